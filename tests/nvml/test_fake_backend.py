"""The fake backend itself: deterministic, alive, and speaking pynvml's exceptions."""

from __future__ import annotations

import pynvml
import pytest

from gpuflow.collectors.nvml.backend import ULLONG_MAX, NvmlBackend
from gpuflow.collectors.nvml.fake_backend import FakeBackend, get_scenario, scenario_names


def readings(seed, polls=6):
    b = FakeBackend("shared8", seed=seed)
    b.init()
    out = []
    for _ in range(polls):
        for i in range(7):  # GPU 7 is in MIG mode: no whole-GPU utilization
            h = b.handle_by_index(i)
            out.append((b.utilization(h), b.power_usage(h), b.temperature(h), b.pcie_rx(h),
                        b.memory(h).used, b.uuid(h)))
    return out


def test_same_seed_same_readings_other_seed_other_readings():
    assert readings(3) == readings(3)
    assert readings(3) != readings(4)


def test_readings_move_over_polls():
    b = FakeBackend("single", seed=0)
    b.init()
    h = b.handle_by_index(0)
    assert len({b.utilization(h).gpu for _ in range(20)}) > 5


def test_implements_the_backend_protocol():
    assert isinstance(FakeBackend("single"), NvmlBackend)


def test_scenarios_listed_by_name():
    assert {"shared8", "wddm", "notsupported", "lost", "nodriver", "vanishing", "hang"} <= set(scenario_names())
    with pytest.raises(ValueError, match="unknown fake NVML scenario 'x'"):
        get_scenario("x")


def test_raises_real_pynvml_exceptions():
    b = FakeBackend("nodriver")
    with pytest.raises(pynvml.NVMLError_LibraryNotFound):
        b.init()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        b.device_count()
    n = FakeBackend("notsupported")
    n.init()
    with pytest.raises(pynvml.NVMLError_NotSupported):
        n.temperature(n.handle_by_index(0))
    lost = FakeBackend("lost")
    lost.init()
    h = lost.handle_by_index(2)
    for _ in range(3):
        lost.utilization(h)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        lost.utilization(h)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        lost.handle_by_index(2)


def test_wddm_gives_the_raw_sentinel():
    b = FakeBackend("wddm")
    b.init()
    assert {p.used_memory for p in b.compute_processes(b.handle_by_index(0))} == {ULLONG_MAX}


def test_process_utilization_honours_last_seen():
    clock = [1000.0]
    b = FakeBackend("single", clock=lambda: clock[0])
    b.init()
    h = b.handle_by_index(0)
    (sample,) = b.process_utilization(h, 0)
    assert sample.pid == 3131 and sample.timestamp_us == 1_000_000_000
    with pytest.raises(pynvml.NVMLError_NotFound):
        b.process_utilization(h, sample.timestamp_us)
    clock[0] += 0.2
    assert b.process_utilization(h, sample.timestamp_us)[0].timestamp_us == 1_000_200_000


def test_every_scenario_runs_through_a_collector(manual):
    for name in scenario_names():
        m = manual(name)
        if name == "hang":
            m.backend.slow = {}
        for _ in range(5):
            part = m.tick()
        assert part.source == "nvml"
        assert len(part.devices) == get_scenario(name).gpus
