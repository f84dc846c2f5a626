"""Pure-Python twin of ``_rows_c``: a lane's span rows read into a SpanColumns in one pass, checked.

What it is for: the readable statement of what the compiled reader does, and the reader where the
extension is not built (gpuflow.collectors.fleet.lane_columns picks one). :func:`columns` reads
the stream's rows of one lane (docs/snapshot.md, "Spans"; ``names``: its process's names table)
into columns, or answers None where the columns cannot hold them exactly; the caller then reads
the lane the reference way (``wire.decode_spans``, and parse.py checks each span).

A lane fits when ``rows`` is a list of lists and every row is either

* a kernel ``[Δseq, Δstart_us, dur_ns, 0, name_id, grid, block]``, seven values: ``name_id`` null
  or an int naming an entry of ``names`` whose first value is null or text of at most
  ``max_text`` characters (``names[name_id][0]``, as decode_spans reads it); ``grid`` and
  ``block`` an int (``x`` of (x, 1, 1)) or a list of three ints; or
* a copy or a memset ``[Δseq, Δstart_us, dur_ns, 1 | 2, bytes, direction]``, four to six values
  (trailing nulls left out): ``bytes`` null or an int of at least 0, ``direction`` null or an int
  below the number of directions;

where every number is an int (not a bool) within int64, as are the running seq and start, and the
seq rises from row to row (Δseq above 0 after the first). The names are the lane's, in order of
first use, interned. :func:`concat` is a lane keeper's join of two lanes' columns (the names
already remapped by the caller). :func:`made` wraps columns either twin made in a SpanColumns
without its constructor's checks (every column an ``array('q')`` of one length: the readers and
the joins make them so), a third of the constructor's cost: a watched lane makes two a frame.

Constraints: pure; equal to ``_rows_c`` on every input, hostile ones included (tests/fleet/
test_lane_columns.py compares both with the reference reading); a lane of all kernels or all
copies is read column by column (``zip``, ``set``, ``accumulate``: C loops), a mixed one row by
row.
"""

from __future__ import annotations

import sys
from array import array
from dataclasses import fields
from itertools import accumulate, chain, zip_longest
from typing import Any, Sequence

from gpuflow.core.recorded import INT, NONE, SpanColumns
from gpuflow.core.snapshot import SPAN_KINDS, TRANSFER_DIRECTIONS

is_compiled = False

KERNEL = SPAN_KINDS.index("kernel")
_COPY_KINDS = frozenset(range(len(SPAN_KINDS))) - {KERNEL}
_DIRECTIONS = range(len(TRANSFER_DIRECTIONS))
_COLUMNS = ("seq", "start_us", "dur_ns", "kind", "name", "grid_x", "grid_y", "grid_z",
            "block_x", "block_y", "block_z", "bytes", "direction")
if _COLUMNS + ("names",) != tuple(f.name for f in fields(SpanColumns)):   # made() relies on it
    raise ImportError("SpanColumns' fields are not the thirteen columns and names in this order")
_NONE_TYPE = type(None)
_INT_ONLY = frozenset({int})
_INT_OR_NONE = frozenset({int, _NONE_TYPE})
_INT_MIN, _INT_MAX = -(1 << 63), (1 << 63) - 1


_NEW = object.__new__


def made(columns: Sequence[array], names: tuple[str, ...]) -> SpanColumns:
    """A SpanColumns of the thirteen ``columns`` (in SpanColumns' order) and ``names``, given
    columns made here or in ``_rows_c`` (each an ``array('q')``, all of one length), so without the
    constructor's checks of that: the same object the constructor makes."""
    out = _NEW(SpanColumns)
    values = out.__dict__
    values.update(zip(_COLUMNS, columns))
    values["names"] = names
    return out


def columns(rows: list, names: Sequence[Any], max_text: int) -> SpanColumns | None:
    """``rows`` (a non-empty list) as columns; None where they do not fit (see the opening)."""
    try:
        return _columns(rows, names, max_text)
    except (_Unfit, OverflowError, TypeError):   # beyond int64; an unhashable name id
        return None


class _Unfit(Exception):
    """A row the columns cannot hold exactly: the lane is read the reference way."""


def _columns(rows: list, names: Sequence[Any], max_text: int) -> SpanColumns:
    if set(map(type, rows)) != {list}:
        raise _Unfit
    lengths = set(map(len, rows))
    if lengths == {7}:
        return _kernels(rows, names, max_text)
    if lengths <= {4, 5, 6}:
        return _copies(rows)
    return _mixed(rows, names, max_text)


def _ints(values: Sequence[Any]) -> None:
    if set(map(type, values)) != _INT_ONLY:
        raise _Unfit


