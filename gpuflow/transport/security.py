"""Request gatekeeping and response hardening: Host allow-list, methods, token, security headers.

Order on every request (one Falcon middleware, so no route can forget it):

1. **Host** — loopback literals (127.0.0.0/8, ``::1``, with or without port, bracketed or not),
   ``localhost``, ``*.localhost`` and the ``allow_hosts`` values (``name``, ``*.domain`` or
   ``*``) pass; anything else, or no Host at all, is 403. A loopback bind does not stop DNS
   rebinding: the attacker's page still sends ``Host: attacker.example``. A request target in
   absolute form (``GET http://name/path``, which RFC 9112 says overrides Host) must name an
   allowed host too.
2. **Method** — the API is read-only: GET and HEAD; anything else is 405,
   before routing, so OPTIONS gets no CORS-like answer either.
3. **Token** (only when one is configured) — every data route (``/api/*``, ``/metrics``,
   ``/healthz``) needs ``Authorization: Bearer T``; failures are a bare 401. The page, its
   modules and the icon (:data:`PUBLIC_PATHS`: fixed files, no data) need nothing: the page
   keeps the token in its origin's ``sessionStorage`` and sends it with its ``fetch`` of the
   stream. There is no cookie, on purpose: browsers send a host's cookies to every port of that
   host, so any other local web server the user visits would receive one and could replay it.
   Nothing a browser sends by itself carries a credential.

Every response then gets ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: no-referrer``,
``X-Frame-Options: DENY``, a default ``Content-Security-Policy`` (``default-src 'self';
frame-ancestors 'none'``; the UI page sets its own, stricter one with a nonce) and
``Cache-Control: no-store`` unless the route chose otherwise (the stream sends ``no-cache``).
No CORS headers are ever sent. :data:`SECURITY_HEADERS` is the same set for the error pages the
servers write themselves, before the app runs (server.py, gunicorn_hardening.py).

Constraints: pure functions plus one middleware; no secrets in any response body or log line;
no Set-Cookie, ever, and no cookie is read; secrets are compared as SHA-256 digests with
``hmac.compare_digest``, so neither their content nor their length shows in the time an answer
takes. There is no lockout after wrong tokens: every attempt costs the same and gets the same
401 (docs/security.md says why that is enough).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from typing import Iterable, Mapping
from urllib.parse import urlsplit

import falcon

from gpuflow.transport.ui import UI_MODULES

SAFE_METHODS = ("GET", "HEAD")
DEFAULT_CSP = "default-src 'self'; frame-ancestors 'none'"
#: Served without a token: the page, its modules and the icon, fixed files that hold no data.
PUBLIC_PATHS = frozenset({"/", "/favicon.ico", *("/" + name for name in UI_MODULES)})

#: Sent on every response, error pages included; Cache-Control only where no route chose one.
SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    ("Content-Security-Policy", DEFAULT_CSP),
    ("Cache-Control", "no-store"),
)


# -- Host ----------------------------------------------------------------------------------------
def host_name(header: str | None) -> str | None:
    """The host part of a Host header, lower-cased, without port, brackets or trailing dot."""
    if not header:
        return None
    h = header.strip().lower()
    if h.startswith("["):
        end = h.find("]")
        if end < 0:
            return None
        rest = h[end + 1:]
        if rest and not (rest.startswith(":") and rest[1:].isdigit()):
            return None
        return h[1:end]
    if h.count(":") == 1:
        h, _, port = h.partition(":")
        if not port.isdigit():
            return None
    elif h.count(":") > 1:  # a bare IPv6 literal (not valid in Host, but unambiguous)
        return h
    return h[:-1] if h.endswith(".") else h


def is_loopback_name(name: str) -> bool:
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(name)
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)  # ::ffff:127.0.0.1
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


class HostAllowList:
    """Loopback and localhost always; plus exact names, ``*.domain`` suffixes, or ``*`` (any)."""

    def __init__(self, extra: Iterable[str] = ()) -> None:
        self.any = False
        self.exact: set[str] = set()
        self.suffixes: list[str] = []
        for raw in extra:
            value = raw.strip().lower()
            if value == "*":
                self.any = True
            elif value.startswith("*."):
                domain = value[2:].rstrip(".")
                if not domain or any(c in domain for c in ":*[]/@ "):
                    raise ValueError(f"not a host pattern: {raw!r} (use *.domain, without a port)")
                self.suffixes.append("." + domain)
            elif value:
                name = host_name(value)
                if name is None:
                    raise ValueError(f"not a host name: {raw!r}")
                self.exact.add(name)

    def allows(self, header: str | None) -> bool:
        name = host_name(header)
        if name is None:
            return False
        if self.any or is_loopback_name(name) or name in self.exact:
            return True
        return any(name.endswith(s) for s in self.suffixes)

    def allows_target(self, environ: Mapping[str, object]) -> bool:
        """False for a request target in absolute form whose authority is not allowed.

        ``GET http://attacker.example/api/snapshot`` must be judged by the host it names, which
        RFC 9112 section 3.2.2 puts before the Host header. Origin-form targets (``/path``) and
        ``*`` have no authority and pass. gunicorn gives the raw target as ``RAW_URI``; the
        embedded server sets it too.
        """
        raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
        if not isinstance(raw, str) or not raw or raw.startswith("/") or raw == "*":
            return True
        try:
            parts = urlsplit(raw)
        except ValueError:
            return False
        if not parts.scheme:
            return True  # not absolute form; the router answers 404
        return bool(parts.netloc) and self.allows(parts.netloc)


# -- token -----------------------------------------------------------------------------------------
def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).digest()


def same_secret(given: str | None, expected: str) -> bool:
    """Constant-time equality that does not reveal the length of either side."""
    if given is None:
        return False
    return hmac.compare_digest(_digest(given), _digest(expected))


class TokenAuth:
    """``Authorization: Bearer <token>`` (the scheme in any case), the only credential taken."""

    def __init__(self, token: str) -> None:
        self.token = token

    def bearer_ok(self, req: falcon.Request) -> bool:
        auth = req.get_header("Authorization") or ""
        scheme, _, value = auth.partition(" ")
        return scheme.lower() == "bearer" and same_secret(value.strip(), self.token)


# -- middleware ------------------------------------------------------------------------------------
class SecurityMiddleware:
    def __init__(self, allow_hosts: Iterable[str] = (), token: str | None = None) -> None:
        self.hosts = HostAllowList(allow_hosts)
        self.auth = TokenAuth(token) if token else None

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        if not self.hosts.allows(req.get_header("Host")) or not self.hosts.allows_target(req.env):
            _refuse(resp, falcon.HTTP_403, "403 Forbidden: this Host is not allowed. Browse to "
                    "127.0.0.1 or localhost, or start gpuflow with --allow-host NAME.\n")
            return
        if req.method not in SAFE_METHODS:
            resp.set_header("Allow", "GET, HEAD")
            _refuse(resp, falcon.HTTP_405, "405 Method Not Allowed: this API is read-only.\n")
            return
        if self.auth is None or req.path in PUBLIC_PATHS or self.auth.bearer_ok(req):
            return
        resp.set_header("WWW-Authenticate", 'Bearer realm="gpuflow"')
        _refuse(resp, falcon.HTTP_401, "401 Unauthorized: send Authorization: Bearer <token> "
                "(the page does, once opened with the token).\n")

    def process_response(self, req: falcon.Request, resp: falcon.Response, resource,
                         req_succeeded: bool) -> None:
        for name, value in SECURITY_HEADERS:
            if name in ("Content-Security-Policy", "Cache-Control"):
                if resp.get_header(name) is None:  # the UI page and the stream set their own
                    resp.set_header(name, value)
            else:
                resp.set_header(name, value)


def plain_error(code: int, reason: str, version: str = "HTTP/1.1",
                extra: Iterable[tuple[str, str]] = (), body: bool = True) -> bytes:
    """A complete error response for the servers' own refusals (before the app runs).

    Text only, the security headers, ``Connection: close``, and a body of ``"<code> <reason>"``:
    nothing the client sent is echoed back, neither in the body nor in the status line.
    """
    text = f"{code} {reason}\n".encode("ascii")
    lines = [f"{version} {code} {reason}", "Content-Type: text/plain; charset=utf-8",
             f"Content-Length: {len(text)}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (*extra, *SECURITY_HEADERS)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (text if body else b"")


def _refuse(resp: falcon.Response, status: str, text: str) -> None:
    resp.status = status
    resp.content_type = falcon.MEDIA_TEXT
    resp.text = text
    resp.complete = True
