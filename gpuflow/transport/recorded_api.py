"""GET /api/window and GET /api/history: the flight recorder's answers, as JSON.

``/api/window?from=<t0>&to=<t1>[&pid=<pid>][&width=<px>][&format=json|columns]`` answers every
traced execution the collectors retain in ``[t0, t1)`` (seconds since the epoch, floats); with
``width`` a lane denser than that many executions comes reduced to ``width`` buckets; with
``format=columns`` the same answer comes in the compact columnar form (its header the JSON form's
document, its columns int64 blocks a client maps without parsing: gpuflow.transport.window_columns
defines it). ``/api/history?from=<t0>&to=<t1>``
answers the readings kept over time. Both ask the agent (``Agent.query_window`` /
``query_history``), which asks every plugin through its hook: the transport knows no collector.
A range outside what is retained, or with nothing traced, is an empty 200 answer that says what is
retained; only malformed input (not a number, ``to`` not after ``from``, a range or width past
the limits below, an unknown parameter) is 400, with a message that never repeats the input.

A view that draws history small (the page's sparklines, its timeline) asks for less:
``metrics=a,b`` keeps only the series of those metrics, and ``points=<n>`` reduces every series
holding more than ``n`` points to at most ``n``, here, from what the collectors answered: the range
is cut into buckets of ``(to - from) / (n - 1)`` seconds aligned to multiples of that width (so a
bucket holds the same samples whichever range asked for it), and each bucket with samples becomes
one point at its start: the mean of its available values (``math.fsum`` over their count), their
least and greatest (a roll-up's own minimum and maximum taken into account), null when none was
available. A reduced series says so with its ``resolution_s`` (the bucket's width) and its
``"min"``/``"max"``; a series that already fits is answered as it is.

The JSON (docs/recorder.md): spans travel column by column (``{"seq": [...], "start_us": [...],
...}``, -1 for "none"), with the lane's names table once; buckets as ``{"start_us", "width_us",
"count": [...], "busy_ns": [...]}``; series as ``{"entity", "metric", "unit", "resolution_s",
"t": [...], "value": [...]}`` with null for "not available" (and a roll-up's ``"min"`` and
``"max"``, when the series has them).

Constraints: runs in a server thread; the agent's answer is built by the plugins without a Python
object per execution, and encoded here without one either: each span column is written as JSON
text straight from its array (gpuflow.transport.json_ints, compiled where built) and spliced into
the answer, byte for byte what ``json`` writes for the documented dict; the same Host, token and
security headers as every route (the middleware runs first); an app without an agent (a bare
board in tests) answers empty.
"""

from __future__ import annotations

import bisect
import math
import re
from array import array
from typing import Any

import falcon

from gpuflow.core.recorded import (
    HistoryPart, LaneWindow, ProcessWindow, Series, SpanBuckets, SpanColumns, WindowPart,
)
from gpuflow.transport import window_columns
from gpuflow.transport.frames import dumps
from gpuflow.transport.json_ints import int64_json

#: the widest range a query may ask for: a week
MAX_RANGE_S = 7 * 86_400.0
#: the most pixels a reduced window may be asked for
MAX_WIDTH_PX = 16_384
#: the most points a reduced series may be asked for (and the fewest: a series needs two)
MAX_POINTS = 16_384
MIN_POINTS = 2
#: the forms ``/api/window`` answers in (``format=``): JSON, or gpuflow.transport.window_columns'
WINDOW_FORMATS = ("json", "columns")
#: how many metric names ``metrics=`` may list, and what one looks like (the snapshot's field names)
MAX_METRICS = 32
_METRIC_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
_SPAN_FIELDS = ("seq", "start_us", "dur_ns", "kind", "name", "grid_x", "grid_y", "grid_z",
                "block_x", "block_y", "block_z", "bytes", "direction")
_FIELD_KEYS = {name: f'{name}":'.encode("ascii") for name in _SPAN_FIELDS}   # after the opening quote


class BadQuery(ValueError):
    """A query that cannot be answered as asked; the message names the parameter, not its value."""


