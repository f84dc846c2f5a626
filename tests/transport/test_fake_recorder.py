"""The fake collector's flight recorder: what it retains, for how long, and how it answers the
recorder's hooks (exact columns, buckets past a width, readings with NaN), also after it stopped."""

from __future__ import annotations

import math

from gpuflow.core.context import AgentConfig, CollectorContext
from gpuflow.core.snapshot import Span
from gpuflow.testing import fake_collector as fc
from gpuflow.testing.fake_recorder import FakeRecorder

T0 = 1_764_000_000.0


def spans(n, start_s, step_us=10, dur_ns=4_000):
    return [Span(seq=i, kind="kernel", start_us=int(start_s * 1e6) + i * step_us, dur_ns=dur_ns, name="k",
                 grid=(1, 1, 1), block=(1, 1, 1)) for i in range(n)]


def test_a_window_holds_the_spans_that_start_in_it_exactly():
    rec = FakeRecorder("fake", 60, 10 ** 6, 0.1)
    rec.add_spans(42, "s", "train", {(0, 1, 7): ("default", spans(100, T0))}, T0 + 1)
    (proc,) = rec.window(T0 + 100e-6, T0 + 300e-6, None, None).processes
    (lane,) = proc.lanes
    assert list(lane.spans.seq) == list(range(10, 30)) and lane.executions == 20
    assert (proc.retained_from_s, proc.complete) == (T0, True)
    assert rec.window(T0, T0 + 1, 43, None).processes == ()


def test_a_lane_denser_than_the_width_comes_as_buckets_with_counts_and_busy_time():
    rec = FakeRecorder("fake", 60, 10 ** 6, 0.1)
    rec.add_spans(42, "s", "train", {(0, 1, 7): ("default", spans(100, T0))}, T0 + 1)
    (lane,) = rec.window(T0, T0 + 1e-3, None, 4).processes[0].lanes
    b = lane.buckets
    assert lane.spans is None and lane.executions == 100 and b.width_us == 250.0
    assert list(b.count) == [25, 25, 25, 25]
    assert all(0 < busy <= 250_000 for busy in b.busy_ns) and sum(b.busy_ns) == 100 * 4_000


def test_the_oldest_ticks_leave_by_time_and_by_count_and_the_window_says_so():
    rec = FakeRecorder("fake", retain_s=2, retain_spans=250, resolution_s=0.1)
    for tick in range(6):
        rec.add_spans(42, "s", "train", {(0, 1, 7): ("x", spans(100, T0 + tick))}, T0 + tick + 0.5)
    (proc,) = rec.window(T0, T0 + 10, None, None).processes
    assert sum(len(l.spans) for l in proc.lanes) == 200  # 250 at most: whole ticks leave
    assert proc.retained_from_s == T0 + 4 and not proc.complete
    assert rec.window(T0 + 4, T0 + 10, None, None).processes[0].complete
    rec2 = FakeRecorder("fake", retain_s=2, retain_spans=10 ** 6, resolution_s=0.1)
    for tick in range(6):
        rec2.add_spans(42, "s", "train", {(0, 1, 7): ("x", spans(10, T0 + tick))}, T0 + tick + 0.5)
    assert rec2.window(T0, T0 + 10, None, None).processes[0].retained_from_s == T0 + 4  # older than 2 s left


def test_readings_are_series_with_nan_for_not_available():
    scenario = fc.FakeScenario(fc.FakeOptions(gpus=2, procs=2), show_cmdline=False,
                               recorder=(rec := FakeRecorder("fake", 60, 10 ** 6, 0.1)))
    for i in range(3):
        scenario.step(T0 + 0.1 * i)
    part = rec.history(T0 - 1, T0 + 1)
    by = {(s.entity, s.metric): s for s in part.series}
    util = by[(("device", scenario.uuids[0]), "utilization_gpu_pct")]
    assert list(util.t_s) == [T0, T0 + 0.1, T0 + 0.2] and util.unit == "%"
    rx = by[(("device", scenario.uuids[1]), "pcie_rx_bytes_per_s")]
    assert all(math.isnan(v) for v in rx.value)  # the fake's odd GPUs have no PCIe rx reading
    assert (("process", "4000", scenario.uuids[1]), "memory_used_bytes") in by
    assert (part.retained_from_s, part.retained_to_s) == (T0, T0 + 0.2)


def test_the_hooks_answer_after_the_collector_stopped():
    ctx = CollectorContext(AgentConfig(options={"fake": {"rate_hz": 0}}))
    fc.start_collecting(ctx)
    fc.stop_collecting(ctx)
    assert fc.produce_snapshot(ctx) is None
    window = fc.query_window(ctx, 0.0, 4e9, None, None)
    assert window.source == "fake" and window.processes and window.processes[0].lanes
    assert fc.query_history(ctx, 0.0, 4e9).series