def _head(ds: Sequence[int], dt: Sequence[int], dur: Sequence[int], kind: Sequence[int]) -> tuple[array, array, array]:
    """seq, start_us and dur_ns from the rows' differences: ints (the kind codes too), seqs
    ascending, within int64 (array('q') raises OverflowError beyond it)."""
    _ints(list(chain(ds, dt, dur, kind)))
    if len(ds) > 1 and min(ds[1:]) <= 0:
        raise _Unfit
    d_seq, d_start = array(INT, ds), array(INT, dt)   # each difference within int64 (OverflowError)
    return array(INT, list(accumulate(d_seq))), array(INT, list(accumulate(d_start))), array(INT, dur)


class _Names:
    """The lane's names, in order of first use, from the process's names table."""

    __slots__ = ("table", "max_text", "names", "index", "by_id")

    def __init__(self, table: Sequence[Any], max_text: int) -> None:
        self.table, self.max_text = table, max_text
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.by_id: dict[Any, int] = {None: NONE}

    def of(self, name_id: Any) -> int:
        i = self.by_id.get(name_id) if type(name_id) is int or name_id is None else None
        if i is not None:
            return i
        if type(name_id) is not int or not 0 <= name_id < len(self.table):
            raise _Unfit
        try:
            name = self.table[name_id][0]
        except (TypeError, IndexError, KeyError):
            raise _Unfit from None
        if name is None:
            i = NONE
        elif type(name) is str and len(name) <= self.max_text:
            name = sys.intern(name)
            i = self.index.get(name)
            if i is None:
                i = self.index[name] = len(self.names)
                self.names.append(name)
        else:
            raise _Unfit
        self.by_id[name_id] = i
        return i


def _geometry(values: Sequence[Any]) -> tuple[array, array, array]:
    """A grid or a block column: a bare int is (x, 1, 1), a list of three ints is itself."""
    n = len(values)
    kinds = set(map(type, values))
    if kinds == _INT_ONLY:
        ones = array(INT, [1]) * n   # y and z: one array for both (never changed)
        return array(INT, values), ones, ones
    if not kinds <= {int, list}:
        raise _Unfit
    lists = [g for g in values if type(g) is list]
    if set(map(len, lists)) != {3} or set(map(type, chain.from_iterable(lists))) != _INT_ONLY:
        raise _Unfit
    x, y, z = zip(*[(g, 1, 1) if type(g) is int else g for g in values])
    return array(INT, x), array(INT, y), array(INT, z)


def _kernels(rows: list, names: Sequence[Any], max_text: int) -> SpanColumns:
    """Rows that are all ``[Δseq, Δstart_us, dur_ns, 0, name_id, grid, block]``."""
    ds, dt, dur, kind, name_ids, grid, block = zip(*rows)
    seq, start, dur_ns = _head(ds, dt, dur, kind)
    if any(kind):
        raise _Unfit
    n = len(rows)
    lane_names = _Names(names, max_text)
    of = lane_names.of
    ids = {i: of(i) for i in dict.fromkeys(name_ids)}   # in order of first use
    gx, gy, gz = _geometry(grid)
    bx, by, bz = _geometry(block)
    absent = array(INT, [NONE]) * n   # bytes and direction: one array for both (never changed)
    return made((seq, start, dur_ns, array(INT, [KERNEL]) * n, array(INT, list(map(ids.__getitem__, name_ids))),
                 gx, gy, gz, bx, by, bz, absent, absent), tuple(lane_names.names))


def _copies(rows: list) -> SpanColumns:
    """Rows that are all ``[Δseq, Δstart_us, dur_ns, 1 | 2, bytes, direction]`` (trailing nulls
    left out)."""
    columns = list(zip_longest(*rows))
    ds, dt, dur, kind = columns[:4]
    nbytes = columns[4] if len(columns) > 4 else (None,) * len(rows)
    codes = columns[5] if len(columns) > 5 else (None,) * len(rows)
    seq, start, dur_ns = _head(ds, dt, dur, kind)
    if not set(kind) <= _COPY_KINDS or not set(map(type, nbytes)) <= _INT_OR_NONE:
        raise _Unfit
    if not set(map(type, codes)) <= _INT_OR_NONE or not set(codes) - {None} <= set(_DIRECTIONS):
        raise _Unfit
    if min((b for b in nbytes if b is not None), default=0) < 0:
        raise _Unfit   # a negative byte count reads back as none from the columns
    n = len(rows)
    absent = array(INT, [NONE]) * n   # name, grid and block: one array for all (never changed)
    return made((seq, start, dur_ns, array(INT, kind), absent, absent, absent, absent, absent, absent, absent,
                 array(INT, [NONE if b is None else b for b in nbytes]),
                 array(INT, [NONE if d is None else d for d in codes])), ())


