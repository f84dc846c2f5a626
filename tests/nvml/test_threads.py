"""The collector on its own threads: notify, never blocking, a hanging NVML, stop, the plugin hooks."""

from __future__ import annotations

import threading
import time

import pytest

from gpuflow.collectors.nvml import plugin
from gpuflow.collectors.nvml.collector import NvmlCollector
from gpuflow.collectors.nvml.fake_backend import FakeBackend
from gpuflow.core.context import AgentConfig, CollectorContext


def wait_for(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.005)
    raise AssertionError("condition not met in time")


def threaded(scenario, interval_s=0.05, slow=None):
    backend = FakeBackend(scenario, slow=slow)
    wake = threading.Event()
    c = NvmlCollector(backend, AgentConfig(interval_s=interval_s), proc_reader=backend.proc_reader,
                      notify=wake.set)
    return c, backend, wake


def test_threads_poll_sample_notify_and_stop():
    c, backend, wake = threaded("shared8")
    assert c.latest() is None
    c.start()
    try:
        assert wake.wait(5)
        part = wait_for(lambda: (p := c.latest()) is not None and p.devices[0].pcie_tx_bytes_per_s
                        and p)
        assert len(part.devices) == 8
        # the first part already has the sampler's readings (the poll waited for its first sweep)
        assert c.sampler.sweeps >= 1
        wake.clear()
        assert wake.wait(2)  # readings move, so every poll notifies
        assert c.latest() is not part
    finally:
        t0 = time.monotonic()
        c.stop()
    assert time.monotonic() - t0 < 1.0
    assert backend.calls["shutdown"] == 1 and not backend.initialized
    polls = c.polls
    time.sleep(0.15)
    assert c.polls == polls  # the threads are gone


def test_latest_never_blocks_while_nvml_hangs_and_says_so():
    c, backend, wake = threaded("hang", interval_s=0.05, slow={"utilization": 0.6})
    c.start()
    try:
        worst = 0.0
        deadline = time.monotonic() + 0.4
        while time.monotonic() < deadline:  # the first poll is stuck in utilization()
            t0 = time.perf_counter()
            part = c.latest()
            worst = max(worst, time.perf_counter() - t0)
            time.sleep(0.01)
        assert worst < 0.05  # microseconds normally; generous for a loaded CI machine
        stuck = [p for p in part.problems if "not answering" in p.message]
        assert len(stuck) == 1 and "interval 0.05 s" in stuck[0].message
        assert c.latest() is part  # marked once per stuck poll, then the same object
        # once the poll returns, its part says it was slow
        done = wait_for(lambda: (p := c.latest()) is not None and p.devices and p, timeout=3)
        assert any("NVML is slow" in p.message for p in done.problems)
        assert done.devices[0].utilization_gpu_pct is not None
    finally:
        c.stop()


def test_stop_returns_even_if_nvml_never_answers():
    c, backend, _ = threaded("hang", interval_s=0.05, slow={"utilization": 5.0})
    c.start()
    wait_for(lambda: backend.calls.get("utilization"))
    t0 = time.monotonic()
    c.stop(timeout=0.5)
    assert time.monotonic() - t0 < 1.0
    assert "shutdown" not in backend.calls  # not while a call is in flight


def test_no_driver_thread_keeps_running_and_reports():
    c, backend, wake = threaded("nodriver")
    c.start()
    try:
        part = wait_for(c.latest)
        assert part.problems[0].message.startswith("NVIDIA driver not found")
        assert c._poll_thread.is_alive()
    finally:
        c.stop()


# -- the pluggy hooks -------------------------------------------------------------------------

def context_with(**options):
    return CollectorContext(AgentConfig(interval_s=0.05, options={"nvml": options}))


def test_plugin_hooks_with_the_fake_option():
    ctx = context_with(fake="single")
    assert plugin.produce_snapshot(context=ctx) is None  # not started
    plugin.start_collecting(context=ctx)
    try:
        assert isinstance(ctx.slots["nvml"], NvmlCollector)
        assert ctx.wake_event.wait(5)  # the collector notified the agent
        part = wait_for(lambda: plugin.produce_snapshot(context=ctx))
        assert part.source == "nvml" and len(part.devices) == 1
        notices = [p for p in part.problems if p.severity == "info"]
        assert len(notices) == 1 and "simulated GPUs" in notices[0].message and "single" in notices[0].message
        assert plugin.produce_snapshot(context=ctx) is ctx.slots["nvml"].latest()
    finally:
        plugin.stop_collecting(context=ctx)
    assert "nvml" not in ctx.slots
    assert plugin.produce_snapshot(context=ctx) is None


def test_plugin_picks_the_fake_from_the_environment(monkeypatch):
    monkeypatch.setenv("GPUFLOW_NVML_FAKE", "wddm")
    monkeypatch.setenv("GPUFLOW_NVML_FAKE_SEED", "7")
    ctx = context_with()
    plugin.start_collecting(context=ctx)
    try:
        collector = ctx.slots["nvml"]
        assert collector._b.scenario.name == "wddm" and collector._b.seed == 7
        # the first poll's part (on a loaded machine, a first poll slower than the interval gives a
        # part saying NVML is late, with no device yet: the fresh-clone CI saw one)
        part = wait_for(lambda: (p := plugin.produce_snapshot(context=ctx)) is not None and p.devices and p,
                        timeout=30)
        assert len(part.devices) == 2
    finally:
        plugin.stop_collecting(context=ctx)


def test_option_wins_over_environment(monkeypatch):
    monkeypatch.setenv("GPUFLOW_NVML_FAKE", "wddm")
    ctx = context_with(fake="lost")
    plugin.start_collecting(context=ctx)
    try:
        assert ctx.slots["nvml"]._b.scenario.name == "lost"
    finally:
        plugin.stop_collecting(context=ctx)


def test_unknown_scenario_is_a_problem_not_an_exception():
    ctx = context_with(fake="nosuch")
    plugin.start_collecting(context=ctx)
    part = plugin.produce_snapshot(context=ctx)
    assert part.devices == ()
    assert part.problems[0].severity == "error"
    assert "unknown fake NVML scenario 'nosuch'" in part.problems[0].message
    assert "shared8" in part.problems[0].message
    plugin.stop_collecting(context=ctx)


@pytest.mark.parametrize("name", ["start_collecting", "produce_snapshot", "stop_collecting"])
def test_hooks_are_pluggy_hookimpls(name):
    assert hasattr(getattr(plugin, name), "gpuflow_impl")
