"""A trace with the occupancy and bandwidth arguments reads back (gpuflow.export.trace_read, what
``gpuflow open`` shows) to exactly the columns it was written from: the reader passes over the
arguments that are no column, whatever their value's form (a double, an interned string, an
int); a trace written before those arguments existed (its header has only the base names) still
reads, and one whose slices use an argument its header lacks is refused with one line. The
arguments' interned strings are written once however many slices and pieces use them."""

from __future__ import annotations

from array import array

import pytest
from perfetto_read import read

from gpuflow.core.recorded import LaneWindow, LaunchFigures, ProcessWindow, SpanColumns, WindowPart
from gpuflow.core.snapshot import Span
from gpuflow.export import launch_args as LA
from gpuflow.export import perfetto as pf
from gpuflow.export import slice_layout as L
from gpuflow.export.trace_read import TraceReadError, read_trace

T0 = 1_764_000_000_000_000
COLUMNS = ("seq", "start_us", "dur_ns", "kind", "name", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
           "block_z", "bytes", "direction")


def spans() -> SpanColumns:
    return SpanColumns.from_spans([
        Span(seq=1, kind="kernel", start_us=T0, dur_ns=5_000, name="gemm", grid=(528, 1, 1), block=(256, 1, 1)),
        Span(seq=2, kind="kernel", start_us=T0 + 10, dur_ns=5_000, name="gemm", grid=(264, 2, 1), block=(256, 1, 1)),
        Span(seq=3, kind="kernel", start_us=T0 + 20, dur_ns=5_000, name="reduce", grid=(1, 1, 1), block=(64, 1, 1)),
        Span(seq=4, kind="memcpy", start_us=T0 + 30, dur_ns=20_000, bytes=1 << 20, direction="h2d"),
        Span(seq=5, kind="memset", start_us=T0 + 60, dur_ns=1_000, bytes=4096, direction="memset"),
    ])


#: per name (gemm, reduce): the figures of the configurations it ran with
LAUNCHES = ((LaunchFigures(7, (256, 1, 1), occupancy_pct=25.0, blocks_per_sm=2, limiters="registers",
                           wave_blocks=264),),
            (LaunchFigures(0, (64, 1, 1), unavailable="no launch configuration was recorded"),))


def part(columns: SpanColumns, launches=LAUNCHES, launch_ids=(7, 7, 0, -1, -1)) -> WindowPart:
    lane = LaneWindow(0, 1, 13, "compute", len(columns), spans=columns, launch_ids=array("q", launch_ids),
                      launches=launches)
    return WindowPart(source="rec", processes=(ProcessWindow(pid=4242, session="s1", name="train",
                                                             retained_from_s=T0 / 1e6, retained_to_s=T0 / 1e6 + 1,
                                                             lanes=(lane,)),))


def export(parts, header_args=None) -> bytes:
    out = []
    writer = pf.TraceWriter(out.append)
    if header_args is None:
        writer.header()
    else:   # a header as a GPUFlow before the occupancy arguments wrote it
        saved, L.ARG_NAMES = L.ARG_NAMES, header_args
        try:
            writer.header()
        finally:
            L.ARG_NAMES = saved
    for p in parts:
        writer.window((p,))
    writer.finish()
    return b"".join(out)


def test_the_arguments_are_written_and_read_back_to_the_same_columns():
    columns = spans()
    data = export([part(columns), part(columns)])   # two pieces: the strings interned once
    by_seq = {}
    for s in read(data).slices:
        by_seq.setdefault(s.args["seq"], s.args)
    assert by_seq[1]["waves"] == 2.0 and by_seq[2]["waves"] == 2.0 and by_seq[1]["limiter"] == "registers"
    assert (by_seq[1]["occupancy_pct"], by_seq[1]["blocks_per_sm"]) == (25.0, 2)
    assert by_seq[3] == {"seq": 3, "dur_ns": 5_000, "grid_x": 1, "grid_y": 1, "grid_z": 1, "block_x": 64,
                         "block_y": 1, "block_z": 1,
                         "occupancy_pct": LA.NOT_AVAILABLE + "no launch configuration was recorded"}
    assert by_seq[4]["bytes_per_s"] == (1 << 20) * 1e9 / 20_000
    assert "bytes_per_s" not in by_seq[5] and "host_memory" not in by_seq[5]
    for text in ("registers", LA.NOT_AVAILABLE + LA.NO_HOST_MEMORY, LA.NOT_AVAILABLE + LA.NO_RATE):
        assert data.count(text.encode()) == 1
    contents = read_trace(data)
    (proc,) = contents.processes
    (lane,) = proc.lanes
    got = lane.spans
    assert got.names == columns.names
    for col in COLUMNS:
        assert list(getattr(got, col)) == list(getattr(columns, col)) * 2, col


def test_a_trace_from_before_the_arguments_still_reads_and_one_using_an_undefined_argument_is_refused():
    memset = SpanColumns.from_spans([Span(seq=1, kind="memset", start_us=T0, dur_ns=10, bytes=64,
                                          direction="memset")])
    old = export([part(memset, (), (-1,))], header_args=L.ARG_NAMES[:L.BASE_ARG_NAMES])
    (proc,) = read_trace(old).processes
    assert list(proc.lanes[0].spans.bytes) == [64]
    kernels = export([part(spans())], header_args=L.ARG_NAMES[:L.BASE_ARG_NAMES])
    with pytest.raises(TraceReadError, match="a name id the header does not define"):
        read_trace(kernels)


def test_a_header_whose_later_argument_names_are_not_ours_is_refused():
    other = export([part(spans())], header_args=(*L.ARG_NAMES[:L.BASE_ARG_NAMES], "something_else"))
    with pytest.raises(TraceReadError, match="not a GPUFlow trace"):
        read_trace(other)
