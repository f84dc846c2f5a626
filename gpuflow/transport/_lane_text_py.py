"""Pure-Python twin of ``_lane_text_c``: a traced process's lanes in a frame, the frame encoder's
two passes over them.

What it is for: the readable statement of what the compiled twin does, and the passes themselves
where the extension is not built (gpuflow.transport.wire_text picks one).

:func:`lane_news` and :func:`lane_texts`: a traced process's lanes in a frame, the frame
encoder's two passes over them (gpuflow.transport.frames, whose opening says what a delta's
lanes carry). ``lane_news`` gives each lane's spans newer than the base frame's (``base_lanes``:
per lane key ``(host, session, pid, device, context, stream)``, the largest seq and the
executions the base frame had; none: every span is new): the lane's columns whole and the index
of the first new span (their seqs ascend), Span objects as a list of the newer ones; and how many
there are. ``lane_texts``, once the delta's allowance is shared out (``shares``, from ``at``, a
lane each), gives each lane's name ids in the process's names table (entering its names), its
head, the delta's ``lanes`` member as JSON text (the newest ``share`` new spans of each lane
and its ``spans_skipped``; ``news`` None: a frame with no base, no text), whether any lane has a
new or skipped span, and puts each lane's largest seq and executions in ``lanes_now``. A lane's
rows go through ``rows_of(spans, first, table, ids)`` and its head through ``head_of(lane)``
(the frame encoder's: compiled rows where they fit, else ``json``); the compiled twin writes
both itself where it can, the same text.

Constraints: equal to ``_lane_text_c`` (tests/transport/test_wire_text.py, generated lanes, hostile
ones included); changes only what it is given to fill (``news``, ``demands``, ``lanes_now``, the
names table's new names).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, Callable, Sequence

from gpuflow.core.recorded import SpanColumns

is_compiled = False


def largest_seq(spans: Any) -> int | None:
    """The seq of a lane's newest span (their seqs ascend); None for no span."""
    if isinstance(spans, SpanColumns):
        return spans.seq[-1] if len(spans.seq) else None
    return max((s.seq for s in spans), default=None)


def lane_news(lanes: Sequence[Any], key: tuple, base_lanes: dict[tuple, tuple[int | None, int]],
              news: list[tuple[Any, int]], demands: list[int]) -> None:
    """Each lane's spans newer than the base frame's, ``(spans, first)``, into ``news``, and how
    many into ``demands`` (see the module's opening)."""
    for lane in lanes:
        base = base_lanes.get(key + (lane.device, lane.context, lane.stream))
        last = None if base is None else base[0]
        spans = lane.spans
        if last is None:
            new = (spans, 0)
        elif isinstance(spans, SpanColumns):
            new = (spans, bisect_right(spans.seq, last))
        else:
            new = ([s for s in spans if s.seq > last], 0)
        news.append(new)
        demands.append(len(new[0]) - new[1])


def lane_texts(lanes: Sequence[Any], key: tuple, table: Any, news: list[tuple[Any, int]] | None,
               shares: Sequence[int] | None, at: int, base_lanes: dict[tuple, tuple[int | None, int]],
               lanes_now: dict[tuple, tuple[int | None, int]], rows_of: Callable[..., str],
               head_of: Callable[[Any], str]) -> tuple[list, list[tuple], str | None, bool]:
    """``(ids, heads, text, new)`` of one traced process's lanes (see the module's opening)."""
    ids_of: list[list[int] | None] = []
    heads: list[tuple] = []
    parts: list[str] = []
    new_or_skipped = False
    for lane in lanes:
        # every name of the sample gets its id now, so the full frame, whenever it is built,
        # refers only to names this frame's count covers
        spans = lane.spans
        if isinstance(spans, SpanColumns):
            ids = table.span_ids(spans.names)
        else:
            table.add_span_names(spans)
            ids = None
        ids_of.append(ids)
        heads.append((lane.device, lane.context, lane.stream, lane.label, lane.executions, lane.spans_elided))
        lane_key = key + (lane.device, lane.context, lane.stream)
        if news is not None and shares is not None:
            new, first = news[at]
            first = max(first, len(new) - shares[at])
            at += 1
            base = base_lanes.get(lane_key)
            skipped = max(0, lane.executions - (0 if base is None else base[1]) - (len(new) - first))
            rows = rows_of(new, first, table, ids)
            new_or_skipped = new_or_skipped or rows != "[]" or skipped > 0
            parts.append(head_of(lane) + ',"spans":' + rows + ',"spans_skipped":' + str(skipped) + "}")
        lanes_now[lane_key] = (largest_seq(spans), lane.executions)
    return ids_of, heads, "[" + ",".join(parts) + "]" if news is not None else None, new_or_skipped
