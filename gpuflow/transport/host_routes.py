"""``/api/window`` and ``/api/history`` for another host: a hub relays them to that host's agent.

With ``host=<name>`` (any host the agent's plugins follow other than its own), the question is
checked here exactly as the recorder's routes check it (gpuflow.transport.recorded_api's
parsers: the range, ``pid``, ``width``, ``metrics``, ``points``; anything else 400), rebuilt from
the checked values (nothing of the page's query is passed on as written: not its token, not a
parameter the route does not take), and asked of the plugin that follows the host
(``Agent.answer_for_host``: the fleet collector asks the agent with that agent's credentials).
The host's answer is served as it came, if it is JSON (its status kept, 2xx to 5xx); the hub
stores nothing. Without ``host``, or with the agent's own name, the route answers as before. A
host no plugin follows is 404; every error is one line of JSON that does not repeat the input.

Constraints: a server thread waits for the relayed answer (the plugin bounds its time and size);
the Host, token and method checks ran before (the security middleware), as on every route.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import falcon

from gpuflow.core.identity import check_host_name
from gpuflow.transport.frames import dumps
from gpuflow.transport.recorded_api import (
    MAX_WIDTH_PX, BadQuery, parse_metrics, parse_points, parse_range,
)

#: each route and the parameters it takes besides ``host``
ROUTE_PARAMS = {"/api/window": ("from", "to", "pid", "width"),
                "/api/history": ("from", "to", "metrics", "points")}
MAX_PID = 2**31 - 1


def _whole(req: falcon.Request, name: str, maximum: int) -> int | None:
    raw = req.get_param(name)
    if raw is None:
        return None
    if not raw.isdigit() or len(raw) > 12 or not 1 <= int(raw) <= maximum:
        raise BadQuery(f"{name} must be a whole number between 1 and {maximum}")
    return int(raw)


def relayed_query(req: falcon.Request, route: str) -> str:
    """The checked question of ``route``, rebuilt as the query string to send the host's agent."""
    start, end = parse_range(req, ROUTE_PARAMS[route] + ("host",))
    pairs: list[tuple[str, str]] = [("from", repr(start)), ("to", repr(end))]
    if route == "/api/window":
        for name, maximum in (("pid", MAX_PID), ("width", MAX_WIDTH_PX)):
            value = _whole(req, name, maximum)
            if value is not None:
                pairs.append((name, str(value)))
    else:
        metrics, points = parse_metrics(req), parse_points(req)
        if metrics is not None:
            pairs.append(("metrics", ",".join(sorted(metrics))))
        if points is not None:
            pairs.append(("points", str(points)))
    return urlencode(pairs)


class HostRecorderRoute:
    """``route`` (``/api/window`` or ``/api/history``): answered by ``inner`` for this agent's own
    host, relayed to another host's agent with ``host=<name>``."""

    def __init__(self, state: Any, inner: Any, route: str) -> None:
        self.state, self.inner, self.route = state, inner, route

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        raw = req.params.get("host")
        agent = self.state.agent
        if raw is None:
            self.inner.on_get(req, resp)
            return
        try:
            host = check_host_name(raw)
        except ValueError:
            _error(resp, falcon.HTTP_400, "host must be given once, as a host name")
            return
        if agent is not None and host == agent.identity.name:
            del req.params["host"]   # this agent's own: the route answers it as ever
            self.inner.on_get(req, resp)
            return
        try:
            query = relayed_query(req, self.route)
        except BadQuery as exc:
            _error(resp, falcon.HTTP_400, str(exc))
            return
        answer = agent.answer_for_host(host, self.route, query) if agent is not None else None
        if answer is None:
            _error(resp, falcon.HTTP_404, "no such host")
            return
        if not 200 <= answer.status <= 599 or answer.content_type.split(";")[0].strip() != falcon.MEDIA_JSON:
            _error(resp, falcon.HTTP_502, "the host answered something other than JSON")
            return
        resp.status = falcon.code_to_http_status(answer.status)
        resp.content_type = falcon.MEDIA_JSON
        resp.data = answer.body

    on_head = on_get


def _error(resp: falcon.Response, status: str, message: str) -> None:
    resp.status = status
    resp.content_type = falcon.MEDIA_JSON
    resp.data = dumps({"error": message})
