"""GPUFlow's Perfetto trace, decoded with Perfetto's own schema (tests/support/perfetto_read.py):
tracks per process → device → stream with NVTX names, every slice's name, category and arguments,
counter tracks, the end-of-trace packet, and what a traced program's own strings and values
cannot break."""

from __future__ import annotations

import math
from array import array

import pytest
from perfetto_read import read

from gpuflow.core.recorded import (
    HistoryPart, LaneWindow, ProcessWindow, Series, SpanBuckets, SpanColumns, WindowPart,
)
from gpuflow.core.snapshot import Span
from gpuflow.export import launch_args as LA
from gpuflow.export import perfetto as pf
from gpuflow.export import slice_layout as L

T0 = 1_764_000_000_000_000  # µs since the epoch


def kernel(seq, start, dur, name="gemm_kernel<float, 128>(float const*, float*)", grid=(256, 4, 1), block=(128, 1, 1)):
    return Span(seq=seq, kind="kernel", start_us=start, dur_ns=dur, name=name, grid=grid, block=block)


def copy(seq, start, dur, nbytes=4096, direction="h2d"):
    return Span(seq=seq, kind="memset" if direction == "memset" else "memcpy", start_us=start, dur_ns=dur,
                bytes=nbytes, direction=direction)


def lane(stream, spans, label=None, device=0, context=1):
    return LaneWindow(device=device, context=context, stream=stream, label=label or str(stream),
                      executions=len(spans), spans=SpanColumns.from_spans(spans))


def process(pid, lanes, name="train", session="s1", complete=True):
    return ProcessWindow(pid=pid, session=session, name=name, retained_from_s=T0 / 1e6, retained_to_s=T0 / 1e6 + 9,
                         lanes=tuple(lanes), complete=complete)


def export(windows=(), history=()):
    pieces = []
    writer = pf.TraceWriter(pieces.append)
    writer.header()
    for parts in windows:
        writer.window(parts)
    writer.history(tuple(history))
    writer.finish()
    return b"".join(pieces), writer


def test_tracks_are_process_device_stream_with_nvtx_names_and_slices_carry_their_arguments():
    compute = [kernel(1, T0, 2_500), kernel(2, T0 + 10, 1_000, name="layer_norm(float*, int)", grid=(64, 1, 1),
                                             block=(1024, 1, 1))]
    copies = [copy(3, T0 + 1, 700, 1 << 20, "h2d"), copy(4, T0 + 20, 300, 4096, "d2h"), copy(5, T0 + 30, 1500, 65536, "memset")]
    other = [kernel(6, T0 + 5, 4_000, name="reduce_sum<512>(float const*, float*)")]
    parts = (WindowPart(source="rec", processes=(
        process(4242, [lane(13, compute, "compute"), lane(7, copies, "default"), lane(14, other, device=1)]),
        process(5151, [lane(13, [kernel(7, T0 + 2, 100)], "compute")], name="worker", session="s2"))),)
    data, writer = export([parts])
    t = read(data)
    assert t.whole and pf.is_whole(data) and data.endswith(pf.END_OF_TRACE)
    roots = sorted(t.children(None), key=lambda tr: tr.pid)
    assert [(r.pid, r.process_name) for r in roots] == [(4242, "train"), (5151, "worker")]
    paths = sorted(" / ".join(t.path(s.track)) for s in t.slices)
    assert set(paths) == {"pid 4242 / GPU 0 / compute (stream 13)", "pid 4242 / GPU 0 / default (stream 7)",
                          "pid 4242 / GPU 1 / stream 14", "pid 5151 / GPU 0 / compute (stream 13)"}
    by_seq = {s.args["seq"]: s for s in t.slices}
    assert sorted(by_seq) == [1, 2, 3, 4, 5, 6, 7]
    k = by_seq[2]
    assert (k.name, k.category, k.begin_ns, k.dur_ns) == ("layer_norm(float*, int)", "kernel", (T0 + 10) * 1000, 1_000)
    # a lane that came with no launch configurations (this collector keeps none): said so
    assert k.args == {"seq": 2, "dur_ns": 1_000, "grid_x": 64, "grid_y": 1, "grid_z": 1, "block_x": 1024,
                      "block_y": 1, "block_z": 1, "occupancy_pct": LA.NOT_AVAILABLE + LA.NO_LAUNCHES}
    h2d, d2h, memset = by_seq[3], by_seq[4], by_seq[5]
    assert (h2d.name, h2d.category, h2d.args) == ("memcpy h2d", "memcpy", {
        "seq": 3, "dur_ns": 700, "bytes": 1 << 20, "direction": "h2d", "bytes_per_s": (1 << 20) * 1e9 / 700,
        "host_memory": LA.NOT_AVAILABLE + LA.NO_HOST_MEMORY})
    assert (d2h.name, d2h.args["direction"], d2h.args["bytes"]) == ("memcpy d2h", "d2h", 4096)
    assert (memset.name, memset.category, memset.args) == ("memset", "memset", {
        "seq": 5, "dur_ns": 1500, "bytes": 65536, "direction": "memset"})
    assert t.kernel_counts() == writer.kernel_counts == {
        "gemm_kernel<float, 128>(float const*, float*)": 2, "layer_norm(float*, int)": 1,
        "reduce_sum<512>(float const*, float*)": 1}
    assert writer.slices == 7


