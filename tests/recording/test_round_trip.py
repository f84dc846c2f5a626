"""The round trip: a recorder's content written by GPUFlow's exporter, opened again by a real agent
with the recording collector alone, answers the same windows (executions lane by lane: kernel
counts per name, spans, bytes), the same history, and a snapshot whose aggregates are the
recorded run's complete ones, its GPUs and processes as they stood at the end."""

from __future__ import annotations

import collections
import math

import pytest

from gpuflow.core.agent import Agent
from gpuflow.core.context import AgentConfig
from gpuflow.core.plugins import get_plugin_manager

from .test_trace_read import rows
from .traces import Recorded

ONLY_RECORDING = {"GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1", "GPUFLOW_DISABLED_PLUGINS": "nvml,cupti"}


def opened(tmp_path, recorded: Recorded, **written) -> Agent:
    path = tmp_path / "run.perfetto-trace"
    path.write_bytes(recorded.trace(**written))
    agent = Agent(AgentConfig(options={"recording": {"file": str(path)}}), get_plugin_manager(environ=ONLY_RECORDING))
    agent.start()
    return agent


@pytest.fixture(scope="module")
def one_gpu():
    return Recorded(ticks=30, gpus=1, procs=3, traced=2, lanes=4, spans=20)


def test_windows_are_answered_as_the_recorder_answered_them(tmp_path, one_gpu):
    agent = opened(tmp_path, one_gpu, piece_spans=900)
    try:
        t0 = one_gpu.parts[0].traced[0].lanes[0].spans.start_us[0] / 1e6
        for start, end in ((one_gpu.start_s, one_gpu.end_s), (t0 + 1.3, t0 + 2.9), (t0 + 4.0, t0 + 4.0001)):
            for pid in (None, 5001):
                (got,) = agent.query_window(start, end, pid)
                (want,) = one_gpu.window(start, end, pid)
                assert got.source == "recording" and not got.problems
                assert [(p.pid, p.name) for p in got.processes] == [(p.pid, p.name) for p in want.processes]
                for g, w in zip(got.processes, want.processes):
                    assert g.complete and abs(g.retained_from_s - w.retained_from_s) < 1e-6
                    assert abs(g.retained_to_s - w.retained_to_s) < 1e-6
                    g_lanes = {(l.device, l.stream): l for l in g.lanes}
                    w_lanes = {(l.device, l.stream): l for l in w.lanes if l.executions}
                    assert g_lanes.keys() == w_lanes.keys()
                    for key, lane in g_lanes.items():
                        assert rows(lane) == rows(w_lanes[key])
                        kernels = collections.Counter(lane.spans.names[i] for i in lane.spans.name if i >= 0)
                        assert kernels == collections.Counter(
                            w_lanes[key].spans.names[i] for i in w_lanes[key].spans.name if i >= 0)
                        moved = [sum(b for b in x.spans.bytes if b > 0) for x in (lane, w_lanes[key])]
                        assert moved[0] == moved[1]
        (reduced,) = agent.query_window(one_gpu.start_s, one_gpu.end_s, None, 16)
        for p in reduced.processes:
            for lane in p.lanes:
                assert lane.buckets is not None and sum(lane.buckets.count) == lane.executions
        (outside,) = agent.query_window(one_gpu.end_s + 100, one_gpu.end_s + 101)
        assert [p.pid for p in outside.processes] == [5000, 5001] and all(not p.lanes for p in outside.processes)
        assert all(p.retained_from_s is not None for p in outside.processes)
    finally:
        agent.stop()


def test_history_is_answered_as_the_recorder_kept_it(tmp_path, one_gpu):
    agent = opened(tmp_path, one_gpu)
    try:
        t0 = one_gpu.parts[0].traced[0].lanes[0].spans.start_us[0] / 1e6
        for start, end in ((one_gpu.start_s, one_gpu.end_s), (t0 + 2.1, t0 + 5.1)):
            (got,) = agent.query_history(start, end)
            (want,) = one_gpu.history(start, end)
            assert abs(got.retained_from_s - want.retained_from_s) < 1e-6
            assert abs(got.retained_to_s - want.retained_to_s) < 1e-6
            kept = {(s.entity, s.metric): s for s in got.series}
            for s in want.series:
                finite = [(t, v) for t, v in zip(s.t_s, s.value) if math.isfinite(v)]
                if not finite:
                    assert (s.entity, s.metric) not in kept
                    continue
                g = kept.pop((s.entity, s.metric))
                assert g.unit == s.unit and g.resolution_s == s.resolution_s
                assert list(g.value) == [v for _, v in finite]
                assert max(abs(a - t) for a, (t, _) in zip(g.t_s, finite)) < 1e-6
            assert not kept
    finally:
        agent.stop()