def _number(req: falcon.Request, name: str) -> float:
    raw = req.get_param(name)
    if raw is None:
        raise BadQuery(f"{name} is required (seconds since the Unix epoch)")
    try:
        value = float(raw)
    except ValueError:
        raise BadQuery(f"{name} must be a number of seconds since the Unix epoch") from None
    if not math.isfinite(value) or value < 0:
        raise BadQuery(f"{name} must be a finite, non-negative number of seconds")
    return value


def _whole(req: falcon.Request, name: str, maximum: int) -> int | None:
    raw = req.get_param(name)
    if raw is None:
        return None
    if not raw.isdigit() or len(raw) > 12:
        raise BadQuery(f"{name} must be a whole number")
    value = int(raw)
    if not 1 <= value <= maximum:
        raise BadQuery(f"{name} must be between 1 and {maximum}")
    return value


def parse_range(req: falcon.Request, allowed: tuple[str, ...]) -> tuple[float, float]:
    """``from`` and ``to`` checked; BadQuery for anything else in the query string."""
    unknown = sorted(set(req.params) - set(allowed))
    if unknown:
        raise BadQuery(f"unknown parameter(s); this route takes {', '.join(allowed)}")
    start, end = _number(req, "from"), _number(req, "to")
    if not end > start:
        raise BadQuery("to must be after from")
    if end - start > MAX_RANGE_S:
        raise BadQuery(f"the range may be at most {MAX_RANGE_S:.0f} s")
    return start, end


def parse_format(req: falcon.Request) -> str:
    """``format=json`` (the default) or ``format=columns``."""
    raw = req.get_param("format")
    if raw is None:
        return "json"
    if raw not in WINDOW_FORMATS:
        raise BadQuery(f"format must be one of {', '.join(WINDOW_FORMATS)}")
    return raw


def parse_metrics(req: falcon.Request) -> frozenset[str] | None:
    """``metrics=a,b,...`` as a set of names, or None when not given."""
    raw = req.get_param("metrics")
    if raw is None:
        return None
    names = raw.split(",")
    if len(names) > MAX_METRICS or not all(_METRIC_NAME.fullmatch(n) for n in names):
        raise BadQuery(f"metrics must be a comma-separated list of at most {MAX_METRICS} metric names "
                       "(lower case, digits and _)")
    return frozenset(names)


def parse_points(req: falcon.Request) -> int | None:
    """``points=<n>``, checked, or None when not given."""
    raw = req.get_param("points")
    if raw is None:
        return None
    if not raw.isdigit() or len(raw) > 12:
        raise BadQuery("points must be a whole number")
    points = int(raw)
    if not MIN_POINTS <= points <= MAX_POINTS:
        raise BadQuery(f"points must be between {MIN_POINTS} and {MAX_POINTS}")
    return points


def _available(values: array, lo: int, hi: int) -> list[float]:
    return [v for v in values[lo:hi] if v == v]   # NaN is not equal to itself: not available


def reduce_series(s: Series, start: float, end: float, points: int) -> Series:
    """``s`` with at most ``points`` points over ``[start, end)``: per bucket of ``(end - start) /
    (points - 1)`` seconds, aligned to multiples of that width, the mean, least and greatest of the
    available values at the bucket's start (NaN where none was available). A point a collector
    answered from before ``start`` (a roll-up of a minute the range begins in) counts in the first
    bucket. A series of ``points`` or fewer comes back as it is."""
    n = len(s.t_s)
    if n <= points:
        return s
    width = (end - start) / (points - 1)
    first = math.floor(start / width)
    last = first + points - 1   # however the division rounds, never more than `points` buckets
    t_out, mean, least, greatest = array("d"), array("d"), array("d"), array("d")
    lows = s.min_value if s.min_value is not None else s.value
    highs = s.max_value if s.max_value is not None else s.value
    i = 0
    while i < n:
        k = min(max(math.floor(s.t_s[i] / width), first), last)
        j = n if k == last else max(i + 1, bisect.bisect_left(s.t_s, (k + 1) * width, i))
        got = _available(s.value, i, j)
        lo, hi = _available(lows, i, j), _available(highs, i, j)
        t_out.append(k * width)
        mean.append(math.fsum(got) / len(got) if got else math.nan)
        least.append(min(lo) if lo else math.nan)
        greatest.append(max(hi) if hi else math.nan)
        i = j
    return Series(entity=s.entity, metric=s.metric, unit=s.unit, resolution_s=max(width, s.resolution_s),
                  t_s=t_out, value=mean, min_value=least, max_value=greatest)


