"""GET /: the single-file UI (gpuflow/ui/index.html, or ``ui_path``), under a nonce-based CSP.

The UI is one self-contained HTML file with inline ``<script>`` and ``<style>``. Rather than
allow ``'unsafe-inline'`` for scripts, every response gets a fresh nonce, written into each
``<script`` and ``<style`` opening tag and into the page's Content-Security-Policy, so only the
file's own blocks run. Inline ``style="…"`` attributes stay allowed (``style-src-attr``): they
cannot run code. Until the UI file exists a short page says so, and points at the JSON routes.

Constraints: the file is read once and re-read only when its mtime or size changes; per request
the work is one join; the page is never cached (its nonce must not be reused). No response
names a directory of this machine: the not-built page gives the file name only, and the full
path goes to the log (once).
"""

from __future__ import annotations

import html
import logging
import os
import re
import secrets
import threading
from pathlib import Path

import falcon

log = logging.getLogger("gpuflow.transport.ui")

DEFAULT_UI = Path(__file__).resolve().parent.parent / "ui" / "index.html"
_TAG = re.compile(rb"<(?:script|style)\b", re.IGNORECASE)

CSP_TEMPLATE = (
    "default-src 'self'; script-src 'self' 'nonce-{n}'; style-src 'self' 'nonce-{n}'; "
    "style-src-attr 'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)

NOT_BUILT = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>GPUFlow: UI not built</title></head>
<body>
<h1>GPUFlow is running, but its UI is not built</h1>
<p>No UI file <code>{name}</code> (its path is in the agent's log). The agent is serving data:
<a href="/api/snapshot">/api/snapshot</a> (JSON), <a href="/api/stream">/api/stream</a>
(Server-Sent Events), <a href="/metrics">/metrics</a> (Prometheus).</p>
</body></html>
"""


def split_for_nonce(html: bytes) -> list[bytes]:
    """The page cut just after each ``<script``/``<style`` tag name, ready for a nonce join."""
    parts, last = [], 0
    for m in _TAG.finditer(html):
        parts.append(html[last:m.end()])
        last = m.end()
    parts.append(html[last:])
    return parts


class IndexResource:
    def __init__(self, ui_path: str | os.PathLike | None = None) -> None:
        self.path = Path(ui_path) if ui_path is not None else DEFAULT_UI
        self._lock = threading.Lock()
        self._key: tuple[int, int] | None = None
        self._parts: list[bytes] | None = None
        self._missing_logged = False

    def _load(self) -> list[bytes] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        key = (st.st_mtime_ns, st.st_size)
        with self._lock:
            if key != self._key:
                try:
                    self._parts = split_for_nonce(self.path.read_bytes())
                except OSError:
                    return None
                self._key = key
            return self._parts

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        parts = self._load()
        resp.content_type = "text/html; charset=utf-8"
        if parts is None:
            if not self._missing_logged:
                self._missing_logged = True
                log.warning("no UI file at %s: serving the not-built page at /", self.path)
            resp.text = NOT_BUILT.format(name=html.escape(self.path.name))
            return
        nonce = secrets.token_urlsafe(18)
        resp.set_header("Content-Security-Policy", CSP_TEMPLATE.format(n=nonce))
        resp.data = (b' nonce="' + nonce.encode() + b'"').join(parts)

    on_head = on_get


class FaviconResource:
    """GET /favicon.ico: 204, so browsers do not log a 404 for the icon they always ask for."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.status = falcon.HTTP_204

    on_head = on_get
