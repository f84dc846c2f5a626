"""The stream's span rows, kernel entries and traced processes' heads written as JSON text
(gpuflow.transport.wire_text): both twins give exactly ``json.dumps`` of what the reference
encoders give (wire.encode_spans of the same rows, the changed kernels' dicts, wire.traced_head's
dict), or both decline (None) where the caller must take the reference way; extreme values
included."""

from __future__ import annotations

import json
import math
from array import array
from enum import IntEnum
from dataclasses import fields

import pytest
from hypothesis import given, settings, strategies as st

from gpuflow.core.recorded import SpanColumns
from gpuflow.core.snapshot import CopyRate, KernelStat, Lane, Span, TracedDevice, TracedProcess, TransferStat
from gpuflow.transport import wire, wire_text
from gpuflow.transport.frames import compact, lane_head_text, span_rows as frame_rows
from gpuflow.transport.wire import NameTable, encode_spans, traced_head

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
def kernel_table(draw):
    """Kernels, a names table's pairs (some kernels' not there, a kernel now and then twice), and
    the base frame's ids and KernelStats (the same objects, equal ones, changed ones, ids gone)."""
    n = draw(st.integers(0, 12))
    stats = [KernelStat(name=f"k{i}", mangled=f"_Z1k{i}v" if i % 3 else None, count=draw(VALUE),
                        total_ns=draw(VALUE), min_ns=draw(VALUE), max_ns=draw(VALUE), timed=draw(VALUE))
             for i in range(n)]
    if stats and draw(st.integers(0, 8)) == 0:
        stats.append(stats[0])
    table_ids = draw(st.lists(st.integers(0, 40), min_size=n, max_size=n, unique=True))
    pairs = {(k.name, k.mangled): i for k, i in zip(stats, table_ids) if draw(st.integers(0, 10))}
    if draw(st.booleans()):
        return stats, pairs, None, None
    base_ids, base_kernels = [], []
    for k in stats[:n]:
        i = pairs.get((k.name, k.mangled))
        choice = draw(st.sampled_from(["same", "equal", "changed", "absent"]))
        if i is None or choice == "absent":
            continue
        base_ids.append(i)
        if choice == "same":
            base_kernels.append(k)
        elif choice == "equal":
            base_kernels.append(KernelStat(**{f.name: getattr(k, f.name) for f in fields(KernelStat)}))
        else:
            base_kernels.append(KernelStat(name=k.name, mangled=k.mangled, count=draw(VALUE), total_ns=k.total_ns,
                                           min_ns=k.min_ns, max_ns=k.max_ns, timed=k.timed))
    if draw(st.integers(0, 5)) == 0:   # a kernel the base frame had and this one has not
        base_ids.append(41)
        base_kernels.append(KernelStat(name="gone", mangled="_Z4gonev", count=1, total_ns=1, min_ns=1, max_ns=1))
    return stats, pairs, base_ids, base_kernels


def reference_delta(stats, pairs, base_ids, base_kernels):
    """What kernel_delta answers, stated the plain way: the changed kernels' dicts through json,
    non-finite floats as null (frames.dumps)."""
    ids = [pairs.get((k.name, k.mangled)) for k in stats]
    base = {} if base_ids is None else dict(zip(base_ids, base_kernels))
    whole = all(i in ids for i in base)
    if None in ids or len(set(ids)) != len(ids):
        return ids, whole, None
    out = []
    for k, i in zip(stats, ids):
        entry = {"id": i, **{f: getattr(k, f) for f in KERNEL_FIELDS}}
        if i in base and all(getattr(base[i], f) is getattr(k, f) or getattr(base[i], f) == getattr(k, f)
                             for f in KERNEL_FIELDS):
            continue
        for f, v in entry.items():
            if isinstance(v, float) and not math.isfinite(v):
                entry[f] = None
            if isinstance(v, str):
                try:
                    v.encode("utf-8")
                except UnicodeEncodeError:
                    return ids, whole, None
        out.append(entry)
    return ids, whole, dumps(out)


