"""A watched host's span rows read straight into columns, checked, and its lanes' samples joined.

A full-detail stream carries each lane's new spans as the stream's rows (docs/snapshot.md,
"Spans"; :mod:`gpuflow.transport.wire`). The hub used to read every row into a dict
(``wire.decode_spans``), check it into a :class:`~gpuflow.core.snapshot.Span`, keep it and
encode it again for the page: four passes and two Python objects per span. :func:`read_rows`,
given to the hub's :class:`~gpuflow.transport.wire.StreamReader`, reads a lane's rows in one pass
into a :class:`~gpuflow.core.recorded.SpanColumns` (an ``array('q')`` per field, the lane's names
once), which the lane keeper joins and the frame encoder writes from its columns with no object
per span, as it does an agent's own lanes.

What a column holds is checked as :mod:`~gpuflow.collectors.fleet.parse` checks a Span: every
number an int (not a bool) within 64 bits (the running seq and start too), a name text of at most
:data:`~gpuflow.collectors.fleet.parse.MAX_TEXT` characters or none. Rows the columns cannot hold
exactly (a kernel without its grid, a copy with a name, a negative byte count, a kind or
direction outside the known codes, seqs that do not ascend, a bool for a number, anything
malformed) are not guessed at: the lane is then read the reference way (``decode_spans``, and
parse.py checks or refuses each span), so what the hub takes or refuses is what it did before.

:func:`joined` is the lane keeper's join of the spans kept from earlier frames and a frame's new
ones, trimmed to the agent's sample: columns stay columns (names remapped, arrays concatenated);
spans that do not continue the kept ones in seq order, or a lane held as Span objects, give Span
objects, as before.

The rows are read, and two lanes' columns joined, by ``_rows_c`` (compiled: one loop over the
rows, the columns written straight into the arrays' buffers; a join is one call, its names
matched and its columns copied buffer to buffer, the new name column remapped as it is copied)
where it is built, else by its twin ``_rows_py``; their opening says exactly which rows fit.
Every SpanColumns made here is wrapped as ``_rows_py.made`` wraps it, without the constructor's
checks of what these functions make so (thirteen ``array('q')`` of one length): a watched lane
makes two a frame, and the constructor's checks were a third of the join's cost.

Constraints: pure; on the hub's network thread for every frame of a watched host; names are
interned (a kernel's name is one object across the lanes, the kernel table and the hosts that run
the same program).
"""

from __future__ import annotations

import os
import sys
from typing import Any, Sequence

from gpuflow.collectors.fleet import _rows_py as rows_py
from gpuflow.collectors.fleet.parse import LIST_CAPS, MAX_TEXT
from gpuflow.core.recorded import SpanColumns
from gpuflow.core.snapshot import Span
from gpuflow.transport.wire import decode_spans

#: the most rows a lane may carry (parse.py refuses more)
MAX_ROWS = LIST_CAPS["spans"]

#: as the ring decoder and the stream's writers are picked: GPUFLOW_NO_EXTENSIONS=1 (any non-empty
#: value) or a non-CPython interpreter takes the pure-Python twin; both stay importable for the tests
NO_EXTENSIONS = bool(os.environ.get("GPUFLOW_NO_EXTENSIONS")) or sys.implementation.name != "cpython"
try:
    from gpuflow.collectors.fleet import _rows_c as rows_c  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the build
    rows_c = None
_twin = rows_py if NO_EXTENSIONS or rows_c is None else rows_c
_read, _join = _twin.columns, _twin.join
#: whether read_rows reads through the compiled twin
USING_EXTENSION = _read is not rows_py.columns


def read_rows(rows: Any, names: Sequence[Any]) -> SpanColumns | list[dict[str, Any]]:
    """A lane's rows (``names``: its process's names table) as checked columns, or, where the
    columns cannot hold them exactly, as ``wire.decode_spans`` reads them (see the opening)."""
    if type(rows) is list and 0 < len(rows) <= MAX_ROWS:
        made = _read(rows, names, MAX_TEXT)
        if made is not None:
            return made
    return decode_spans(rows, names)


# -- the lane keeper's join --------------------------------------------------------------------------
def joined(kept: SpanColumns | tuple[Span, ...], new: SpanColumns | tuple[Span, ...],
           size: int) -> SpanColumns | tuple[Span, ...]:
    """The last ``size`` spans of ``kept`` then ``new``: columns when both are columns (or
    empty) and ``new`` continues ``kept`` in seq order, else Span objects."""
    if type(kept) is SpanColumns and type(new) is SpanColumns:   # a watched lane, frame after frame
        out = _join(kept, new, size)
        return out if out is not None else (tuple(kept) + tuple(new))[-size:]
    if size <= 0:
        return ()
    if not kept:
        return new if len(new) <= size else _tail(new, len(new) - size)
    if not new:
        return kept if len(kept) <= size else _tail(kept, len(kept) - size)
    return (tuple(kept) + tuple(new))[-size:]


def _tail(spans: SpanColumns | tuple[Span, ...], start: int) -> SpanColumns | tuple[Span, ...]:
    """``spans[start:]``: columns as the twins' join trims them, Span objects as a tuple."""
    return rows_py.tail(spans, start) if type(spans) is SpanColumns else spans[start:]