def test_names_are_interned_once_however_many_pieces_use_them():
    name = "a_kernel_with_a_long_name<" + "x" * 300 + ">"
    pieces = [(WindowPart(source="rec", processes=(process(1, [lane(13, [kernel(i, T0 + 10 * i, 5, name=name)])]),)),)
              for i in range(5)]
    data, writer = export(pieces)
    assert data.count(name.encode()) == 1
    assert read(data).kernel_counts() == {name: 5} == writer.kernel_counts


def test_a_lane_continues_on_one_track_across_pieces():
    first = WindowPart(source="rec", processes=(process(1, [lane(13, [kernel(1, T0, 5_000)])]),))
    second = WindowPart(source="rec", processes=(process(1, [lane(13, [kernel(2, T0 + 10, 5_000)])]),))
    t = read(export([(first,), (second,)])[0])
    assert len({s.track for s in t.slices}) == 1 and len(t.tracks) == 3  # process, GPU 0, the stream


def test_back_to_back_executions_within_a_microsecond_end_where_the_next_begins():
    # starts are kept to the microsecond: 2,400 ns from T0 then one starting at T0+2 µs
    spans = [kernel(1, T0, 2_400), kernel(2, T0 + 2, 1_000)]
    t = read(export([(WindowPart(source="rec", processes=(process(1, [lane(13, spans)]),)),)])[0])
    first, second = sorted(t.slices, key=lambda s: s.begin_ns)
    assert first.track == second.track
    assert first.end_ns == second.begin_ns == (T0 + 2) * 1000
    assert first.args["dur_ns"] == 2_400  # the exact duration stays in the arguments


def test_executions_that_really_overlap_go_on_sub_tracks_under_the_streams():
    spans = [kernel(1, T0, 50_000), kernel(2, T0 + 10, 5_000), kernel(3, T0 + 12, 5_000), kernel(4, T0 + 100, 1_000)]
    t = read(export([(WindowPart(source="rec", processes=(process(1, [lane(13, spans, "compute")]),)),)])[0])
    by_seq = {s.args["seq"]: s for s in t.slices}
    stream = by_seq[1].track
    assert by_seq[4].track == stream
    assert {t.tracks[by_seq[2].track].parent, t.tracks[by_seq[3].track].parent} == {stream}
    assert by_seq[2].track != by_seq[3].track
    assert t.tracks[by_seq[2].track].name == "compute (stream 13) (overlapping 1)"
    assert all(s.dur_ns == s.args["dur_ns"] for s in t.slices)


def test_sub_tracks_are_capped_for_a_ring_that_overlaps_everything():
    spans = [kernel(i, T0, 10_000_000) for i in range(200)]
    data, writer = export([(WindowPart(source="rec", processes=(process(1, [lane(13, spans)]),)),)])
    t = read_loose(data)
    assert len(t) == 1 + 1 + L.MAX_SUBTRACKS  # the process, its GPU, the stream and its sub-tracks
    assert writer.kernel_counts == {spans[0].name: 200}


def read_loose(data: bytes) -> set[int]:
    """The track uuids of a trace whose slices may misnest (only a hostile ring's can)."""
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    trace = pb.Trace()
    trace.ParseFromString(data)
    return {p.track_descriptor.uuid for p in trace.packet if p.HasField("track_descriptor")}