def _mixed(rows: list, names: Sequence[Any], max_text: int) -> SpanColumns:
    """Kernels and copies in one lane, row by row."""
    cols = {c: array(INT) for c in _COLUMNS}
    seq_a, start_a, dur_a, kind_a, name_a = (cols[c] for c in _COLUMNS[:5])
    gx, gy, gz, bx, by, bz, bytes_a, dir_a = (cols[c] for c in _COLUMNS[5:])
    lane_names = _Names(names, max_text)
    seq = start = 0
    for r in rows:
        n = len(r)
        if n < 4:
            raise _Unfit
        d_seq, d_start, dur, k = r[0], r[1], r[2], r[3]
        if type(d_seq) is not int or type(d_start) is not int or type(dur) is not int or type(k) is not int:
            raise _Unfit
        if seq_a and d_seq <= 0:
            raise _Unfit
        if not (_INT_MIN <= d_seq <= _INT_MAX and _INT_MIN <= d_start <= _INT_MAX):
            raise _Unfit
        seq += d_seq
        start += d_start
        if k == KERNEL:
            if n != 7:
                raise _Unfit
            name_a.append(lane_names.of(r[4]))
            for g, (x, y, z) in ((r[5], (gx, gy, gz)), (r[6], (bx, by, bz))):
                if type(g) is int:
                    x.append(g)
                    y.append(1)
                    z.append(1)
                elif type(g) is list and len(g) == 3 and type(g[0]) is int and type(g[1]) is int and type(g[2]) is int:
                    x.append(g[0])
                    y.append(g[1])
                    z.append(g[2])
                else:
                    raise _Unfit
            bytes_a.append(NONE)
            dir_a.append(NONE)
        elif k in _COPY_KINDS:
            if n > 6:
                raise _Unfit
            b = r[4] if n > 4 else None
            d = r[5] if n > 5 else None
            if not (b is None or (type(b) is int and b >= 0)) or not (d is None or (type(d) is int and d in _DIRECTIONS)):
                raise _Unfit
            for c in (name_a, gx, gy, gz, bx, by, bz):
                c.append(NONE)
            bytes_a.append(NONE if b is None else b)
            dir_a.append(NONE if d is None else d)
        else:
            raise _Unfit
        seq_a.append(seq)
        start_a.append(start)
        dur_a.append(dur)
        kind_a.append(k)
    return made([cols[c] for c in _COLUMNS], tuple(lane_names.names))


def concat(kept: SpanColumns, cut: int, new: SpanColumns, new_name: array) -> list[array]:
    """The thirteen columns of ``kept`` from row ``cut`` on, then ``new``'s, with ``new_name`` for
    ``new``'s name column (its names remapped to the joined lane's): a list of new arrays."""
    return [getattr(kept, c)[cut:] + (new_name if c == "name" else getattr(new, c)) for c in _COLUMNS]


# -- the lane keeper's join of two lanes' columns ------------------------------------------------------
_NAME = _COLUMNS.index("name")


def join(kept: SpanColumns, new: SpanColumns, size: int) -> SpanColumns | tuple[()] | None:
    """The last ``size`` spans of ``kept`` then ``new`` as columns (``()`` for a size of 0 or
    less), naming no more than they use when they would name more names than they have spans;
    None where ``new`` does not continue ``kept`` in seq order (the caller joins them as Span
    objects). The columns given are left as they were."""
    if size <= 0:
        return ()
    k, m = len(kept.seq), len(new.seq)
    if not k:
        return new if m <= size else tail(new, m - size)
    if not m:
        return kept if k <= size else tail(kept, k - size)
    if new.seq[0] <= kept.seq[-1]:
        return None
    cut = k + m - size   # spans of kept that no longer fit
    if cut >= k:
        return tail(new, cut - k) if cut > k else new
    names, new_name = _names_joined(kept, new)
    columns = concat(kept, max(cut, 0), new, new_name)
    if len(names) > len(columns[_NAME]):   # more names than spans: those no span uses any more go
        names, columns[_NAME] = _compacted(names, columns[_NAME])
    return made(columns, names)


def tail(spans: SpanColumns, start: int) -> SpanColumns:
    """``spans[start:]``: columns sliced column by column and wrapped without the constructor's
    checks (slices of columns of one length are of one length), naming no more than their spans
    use, as a join does."""
    columns, names = [getattr(spans, c)[start:] for c in _COLUMNS], spans.names
    if len(names) > len(columns[_NAME]):
        names, columns[_NAME] = _compacted(names, columns[_NAME])
    return made(columns, names)


def _names_joined(kept: SpanColumns, new: SpanColumns) -> tuple[tuple[str, ...], array]:
    """The names of ``kept`` then those ``new`` adds, and ``new``'s name column in them."""
    if new.names == kept.names[:len(new.names)]:
        return kept.names, new.name
    index = {n: i for i, n in enumerate(kept.names)}
    for n in new.names:
        index.setdefault(n, len(index))
    remap = {NONE: NONE, **{i: index[n] for i, n in enumerate(new.names)}}
    return tuple(index), array(INT, map(remap.__getitem__, new.name))


def _compacted(names: tuple[str, ...], name: array) -> tuple[tuple[str, ...], array]:
    """Only the names ``name`` uses, in order of first use, and the column in them."""
    used = [i for i in dict.fromkeys(name) if i != NONE]
    remap = {NONE: NONE, **{old: new for new, old in enumerate(used)}}
    return tuple(names[i] for i in used), array(INT, map(remap.__getitem__, name))
