"""The stream's span rows and kernel entries written as JSON text (gpuflow.transport.wire_text):
both twins give exactly ``json.dumps`` of what the reference encoders give (wire.encode_spans of
the same rows, the changed kernels' dicts), or both decline (None) where the caller must take the
reference way; extreme values included."""

from __future__ import annotations

import json
import math
from array import array
from dataclasses import fields

import pytest
from hypothesis import given, settings, strategies as st

from gpuflow.core.recorded import SpanColumns
from gpuflow.core.snapshot import KernelStat
from gpuflow.transport import wire_text
from gpuflow.transport.wire import NameTable, encode_spans

TWINS = [pytest.param(wire_text.wire_text_py, id="py"),
         pytest.param(wire_text.wire_text_c, id="c",
                      marks=pytest.mark.skipif(wire_text.wire_text_c is None, reason="not built"))]
COLUMNS = ("seq", "start_us", "dur_ns", "kind", "name", "grid_x", "grid_y", "grid_z",
           "block_x", "block_y", "block_z", "bytes", "direction")
INT64 = st.integers(-2**63, 2**63 - 1)
DIMENSION = st.one_of(st.sampled_from([1, 1, 1, 2, 7, 65535, -1]), INT64)
KERNEL_FIELDS = tuple(f.name for f in fields(KernelStat) if f.name not in ("name", "mangled"))


