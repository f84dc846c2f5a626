"""``gpuflow open FILE``, the real command: a recording served alone (every other collector off,
whatever the environment enables), answering the recorder's routes as the recording; and every
file it cannot show refused before anything is served, in one line, with exit status 2."""

from __future__ import annotations

import random
import signal

import pytest
import requests
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from cli_process import gpuflow, gpuflow_env, start_gpuflow, stop_gpuflow

from .traces import Recorded


@pytest.fixture(scope="module")
def recorded():
    return Recorded(ticks=12)


@pytest.fixture
def trace_file(tmp_path, recorded):
    path = tmp_path / "run.perfetto-trace"
    path.write_bytes(recorded.trace())
    return path


def test_a_recording_is_served_alone_and_answers_as_it_was_recorded(trace_file, recorded):
    # NVML on its fake 8-GPU backend would show GPUs: open must not load it
    proc, port = start_gpuflow("open", "--port", "0", str(trace_file), env=gpuflow_env(GPUFLOW_NVML_FAKE="shared8"))
    try:
        url = f"http://127.0.0.1:{port}/"
        snap = requests.get(url + "api/snapshot", timeout=10).json()
        assert snap["sources"] == ["recording"]
        (info,) = [p for p in snap["host"]["problems"] if p["severity"] == "info" and "recording of" in p["message"]]
        assert "run.perfetto-trace" in info["message"] and "not live" in info["message"]
        assert [t["pid"] for t in snap["traced"]] == [5000, 5001]
        assert all(t["state"] == "exited" for t in snap["traced"])
        params = {"from": recorded.start_s, "to": recorded.end_s}
        got = requests.get(url + "api/window", params=params, timeout=10).json()
        assert got["sources"] == ["recording"]
        (want,) = recorded.window(recorded.start_s, recorded.end_s)
        assert sum(l["executions"] for p in got["processes"] for l in p["lanes"]) == \
               sum(l.executions for p in want.processes for l in p.lanes)
        history = requests.get(url + "api/history", params=params, timeout=10).json()
        assert history["sources"] == ["recording"] and history["series"]
        assert history["retained_to"] < recorded.end_s
    finally:
        out = stop_gpuflow(proc, signal.SIGTERM)
    assert proc.returncode == 0, out
    assert "recording of run.perfetto-trace" in out and "gpuflow: stopped" in out


def foreign_trace() -> bytes:
    """A Perfetto trace another tool would write: a process track and a slice, no GPUFlow header."""
    trace = pb.Trace()
    p = trace.packet.add()
    p.track_descriptor.uuid = 10
    p.track_descriptor.process.pid = 42
    p = trace.packet.add()
    p.timestamp = 1000
    p.trusted_packet_sequence_id = 3
    p.track_event.type = pb.TrackEvent.TYPE_SLICE_BEGIN
    p.track_event.track_uuid = 10
    p.track_event.name = "draw"
    return trace.SerializeToString()


@pytest.mark.parametrize("make, words", [
    (lambda d, good: d / "missing.perfetto-trace", "No such file"),
    (lambda d, good: d, "is not a regular file"),
    (lambda d, good: write(d / "empty", b""), "is empty"),
    (lambda d, good: write(d / "cut", good[: len(good) // 2]), "cut short"),
    (lambda d, good: write(d / "foreign", foreign_trace()), "not a GPUFlow trace"),
    (lambda d, good: write(d / "noise", random.Random(7).randbytes(5000)), "trace"),
    (lambda d, good: write(d / "text.json", b'{"traceEvents": []}'), "trace"),
])
def test_a_file_it_cannot_show_is_one_line_and_exit_2(tmp_path, recorded, make, words):
    path = make(tmp_path, recorded.trace())
    r = gpuflow("open", "--port", "0", str(path))
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuflow open: error: ") and words in lines[0], r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def write(path, data: bytes):
    path.write_bytes(data)
    return path


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "big.perfetto-trace"
    with open(path, "wb") as f:
        f.truncate(3 << 20)   # sparse: three MiB that cost nothing to make
    r = gpuflow("open", "--port", "0", "--max-mb", "2", str(path))
    assert r.returncode == 2 and "more than the 2 MiB" in r.stderr and "--max-mb" in r.stderr
    r = gpuflow("open", "--port", "0", str(path), env=gpuflow_env(GPUFLOW_RECORDING_MAX_MB="1"))
    assert r.returncode == 2 and "more than the 1 MiB" in r.stderr
    r = gpuflow("open", "--port", "0", "--max-mb", "0", str(path))
    assert r.returncode == 2 and "--max-mb" in r.stderr and "1 to 65536" in r.stderr


def test_other_collectors_cannot_be_added(trace_file):
    r = gpuflow("open", "--port", "0", "--plugin", "gpuflow.testing.fake_collector", str(trace_file))
    assert r.returncode == 2 and "--plugin does not apply" in r.stderr
    r = gpuflow("open", "--port", "0", str(trace_file), env=gpuflow_env(GPUFLOW_DISABLED_PLUGINS="recording"))
    assert r.returncode == 2 and "GPUFLOW_DISABLED_PLUGINS" in r.stderr


def test_help_names_what_it_opens_and_its_limit():
    r = gpuflow("open", "--help")
    assert r.returncode == 0
    assert "gpuflow open [options] FILE" in r.stdout and "--max-mb" in r.stdout and "--trace-out" in r.stdout
    assert "--plugin" not in r.stdout and "--interval" not in r.stdout
