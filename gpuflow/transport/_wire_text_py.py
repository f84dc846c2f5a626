"""Pure-Python twin of ``_wire_text_c``: a lane's span rows, a kernel table's entries and a traced
process's head as the stream's JSON text, straight from the columns and the snapshot's objects.

What it is for: the readable statement of what the compiled writer does, and the writer where the
extension is not built. The frame encoder (gpuflow.transport.frames) splices these texts into a
frame instead of making a Python list per span row and a dict per kernel entry and handing them to
``json``: under bench/agent_rss.py that was most of the agent's CPU.

* :func:`span_rows`: rows ``lo``..``hi`` of a :class:`~gpuflow.core.recorded.SpanColumns` as the
  stream's arrays (docs/snapshot.md, "Spans"): exactly ``json.dumps`` of what
  ``wire.encode_spans(columns[lo:hi], table)`` gives, ``ids`` being the table's id of each of the
  columns' names. A span outside the two documented shapes of the columns (a kernel with bytes or
  a direction, a copy with a name, an unknown kind or direction) is not written here: the answer
  is then None and the caller encodes the lane through ``wire.encode_spans``; so is a difference
  of two seqs or starts beyond int64 (the compiled twin writes int64s only).
* :func:`name_ids`: each of a SpanColumns' ``names``' id in a names table (name -> id), None
  for a name it does not hold.
* :func:`kernel_delta`: one traced process's kernel table against the base frame's, in one
  pass: ``ids``, each kernel's id in the names table (``pairs``: (name, mangled) -> id; None for a
  pair it does not hold); ``whole``, whether every id of the base frame's kernels (``base_ids``,
  with ``base_kernels`` the KernelStats it sent) is among them (a kernel name gone tells a process
  that replaced its namesake); and ``text``, the stream's kernel entries (``{"id": …,
  <fields>…}``) of the kernels whose ``fields`` differ from the base frame's KernelStat of the
  same id (``base_ids`` None: every kernel), in order, as one JSON list: exactly ``json.dumps`` of
  those dicts. The values must be ints (bools included), None, floats (a non-finite one is
  written ``null``, as ``frames.dumps`` writes it) or strings that UTF-8 can hold; for anything
  else, a pair the table lacks or an id given twice ``text`` is None, and the caller encodes the
  table with ``json``.
* :func:`head_text`: a traced process's head (its fields but its names, kernels, launches and
  lanes; its devices made plain), as ``compact(wire.traced_head(t))`` writes it: ~20 fields and
  its devices' dozens more, for every traced process of every frame.

Constraints: byte-identical to ``_wire_text_c`` (tests/transport/test_wire_text.py compares both
with ``json.dumps`` of the reference rows and entries, extreme values included); reads its
arguments, never changes them.
"""

from __future__ import annotations

import json
import math
from typing import Any, Sequence

from gpuflow.core.recorded import SpanColumns

is_compiled = False

_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
#: the kind codes of the columns (SPAN_KINDS: kernel, memcpy, memset) and the directions' count
_KINDS = 3
_DIRECTIONS = 6
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def span_rows(c: SpanColumns, lo: int, hi: int, ids: Sequence[int]) -> str | None:
    """Rows ``lo``..``hi`` of ``c`` as JSON text (see the module's opening); None: a row is
    outside the columns' two shapes."""
    if not 0 <= lo <= hi <= len(c):
        raise IndexError(f"rows {lo}..{hi} of {len(c)}")
    rows = []
    prev_seq = prev_start = 0
    seq, start_us, dur_ns, kind, name = c.seq, c.start_us, c.dur_ns, c.kind, c.name
    gx, gy, gz, bx, by, bz = c.grid_x, c.grid_y, c.grid_z, c.block_x, c.block_y, c.block_z
    nbytes, direction = c.bytes, c.direction
    for i in range(lo, hi):
        s, t, k, n, b, d = seq[i], start_us[i], kind[i], name[i], nbytes[i], direction[i]
        head = [s - prev_seq, t - prev_start, dur_ns[i]]
        if not (_INT64_MIN <= head[0] <= _INT64_MAX and _INT64_MIN <= head[1] <= _INT64_MAX):
            return None   # a difference beyond int64, which the compiled twin does not write
        prev_seq, prev_start = s, t
        if k == 0 and b < 0 and d < 0:   # a kernel
            if n >= len(ids):
                return None
            grid = gx[i] if gy[i] == 1 and gz[i] == 1 else [gx[i], gy[i], gz[i]]
            block = bx[i] if by[i] == 1 and bz[i] == 1 else [bx[i], by[i], bz[i]]
            rows.append(head + [0, None if n < 0 else ids[n], grid, block])
        elif 0 < k < _KINDS and n < 0 and d < _DIRECTIONS:   # a copy or a memset
            row = head + [k, None if b < 0 else b, None if d < 0 else d]
            while row[-1] is None:
                row.pop()
            rows.append(row)
        else:
            return None
    return _ENCODE(rows)