@pytest.mark.parametrize("twin", TWINS)
@settings(max_examples=300, deadline=None)
@given(kernel_table())
def test_kernel_delta_gives_ids_whether_the_base_is_whole_and_the_changed_entries_as_json(twin, table):
    assert twin.kernel_delta(*table, KERNEL_FIELDS) == reference_delta(*table)


@pytest.mark.parametrize("twin", TWINS)
def test_kernel_delta_declines_what_it_does_not_write(twin):
    k = KernelStat(name="k", mangled="_Z1kv", count=1, total_ns=2, min_ns=None, max_ns=None, timed=1)
    odd = KernelStat(name="k", mangled="_Z1kv", count=[1], total_ns=2, min_ns=None, max_ns=None, timed=1)
    pairs = {("k", "_Z1kv"): 0}
    assert twin.kernel_delta([k], pairs, None, None, KERNEL_FIELDS) == (
        [0], True, dumps([{"id": 0, **{f: getattr(k, f) for f in KERNEL_FIELDS}}]))
    assert twin.kernel_delta([k], pairs, None, None, ("count", "total_ns", "min_ns")) == (
        [0], True, '[{"id":0,"count":1,"total_ns":2,"min_ns":null}]')
    assert twin.kernel_delta([k], pairs, [0], [k], KERNEL_FIELDS) == ([0], True, "[]")
    assert twin.kernel_delta([k], pairs, [0, 5], [k, k], KERNEL_FIELDS) == ([0], False, "[]")
    assert twin.kernel_delta([odd], pairs, None, None, KERNEL_FIELDS) == ([0], True, None)   # a list: json's
    assert twin.kernel_delta([k, k], pairs, None, None, KERNEL_FIELDS) == ([0, 0], True, None)   # an id twice
    assert twin.kernel_delta([k], {}, None, None, KERNEL_FIELDS) == ([None], True, None)   # not in the table
    unslotted = Unslotted("k", "_Z1kv")   # fields read by attribute name
    unslotted.__dict__.update({f: getattr(k, f) for f in KERNEL_FIELDS})
    assert twin.kernel_delta([unslotted], pairs, [0], [k], KERNEL_FIELDS) == ([0], True, "[]")
    assert twin.kernel_delta([k], pairs, [0], [unslotted], KERNEL_FIELDS) == ([0], True, "[]")


class Unslotted:
    def __init__(self, name, mangled):
        self.name, self.mangled = name, mangled


@pytest.mark.parametrize("twin", TWINS)
def test_name_ids_are_the_tables_ids_of_each_name(twin):
    assert twin.name_ids(("gemm", "softmax \u00e9", "gemm", "new"), {"gemm": 4, "softmax \u00e9": 0}) == [4, 0, 4, None]
    assert twin.name_ids((), {"gemm": 4}) == []


FLOAT = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -0.0, 97.5, 1e300]))
TEXT = st.one_of(st.none(), st.text(max_size=12), st.sampled_from(["GPU-\u00e9\"\\\n", "\ud800"]))


@st.composite
def traced_processes(draw) -> TracedProcess:
    """A traced process whose head holds every kind of value: its devices' floats (NaN, infinite),
    text to escape (or that UTF-8 cannot hold), big ints, nothing; and, rarely, a value the writer
    does not take (an int of another type, an object in a device)."""
    odd = st.sampled_from([True, IntEnum("E", "a").a, 2**70, (1, 2), [3]])
    copies = tuple(CopyRate(direction=draw(st.sampled_from(["h2d", "d2h"])), memory="pinned",
                            count=draw(INT64), bytes=draw(st.integers(0, 2**64)), total_ns=draw(INT64),
                            bytes_per_s=draw(st.none() | FLOAT))
                   for _ in range(draw(st.integers(0, 3))))
    devices = tuple(TracedDevice(device=draw(st.integers(0, 2**32)), uuid=draw(TEXT), name=draw(TEXT),
                                 compute_capability=draw(st.none() | st.tuples(st.integers(0, 99), st.integers(0, 9))),
                                 sm_count=draw(st.none() | st.integers(0, 4096)), busy_pct=draw(st.none() | FLOAT),
                                 busy_window_ms=draw(st.none() | FLOAT), busy_ns=draw(st.integers(0, 2**64)),
                                 busy_late=draw(st.one_of(st.integers(0, 9), odd)), copies=copies)
                    for _ in range(draw(st.integers(0, 2))))
    transfers = tuple(TransferStat(direction="h2d", count=draw(INT64), bytes=draw(st.one_of(INT64, odd)),
                                   total_ns=draw(INT64), timed=draw(INT64)) for _ in range(draw(st.integers(0, 3))))
    return TracedProcess(pid=draw(st.integers(0, 2**22)), session=draw(st.text(max_size=8)), name=draw(TEXT),
                         exit_status=draw(st.none() | st.integers(-255, 255)), records=draw(st.integers(0, 2**64)),
                         cupti_detail=draw(TEXT), behind_live_ms=draw(st.none() | FLOAT),
                         window_start_us=draw(st.none() | INT64), devices=devices, transfers=transfers,
                         host=draw(TEXT))


