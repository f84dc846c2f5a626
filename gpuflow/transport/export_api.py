"""GET /api/export: a range of what the flight recorder retains, as a Perfetto trace to save.

``/api/export?from=<t0>&to=<t1>[&pid=<pid>]`` answers ``application/octet-stream`` with a
``Content-Disposition`` attachment (``gpuflow-<t0>-<t1>[-pid<pid>].perfetto-trace``): the
trace :mod:`gpuflow.export.perfetto` defines, of every execution starting in ``[t0, t1)`` (of
one traced process with ``pid``) and the readings kept over that range. ``gpuflow export`` and
the page's "save" and "open in Perfetto" (ui/perfetto.js) fetch it. The query is checked as
``/api/window``'s (recorded_api: the same 400s, naming the parameter and never echoing it).

The trace is streamed as it is written, piece by piece (gpuflow.export.window_export: the range
is planned from a reduced window, then asked a piece at a time), so an export holds one piece
(about 200,000 executions) however much is retained. A collector that cannot answer the plan
makes it a 503 naming the problem; one that fails later ends the stream without the trace's
end-of-trace packet, which ``gpuflow export`` checks for before it keeps a file. At most
:data:`MAX_EXPORTS` exports run at once (each takes a core while it writes); the next is a 503
with ``Retry-After``. HEAD answers the headers without exporting.

Constraints: the same Host, token and security headers as every data route (the middleware runs
first; ``Cache-Control: no-store``); a slot is given back however the response ends (finished,
client gone, server shutting down: the WSGI server closes the iterable); the agent is reached
only through its query methods; an app without an agent answers an empty trace.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Iterator

import falcon

from gpuflow.export.perfetto import SUFFIX, ExportError, TraceWriter
from gpuflow.export.window_export import WindowExport
from gpuflow.transport.frames import dumps
from gpuflow.transport.recorded_api import BadQuery, _bad, _whole, parse_range

log = logging.getLogger("gpuflow.transport.export")

#: exports streaming at once, per app
MAX_EXPORTS = 2
RETRY_AFTER_S = 5
CONTENT_TYPE = "application/octet-stream"


def attachment_name(start: float, end: float, pid: int | None) -> str:
    """The file name offered to save as: digits, dashes and the suffix only."""
    return f"gpuflow-{int(start)}-{int(end)}" + (f"-pid{pid}" if pid is not None else "") + SUFFIX


class _Stream:
    """The response body: the export's pieces, and its slot given back when the server closes it
    (whether or not it was read to the end, or at all)."""

    def __init__(self, export: WindowExport | None, slot: threading.BoundedSemaphore) -> None:
        self._export = export
        self._slot: threading.BoundedSemaphore | None = slot
        self._pieces: Iterator[bytes] | None = None

    def __iter__(self) -> Iterator[bytes]:
        self._pieces = self._write()
        return self._pieces

    def _write(self) -> Iterator[bytes]:
        if self._export is None:
            pieces: list[bytes] = []
            writer = TraceWriter(pieces.append)
            writer.header()
            writer.finish()
            yield from pieces
            return
        try:
            yield from self._export.stream()
        except ExportError as exc:
            log.error("an export ended early (the client gets no end-of-trace packet): %s", exc)

    def close(self) -> None:
        pieces, self._pieces = self._pieces, None
        if pieces is not None:
            pieces.close()  # type: ignore[attr-defined]
        slot, self._slot = self._slot, None
        if slot is not None:
            slot.release()


class ExportResource:
    """GET /api/export: a range of the recorder's windows as a Perfetto trace."""

    def __init__(self, state: Any, max_exports: int = MAX_EXPORTS) -> None:
        self.state = state
        self._slots = threading.BoundedSemaphore(max_exports)

    def _parse(self, req: falcon.Request) -> tuple[float, float, int | None]:
        start, end = parse_range(req, ("from", "to", "pid"))
        return start, end, _whole(req, "pid", 2**31 - 1)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        try:
            start, end, pid = self._parse(req)
        except BadQuery as exc:
            _bad(resp, exc)
            return
        if not self._slots.acquire(blocking=False):
            self._unavailable(resp, f"{MAX_EXPORTS} exports are running; try again shortly", RETRY_AFTER_S)
            return
        agent = self.state.agent
        export = None
        try:
            if agent is not None:
                shown = agent.board.latest()   # the GPUs the page shows, described in the trace
                export = WindowExport(agent.query_window, agent.query_history, start, end, pid,
                                      devices=shown.devices if shown is not None else ())
                export.plan()
        except ExportError as exc:
            self._slots.release()
            self._unavailable(resp, str(exc), None)
            return
        except BaseException:
            self._slots.release()
            raise
        self._headers(resp, start, end, pid)
        resp.stream = _Stream(export, self._slots)

    def on_head(self, req: falcon.Request, resp: falcon.Response) -> None:
        try:
            start, end, pid = self._parse(req)
        except BadQuery as exc:
            _bad(resp, exc)
            return
        self._headers(resp, start, end, pid)

    @staticmethod
    def _headers(resp: falcon.Response, start: float, end: float, pid: int | None) -> None:
        resp.content_type = CONTENT_TYPE
        resp.set_header("Content-Disposition", f'attachment; filename="{attachment_name(start, end, pid)}"')

    @staticmethod
    def _unavailable(resp: falcon.Response, message: str, retry_after: int | None) -> None:
        resp.status = falcon.HTTP_503
        resp.content_type = falcon.MEDIA_JSON
        if retry_after is not None:
            resp.set_header("Retry-After", str(retry_after))
        resp.data = dumps({"error": message})