def name_ids(names: tuple[str, ...], ids: dict[str, int]) -> list[int | None]:
    """Each of ``names``' id in ``ids`` (a names table's name -> id), None for a name it lacks."""
    return [ids.get(name) for name in names]


def kernel_delta(kernels: Sequence[Any], pairs: dict[tuple[Any, Any], int], base_ids: Sequence[int] | None,
                 base_kernels: Sequence[Any] | None, fields: Sequence[str]) -> tuple[list, bool, str | None]:
    """``(ids, whole, text)`` of one process's kernel table against the base frame's (see the
    module's opening)."""
    ids = [pairs.get((k.name, k.mangled)) for k in kernels]
    base = {} if base_ids is None else dict(zip(base_ids, base_kernels))
    whole = set(base) <= set(ids)
    if None in ids or len(set(ids)) != len(ids) or min(ids, default=0) < 0:
        return ids, whole, None
    entries = []
    for k, i in zip(kernels, ids):
        values = [getattr(k, f) for f in fields]
        b = base.get(i)
        if b is k or (b is not None and values == [getattr(b, f) for f in fields]):
            continue
        entry: dict[str, Any] = {"id": i}
        for f, v in zip(fields, values):
            if type(v) is float and not math.isfinite(v):
                v = None
            elif type(v) is str and not _utf8(v):
                return ids, whole, None
            elif v is not None and type(v) not in (int, bool, float, str):
                return ids, whole, None
            entry[f] = v
        entries.append(entry)
    return ids, whole, _ENCODE(entries)


def _utf8(text: str) -> bool:
    """Whether ``text`` can be written as UTF-8 (a lone surrogate cannot)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _Declined(Exception):
    """A value :func:`head_text` does not write (the caller encodes the head with ``json``)."""


def _plain(v: Any, types: dict[type, tuple[str, ...]] | None, depth: int) -> Any:
    """``v`` as ``json_value`` makes it plain, for the types :func:`head_text` takes."""
    if depth > _MAX_DEPTH:
        raise _Declined
    if type(v) in (tuple, list):
        return [_plain(x, types, depth + 1) for x in v]
    names = types.get(type(v)) if types is not None else None
    if names is not None:
        return {name: _plain(getattr(v, name), types, depth + 1) for name in names}
    if type(v) is float and not math.isfinite(v):
        return None
    if type(v) is str and not _utf8(v):
        raise _Declined
    if v is not None and type(v) not in (int, bool, float, str):
        raise _Declined
    return v


#: how deep a head nests (its devices, their copies, a copy's fields)
_MAX_DEPTH = 8


def head_text(t: Any, scalars: Sequence[str], transfer_fields: Sequence[str],
              types: dict[type, tuple[str, ...]]) -> str | None:
    """A traced process's head as the stream's JSON text: exactly ``compact`` of what
    ``wire.traced_head`` gives (``scalars``: its fields sent as they are, ``devices`` among them,
    made plain with ``types``, each type's field names; then ``complete`` and the transfers, each
    ``transfer_fields``); None for a value it does not write (an object of another type, a number
    of another type than int, bool or float, text UTF-8 cannot hold, a nesting deeper than 8): the
    caller encodes the head with ``json``."""
    try:
        head = {f: _plain(getattr(t, f), types, 1) for f in scalars}
        head["complete"] = _plain(t.complete, None, 1)
        head["transfers"] = [{f: _plain(getattr(x, f), None, 2) for f in transfer_fields} for x in t.transfers]
    except _Declined:
        return None
    return _ENCODE(head)

