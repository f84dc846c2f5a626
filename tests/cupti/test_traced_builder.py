"""Decoder state → TracedProcess: labels, demangled names, wall-clock spans, window, behind-live,
lanes whose spans are columns (no Span object made), reuse of unchanged Lanes, exact spans_elided."""

from __future__ import annotations

import gc

import pytest

from gpuflow.collectors.cupti.traced_builder import UNNAMED_KERNEL, TracedBuilder, lane_label
from gpuflow.collectors.cupti.demangle import AVAILABLE as DEMANGLER
from gpuflow.core.recorded import SpanColumns

WALL0 = 1_764_000_000_000_000_000  # ns
CUPTI0 = 5_000_000
SESSION = "0123456789abcdef"  # the collector names the session; the ring does not


@pytest.mark.parametrize(("name", "null", "stream", "label"), [
    ("compute", 7, 7, "compute"), (None, 7, 7, "default"), ("", 7, 7, "default"),
    (None, 7, 13, "13"), (None, None, 13, "13"), ("prefetch", None, 13, "prefetch")])
def test_lane_label_rule(name, null, stream, label):
    assert lane_label(name, null, stream) == label


def build(decoder, builder=None, now_ns=WALL0 + 10_000_000, **kw):
    builder = builder or TracedBuilder(decoder.producer_pid, SESSION, decoder.lane_span_cap)
    args = {"name": "demo", "state": "running", "exit_status": None, "truncated": False, "now_ns": now_ns}
    args.update(kw)
    return builder, builder.build(decoder, **args)


