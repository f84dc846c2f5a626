"""An export of a range: asked in pieces that partition it, each execution exactly once, counts per
kernel name equal to the recorder's (a window's) and, for a whole run of the fake collector, to
the snapshot's complete aggregates; a collector's problem refuses the export."""

from __future__ import annotations

import collections
import time

import pytest
from perfetto_read import read

from gpuflow.core.agent import Agent
from gpuflow.core.context import AgentConfig
from gpuflow.core.plugins import get_plugin_manager
from gpuflow.core.recorded import WindowPart
from gpuflow.core.snapshot import Problem, Span
from gpuflow.export.perfetto import END_OF_TRACE, ExportError
from gpuflow.export.window_export import WindowExport
from gpuflow.testing import fake_collector as fc
from gpuflow.testing.fake_recorder import FakeRecorder
from servers import FAKE_ENV

T0 = 1_764_000_000.0


class Asked:
    """A recorder's answers, with what was asked and how much each exact answer held."""

    def __init__(self, recorder: FakeRecorder) -> None:
        self.recorder = recorder
        self.exact_sizes: list[int] = []
        self.plans = 0

    def window(self, start, end, pid, width):
        part = self.recorder.window(start, end, pid, width)
        if width is None:
            self.exact_sizes.append(sum(len(l.spans) for p in part.processes for l in p.lanes))
        else:
            self.plans += 1
        return (part,)

    def history(self, start, end):
        return (self.recorder.history(start, end),)


def recorder_with(spans_per_lane: list[list[Span]], pid: int = 42) -> FakeRecorder:
    rec = FakeRecorder("fake", retain_s=10 ** 6, retain_spans=10 ** 8, resolution_s=1.0)
    rec.add_spans(pid, "s", "train", {(0, 1, 13 + i): (f"lane{i}", spans) for i, spans in enumerate(spans_per_lane)},
                  T0 + 100)
    return rec


def kernels(n: int, start_us: int, step_us: float, names=("a", "b", "c"), seq0: int = 0) -> list[Span]:
    return [Span(seq=seq0 + i, kind="kernel", start_us=start_us + int(i * step_us), dur_ns=500, name=names[i % len(names)],
                 grid=(1, 1, 1), block=(32, 1, 1)) for i in range(n)]


def run(export: WindowExport) -> bytes:
    out = []
    export.write(out.append)
    return b"".join(out)


def test_a_range_is_asked_in_pieces_that_hold_every_execution_once():
    # a dense burst in the middle of a sparse range: the plan must cut it finer
    lanes = [kernels(3000, int(T0 * 1e6), 1000, seq0=0), kernels(40_000, int((T0 + 1.5) * 1e6), 5, seq0=10 ** 6),
             kernels(3000, int((T0 + 2) * 1e6), 1000, seq0=2 * 10 ** 6)]
    asked = Asked(recorder_with(lanes))
    export = WindowExport(asked.window, asked.history, T0, T0 + 10, piece_spans=4000)
    data = run(export)
    t = read(data)
    seqs = [s.args["seq"] for s in t.slices]
    assert len(seqs) == len(set(seqs)) == 46_000
    assert len(export.pieces) > 10 and max(asked.exact_sizes) <= 4000 and sum(asked.exact_sizes) == 46_000
    assert all(a[1] == b[0] for a, b in zip(export.pieces, export.pieces[1:]))  # contiguous
    assert export.pieces[0][0] == T0 and export.pieces[-1][1] == T0 + 10
    expected = collections.Counter(s.name for lane in lanes for s in lane)
    assert t.kernel_counts() == expected == export.summary.kernel_counts
    assert export.summary.slices == 46_000


def test_executions_that_start_in_one_microsecond_are_asked_together():
    burst = kernels(9000, int(T0 * 1e6) + 7, 0)
    asked = Asked(recorder_with([burst]))
    export = WindowExport(asked.window, None, T0, T0 + 60, piece_spans=1000)
    t = read(run(export))
    assert len(t.slices) == 9000 and max(asked.exact_sizes) == 9000


def test_a_sparse_range_is_one_piece_after_one_plan():
    asked = Asked(recorder_with([kernels(100, int(T0 * 1e6), 10)]))
    export = WindowExport(asked.window, asked.history, T0, T0 + 1)
    assert export.plan() == [(T0, T0 + 1)] and asked.plans == 1
    assert len(read(run(export)).slices) == 100


class Troubled:
    def __init__(self, recorder, fail_at: int):
        self.recorder, self.fail_at, self.calls = recorder, fail_at, 0

    def window(self, start, end, pid, width):
        self.calls += 1
        part = self.recorder.window(start, end, pid, width)
        if self.calls >= self.fail_at:
            part = WindowPart(source="fake", processes=part.processes,
                              problems=(Problem("fake", "window store on fire", "error"),))
        return (part,)


def test_a_problem_in_the_plan_refuses_the_export_before_any_byte():
    troubled = Troubled(recorder_with([kernels(10, int(T0 * 1e6), 10)]), fail_at=1)
    export = WindowExport(troubled.window, None, T0, T0 + 1)
    with pytest.raises(ExportError, match="on fire"):
        export.plan()


def test_a_problem_later_ends_the_stream_without_the_end_of_trace():
    troubled = Troubled(recorder_with([kernels(5000, int(T0 * 1e6), 100)]), fail_at=3)
    export = WindowExport(troubled.window, None, T0, T0 + 1, piece_spans=1000)
    got = []
    with pytest.raises(ExportError, match="on fire"):
        for piece in export.stream():
            got.append(piece)
    assert got and not b"".join(got).endswith(END_OF_TRACE)