def span_columns_json(columns: SpanColumns) -> dict[str, Any]:
    out: dict[str, Any] = {name: getattr(columns, name).tolist() for name in _SPAN_FIELDS}
    out["names"] = list(columns.names)
    return out


def _span_columns_into(columns: SpanColumns, out: list[bytes]) -> None:
    """Append :func:`span_columns_json`'s JSON text, each column written straight from its array
    (no Python int per value: gpuflow.transport.json_ints)."""
    sep = b'{"'
    for name in _SPAN_FIELDS:
        out += (sep, _FIELD_KEYS[name], int64_json(getattr(columns, name)))
        sep = b',"'
    out += (b',"names":', dumps(list(columns.names)), b"}")


def _lane_head(lane: LaneWindow) -> dict[str, Any]:
    return {"device": lane.device, "context": lane.context, "stream": lane.stream,
            "label": lane.label, "executions": lane.executions}


def _process_head(p: ProcessWindow) -> dict[str, Any]:
    return {"pid": p.pid, "session": p.session, "name": p.name, "retained_from": p.retained_from_s,
            "retained_to": p.retained_to_s, "complete": p.complete}


def _buckets_into(lane: LaneWindow, out: list[bytes]) -> None:
    """Append :func:`lane_json`'s text for a reduced lane, its two columns written from their arrays."""
    b: SpanBuckets = lane.buckets  # type: ignore[assignment]
    out += (dumps(_lane_head(lane))[:-1], b',"buckets":',
            dumps({"start_us": b.start_us, "width_us": b.width_us})[:-1],
            b',"count":', int64_json(b.count), b',"busy_ns":', int64_json(b.busy_ns), b"}}")


def _process_into(p: ProcessWindow, out: list[bytes]) -> None:
    out += (dumps(_process_head(p))[:-1], b',"lanes":[')
    for i, lane in enumerate(p.lanes):
        if i:
            out.append(b",")
        if lane.spans is None:
            _buckets_into(lane, out)
        else:
            out += (dumps(_lane_head(lane))[:-1], b',"spans":')
            _span_columns_into(lane.spans, out)
            out.append(b"}")
    out.append(b"]}")


def window_body(parts: tuple[WindowPart, ...], start: float, end: float, pid: int | None,
                width: int | None) -> bytes:
    """``dumps(window_json(...))``, byte for byte, with the span and bucket columns written from
    their arrays and spliced in as text (see _span_columns_into): the ~1.3 M integers of a second
    of 100 k executions never become Python ints or pass through ``json``, and the answer is
    copied once, by the one join of its pieces. Each dict is encoded without its last key, whose
    text follows (``dumps(d)[:-1]`` drops the closing brace)."""
    head = dumps({"from": start, "to": end, "pid": pid, "width": width, "sources": [p.source for p in parts]})
    out = [head[:-1], b',"processes":[']
    for i, p in enumerate(p for part in parts for p in part.processes):
        if i:
            out.append(b",")
        _process_into(p, out)
    out += (b"],", dumps({"problems": _problems(parts)})[1:])   # '"problems":[...]}'
    return b"".join(out)


def window_columns_body(parts: tuple[WindowPart, ...], start: float, end: float, pid: int | None,
                        width: int | None) -> bytes:
    """The answer in the columnar form (gpuflow.transport.window_columns): the JSON form's document
    as its header, the columns as int64 blocks after it."""
    head = {"from": start, "to": end, "pid": pid, "width": width, "sources": [p.source for p in parts]}
    processes = [(_process_head(p), [(_lane_head(lane), lane.spans if lane.spans is not None else lane.buckets)
                                     for lane in p.lanes])
                 for part in parts for p in part.processes]
    return window_columns.encode(head, processes, _problems(parts))  # type: ignore[arg-type]


