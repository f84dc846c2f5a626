"""GET /: the UI page (gpuflow/ui/index.html, or ``ui_path``) under a nonce-based CSP, and its modules.

The page is ``index.html`` (markup and one ``<style>``) plus the ES modules next to it, which it
loads with ``<script type="module">``. Rather than allow ``'unsafe-inline'``, every page response
gets a fresh nonce, written into each ``<script`` and ``<style`` opening tag and into the page's
Content-Security-Policy, so only the file's own blocks run; the modules are ``'self'``. Inline
``style="…"`` attributes stay allowed (``style-src-attr``): they cannot run code. Until the UI
file exists a short page says so, and points at the JSON routes.

The modules are served at the page's own level (``/main.js`` next to ``/``), so the page's
relative URLs mean the same thing from the agent, behind a proxy path, and from any static
server of gpuflow/ui. :func:`module_routes` knows a fixed list: the ``*.js`` files of the
installed package's gpuflow/ui, found once at import; each gets a static route of its own, so
no part of a request path ever becomes a file name (anything else is the app's 404). A module
is ``text/javascript`` with the page's policy (less the nonce) and the app's security headers,
and is revalidated on every load (``no-cache`` with an ``ETag``; 304 when unchanged), so a
page never runs against modules of another version.

Constraints: each file is read once and re-read only when its mtime or size changes; per request
the page's work is one join; the page is never cached (its nonce must not be reused). No
response names a directory of this machine: the not-built page gives the file name only, and
the full path goes to the log (once).
"""

from __future__ import annotations

import hashlib
import html
import logging
import os
import re
import secrets
import threading
from pathlib import Path
from typing import Any, Callable

import falcon

log = logging.getLogger("gpuflow.transport.ui")

UI_DIR = Path(__file__).resolve().parent.parent / "ui"
DEFAULT_UI = UI_DIR / "index.html"
_TAG = re.compile(rb"<(?:script|style)\b", re.IGNORECASE)
_MODULE_NAME = re.compile(r"[a-z][a-z0-9_-]*\.js")
#: the page's modules: every gpuflow/ui/*.js of this installation, by name, found once
UI_MODULES: tuple[str, ...] = tuple(sorted(p.name for p in UI_DIR.glob("*.js")
                                           if _MODULE_NAME.fullmatch(p.name)))
MODULE_CONTENT_TYPE = "text/javascript; charset=utf-8"


def csp(nonce: str | None = None) -> str:
    """The page's Content-Security-Policy; a module's is the same without the nonce."""
    n = f" 'nonce-{nonce}'" if nonce else ""
    return (f"default-src 'self'; script-src 'self'{n}; style-src 'self'{n}; "
            "style-src-attr 'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self'; "
            "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


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


class CachedFile:
    """A file's contents as ``parse`` made them, re-read only when its mtime or size changes."""

    def __init__(self, path: Path, parse: Callable[[bytes], Any]) -> None:
        self.path = path
        self._parse = parse
        self._lock = threading.Lock()
        self._key: tuple[int, int] | None = None
        self._value: Any = None

    def get(self) -> Any:
        """The parsed contents, or None while the file cannot be read."""
        try:
            st = self.path.stat()
        except OSError:
            return None
        key = (st.st_mtime_ns, st.st_size)
        with self._lock:
            if key != self._key:
                try:
                    self._value = self._parse(self.path.read_bytes())
                except OSError:
                    return None
                self._key = key
            return self._value


class IndexResource:
    def __init__(self, ui_path: str | os.PathLike | None = None) -> None:
        self.path = Path(ui_path) if ui_path is not None else DEFAULT_UI
        self._file = CachedFile(self.path, split_for_nonce)
        self._missing_logged = False

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        parts = self._file.get()
        resp.content_type = "text/html; charset=utf-8"
        if parts is None:
            if not self._missing_logged:
                self._missing_logged = True
                log.warning("no UI file at %s: serving the not-built page at /", self.path)
            resp.text = NOT_BUILT.format(name=html.escape(self.path.name))
            return
        nonce = secrets.token_urlsafe(18)
        resp.set_header("Content-Security-Policy", csp(nonce))
        resp.data = (b' nonce="' + nonce.encode() + b'"').join(parts)

    on_head = on_get


def _with_etag(body: bytes) -> tuple[bytes, str]:
    return body, hashlib.sha256(body).hexdigest()[:32]


class ModuleResource:
    """One of the page's modules (GET/HEAD): ``text/javascript``, revalidated by ETag."""

    def __init__(self, name: str) -> None:
        self._file = CachedFile(UI_DIR / name, _with_etag)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        loaded = self._file.get()
        if loaded is None:   # gone since the app started
            raise falcon.HTTPNotFound()
        body, etag = loaded
        resp.set_header("Content-Security-Policy", csp())
        resp.set_header("Cache-Control", "no-cache")
        resp.set_header("ETag", f'"{etag}"')
        if any(t == "*" or t == etag for t in req.if_none_match or ()):
            resp.status = falcon.HTTP_304
            return
        resp.content_type = MODULE_CONTENT_TYPE
        resp.data = body

    on_head = on_get


def module_routes() -> list[tuple[str, ModuleResource]]:
    """A static route for each of the page's modules, next to the page: ``/<name>.js``."""
    return [("/" + name, ModuleResource(name)) for name in UI_MODULES]


class FaviconResource:
    """GET /favicon.ico: 204, so browsers do not log a 404 for the icon they always ask for."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.status = falcon.HTTP_204

    on_head = on_get
