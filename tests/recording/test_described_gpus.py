"""The GPUs a trace describes come from what the agent showed: ``gpuflow run --trace-out`` (the GPUs
of the run's last live frame, before its collectors stopped) and ``/api/export`` (those the page
shows), with the fake collector's GPUs standing in for a machine's; and ``gpuflow open`` of such
a trace shows them by name."""

from __future__ import annotations

import sys

import requests

from cli_process import gpuflow, gpuflow_env, start_gpuflow, stop_gpuflow
from gpuflow.export.trace_read import read_trace
from gpuflow.testing import fake_collector as fc

FAKE = ["--plugin", "gpuflow.testing.fake_collector"]
ENV = {"GPUFLOW_DISABLED_PLUGINS": "nvml,cupti", "GPUFLOW_FAKE_GPUS": "3", "GPUFLOW_FAKE_RATE_HZ": "5"}


def described(data: bytes) -> dict[int, tuple[str, str | None]]:
    return {f.index: (uuid, f.name) for uuid, f in read_trace(data).gpus.items()}


def the_fake_gpus() -> dict[int, tuple[str, str | None]]:
    part = fc.FakeScenario(fc.FakeOptions(gpus=3), show_cmdline=False).step(1.0)
    return {d.index: (d.uuid, d.name) for d in part.devices}


def test_run_trace_out_describes_the_runs_gpus_and_open_shows_them(tmp_path):
    out = tmp_path / "run.perfetto-trace"
    r = gpuflow("run", "--port", "0", *FAKE, "--no-summary", "--trace-out", str(out), "--",
                sys.executable, "-c", "import time; time.sleep(0.5)", env=gpuflow_env(**ENV))
    assert r.returncode == 0, r.stderr
    assert described(out.read_bytes()) == the_fake_gpus()
    proc, port = start_gpuflow("open", "--port", "0", str(out))
    try:
        snap = requests.get(f"http://127.0.0.1:{port}/api/snapshot", timeout=10).json()
    finally:
        stop_gpuflow(proc, 15)
    assert {d["index"]: (d["uuid"], d["name"]) for d in snap["devices"]} == the_fake_gpus()


def test_api_export_describes_the_gpus_the_page_shows(tmp_path):
    proc, port = start_gpuflow("watch", "--port", "0", *FAKE, env=gpuflow_env(**ENV))
    try:
        url = f"http://127.0.0.1:{port}/"
        now = requests.get(url + "api/snapshot", timeout=10).json()["timestamp"]
        r = requests.get(url + "api/export", params={"from": now - 30, "to": now + 1}, timeout=30)
        assert r.status_code == 200
    finally:
        stop_gpuflow(proc, 15)
    assert described(r.content) == the_fake_gpus()


def test_run_trace_out_holds_the_readings_of_the_run(tmp_path):
    # NVML on its fake backend: the run's GPU and process readings belong in the file, as in an
    # /api/export of the same range, so that an opened recording shows them
    out = tmp_path / "run.perfetto-trace"
    r = gpuflow("run", "--port", "0", "--interval", "200", "--no-summary", "--trace-out", str(out), "--",
                sys.executable, "-c", "import time; time.sleep(1.5)",
                env=gpuflow_env(GPUFLOW_DISABLED_PLUGINS="cupti", GPUFLOW_NVML_FAKE="shared8"))
    assert r.returncode == 0, r.stderr
    contents = read_trace(out.read_bytes())
    devices = {s.entity[1] for s in contents.series if s.entity[0] == "device"}
    assert len(devices) == 8 and devices == set(contents.gpus)
    assert any(s.entity[0] == "process" for s in contents.series)
    assert all(len(s.t_s) >= 3 for s in contents.series if s.metric == "utilization_gpu_pct")