def buckets_json(buckets: SpanBuckets) -> dict[str, Any]:
    return {"start_us": buckets.start_us, "width_us": buckets.width_us,
            "count": buckets.count.tolist(), "busy_ns": buckets.busy_ns.tolist()}


def lane_json(lane: LaneWindow) -> dict[str, Any]:
    out = _lane_head(lane)
    if lane.spans is not None:
        out["spans"] = span_columns_json(lane.spans)
    else:
        out["buckets"] = buckets_json(lane.buckets)  # type: ignore[arg-type]
    return out


def process_json(p: ProcessWindow) -> dict[str, Any]:
    return {**_process_head(p), "lanes": [lane_json(lane) for lane in p.lanes]}


def series_json(s: Series) -> dict[str, Any]:
    out: dict[str, Any] = {"entity": list(s.entity), "metric": s.metric, "unit": s.unit,
                           "resolution_s": s.resolution_s, "t": s.t_s.tolist(),
                           "value": [v if math.isfinite(v) else None for v in s.value]}
    if s.min_value is not None:
        out["min"] = [v if math.isfinite(v) else None for v in s.min_value]
    if s.max_value is not None:
        out["max"] = [v if math.isfinite(v) else None for v in s.max_value]
    return out


def _problems(parts: tuple[WindowPart, ...] | tuple[HistoryPart, ...]) -> list[dict[str, str]]:
    return [{"source": p.source, "severity": p.severity, "message": p.message}
            for part in parts for p in part.problems]


def window_json(parts: tuple[WindowPart, ...], start: float, end: float, pid: int | None,
                width: int | None) -> dict[str, Any]:
    return {"from": start, "to": end, "pid": pid, "width": width,
            "sources": [p.source for p in parts],
            "processes": [process_json(p) for part in parts for p in part.processes],
            "problems": _problems(parts)}


def history_json(parts: tuple[HistoryPart, ...], start: float, end: float,
                 metrics: frozenset[str] | None = None, points: int | None = None) -> dict[str, Any]:
    froms = [p.retained_from_s for p in parts if p.retained_from_s is not None]
    tos = [p.retained_to_s for p in parts if p.retained_to_s is not None]
    series = [s for part in parts for s in part.series if metrics is None or s.metric in metrics]
    if points is not None:
        series = [reduce_series(s, start, end, points) for s in series]
    return {"from": start, "to": end, "sources": [p.source for p in parts],
            "retained_from": min(froms) if froms else None, "retained_to": max(tos) if tos else None,
            "series": [series_json(s) for s in series],
            "problems": _problems(parts)}


def _bad(resp: falcon.Response, exc: BadQuery) -> None:
    resp.status = falcon.HTTP_400
    resp.content_type = falcon.MEDIA_JSON
    resp.data = dumps({"error": str(exc)})


class WindowResource:
    """GET /api/window: what is retained of traced executions in a range."""

    def __init__(self, state: Any) -> None:
        self.state = state

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        try:
            start, end = parse_range(req, ("from", "to", "pid", "width", "format"))
            pid = _whole(req, "pid", 2**31 - 1)
            width = _whole(req, "width", MAX_WIDTH_PX)
            form = parse_format(req)
        except BadQuery as exc:
            _bad(resp, exc)
            return
        agent = self.state.agent
        parts = agent.query_window(start, end, pid, width) if agent is not None else ()
        if form == "columns":
            resp.content_type = window_columns.MEDIA_TYPE
            resp.data = window_columns_body(parts, start, end, pid, width)
        else:
            resp.content_type = falcon.MEDIA_JSON
            resp.data = window_body(parts, start, end, pid, width)

    on_head = on_get


class HistoryResource:
    """GET /api/history: the readings kept over time in a range (some metrics, reduced, if asked)."""

    def __init__(self, state: Any) -> None:
        self.state = state

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        try:
            start, end = parse_range(req, ("from", "to", "metrics", "points"))
            metrics = parse_metrics(req)
            points = parse_points(req)
        except BadQuery as exc:
            _bad(resp, exc)
            return
        agent = self.state.agent
        parts = agent.query_history(start, end) if agent is not None else ()
        resp.content_type = falcon.MEDIA_JSON
        resp.data = dumps(history_json(parts, start, end, metrics, points))

    on_head = on_get
