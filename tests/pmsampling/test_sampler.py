"""The real helper (gpuflow-pm-sampler, built from cupti_src/) under a real agent's pmsampling plugin,
with the fake driver standing in for the GPU: every sample it decodes reaches the history exactly,
every refusal is one plain line and the agent carries on, and the helper ends when the agent stops
(or is killed when it does not)."""

from __future__ import annotations

import math
import time

import pytest

from gpuflow.collectors.pmsampling import samples_layout as L
from gpuflow.collectors.pmsampling.plugin import SLOT
from gpuflow.collectors.pmsampling.samplers import KILL_WAIT_S, STOP_WAIT_S

from .fake_values import fake_slots

UUID = "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f"   # the fake driver's


def wait_for(what, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError(f"not within {timeout} s")


def lines(agent) -> list[tuple[str, str]]:
    return [(p.severity, p.message) for p in agent.board.latest().problems if p.source == "pmsampling"]


def history(agent, start: float = 0.0, end: float = 4e9):
    return [s for part in agent.query_history(start, end) if part.source == "pmsampling" for s in part.series]


def test_every_sample_the_helper_decodes_reaches_the_history_exactly(make_agent, monkeypatch):
    monkeypatch.setenv("GPUFLOW_FAKE_PM", "ok")
    agent = make_agent()
    wait_for(lambda: history(agent) and len(history(agent)[0].t_s) >= 300)
    series = {s.metric: s for s in history(agent)}
    assert set(series) == set(L.METRICS) - {"pm_pcie_write_bytes_per_s"}   # not in the fake chip's one pass
    t = series["pm_warps_active_pct"].t_s
    assert all(s.t_s is t for s in series.values())                       # one time column per GPU
    for s in series.values():
        assert s.entity == ("device", UUID) and s.resolution_s == pytest.approx(0.001)
        assert s.unit == ("bytes/s" if "pcie" in s.metric else "%")
    assert all(b - a == pytest.approx(0.001, abs=1e-6) for a, b in zip(t, t[1:]))
    for k in range(len(t)):
        want = fake_slots(k, 0.001)
        for i, metric in enumerate(L.METRICS[:-1]):
            assert series[metric].value[k] == pytest.approx(want[i], rel=1e-5, abs=1e-4), (k, metric)
    # the window asked is exactly the samples starting in it
    part_t = history(agent, t[10], t[20])[0].t_s
    assert list(part_t) == list(t[10:20])
    severity, message = lines(agent)[0]
    assert severity == "info"
    assert message.startswith("GPU 0 (Fake H200): PM sampling every 1 ms, 8 of 9 metrics (not in one pass: PCIe writes)")


def test_the_interval_option_reaches_the_helper(make_agent, monkeypatch):
    monkeypatch.setenv("GPUFLOW_FAKE_PM", "ok")
    agent = make_agent(interval_us=500)
    wait_for(lambda: history(agent) and len(history(agent)[0].t_s) >= 50)
    t = history(agent)[0].t_s
    assert all(b - a == pytest.approx(0.0005, abs=1e-6) for a, b in zip(t, t[1:]))
    wait_for(lambda: "every 0.5 ms" in lines(agent)[0][1])   # the board takes the part at its next frame


@pytest.mark.parametrize("case, status, words", [
    ("no_privilege", "no_privilege", "run gpuflow as root or with CAP_SYS_ADMIN"),
    ("busy", "counters_busy", "another tool holds this GPU's counters"),
    ("unsupported", "unsupported", "a virtual GPU without profiling enabled"),
    ("no_device", "no_device", "CUDA_ERROR_NO_DEVICE"),
    ("no_driver", "no_driver", "the CUDA driver did not start"),
])
def test_a_refusal_is_one_plain_line_and_the_agent_carries_on(make_agent, monkeypatch, case, status, words):
    monkeypatch.setenv("GPUFLOW_FAKE_PM", case)
    agent = make_agent()
    got = wait_for(lambda: [m for s, m in lines(agent) if s == "warning"])
    assert len(got) == 1 and f"no GPU metrics ({status})" in got[0] and words in got[0], got
    assert not history(agent)
    feed = agent.context.slots[SLOT]._feeds[0]
    wait_for(lambda: feed.sampler.exit_status is not None)
    assert feed.sampler.exit_status == 4   # the helper's "refused" status
    seq = agent.board.latest().seq
    agent.context.notify()
    wait_for(lambda: agent.board.latest().seq >= seq and agent.running)


def test_a_helper_that_needs_a_context_takes_one_and_says_so(make_agent, monkeypatch):
    monkeypatch.setenv("GPUFLOW_FAKE_PM", "needs_context")
    agent = make_agent()
    wait_for(lambda: history(agent))
    wait_for(lambda: "holding a CUDA context on the GPU" in lines(agent)[0][1])


def test_samples_lost_in_the_gpus_buffer_are_counted(make_agent, monkeypatch):
    monkeypatch.setenv("GPUFLOW_FAKE_PM", "overflow")
    agent = make_agent()
    wait_for(lambda: history(agent) and len(history(agent)[0].t_s) > 100)
    collector = agent.context.slots[SLOT]
    wait_for(lambda: collector._feeds[0].facts.hw_overflows == 1)
    collector._publish(force=True)
    wait_for(lambda: "the GPU's buffer overflowed 1 time (samples lost there)" in lines(agent)[0][1])


def test_a_sampling_that_fails_later_is_reported_and_the_samples_so_far_stay(make_agent, monkeypatch):
    monkeypatch.setenv("GPUFLOW_FAKE_PM", "decode_fails")
    agent = make_agent()
    got = wait_for(lambda: [m for s, m in lines(agent) if s == "warning"])
    assert "no GPU metrics (cupti_error): cuptiPmSamplingDecodeData: CUPTI_ERROR_UNKNOWN" in got[0]
    assert history(agent)   # what it sampled before stays


def test_stopping_stops_the_helper_and_keeps_the_samples(make_agent, monkeypatch):
    monkeypatch.setenv("GPUFLOW_FAKE_PM", "ok")
    agent = make_agent()
    wait_for(lambda: history(agent) and len(history(agent)[0].t_s) >= 50)
    feed = agent.context.slots[SLOT]._feeds[0]
    agent.stop()
    assert feed.sampler.exit_status == 0                   # it stopped when its connection closed
    kept = history(agent)
    assert kept and len(kept[0].t_s) >= 50                  # still answered (gpuflow run --trace-out)
    assert "PM sampling stopped" in lines(agent)[0][1]


def test_a_helper_deaf_to_stopping_is_killed_within_the_bound(make_agent, monkeypatch, built):
    monkeypatch.setenv("GPUFLOW_FAKE_PM", "hang")
    agent = make_agent()
    feed = wait_for(lambda: agent.context.slots[SLOT]._feeds.get(0))
    wait_for(lambda: feed.handover is not None)
    started = time.monotonic()
    agent.stop()
    took = time.monotonic() - started
    assert feed.sampler.exit_status in (128 + 15, 128 + 9)   # SIGTERM was enough: the hang is in CUPTI
    assert took < STOP_WAIT_S + KILL_WAIT_S + 3


def test_a_missing_helper_is_said_once_and_nothing_else_starts(make_agent, monkeypatch):
    agent = make_agent(sampler="/nonexistent/gpuflow-pm-sampler")
    got = wait_for(lambda: lines(agent))
    assert got == [("warning", "--gpu-metrics: the PM sampler helper (gpuflow-pm-sampler) was not built: install "
                                "the CUDA toolkit (its CUPTI headers), set CUDA_HOME, reinstall GPUFlow")]
    assert not agent.context.slots[SLOT]._feeds


def test_without_the_flag_the_plugin_does_nothing(built):
    from gpuflow.core.agent import Agent
    from gpuflow.core.context import AgentConfig
    from gpuflow.core.plugins import get_plugin_manager

    from .conftest import ENVIRON

    agent = Agent(AgentConfig(interval_s=0.05), get_plugin_manager(environ=ENVIRON))
    agent.start()
    try:
        assert "pmsampling" not in agent.board.latest().sources
        assert SLOT not in agent.context.slots and not history(agent)
    finally:
        agent.stop()


def test_the_values_a_sample_does_not_have_are_nan_never_zero(make_agent, monkeypatch):
    monkeypatch.setenv("GPUFLOW_FAKE_PM", "ok")
    agent = make_agent()
    wait_for(lambda: history(agent))
    store = agent.context.slots[SLOT].store
    with store._lock:
        column = store._devices[UUID].columns[L.METRICS.index("pm_pcie_write_bytes_per_s")]
        assert all(math.isnan(v) for v in column)
