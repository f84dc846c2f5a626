"""``gpuflow watch`` starts, explains itself (even without a driver), serves, and stops on Ctrl-C."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

from cli_process import URL_RE, gpuflow_env, signal_another_thread, start_gpuflow, stop_gpuflow

from gpuflow.cli.report import describe_start
from gpuflow.cli.watch import says_what_gpus_there_are
from gpuflow.core.snapshot import Problem, Snapshot


def snapshot_with_devices(port: int, timeout: float = 10) -> dict:
    """The first /api/snapshot that lists devices (or the last one, after ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    while True:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/snapshot", timeout=5) as resp:
            snap = json.load(resp)
        if snap["devices"] or time.monotonic() > deadline:
            return snap
        time.sleep(0.05)


def test_watch_without_driver_starts_and_says_why():
    env = gpuflow_env(GPUFLOW_NVML_FAKE="nodriver", GPUFLOW_DISABLED_PLUGINS="cupti")
    proc, port = start_gpuflow("watch", "--port", "0", env=env)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/snapshot", timeout=5) as resp:
            snap = json.load(resp)
        assert snap["devices"] == []
        assert any("driver" in p["message"].lower() for p in snap["host"]["problems"])
    finally:
        out = stop_gpuflow(proc, signal.SIGINT)
    assert proc.returncode == 0, out
    assert "driver" in out.lower()
    assert "Traceback" not in out


def test_watch_with_fake_gpus_serves_them():
    env = gpuflow_env(GPUFLOW_NVML_FAKE="shared8", GPUFLOW_DISABLED_PLUGINS="cupti")
    proc, port = start_gpuflow("watch", "--port", "0", "--interval", "100", env=env)
    try:  # the server answers before the first NVML poll has finished
        assert len(snapshot_with_devices(port)["devices"]) == 8
    finally:
        out = stop_gpuflow(proc, signal.SIGTERM)
    assert proc.returncode == 0, out
    assert "8 GPU(s)" in out


def test_a_first_poll_slower_than_the_interval_is_not_called_no_gpus():
    # the fake's one GPU answers its utilization in 2 s, twice the interval: the first snapshots
    # carry NVML's "not answering" warning and no device yet, which is no verdict on the GPUs
    env = gpuflow_env(GPUFLOW_NVML_FAKE="hang", GPUFLOW_DISABLED_PLUGINS="cupti")
    proc, port = start_gpuflow("watch", "--port", "0", env=env)
    try:
        assert len(snapshot_with_devices(port)["devices"]) == 1
    finally:
        out = stop_gpuflow(proc, signal.SIGTERM)
    assert proc.returncode == 0, out
    assert "sees no GPUs" not in out
    assert "1 GPU(s)" in out or "NVML is not answering" in out   # the banner waits up to 3 s


def test_the_banner_waits_for_a_verdict_on_the_gpus():
    stalled = Snapshot(seq=1, timestamp=0.0, sources=("nvml",), problems=(
        Problem("nvml", severity="warning", message="NVML is not answering: a poll has been running for 1.0 s"),))
    none_there = Snapshot(seq=2, timestamp=0.0, sources=("nvml",), problems=(
        Problem("nvml", severity="info", message="simulated GPUs"),))
    no_driver = Snapshot(seq=3, timestamp=0.0, problems=(Problem("nvml", severity="error", message="no driver"),))
    assert not says_what_gpus_there_are(stalled)
    assert not says_what_gpus_there_are(Snapshot(seq=4, timestamp=0.0))   # NVML not heard from yet
    assert says_what_gpus_there_are(none_there) and says_what_gpus_there_are(no_driver)
    shown = io.StringIO()
    describe_start(stalled, "http://127.0.0.1:7717/", shown)   # the banner's timeout came first
    assert "sees no GPUs" not in shown.getvalue() and "not answering" in shown.getvalue()
    shown = io.StringIO()
    describe_start(none_there, "http://127.0.0.1:7717/", shown)
    assert "NVML works but sees no GPUs" in shown.getvalue()


def test_watch_under_the_benchmarking_switch_says_its_view_is_partial():
    env = gpuflow_env(GPUFLOW_NVML_FAKE="shared8", GPUFLOW_DISABLED_PLUGINS="cupti",
                      GPUFLOW_AB_PERIOD_MS="200")
    proc, port = start_gpuflow("watch", "--port", "0", "--interval", "100", env=env)
    try:  # NVML is polled in the on periods only, still within a period or two
        assert len(snapshot_with_devices(port)["devices"]) == 8
    finally:
        out = stop_gpuflow(proc, signal.SIGTERM)
    assert proc.returncode == 0, out
    assert "GPUFLOW_AB_PERIOD_MS=200 (benchmarking)" in out and "partial" in out


def test_a_stop_signal_as_soon_as_the_url_is_printed_stops_cleanly():
    # Seen once in CI: a SIGTERM sent as soon as the URL showed killed watch outright (-15), the
    # start-up summary being printed before the stop handlers were installed. Each signal is sent
    # the moment the URL line is read, several times over.
    env = gpuflow_env(GPUFLOW_NVML_FAKE="shared8", GPUFLOW_DISABLED_PLUGINS="cupti")
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP) * 4:
        proc, _ = start_gpuflow("watch", "--port", "0", env=env)
        out = stop_gpuflow(proc, sig)
        assert proc.returncode == 0, (sig, out)
        assert "gpuflow: stopped" in out and "Traceback" not in out