@pytest.mark.parametrize("twin", TWINS)
@settings(max_examples=400, deadline=None)
@given(traced_processes())
def test_a_heads_text_is_its_dicts_compact_json_or_declined(twin, t):
    """The head a frame carries for each traced process, written straight from the objects, is the
    text of wire.traced_head's dict as the encoder's json writes it (non-finite floats null), or
    None, and then only for a value that dict's json would not write alike (an int of another type),
    or that UTF-8 cannot hold."""
    text = twin.head_text(t, wire._TRACED_SCALARS, wire._TRANSFER_FIELDS, wire._HEAD_TYPES)
    try:
        reference = compact(traced_head(t))
        reference.encode("utf-8")
    except (UnicodeEncodeError, TypeError):
        assert text is None
        return
    if text is None:   # declined: a value of a type the writer does not take, which json writes
        values = [getattr(t, f) for f in wire._TRACED_SCALARS] + [getattr(x, f) for x in t.transfers
                                                                 for f in wire._TRANSFER_FIELDS]
        values += [getattr(d, f) for d in t.devices for f in wire._HEAD_TYPES[TracedDevice]]
        assert any(type(v) not in (int, float, str, bool, tuple, type(None)) for v in values)
        return
    assert text == reference


@pytest.mark.parametrize("twin", TWINS)
def test_a_plain_heads_text(twin):
    device = TracedDevice(device=0, uuid="GPU-a", name="NVIDIA H200", compute_capability=(9, 0), sm_count=132,
                          busy_pct=float("nan"), busy_ns=7,
                          copies=(CopyRate("h2d", "pinned", 1, 4096, 10, 409.6e9),))
    t = TracedProcess(pid=7, session="s", name="train \u00e9", devices=(device,),
                      transfers=(TransferStat("h2d", 1, 4096, 10, 1),))
    assert twin.head_text(t, wire._TRACED_SCALARS, wire._TRANSFER_FIELDS, wire._HEAD_TYPES) == compact(traced_head(t))
    assert '"busy_pct":null' in compact(traced_head(t)) and '"compute_capability":[9,0]' in compact(traced_head(t))


# -- a traced process's lanes in a frame: lane_news and lane_texts ------------------------------------
LANE_TWINS = [pytest.param(wire_text.lane_text_py, id="py"),
              pytest.param(wire_text.lane_text_c, id="c",
                           marks=pytest.mark.skipif(wire_text.lane_text_c is None, reason="not built"))]
LABEL = st.one_of(st.sampled_from(["default", "7", "nccl \u00e9\"\\", ""]), st.text(max_size=8),
                  st.just("\ud800"), st.integers(0, 3))   # a lone surrogate, a label not text
COUNT = st.one_of(st.integers(0, 5_000), st.integers(-3, 2**64), st.just(True))