def test_readings_become_counter_tracks_without_the_unavailable_points():
    history = HistoryPart(source="nvml", series=(
        Series(entity=("device", "GPU-aaaa"), metric="utilization_gpu_pct", unit="%", resolution_s=1.0,
               t_s=array("d", [100.0, 101.0, 102.0]), value=array("d", [40.0, math.nan, 55.5])),
        Series(entity=("device", "GPU-aaaa"), metric="memory_used_bytes", unit="bytes", resolution_s=1.0,
               t_s=array("d", [100.0]), value=array("d", [2.0 ** 33])),
        Series(entity=("process", "4242", "GPU-aaaa"), metric="sm_util_pct", unit="%", resolution_s=1.0,
               t_s=array("d", [100.5]), value=array("d", [12.0]))))
    parts = (WindowPart(source="rec", processes=(process(4242, [lane(13, [kernel(1, T0, 5)])]),)),)
    t = read(export([parts], [history])[0])
    counters = {t.tracks[uuid].name: (t.tracks[uuid], values) for uuid, values in t.counters.items()}
    util, values = counters["utilization_gpu_pct"]
    assert values == [(100_000_000_000, 40.0), (102_000_000_000, 55.5)]
    assert util.counter_unit == "%" and t.tracks[util.parent].name == "GPU-aaaa"
    assert counters["memory_used_bytes"][0].counter_unit == "bytes"
    sm, values = counters["sm_util_pct (GPU-aaaa)"]
    assert values == [(100_500_000_000, 12.0)] and t.tracks[sm.parent].pid == 4242
    assert t.children(None)[0].pid == 4242 and len([r for r in t.children(None) if r.pid == 4242]) == 1


def test_a_lane_reduced_to_buckets_cannot_be_exported():
    reduced = LaneWindow(device=0, context=1, stream=7, label="x", executions=900,
                         buckets=SpanBuckets(start_us=T0, width_us=10.0, count=array("q", [900]),
                                             busy_ns=array("q", [10_000])))
    with pytest.raises(pf.ExportError, match="buckets"):
        export([(WindowPart(source="rec", processes=(process(1, [reduced]),)),)])


def test_a_traced_programs_strings_and_values_are_written_as_data():
    hostile = "\x00\n\x1b[31m\u202e\ud800 evil" + "é" * 40
    spans = [kernel(1, -5, -1, name=hostile, grid=(-7, 2 ** 40, 1), block=(1, 1, 1)),
             kernel(2, 2 ** 62, 2 ** 63 - 1, name=None),
             Span(seq=3, kind="memset", start_us=T0, dur_ns=10),
             Span(seq=4, kind="memcpy", start_us=T0 + 1, dur_ns=10, bytes=None, direction="p2p")]
    good = SpanColumns.from_spans(spans)
    # what no collector should answer but a ring could make one: a kind outside SPAN_KINDS, a
    # name id past the names table, a direction past TRANSFER_DIRECTIONS
    columns = SpanColumns(**{f: array("q", getattr(good, f)) for f in (
        "seq", "start_us", "dur_ns", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "bytes")},
        kind=array("q", [0, 0, 7, 1]), name=array("q", [0, 99, -1, -1]), direction=array("q", [-1, -1, -1, 3]),
        names=good.names)
    windows = LaneWindow(device=0, context=9, stream=3, label=hostile, executions=4, spans=columns)
    proc = ProcessWindow(pid=77, session=hostile, name=hostile, retained_from_s=None, retained_to_s=None,
                         lanes=(windows,))
    t = read(export([(WindowPart(source="rec", processes=(proc,)),)])[0])
    by_seq = {s.args["seq"]: s for s in t.slices}
    assert by_seq[1].begin_ns == 0 and by_seq[1].args["dur_ns"] == 0
    assert by_seq[1].args["grid_x"] == -7 and by_seq[1].args["grid_y"] == 2 ** 40
    assert by_seq[1].name == hostile.encode("utf-8", "replace").decode()
    assert by_seq[2].name == "(unnamed kernel)" and by_seq[2].begin_ns == L.MAX_START_US * 1000
    assert by_seq[2].args["dur_ns"] == L.MAX_DURATION_NS
    assert (by_seq[3].name, by_seq[3].category, set(by_seq[3].args)) == ("(unknown kind)", "other", {"seq", "dur_ns"})
    assert (by_seq[4].name, by_seq[4].args) == ("memcpy p2p", {"seq": 4, "dur_ns": 10, "direction": "p2p",
                                                               "bytes_per_s": LA.NOT_AVAILABLE + LA.NO_RATE})
    stream = t.tracks[by_seq[1].track]
    assert stream.name.endswith("(stream 3, context 9)")


def test_an_empty_trace_is_still_whole():
    data, writer = export()
    t = read(data)
    assert t.whole and not t.slices and writer.slices == 0
    assert not pf.is_whole(data[:-1])