def dumps(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


@st.composite
def span_row(draw, n_names: int) -> tuple[int, ...]:
    shape = draw(st.sampled_from(["kernel", "copy", "copy", "odd"]))
    small = st.integers(0, 2**40)
    seq, start, dur = (draw(st.one_of(small, small, INT64)) for _ in range(3))
    name = draw(st.integers(-3, n_names))   # n_names: a name the columns do not have
    if shape == "kernel":
        return (seq, start, dur, 0, name, *(draw(DIMENSION) for _ in range(6)), -1, -1)
    if shape == "copy":
        return (seq, start, dur, draw(st.sampled_from([1, 2])), -1, *([-1] * 6),
                draw(st.sampled_from([-1, -7, 0, 4096, 2**33, 2**63 - 1])), draw(st.integers(-3, 5)))
    return (seq, start, dur, draw(st.integers(-3, 4)), name, *(draw(DIMENSION) for _ in range(6)),
            draw(st.sampled_from([-1, 0, 512])), draw(st.integers(-2, 7)))


@st.composite
def lane(draw) -> tuple[SpanColumns, int, int]:
    names = tuple(f"kernel_{i}<float> \u00e9\"" for i in range(draw(st.integers(0, 6))))
    rows = draw(st.lists(span_row(len(names)), max_size=40))
    columns = SpanColumns(**{c: array("q", (r[i] for r in rows)) for i, c in enumerate(COLUMNS)}, names=names)
    lo = draw(st.integers(0, len(rows)))
    return columns, lo, draw(st.integers(lo, len(rows)))


def reference_rows(columns: SpanColumns, lo: int, hi: int, ids: list[int]) -> str | None:
    """What the stream carried before: encode_spans of the slice, through a table that gives each
    of the columns' names its id in ``ids``; None where the writers must decline."""
    part = columns[lo:hi]
    writable = all(
        (k == 0 and b < 0 and d < 0 and n < len(ids)) or (0 < k < 3 and n < 0 and d < 6)
        for k, n, b, d in zip(part.kind, part.name, part.bytes, part.direction))
    seqs, starts = [0, *part.seq], [0, *part.start_us]
    fits = all(-2**63 <= a - b < 2**63 for v in (seqs, starts) for a, b in zip(v[1:], v))
    if not (writable and fits):
        return None
    table = NameTable()
    for name, i in zip(columns.names, ids):
        while len(table) < i:
            table.span_id(f"earlier name {len(table)}")
        assert table.span_id(name) == i
    return dumps(encode_spans(part, table))


@pytest.mark.parametrize("twin", TWINS)
@settings(max_examples=300, deadline=None)
@given(lane(), st.integers(0, 5))
def test_rows_are_json_dumps_of_the_reference_rows_or_declined(twin, lane, spread):
    columns, lo, hi = lane
    ids = [i * (spread + 1) + spread for i in range(len(columns.names))]   # ids as a table that holds more
    assert twin.span_rows(columns, lo, hi, ids) == reference_rows(columns, lo, hi, ids)


@pytest.mark.parametrize("twin", TWINS)
def test_the_documented_rows_and_their_extremes(twin):
    big = 2**63 - 1
    columns = SpanColumns(
        seq=array("q", [10, 12, 13, big]), start_us=array("q", [1000, 1005, 1005, -5]),
        dur_ns=array("q", [300, 40, 0, -2**63]), kind=array("q", [0, 1, 2, 0]), name=array("q", [0, -1, -1, -1]),
        grid_x=array("q", [256, -1, -1, -2**63]), grid_y=array("q", [1, -1, -1, 1]), grid_z=array("q", [1, -1, -1, 1]),
        block_x=array("q", [128, -1, -1, 1]), block_y=array("q", [2, -1, -1, 1]), block_z=array("q", [1, -1, -1, 1]),
        bytes=array("q", [-1, 4096, -1, -1]), direction=array("q", [-1, 0, -1, -1]), names=("gemm",))
    assert twin.span_rows(columns, 0, 4, [3]) == (
        f"[[10,1000,300,0,3,256,[128,2,1]],[2,5,40,1,4096,0],[1,0,0,2],[{big - 13},-1010,{-2**63},0,null,{-2**63},1]]")
    assert twin.span_rows(columns, 1, 3, [3]) == "[[12,1005,40,1,4096,0],[1,0,0,2]]"
    assert twin.span_rows(columns, 2, 2, [3]) == "[]"
    assert twin.span_rows(columns, 0, 1, []) is None   # a name the table has no id for
    with pytest.raises(IndexError):
        twin.span_rows(columns, 3, 5, [3])


@pytest.mark.skipif(wire_text.wire_text_c is None, reason="the compiled writer is not built")
def test_the_compiled_writer_takes_only_int64_columns_of_one_length():
    good = SpanColumns.from_spans([])
    for column, bad in (("seq", array("i")), ("dur_ns", array("q", [1]))):
        odd = object.__new__(SpanColumns)
        odd.__dict__.update({c: getattr(good, c) for c in COLUMNS}, names=(), **{column: bad})
        with pytest.raises((TypeError, ValueError)):
            wire_text.wire_text_c.span_rows(odd, 0, 0, [])


VALUE = st.one_of(st.none(), st.booleans(), INT64, st.integers(-2**70, 2**70), st.integers(2**64 - 5, 2**64 - 1),
                  st.floats(), st.text(max_size=8))


@st.composite
def kernel_table(draw) -> tuple[list[KernelStat], list[int], dict[int, KernelStat] | None]:
    n = draw(st.integers(0, 12))
    stats = [KernelStat(name=f"k{i}", mangled=f"_Z1k{i}v", count=draw(VALUE), total_ns=draw(VALUE),
                        min_ns=draw(VALUE), max_ns=draw(VALUE), timed=draw(VALUE)) for i in range(n)]
    ids = draw(st.lists(st.integers(0, 40), min_size=n, max_size=n, unique=draw(st.booleans())))
    if draw(st.booleans()):
        return stats, ids, None
    base: dict[int, KernelStat] = {}
    for k, i in zip(stats, ids):
        choice = draw(st.sampled_from(["same", "equal", "changed", "absent"]))
        if choice == "same":
            base[i] = k
        elif choice == "equal":
            base[i] = KernelStat(**{f.name: getattr(k, f.name) for f in fields(KernelStat)})
        elif choice == "changed":
            base[i] = KernelStat(name=k.name, mangled=k.mangled, count=draw(VALUE), total_ns=k.total_ns,
                                 min_ns=k.min_ns, max_ns=k.max_ns, timed=k.timed)
    return stats, ids, base


def reference_entries(stats, ids, base) -> str | None:
    """The changed kernels' dicts through json, non-finite floats as null (frames.dumps)."""
    if len(set(ids)) != len(ids):
        return None
    out = []
    for k, i in zip(stats, ids):
        entry = {"id": i, **{f: getattr(k, f) for f in KERNEL_FIELDS}}
        if base is not None and i in base and base[i] is not None and all(
                getattr(base[i], f) is getattr(k, f) or getattr(base[i], f) == getattr(k, f) for f in KERNEL_FIELDS):
            continue
        for f, v in entry.items():
            if isinstance(v, float) and not math.isfinite(v):
                entry[f] = None
            if isinstance(v, str):
                try:
                    v.encode("utf-8")
                except UnicodeEncodeError:
                    return None
        out.append(entry)
    return dumps(out)


@pytest.mark.parametrize("twin", TWINS)
@settings(max_examples=300, deadline=None)
@given(kernel_table())
def test_kernel_entries_are_json_dumps_of_the_changed_kernels_dicts_or_declined(twin, table):
    stats, ids, base = table
    assert twin.kernel_entries(stats, ids, base, KERNEL_FIELDS) == reference_entries(stats, ids, base)


@pytest.mark.parametrize("twin", TWINS)
def test_kernel_entries_decline_what_they_do_not_write(twin):
    k = KernelStat(name="k", mangled="_Z1kv", count=1, total_ns=2, min_ns=None, max_ns=None, timed=1)
    odd = KernelStat(name="k", mangled="_Z1kv", count=[1], total_ns=2, min_ns=None, max_ns=None, timed=1)
    assert twin.kernel_entries([k], [0], None, KERNEL_FIELDS) == dumps([{"id": 0, **{f: getattr(k, f)
                                                                                 for f in KERNEL_FIELDS}}])
    assert twin.kernel_entries([k], [0], None, ("count", "total_ns", "min_ns")) == (
        '[{"id":0,"count":1,"total_ns":2,"min_ns":null}]')
    assert twin.kernel_entries([k], [0], {0: k}, KERNEL_FIELDS) == "[]"
    assert twin.kernel_entries([odd], [0], None, KERNEL_FIELDS) is None   # a list: json's job
    assert twin.kernel_entries([k, k], [2, 2], None, KERNEL_FIELDS) is None   # an id twice
    assert twin.kernel_entries([k], [-1], None, KERNEL_FIELDS) is None
    unslotted = Unslotted("k", "_Z1kv")   # fields read by attribute name
    unslotted.__dict__.update({f: getattr(k, f) for f in KERNEL_FIELDS})
    assert twin.kernel_entries([unslotted], [0], {0: k}, KERNEL_FIELDS) == "[]"
    assert twin.kernel_entries([k], [0], {0: unslotted}, KERNEL_FIELDS) == "[]"


@pytest.mark.parametrize("twin", TWINS)
def test_kernel_ids_are_the_tables_ids_of_each_name_and_mangled_pair(twin):
    stats = [KernelStat(name=n, mangled=m, count=1, total_ns=1, min_ns=1, max_ns=1, timed=1)
             for n, m in (("gemm", "_Z4gemmv"), ("gemm", "_Z4gemmi"), ("softmax", None), ("gemm", "_Z4gemmv"))]
    odd = Unslotted(name="softmax", mangled=None)   # read by attribute name
    pairs = {("gemm", "_Z4gemmv"): 3, ("softmax", None): 0}
    assert twin.kernel_ids(stats + [odd], pairs) == [3, None, 0, 3, 0]
    assert twin.kernel_ids([], pairs) == []


class Unslotted:
    def __init__(self, name, mangled):
        self.name, self.mangled = name, mangled
