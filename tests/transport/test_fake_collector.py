"""The fake collector: options, same object between ticks, notify, increasing span seqs, caps."""

from __future__ import annotations

import threading

import pytest

from gpuflow.core.agent import Agent
from gpuflow.core.context import AgentConfig, CollectorContext
from gpuflow.core.plugins import get_plugin_manager
from gpuflow.testing import fake_collector as fc
from servers import FAKE_ENV


def scenario(**kw) -> fc.FakeScenario:
    return fc.FakeScenario(fc.FakeOptions(**kw), show_cmdline=False)


def test_options_come_from_config_then_env_then_defaults():
    env = {"GPUFLOW_FAKE_GPUS": "5", "GPUFLOW_FAKE_LANES": "3", "GPUFLOW_FAKE_RATE_HZ": "2.5"}
    o = fc.FakeOptions(**fc.OPTIONS.resolve({"gpus": 8}, env))
    assert (o.gpus, o.lanes, o.rate_hz, o.procs) == (8, 3, 2.5, fc.FakeOptions().procs)


@pytest.mark.parametrize("env", [{"GPUFLOW_FAKE_GPUS": "two"}, {"GPUFLOW_FAKE_SPANS": "-1"}])
def test_bad_options_name_the_variable(env):
    with pytest.raises(ValueError, match=next(iter(env))):
        fc.OPTIONS.resolve({}, env)


def test_devices_processes_and_nulls():
    part = scenario(gpus=3, procs=4, lost_gpu=2).step(1000.0)
    assert [d.index for d in part.devices] == [0, 1, 2]
    assert part.devices[2].lost and part.devices[2].temperature_c is None
    assert part.devices[1].pcie_rx_bytes_per_s is None and part.devices[0].pcie_rx_bytes_per_s
    assert [a.device_index for a in part.processes[0].attachments] == [0, 1, 2]
    assert part.processes[-1].attachments[0].mem_util_pct is None
    assert part.processes[0].cmdline == "python"  # redacted unless show_cmdline
    assert any("lost" in p.message for p in part.problems)


def test_show_cmdline_gives_full_command_lines():
    s = fc.FakeScenario(fc.FakeOptions(), show_cmdline=True)
    assert "--api-key" in s.step(1.0).processes[0].cmdline


def test_lanes_labels_spans_and_exact_elision():
    s = scenario(lanes=5, spans=6, span_cap=10)
    seen = []
    for i in range(4):
        t = s.step(1000.0 + 0.1 * i).traced[0]
        for lane in t.lanes:
            assert lane.executions == 6 * (i + 1)
            assert len(lane.spans) == min(10, lane.executions)
            assert lane.spans_elided == lane.executions - len(lane.spans)
            seqs = [sp.seq for sp in lane.spans]
            assert seqs == sorted(seqs)
        seen.append(t)
    t = seen[-1]
    assert [l.label for l in t.lanes][:4] == ["default", "compute", "copy-engine", "prefetch"]
    assert t.lanes[4].label == str(t.lanes[4].stream)
    spans = [sp for l in t.lanes for sp in l.spans]
    kernels = [sp for sp in spans if sp.kind == "kernel"]
    copies = [sp for sp in spans if sp.kind in ("memcpy", "memset")]
    assert kernels and all(k.name and k.grid and k.block for k in kernels)
    assert copies and all(c.direction and c.bytes for c in copies)
    assert t.records == 4 * 5 * 6  # every span ever made
    assert sum(k.count for k in t.kernels) + sum(x.count for x in t.transfers) == t.records
    assert t.window_start_us <= t.window_end_us and t.behind_live_ms > 0
    # seq strictly increases across ticks: new spans always beat the previous maximum
    before = max(sp.seq for l in seen[-2].lanes for sp in l.spans)
    assert min(sp.seq for sp in spans if sp.seq > before) == before + 1


def test_span_cap_bounds_every_lane():
    s = fc.FakeScenario(fc.FakeOptions(spans=20, span_cap=8), show_cmdline=False)
    assert all(len(l.spans) == 8 and l.spans_elided == 12 for l in s.step(1.0).traced[0].lanes)


def test_hooks_same_object_until_a_tick_and_notify_per_tick(tmp_path):
    stop_file = tmp_path / "stopped"
    ctx = CollectorContext(AgentConfig(options={"fake": {"rate_hz": 5, "stop_file": str(stop_file)}}))
    fc.start_collecting(ctx)
    try:
        assert ctx.wake_event.wait(1)  # the first part is announced at once
        ctx.wake_event.clear()
        a = fc.produce_snapshot(ctx)
        assert fc.produce_snapshot(ctx) is a  # 200 ms until the next tick
        assert ctx.wake_event.wait(1)
        assert fc.produce_snapshot(ctx) is not a
    finally:
        fc.stop_collecting(ctx)
    assert stop_file.read_text() == "stopped\n"
    assert fc.produce_snapshot(ctx) is None


def test_rate_zero_makes_one_part():
    ctx = CollectorContext(AgentConfig(options={"fake": {"rate_hz": 0}}))
    fc.start_collecting(ctx)
    a = fc.produce_snapshot(ctx)
    assert not [t for t in threading.enumerate() if t.name == "gpuflow-fake"]
    assert fc.produce_snapshot(ctx) is a
    fc.stop_collecting(ctx)


def test_loaded_as_a_plugin_by_name():
    pm = get_plugin_manager(["gpuflow.testing.fake_collector"], environ=dict(FAKE_ENV))
    agent = Agent(AgentConfig(options={"fake": {"rate_hz": 0, "gpus": 4}}), pm)
    agent.start()
    try:
        snap = agent.board.latest()
        assert snap.sources == ("fake",) and len(snap.devices) == 4 and snap.traced
    finally:
        agent.stop()