def test_what_retention_evicted_is_said_per_process():
    rec = FakeRecorder("fake", retain_s=10 ** 6, retain_spans=100, resolution_s=1.0)
    for tick in range(5):
        rec.add_spans(42, "s", "train", {(0, 1, 13): ("x", kernels(60, int((T0 + tick) * 1e6), 10, seq0=tick * 100))},
                      T0 + tick + 0.5)
    asked = Asked(rec)
    export = WindowExport(asked.window, None, T0, T0 + 10)
    t = read(run(export))
    (proc,) = export.summary.incomplete
    assert (proc.pid, proc.complete) == (42, False) and proc.retained_from_s == T0 + 4
    assert len(t.slices) == 60
    later = WindowExport(asked.window, None, T0 + 4, T0 + 10)
    run(later)
    assert not later.summary.incomplete


def test_a_whole_fake_run_exports_exactly_the_snapshots_complete_aggregates():
    opts = fc.FakeOptions(rate_hz=10, gpus=2, traced=2, lanes=5, spans=40, span_cap=16)
    rec = FakeRecorder("fake", retain_s=3600, retain_spans=10 ** 7, resolution_s=0.1)
    scenario = fc.FakeScenario(opts, show_cmdline=False, recorder=rec)
    for i in range(30):
        part = scenario.step(T0 + 0.1 * i)
    asked = Asked(rec)
    export = WindowExport(asked.window, asked.history, T0 - 60, T0 + 60, piece_spans=500)
    t = read(run(export))
    for traced in part.traced:
        exported = collections.Counter(s.name for s in t.slices if s.category == "kernel"
                                       and t.path(s.track)[0] == f"pid {traced.pid}")
        assert exported == {k.name: k.count for k in traced.kernels}
        copies = collections.Counter(s.args["direction"] for s in t.slices if s.category != "kernel"
                                     and t.path(s.track)[0] == f"pid {traced.pid}")
        assert copies == {tr.direction: tr.count for tr in traced.transfers}
    assert len(t.slices) == sum(tp.records for tp in part.traced)
    # the devices' readings came along as counters (NaN points left out)
    names = {t.tracks[uuid].name for uuid in t.counters}
    assert {"utilization_gpu_pct", "temperature_c", "memory_used_bytes (GPU-fake0000-0000-0000-0000-000000000000)"} <= names


def test_a_window_of_a_running_agent_exports_the_windows_counts():
    pm = get_plugin_manager(["gpuflow.testing.fake_collector"], environ=dict(FAKE_ENV))
    agent = Agent(AgentConfig(options={"fake": {"rate_hz": 20, "spans": 30, "lanes": 4}}), pm)
    agent.start()

    def kernels_in(start: float, end: float) -> collections.Counter:
        (window,) = agent.query_window(start, end, None, None)
        return collections.Counter(s.name for p in window.processes for lane in p.lanes for s in lane.spans
                                   if s.kind == "kernel")

    try:
        agent.board.wait_first(5)
        time.sleep(1.2)
        # a range the fake no longer adds to: its spans start at most 80 ms before their tick, unless
        # its thread was kept off a core (a CI worker's was, over 0.4 s): a range whose counts moved
        # while it was exported is taken again, later
        for _ in range(5):
            end = time.time() - 0.5
            start = end - 0.5
            expected = kernels_in(start, end)
            t = read(run(WindowExport(agent.query_window, agent.query_history, start, end, piece_spans=50)))
            if kernels_in(start, end) == expected:
                break
    finally:
        agent.stop()
    assert expected and t.kernel_counts() == expected


def test_one_process_only_and_its_readings_only():
    opts = fc.FakeOptions(rate_hz=10, gpus=1, procs=2, traced=2, lanes=2, spans=5)
    rec = FakeRecorder("fake", retain_s=3600, retain_spans=10 ** 6, resolution_s=0.1)
    scenario = fc.FakeScenario(opts, show_cmdline=False, recorder=rec)
    for i in range(3):
        scenario.step(T0 + 0.1 * i)
    asked = Asked(rec)
    t = read(run(WindowExport(asked.window, asked.history, T0 - 10, T0 + 10, pid=5001)))
    pids = {t.path(s.track)[0] for s in t.slices}
    assert pids == {"pid 5001"}
    process_counters = {t.path(uuid)[0] for uuid in t.counters if t.tracks[uuid].name.startswith("sm_util")}
    assert process_counters == set()  # the fake's NVML processes (4000, 4001) are not pid 5001
    assert any(t.tracks[uuid].name == "utilization_gpu_pct" for uuid in t.counters)  # devices stay


def test_quiet_time_before_a_dense_stretch_is_still_asked():
    # the first buckets are empty and the one holding every execution is too dense for one piece:
    # the pieces must still cover the range from its start, edge to edge (a recorder's buckets
    # need not fall where the plan's do, so a hole could lose executions)
    dense = kernels(5000, int(T0 * 1e6), 1)
    asked = Asked(recorder_with([dense]))
    export = WindowExport(asked.window, None, T0 - 100, T0 + 100, piece_spans=1000)
    t = read(run(export))
    assert export.pieces[0][0] == T0 - 100 and export.pieces[-1][1] == T0 + 100
    assert all(a[1] == b[0] for a, b in zip(export.pieces, export.pieces[1:]))
    assert len(t.slices) == 5000
