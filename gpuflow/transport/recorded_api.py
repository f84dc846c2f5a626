"""GET /api/window and GET /api/history: the flight recorder's answers, as JSON.

``/api/window?from=<t0>&to=<t1>[&pid=<pid>][&width=<px>]`` answers every traced execution the
collectors retain in ``[t0, t1)`` (seconds since the epoch, floats); with ``width`` a lane denser
than that many executions comes reduced to ``width`` buckets. ``/api/history?from=<t0>&to=<t1>``
answers the readings kept over time. Both ask the agent (``Agent.query_window`` /
``query_history``), which asks every plugin through its hook: the transport knows no collector.
A range outside what is retained, or with nothing traced, is an empty 200 answer that says what is
retained; only malformed input (not a number, ``to`` not after ``from``, a range or width past
the limits below, an unknown parameter) is 400, with a message that never repeats the input.

The JSON (docs/recorder.md): spans travel column by column (``{"seq": [...], "start_us": [...],
...}``, -1 for "none"), with the lane's names table once; buckets as ``{"start_us", "width_us",
"count": [...], "busy_ns": [...]}``; series as ``{"entity", "metric", "unit", "resolution_s",
"t": [...], "value": [...]}`` with null for "not available" (and a roll-up's ``"min"`` and
``"max"``, when the series has them).

Constraints: runs in a server thread; the agent's answer is built by the plugins without a Python
object per execution, and encoded here in one pass per column; the same Host, token and security
headers as every route (the middleware runs first); an app without an agent (a bare board in
tests) answers empty.
"""

from __future__ import annotations

import math
from typing import Any

import falcon

from gpuflow.core.recorded import (
    HistoryPart, LaneWindow, ProcessWindow, Series, SpanBuckets, SpanColumns, WindowPart,
)
from gpuflow.transport.frames import dumps

#: the widest range a query may ask for: a week
MAX_RANGE_S = 7 * 86_400.0
#: the most pixels a reduced window may be asked for
MAX_WIDTH_PX = 16_384
_SPAN_FIELDS = ("seq", "start_us", "dur_ns", "kind", "name", "grid_x", "grid_y", "grid_z",
                "block_x", "block_y", "block_z", "bytes", "direction")


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


def span_columns_json(columns: SpanColumns) -> dict[str, Any]:
    out: dict[str, Any] = {name: getattr(columns, name).tolist() for name in _SPAN_FIELDS}
    out["names"] = list(columns.names)
    return out


def buckets_json(buckets: SpanBuckets) -> dict[str, Any]:
    return {"start_us": buckets.start_us, "width_us": buckets.width_us,
            "count": buckets.count.tolist(), "busy_ns": buckets.busy_ns.tolist()}


def lane_json(lane: LaneWindow) -> dict[str, Any]:
    out: dict[str, Any] = {"device": lane.device, "context": lane.context, "stream": lane.stream,
                           "label": lane.label, "executions": lane.executions}
    if lane.spans is not None:
        out["spans"] = span_columns_json(lane.spans)
    else:
        out["buckets"] = buckets_json(lane.buckets)  # type: ignore[arg-type]
    return out


def process_json(p: ProcessWindow) -> dict[str, Any]:
    return {"pid": p.pid, "session": p.session, "name": p.name, "retained_from": p.retained_from_s,
            "retained_to": p.retained_to_s, "complete": p.complete,
            "lanes": [lane_json(lane) for lane in p.lanes]}


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


def history_json(parts: tuple[HistoryPart, ...], start: float, end: float) -> dict[str, Any]:
    froms = [p.retained_from_s for p in parts if p.retained_from_s is not None]
    tos = [p.retained_to_s for p in parts if p.retained_to_s is not None]
    return {"from": start, "to": end, "sources": [p.source for p in parts],
            "retained_from": min(froms) if froms else None, "retained_to": max(tos) if tos else None,
            "series": [series_json(s) for part in parts for s in part.series],
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
            start, end = parse_range(req, ("from", "to", "pid", "width"))
            pid = _whole(req, "pid", 2**31 - 1)
            width = _whole(req, "width", MAX_WIDTH_PX)
        except BadQuery as exc:
            _bad(resp, exc)
            return
        agent = self.state.agent
        parts = agent.query_window(start, end, pid, width) if agent is not None else ()
        resp.content_type = falcon.MEDIA_JSON
        resp.data = dumps(window_json(parts, start, end, pid, width))

    on_head = on_get


class HistoryResource:
    """GET /api/history: the readings kept over time in a range."""

    def __init__(self, state: Any) -> None:
        self.state = state

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        try:
            start, end = parse_range(req, ("from", "to"))
        except BadQuery as exc:
            _bad(resp, exc)
            return
        agent = self.state.agent
        parts = agent.query_history(start, end) if agent is not None else ()
        resp.content_type = falcon.MEDIA_JSON
        resp.data = dumps(history_json(parts, start, end))

    on_head = on_get