def test_the_snapshot_is_the_recording_at_its_end(tmp_path, one_gpu):
    agent = opened(tmp_path, one_gpu)
    try:
        snap = agent.board.latest()
        last = one_gpu.parts[-1]
        assert snap.sources == ("recording",)
        (info,) = [p for p in snap.problems if p.severity == "info"]
        assert info.message.startswith("recording of run.perfetto-trace, ") and "not live" in info.message
        for got, want in zip(snap.traced, last.traced):
            assert (got.pid, got.name, got.state, got.exit_status) == (want.pid, want.name, "exited", None)
            assert {k.name: (k.count, k.total_ns, k.min_ns, k.max_ns) for k in got.kernels} == {
                k.name: (k.count, k.total_ns, k.min_ns, k.max_ns) for k in want.kernels}
            assert [(t.direction, t.count, t.bytes, t.total_ns) for t in got.transfers] == [
                (t.direction, t.count, t.bytes, t.total_ns) for t in want.transfers]
            assert got.records == want.records
            assert [(l.stream, l.label, l.executions) for l in got.lanes] == [
                (l.stream, l.label, l.executions) for l in sorted(want.lanes, key=lambda l: (l.device, l.stream))]
            assert all(len(l.spans) == min(512, l.executions) and l.spans_elided == l.executions - len(l.spans)
                       for l in got.lanes)
        (device,) = snap.devices
        (was,) = last.devices
        assert (device.index, device.uuid) == (was.index, was.uuid)
        for field in ("utilization_gpu_pct", "temperature_c", "power_draw_w", "memory_used_bytes", "clock_sm_mhz"):
            assert getattr(device, field) == getattr(was, field)
        assert (device.name, device.memory_total_bytes, device.power_limit_w) == (
            was.name, was.memory_total_bytes, was.power_limit_w)   # the GPU as the trace describes it
        assert [p.pid for p in snap.processes] == [p.pid for p in last.processes]
        for got, want in zip(snap.processes, last.processes):
            assert [(a.device_uuid, a.memory_used_bytes, a.sm_util_pct, a.mem_util_pct) for a in got.attachments] == [
                (a.device_uuid, a.memory_used_bytes, a.sm_util_pct, a.mem_util_pct) for a in want.attachments]
    finally:
        agent.stop()


def test_gpus_a_trace_describes_are_its_gpus_whatever_their_number(tmp_path):
    recorded = Recorded(ticks=4, gpus=3)
    agent = opened(tmp_path, recorded)
    try:
        snap = agent.board.latest()
        assert [(d.index, d.uuid, d.name, d.power_limit_w) for d in snap.devices] == [
            (d.index, d.uuid, d.name, d.power_limit_w) for d in recorded.parts[-1].devices]
        assert not any("does not say" in p.message for p in snap.problems)
        assert {a.device_index for p in snap.processes for a in p.attachments} == {0, 1, 2}
    finally:
        agent.stop()


def test_gpus_an_older_trace_cannot_pair_by_index_and_uuid_are_shown_apart_and_said_so(tmp_path):
    agent = opened(tmp_path, Recorded(ticks=4, gpus=2), described=False)
    try:
        snap = agent.board.latest()
        assert [(d.index, d.uuid) for d in snap.devices] == [
            (0, "recorded-gpu-0"), (1, "recorded-gpu-1"),
            (2, "GPU-fake0000-0000-0000-0000-000000000000"), (3, "GPU-fake0000-0000-0000-0000-000000000001")]
        assert any("does not say which of its GPUs' uuids" in p.message for p in snap.problems)
    finally:
        agent.stop()