def test_a_stop_signal_the_kernel_gives_another_thread_stops_watch_at_once():
    # Seen in a parallel test run: SIGTERM went to one of watch's threads (the server's, a
    # collector's), not the main one, which slept in a one-hour wait and so ran the handler only
    # when that wait would have ended. Sent here to a thread other than the main one on purpose.
    env = gpuflow_env(GPUFLOW_NVML_FAKE="shared8", GPUFLOW_DISABLED_PLUGINS="cupti")
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        proc, _ = start_gpuflow("watch", "--port", "0", env=env)
        time.sleep(0.3)   # into the wait for a stop signal
        t0 = time.monotonic()
        out = stop_gpuflow(proc, sig, timeout=10, send=signal_another_thread)
        assert time.monotonic() - t0 < 3, (sig, out)
        assert proc.returncode == 0 and "gpuflow: stopped" in out, (sig, out)


def test_output_whose_reader_has_gone_stops_watch_cleanly_in_one_line():
    # `gpuflow watch | head -1`: the reader of the banner leaves. Here the pipe's reading end is
    # closed before watch starts, so its first line already fails; the server it had started is
    # stopped on the way out and the failure is one line on stderr, not a traceback.
    env = gpuflow_env(GPUFLOW_NVML_FAKE="shared8", GPUFLOW_DISABLED_PLUGINS="cupti")
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "gpuflow", "watch", "--port", "0"], env=env,
                              stdin=subprocess.DEVNULL, stdout=write_end, stderr=subprocess.PIPE,
                              text=True, timeout=30)
    finally:
        os.close(write_end)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "gpuflow: stopped: its output was closed (broken pipe)"
    assert "Traceback" not in done.stderr


def test_output_closed_while_watch_serves_stops_it_cleanly_at_its_end():
    env = gpuflow_env(GPUFLOW_NVML_FAKE="shared8", GPUFLOW_DISABLED_PLUGINS="cupti")
    proc = subprocess.Popen([sys.executable, "-m", "gpuflow", "watch", "--port", "0"], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = int(URL_RE.search(proc.stdout.readline()).group(1))
        banner = iter(proc.stdout.readline, "")
        assert any("Press Ctrl-C" in line for line in banner), "no end of the banner"   # all of it is out
        proc.stdout.close()   # as head does once it has its lines
        assert snapshot_with_devices(port)["devices"]   # still serving
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=15)[1]
    finally:
        proc.kill()
    assert proc.returncode == 1, err   # its last line, "stopped", found the pipe closed
    assert err.strip().splitlines()[-1] == "gpuflow: stopped: its output was closed (broken pipe)"
    assert "Traceback" not in err
