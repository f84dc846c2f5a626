"""The stream's span rows made straight from a lane's columns equal the rows made from its spans.

encode_spans reads SpanColumns column by column (no Span per span: the live path's cost); the
rows, and the order names enter the process's name table, must be exactly those of the same
spans as Span objects, for the documented shapes (kernels, copies, memsets) and for any other
combination the columns can hold (those go through the Span).
"""

from __future__ import annotations

from array import array

from hypothesis import given, settings, strategies as st

from gpuflow.core.recorded import SpanColumns
from gpuflow.transport.wire import NameTable, encode_spans

COLUMNS = ("seq", "start_us", "dur_ns", "kind", "name", "grid_x", "grid_y", "grid_z",
           "block_x", "block_y", "block_z", "bytes", "direction")
DIMENSION = st.sampled_from([1, 1, 1, 2, 7, 65535, -1])


@st.composite
def span_row(draw, n_names: int) -> tuple[int, ...]:
    shape = draw(st.sampled_from(["kernel", "copy", "odd"]))
    seq, start, dur = (draw(st.integers(0, 2**40)) for _ in range(3))
    name = draw(st.integers(-1, n_names - 1))
    if shape == "kernel":
        return (seq, start, dur, 0, name, *(draw(DIMENSION) for _ in range(6)), -1, -1)
    if shape == "copy":
        return (seq, start, dur, draw(st.sampled_from([1, 2])), -1, *([-1] * 6),
                draw(st.sampled_from([-1, 0, 4096, 2**33])), draw(st.integers(-1, 5)))
    # anything else the columns can hold: a kernel with bytes, a named copy, out-of-range codes
    return (seq, start, dur, draw(st.integers(-3, 2)), name, *(draw(DIMENSION) for _ in range(6)),
            draw(st.sampled_from([-1, 0, 512])), draw(st.integers(-2, 5)))


@st.composite
def lane_columns(draw) -> SpanColumns:
    names = tuple(f"kernel_{i}<float>" for i in range(draw(st.integers(1, 6))))
    rows = draw(st.lists(span_row(len(names)), max_size=40))
    return SpanColumns(**{c: array("q", (r[i] for r in rows)) for i, c in enumerate(COLUMNS)}, names=names)


@settings(max_examples=400, deadline=None)
@given(lane_columns(), st.lists(st.sampled_from(["kernel_2<float>", "memset", "other"]), max_size=3))
def test_rows_from_columns_equal_rows_from_their_spans(columns, known):
    from_columns, from_spans = NameTable(), NameTable()
    for name in known:   # a table that already holds names from earlier frames
        from_columns.span_id(name)
        from_spans.span_id(name)
    rows, span_rows = encode_spans(columns, from_columns), encode_spans(list(columns), from_spans)
    assert rows == span_rows
    assert [[type(v) for v in r] for r in rows] == [[type(v) for v in r] for r in span_rows]
    assert from_columns.entries == from_spans.entries


def test_a_kernel_and_a_copy_from_columns_are_the_documented_arrays():
    columns = SpanColumns(seq=array("q", [10, 12]), start_us=array("q", [1000, 1005]),
                          dur_ns=array("q", [300, 40]), kind=array("q", [0, 1]), name=array("q", [0, -1]),
                          grid_x=array("q", [256, -1]), grid_y=array("q", [1, -1]), grid_z=array("q", [1, -1]),
                          block_x=array("q", [128, -1]), block_y=array("q", [2, -1]),
                          block_z=array("q", [1, -1]), bytes=array("q", [-1, 4096]),
                          direction=array("q", [-1, 0]), names=("gemm",))
    table = NameTable()
    assert encode_spans(columns, table) == [[10, 1000, 300, 0, 0, 256, [128, 2, 1]], [2, 5, 40, 1, 4096, 0]]
    assert table.entries == [["gemm", None]]