@st.composite
def traced_lanes(draw) -> tuple[list[Lane], dict, list[int]]:
    """A process's lanes (columns from the rows above, at times Span objects or odd heads), what
    the base frame had of some of them, and a share of the allowance for each."""
    lanes, base = [], {}
    for stream in range(draw(st.integers(0, 4))):
        columns = draw(lane())[0]
        spans = columns if draw(st.integers(0, 5)) else tuple(Span(seq=s, kind="memset", start_us=s, dur_ns=1)
                                                                for s in draw(st.lists(st.integers(0, 50), max_size=5)))
        head = (draw(st.one_of(st.just(0), COUNT)), 1, stream, draw(LABEL), draw(COUNT), draw(COUNT))
        lanes.append(Lane(*head, spans))
        if draw(st.booleans()):
            base[("h", "s", 1) + head[:3]] = (draw(st.one_of(st.none(), INT64, st.integers(2**63, 2**64))),
                                             draw(st.one_of(st.integers(0, 5_000), INT64)))
    return lanes, base, draw(st.lists(st.integers(0, 60), min_size=len(lanes), max_size=len(lanes)))


def lanes_through(twin, lanes, base, shares, delta):
    """Both passes of one process's lanes by ``twin``: the news, the texts and what they enter in
    a names table and the lanes' record (or the error raised)."""
    news, demands, table, now = [], [], NameTable(), {}
    key = ("h", "s", 1)
    try:
        twin.lane_news(lanes, key, base, news, demands)
        texts = twin.lane_texts(lanes, key, table, news if delta else None, shares if delta else None, 0, base,
                                now, frame_rows, lane_head_text)
    except Exception as exc:  # noqa: BLE001 - the same error from both twins
        return type(exc).__name__
    return [(n is s, f) for (n, f), s in zip(news, [x.spans for x in lanes])], demands, texts, table.entries, now


@pytest.mark.skipif(wire_text.lane_text_c is None, reason="not built")
@settings(max_examples=500, deadline=None)
@given(traced_lanes(), st.booleans())
def test_both_twins_give_a_processs_lanes_the_same_texts_ids_and_record(case, delta):
    lanes, base, shares = case
    assert (lanes_through(wire_text.lane_text_c, lanes, base, shares, delta)
            == lanes_through(wire_text.lane_text_py, lanes, base, shares, delta))


@pytest.mark.parametrize("twin", LANE_TWINS)
def test_a_lanes_delta_text_carries_its_newest_allowed_spans_and_what_it_skipped(twin):
    rows = [(10 + i, 1000 + i, 5, 0, i % 2, 1, 1, 1, 128, 1, 1, -1, -1) for i in range(6)]
    columns = SpanColumns(**{c: array("q", (r[i] for r in rows)) for i, c in enumerate(COLUMNS)}, names=("a", "b"))
    lanes = [Lane(0, 1, 7, "main", 40, 34, columns), Lane(0, 1, 8, "side", 3, 0, SpanColumns())]
    base = {("h", "s", 1, 0, 1, 7): (12, 36)}   # seqs 13..15 are new; 4 executions since
    news, demands = [], []
    twin.lane_news(lanes, ("h", "s", 1), base, news, demands)
    assert [first for _s, first in news] == [3, 0] and demands == [3, 0]
    table, now = NameTable(), {}
    ids, heads, text, new = twin.lane_texts(lanes, ("h", "s", 1), table, news, [2, 0], 0, base, now, frame_rows,
                                            lane_head_text)
    assert ids == [[0, 1], []] and new is True
    assert heads == [(0, 1, 7, "main", 40, 34), (0, 1, 8, "side", 3, 0)]
    assert json.loads(text) == [
        {"device": 0, "context": 1, "stream": 7, "label": "main", "executions": 40, "spans_elided": 34,
         "spans": [[14, 1004, 5, 0, 0, 1, 128], [1, 1, 5, 0, 1, 1, 128]], "spans_skipped": 2},
        {"device": 0, "context": 1, "stream": 8, "label": "side", "executions": 3, "spans_elided": 0,
         "spans": [], "spans_skipped": 3}]
    assert now == {("h", "s", 1, 0, 1, 7): (15, 40), ("h", "s", 1, 0, 1, 8): (None, 3)}
    assert twin.lane_texts(lanes, ("h", "s", 1), NameTable(), None, None, 0, base, {}, frame_rows,
                           lane_head_text)[2:] == (None, False)
