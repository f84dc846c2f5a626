"""bench/nvml_tick.py --stand-in: the collector's real pynvml path and the bare-pynvml floor run
against the stand-in driver (tests/support/nvml_standin.py) and make the same calls; the stand-in
itself answers as the driver would (structs filled through ctypes, per-metric return codes, lost
GPUs) and tells apart two paths that do not make the same calls. Not timed: the bench prints the
ratio, nothing here asserts on it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import nvml_tick
import pynvml
import pytest
from nvml_standin import StandInNvml

from gpuflow.collectors.nvml.collector import NvmlCollector
from gpuflow.collectors.nvml.gpm import FAST_IDS, METRIC_IDS
from gpuflow.collectors.nvml.pynvml_backend import PynvmlBackend
from gpuflow.collectors.nvml.query import reset_log_once
from gpuflow.core.context import AgentConfig

ROOT = Path(__file__).resolve().parents[2]
LAST = re.compile(r"^tick_ms=(\d+\.\d{4}) floor_ms=(\d+\.\d{4}) ratio=(\d+\.\d{3})$")


@pytest.fixture
def stand_in():
    reset_log_once()
    driver = StandInNvml(call_us={}).install()
    yield driver
    driver.remove()


@pytest.mark.parametrize("latency", ["instant", "h200"])
def test_the_bench_on_the_stand_in_makes_the_same_calls_on_both_sides(latency):
    args = [sys.executable, str(ROOT / "bench" / "nvml_tick.py"), "--stand-in", latency, "--gpm",
            "--reps", "20", "--sweeps", "2"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith(f"STAND-IN driver ({latency} call times)"), lines[0]
    m = LAST.match(lines[-1])
    assert m and float(m.group(1)) > 0 and float(m.group(2)) > 0, lines[-1]
    assert "GPM: a pair every tick; 1 of 1 GPU(s) support it (+0 MIG instances)" in lines
    same = next(line for line in lines if line.startswith("stand-in calls: "))
    assert same.startswith("stand-in calls: same per tick and per floor ("), same
    for call in ("nvmlGpmSampleGet 1", "nvmlGpmMetricsGet 1", "nvmlDeviceGetClockInfo 2",
                 "nvmlDeviceGetMemoryInfo_v2 1", "nvmlDeviceGetCurrentClocksEventReasons 1",
                 "nvmlGpmMetricsGet 12 ids x1"):
        assert call in same, (call, same)
    graphics = next(line for line in lines if line.startswith("a tick that evaluates GRAPHICS_UTIL: "))
    g = re.search(r"evaluated by (\d+) of (\d+) ticks and (\d+) floors", graphics)
    assert g and g.group(1) == g.group(2) == g.group(3), graphics  # every pair of that line


def test_the_calls_check_says_when_the_two_sides_differ(stand_in):
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    temperature = lambda: pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)  # noqa: E731
    power = lambda: pynvml.nvmlDeviceGetPowerUsage(h)  # noqa: E731
    assert nvml_tick.same_calls(stand_in, temperature, temperature, reps=3).startswith(
        "stand-in calls: same per tick and per floor (nvmlDeviceGetTemperature 1; nvmlGpmMetricsGet none)")
    assert nvml_tick.same_calls(stand_in, temperature, power, reps=3).startswith("stand-in calls: DIFFER")


def test_the_real_adapter_reads_the_stand_ins_gpm_with_each_metrics_code(stand_in):
    stand_in.metric_answers = {pynvml.NVML_GPM_METRIC_FP64_UTIL: (pynvml.NVML_ERROR_NOT_SUPPORTED, 77.0),
                               pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC: (pynvml.NVML_ERROR_INVALID_ARGUMENT, 5.0),
                               pynvml.NVML_GPM_METRIC_SM_OCCUPANCY: (pynvml.NVML_SUCCESS, 0.0)}
    now = [50.0]
    c = NvmlCollector(PynvmlBackend(), AgentConfig(), hostname="box", monotonic=lambda: now[0])
    parts = []
    for _ in range(3):
        c.sample_once()
        parts.append(c.poll_once())
        now[0] += 0.25
    gpm = parts[-1].devices[0].gpm
    assert gpm.sm_util_pct == 41.0 and gpm.graphics_util_pct == 12.5  # held from the first pair
    assert gpm.sm_occupancy_pct == 0.0  # a measured zero stays a zero
    assert gpm.fp64_util_pct is None and gpm.nvlink_tx_bytes_per_s is None  # never 0
    assert gpm.pcie_rx_bytes_per_s == 1830.0 * (1 << 20) and gpm.interval_s == pytest.approx(0.25)
    assert stand_in.metric_requests == {METRIC_IDS: 1, FAST_IDS: 1}
    stand_in.lost.add(0)
    lost = c.poll_once().devices[0]
    assert lost.lost and lost.gpm is None
    stand_in.lost.clear()
    c.stop()
    assert stand_in.samples_held == 0  # both GPM buffers given back before nvmlShutdown
