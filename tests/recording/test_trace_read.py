"""A GPUFlow trace read back (gpuflow.export.trace_read) is the recorder's content it was written
from: every execution column by column, every lane's key and label, every reading; and what is
not GPUFlow's, not whole or beyond the limits is refused with one line."""

from __future__ import annotations

import math

import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from gpuflow.core.recorded import LaneWindow, SpanColumns
from gpuflow.core.snapshot import Span
from gpuflow.export import protowire as w
from gpuflow.export.perfetto import END_OF_TRACE
from gpuflow.export.trace_read import Limits, TraceReadError, read_trace
from gpuflow.export.window_export import WindowExport
from gpuflow.testing.fake_recorder import FakeRecorder

from .traces import T0, Recorded

COLUMNS = ("seq", "start_us", "dur_ns", "kind", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
           "bytes", "direction")


def rows(lane: LaneWindow) -> list[tuple]:
    """A lane's executions as comparable rows, its name column as the names themselves."""
    c = lane.spans
    assert c is not None
    names = [c.names[i] if i >= 0 else None for i in c.name]
    return list(zip(*(getattr(c, col) for col in COLUMNS), names))


@pytest.mark.parametrize("piece_spans", [None, 700])
def test_every_execution_and_reading_comes_back_as_it_was_recorded(piece_spans):
    rec = Recorded()
    contents = read_trace(rec.trace(piece_spans))
    (original,) = rec.window(rec.start_s, rec.end_s)
    assert [(p.pid, p.name) for p in contents.processes] == [(p.pid, p.name) for p in original.processes]
    for got, want in zip(contents.processes, original.processes):
        assert [(l.device, l.context, l.stream, l.label, l.executions) for l in got.lanes] == \
               [(l.device, l.context, l.stream, l.label, l.executions) for l in want.lanes]
        for a, b in zip(got.lanes, want.lanes):
            assert rows(a) == rows(b)
    assert contents.executions == sum(l.executions for p in original.processes for l in p.lanes) == 8000
    (history,) = rec.history(rec.start_s, rec.end_s)
    kept = {(s.entity, s.metric): s for s in contents.series}
    for s in history.series:
        finite = [(t, v) for t, v in zip(s.t_s, s.value) if math.isfinite(v)]
        if not finite:   # a reading never available has no counter at all
            assert (s.entity, s.metric) not in kept
            continue
        got = kept.pop((s.entity, s.metric))
        assert got.unit == s.unit and got.resolution_s == pytest.approx(0.25)
        assert list(got.value) == [v for _, v in finite]
        assert all(abs(a - t) < 1e-6 for a, (t, _) in zip(got.t_s, finite))
    assert not kept


def test_labels_streams_and_contexts_come_back_from_the_track_names():
    rec = FakeRecorder("fake", 10 ** 6, 10 ** 8, 1.0)
    span = Span(seq=1, kind="kernel", start_us=int(T0 * 1e6), dur_ns=5, name="k", grid=(1, 1, 1), block=(1, 1, 1))
    lanes = {(0, 1, 7): ("default", [span]), (0, 1, 9): ("9", [span]), (2, 3, 14): ("copy (stream 4)", [span]),
             (1, 1, -5): ("odd", [span])}
    rec.add_spans(7, "s", "p", lanes, T0)
    out: list[bytes] = []
    WindowExport(lambda *a: (rec.window(*a),), None, T0 - 1, T0 + 1).write(out.append)
    (p,) = read_trace(b"".join(out)).processes
    assert [(l.device, l.context, l.stream, l.label) for l in p.lanes] == [
        (0, 1, 7, "default"), (0, 1, 9, "9"), (1, 1, -5, "odd"), (2, 3, 14, "copy (stream 4)")]


def test_a_trace_from_another_tool_is_refused_by_its_first_packet():
    foreign = w.packet(w.int_field(w.PACKET_SEQUENCE_ID, 1) + w.int_field(w.PACKET_SEQUENCE_FLAGS, 1) + w.len_field(
        w.PACKET_INTERNED_DATA, w.len_field(w.INTERNED_EVENT_NAMES, w.int_field(1, 1) + w.text_field(2, "draw"))))
    with pytest.raises(TraceReadError, match="not a GPUFlow trace"):
        read_trace(foreign + END_OF_TRACE)


def test_a_trace_cut_short_anywhere_is_refused_with_one_line():
    data = Recorded(ticks=3).trace()
    for cut in list(range(0, 200)) + list(range(len(data) - 200, len(data))) + list(range(200, len(data), 997)):
        with pytest.raises(TraceReadError) as caught:
            read_trace(data[:cut])
        assert "\n" not in str(caught.value)


def test_nothing_may_follow_the_end_of_the_trace():
    data = Recorded(ticks=2).trace()
    with pytest.raises(TraceReadError, match="follows the end-of-trace"):
        read_trace(data + END_OF_TRACE)


@pytest.mark.parametrize("limit, message", [
    (Limits(tracks=10), "more than 10 tracks"), (Limits(lanes=3), "more than 3 streams"),
    (Limits(processes=1), "more than 1 processes"), (Limits(counters=5), "more than 5 counters"),
    (Limits(names=20), "more than 20 names"), (Limits(name_bytes=8), "bytes long")])
def test_what_a_trace_can_make_the_reader_hold_is_bounded(limit, message):
    data = Recorded(ticks=2).trace()
    assert read_trace(data).executions == 400
    with pytest.raises(TraceReadError, match=message):
        read_trace(data, limit)


def test_an_empty_window_is_a_whole_trace_that_holds_nothing():
    out: list[bytes] = []
    rec = FakeRecorder("fake", 10, 10, 1.0)
    WindowExport(lambda *a: (rec.window(*a),), lambda *a: (rec.history(*a),), T0, T0 + 1).write(out.append)
    contents = read_trace(b"".join(out))
    assert contents.processes == () and contents.series == () and contents.executions == 0


def test_columns_are_the_recorders_own_types():
    (p,) = read_trace(Recorded(ticks=1, traced=1).trace()).processes[:1]
    assert all(isinstance(l.spans, SpanColumns) and l.spans.seq.typecode == "q" for l in p.lanes)


def test_the_gpus_the_agent_showed_are_described_and_read_back():
    rec = Recorded(ticks=2, gpus=3)
    data = rec.trace()
    shown = rec.parts[-1].devices
    facts = read_trace(data).gpus
    assert {uuid: (f.index, f.name, f.memory_total_bytes, f.power_limit_w) for uuid, f in facts.items()} == {
        d.uuid: (d.index, d.name, d.memory_total_bytes, d.power_limit_w) for d in shown}
    # written where Perfetto's own schema has it: the description of the track named by the GPU's uuid
    trace = pb.Trace()
    trace.ParseFromString(data)
    described = {p.track_descriptor.name: p.track_descriptor.description for p in trace.packet
                 if p.HasField("track_descriptor") and p.track_descriptor.description}
    assert described == {d.uuid: f"GPU {d.index} · GPUFlow Fake GPU · {d.memory_total_bytes} bytes · 700 W"
                         for d in shown}
    assert read_trace(rec.trace(described=False)).gpus == {}