def test_a_traced_process_as_the_browser_sees_it(decoder_impl, rings):
    p = rings.producer()
    p.set_status(1, "")
    p.context(0, 1, 7)
    p.clock_sync(CUPTI0, WALL0)
    p.stream_name(0, 1, 13, "compute")
    p.kernel(0, 1, 13, CUPTI0 + 1_000, CUPTI0 + 3_000, "_Z13attention_fwdPKfPfi", (256, 1, 1), (128, 1, 1))
    p.kernel(0, 1, 13, CUPTI0 + 4_000, CUPTI0 + 5_000, "_Z13attention_fwdPKfPfi", (256, 1, 1), (128, 1, 1))
    p.kernel(0, 1, 7, CUPTI0 + 2_000, CUPTI0 + 9_000, "softmax", (1, 1, 1), (32, 1, 1))
    p.kernel(0, 1, 7, 0, 0, None)
    p.memcpy(0, 1, 14, CUPTI0 + 500, CUPTI0 + 8_500, 1, 1 << 20)
    p.memset(0, 1, 14, CUPTI0 + 9_000, CUPTI0 + 9_100, 4096)
    d = decoder_impl.cls(rings.mapping(p))
    d.drain()
    _, t = build(d)
    assert (t.pid, t.session, t.name, t.state, t.cupti_status, t.truncated) == (
        p.pid, SESSION, "demo", "running", "ok", False)
    assert t.records == d.tail and t.complete
    attention = "attention_fwd(float const*, float*, int)" if DEMANGLER else "_Z13attention_fwdPKfPfi"
    assert [(k.name, k.mangled, k.count, k.total_ns, k.min_ns, k.max_ns) for k in t.kernels] == [
        ("softmax", "softmax", 1, 7_000, 7_000, 7_000),
        (attention, "_Z13attention_fwdPKfPfi", 2, 3_000, 1_000, 2_000),
        (UNNAMED_KERNEL, "", 1, 0, None, None)]
    assert [(x.direction, x.count, x.bytes, x.total_ns) for x in t.transfers] == [
        ("h2d", 1, 1 << 20, 8_000), ("memset", 1, 4096, 100)]
    assert [(l.stream, l.label, l.executions, l.spans_elided, len(l.spans)) for l in t.lanes] == [
        (7, "default", 2, 1, 1), (13, "compute", 2, 0, 2), (14, "14", 2, 0, 2)]
    k = t.lanes[1].spans[0]
    assert (k.kind, k.start_us, k.dur_ns, k.name, k.grid, k.block, k.bytes, k.direction) == (
        "kernel", (WALL0 + 1_000) // 1000, 2_000, attention, (256, 1, 1), (128, 1, 1), None, None)
    c = t.lanes[2].spans[0]
    assert (c.kind, c.name, c.bytes, c.direction, c.grid) == ("memcpy", None, 1 << 20, "h2d", None)
    for lane in t.lanes:  # oldest first
        assert [s.seq for s in lane.spans] == sorted(s.seq for s in lane.spans)
    assert t.window_start_us == (WALL0 + 500) // 1000
    assert t.window_end_us == (WALL0 + 2_000) // 1000 + 7  # the null-stream kernel ends last
    assert t.behind_live_ms == round((10_000_000 - 9_000) / 1e6, 1)
    d.detach()


def test_builds_are_incremental_and_spans_elided_stays_exact(decoder_impl, rings):
    p = rings.producer()
    p.clock_sync(0, WALL0)
    d = decoder_impl.cls(rings.mapping(p), lane_span_cap=4)
    for i in range(3):
        p.kernel(0, 1, 13, 1000 * i + 1, 1000 * i + 500, "_Z1kv")
    d.drain()
    builder, t1 = build(d)
    lane1 = t1.lanes[0]
    assert (lane1.executions, lane1.spans_elided, len(lane1.spans)) == (3, 0, 3)
    _, t_same = build(d, builder)
    assert t_same.lanes[0] is lane1 and t_same.kernels[0] is t1.kernels[0]  # nothing new: reused
    for i in range(3, 9):
        p.kernel(0, 1, 13, 1000 * i + 1, 1000 * i + 500, "_Z1kv")
    p.kernel(0, 1, 13, 0, 0, "_Z1kv")
    d.drain()
    _, t2 = build(d, builder)
    lane2 = t2.lanes[0]
    assert (lane2.executions, lane2.spans_elided, len(lane2.spans)) == (10, 6, 4)
    assert [s.start_us for s in lane2.spans] == [(WALL0 + 1000 * i + 1) // 1000 for i in range(5, 9)]
    for i in range(9, 11):
        p.kernel(0, 1, 13, 1000 * i + 1, 1000 * i + 500, "_Z1kv")
    d.drain()
    _, t3 = build(d, builder)
    assert t3.lanes[0].spans[0] == lane2.spans[2]  # the same span, as columns: no Span object is kept
    assert isinstance(t3.lanes[0].spans, SpanColumns)
    assert (t3.lanes[0].executions, t3.lanes[0].spans_elided) == (12, 8)
    d.detach()


def test_without_any_clock_pair_there_is_no_behind_live(decoder_impl, rings):
    p = rings.producer()
    p.kernel(0, 1, 13, 1_000_000, 2_000_000, "_Z1kv")
    d = decoder_impl.cls(rings.mapping(p))
    d.drain()
    _, t = build(d)
    assert t.behind_live_ms is None and t.window_start_us == 1000
    d.detach()


def test_malformed_records_mark_the_process_truncated(decoder_impl, rings):
    p = rings.producer()
    p.push_raw(bytes(64))
    d = decoder_impl.cls(rings.mapping(p))
    d.drain()
    _, t = build(d)
    assert t.truncated
    _, t = build(d, exit_status=3, state="exited", truncated=False)
    assert (t.state, t.exit_status, t.truncated) == ("exited", 3, True)
    d.detach()


def test_a_build_makes_no_span_object(decoder_impl, rings):
    """The lanes' spans come as columns from the decoder: building a snapshot constructs no Span
    (it made one per new span shown before issue 17: ~340 k a second under bench/agent_rss.py)."""
    from gpuflow.core import snapshot

    p = rings.producer()
    p.clock_sync(0, WALL0)
    for i in range(300):
        p.kernel(0, 1, 13 + i % 4, 1000 * i + 1, 1000 * i + 500, "_Z1kv")
        p.memcpy(0, 1, 7, 1000 * i + 1, 1000 * i + 300, 1, 4096)
    d = decoder_impl.cls(rings.mapping(p))
    d.drain()
    def spans_alive() -> int:
        gc.collect()
        return sum(type(o) is snapshot.Span for o in gc.get_objects())

    before = spans_alive()
    _, t = build(d)
    assert sum(len(lane.spans) for lane in t.lanes) == 600
    assert spans_alive() == before   # the snapshot holds its 600 spans, and no Span object
    d.detach()


def test_a_lanes_columns_are_the_object_the_constructor_makes(decoder_impl, rings):
    """The builder makes each lane's SpanColumns without the constructor's checks (its arrays are the
    decoder's): the same fields, in the same order, equal to what SpanColumns(...) makes of them."""
    p = rings.producer()
    p.clock_sync(CUPTI0, WALL0)
    p.stream_name(0, 1, 13, "compute")
    for i in range(5):
        p.kernel(0, 1, 13, CUPTI0 + 1000 * i, CUPTI0 + 1000 * i + 500, f"_Z{i % 2}kv", (i + 1, 2, 3), (32, 2, 1))
        p.memcpy(0, 1, 13, CUPTI0 + 1000 * i + 600, CUPTI0 + 1000 * i + 700, 1, 4096 << i)
    d = decoder_impl.cls(rings.mapping(p))
    d.drain()
    _, t = build(d)
    spans = t.lanes[0].spans
    made = SpanColumns(**{f: getattr(spans, f) for f in vars(spans)})
    assert list(vars(spans)) == list(vars(made)) and spans == made and len(spans) == 10
    assert [s.kind for s in spans] == ["kernel", "memcpy"] * 5 and len(set(spans.names)) == 2
    d.detach()
