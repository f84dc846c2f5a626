"""One recorded lane answering a window: its executions starting in it, exact or in pixel buckets.

The answer is the one the CUPTI collector's recorder gives for the same executions
(docs/recorder.md, "Window queries"): a window holds the executions whose start, a wall-clock
microsecond, lies in ``[lo_us, hi_us)``; exact, they come as :class:`SpanColumns` in the order
the recorder kept them, with the names they use in order of first appearance; reduced to
``width`` buckets (when the lane holds more executions in the window than that), bucket j covers
``[lo + ⌊j·W/width⌋, lo + ⌊(j+1)·W/width⌋)`` ns, ``count`` the executions starting in it and
``busy_ns`` the time executions spent inside it, those that started before the window included,
at most the bucket's width. The starts are the trace's, to the microsecond.

Held per lane beside its columns: the starts in time order (the columns themselves when the lane
is already in that order, as a recorder writes a stream; else an order array) and the running
maximum of the executions' ends along it, so a window finds its executions by bisection and the
executions still running at its start without a scan.

Constraints: no Python object per execution held; a reduced answer is O(executions in or
overlapping the window + width), however long they are (a difference array counts the buckets an
execution covers whole); the columns are never changed (answers are slices or new arrays).
"""

from __future__ import annotations

import bisect
from array import array

from gpuflow.core.recorded import INT, NONE, LaneWindow, SpanBuckets, SpanColumns

_COLUMNS = ("seq", "start_us", "dur_ns", "kind", "name", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
            "block_z", "bytes", "direction")
#: up to this many names a lane's window finds each name's first use by searching the column
FEW_NAMES = 64


class LaneIndex:
    """A lane of a recording (every execution as :class:`SpanColumns`) and its window answers."""

    def __init__(self, lane: LaneWindow) -> None:
        assert lane.spans is not None
        self.lane = lane
        spans = lane.spans
        starts, durs = spans.start_us, spans.dur_ns
        n = len(starts)
        self.order: array | None = None
        if any(starts[i] > starts[i + 1] for i in range(n - 1)):
            self.order = array(INT, sorted(range(n), key=starts.__getitem__))
            self.starts = array(INT, (starts[i] for i in self.order))
        else:
            self.starts = starts
        self.max_end_ns = array(INT, bytes(8 * n))   # the running maximum of ends, in start order
        latest = None
        for k in range(n):
            i = k if self.order is None else self.order[k]
            end = starts[i] * 1000 + max(durs[i], 0)
            latest = end if latest is None or end > latest else latest
            self.max_end_ns[k] = min(latest, (1 << 63) - 1)

    def window(self, lo_us: int, hi_us: int, width: int | None) -> LaneWindow | None:
        """Its executions starting in ``[lo_us, hi_us)``: exact, or ``width`` buckets when more; None
        when none starts there."""
        k0, k1 = bisect.bisect_left(self.starts, lo_us), bisect.bisect_left(self.starts, hi_us)
        count = k1 - k0
        if count <= 0:
            return None
        lane = self.lane
        if width is None or count <= width:
            return LaneWindow(lane.device, lane.context, lane.stream, lane.label, count, spans=self._exact(k0, k1))
        return LaneWindow(lane.device, lane.context, lane.stream, lane.label, count,
                          buckets=self._buckets(k0, k1, lo_us, hi_us, width))

    def _exact(self, k0: int, k1: int) -> SpanColumns:
        spans = self.lane.spans
        assert spans is not None
        if self.order is None:
            columns = {c: getattr(spans, c)[k0:k1] for c in _COLUMNS}
        else:   # the window's executions in the recorder's order, as a recorder answers
            rows = sorted(self.order[k0:k1])
            columns = {c: array(INT, (getattr(spans, c)[i] for i in rows)) for c in _COLUMNS}
        names = columns["name"]
        if len(spans.names) <= FEW_NAMES:   # a search of the column per name, at C speed
            used = [j for _, j in sorted((names.index(j), j) for j in range(len(spans.names)) if j in names)]
        else:   # one pass, whatever the names
            used = list(dict.fromkeys(j for j in names if j != NONE))
        if used != list(range(len(spans.names))):   # only the names used, in order of first appearance
            local = {j: i for i, j in enumerate(used)}
            local[NONE] = NONE
            columns["name"] = array(INT, (local[j] for j in names))
        return SpanColumns(**columns, names=tuple(spans.names[j] for j in used))

    def _buckets(self, k0: int, k1: int, lo_us: int, hi_us: int, width: int) -> SpanBuckets:
        spans = self.lane.spans
        assert spans is not None
        starts, durs, order = spans.start_us, spans.dur_ns, self.order
        lo = lo_us * 1000
        W = (hi_us - lo_us) * 1000
        count = array(INT, bytes(8 * width))
        busy = array(INT, bytes(8 * width))
        cover = [0] * (width + 1)   # +1 where a run of buckets covered whole begins, -1 past its end
        first = bisect.bisect_right(self.max_end_ns, lo)   # every execution before it ended by lo
        for k in range(min(first, k0), k1):
            i = k if order is None else order[k]
            d = starts[i] * 1000 - lo
            dur = durs[i]
            if d >= 0:
                count[_bucket(d, W, width)] += 1
            e = d + dur
            if e <= 0 or dur <= 0:
                continue
            a, b = max(d, 0), min(e, W)
            ja, jb = _bucket(a, W, width), _bucket(b - 1, W, width)
            if ja == jb:
                busy[ja] += b - a
                continue
            busy[ja] += (ja + 1) * W // width - a
            busy[jb] += b - jb * W // width
            cover[ja + 1] += 1
            cover[jb] -= 1
        whole = 0
        for j in range(width):
            edge, next_edge = j * W // width, (j + 1) * W // width
            whole += cover[j]
            busy[j] = min(busy[j] + whole * (next_edge - edge), next_edge - edge)
        return SpanBuckets(start_us=float(lo_us), width_us=(hi_us - lo_us) / width, count=count, busy_ns=busy)


def _bucket(d: int, W: int, width: int) -> int:
    """The bucket j with edge(j) <= d < edge(j + 1), edge(j) = j * W // width."""
    j = d * width // W
    while j + 1 < width and (j + 1) * W // width <= d:
        j += 1
    return j
