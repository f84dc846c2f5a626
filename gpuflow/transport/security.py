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
3. **Token** (only when one is configured) — ``GET /?token=T`` (compared with
   ``hmac.compare_digest``) sets an HttpOnly SameSite=Strict cookie and answers 303 to ``/`` so
   the token leaves the address bar; every other request needs that cookie, and ``/api/*``,
   ``/metrics`` and ``/healthz`` also take ``Authorization: Bearer T``. Failures are a bare 401.

Every response then gets ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: no-referrer``,
``X-Frame-Options: DENY``, a default ``Content-Security-Policy`` (``default-src 'self';
frame-ancestors 'none'``; the UI page sets its own, stricter one with a nonce) and
``Cache-Control: no-store`` unless the route chose otherwise (the stream sends ``no-cache``).
No CORS headers are ever sent. :data:`SECURITY_HEADERS` is the same set for the error pages the
servers write themselves, before the app runs (server.py, gunicorn_hardening.py).

Constraints: pure functions plus one middleware; no secrets in any response body or log line;
the cookie holds an HMAC of the token, not the token, and its name carries the port so two
agents on one host do not overwrite each other's cookie; secrets are compared as SHA-256
digests with ``hmac.compare_digest``, so neither their content nor their length shows in the
time an answer takes. There is no lockout after wrong tokens: every attempt costs the same
and gets the same 401 (docs/security.md says why that is enough).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from typing import Iterable, Mapping
from urllib.parse import urlsplit

import falcon

SAFE_METHODS = ("GET", "HEAD")
DEFAULT_CSP = "default-src 'self'; frame-ancestors 'none'"
COOKIE_PREFIX = "gpuflow_auth"
BEARER_PREFIXES = ("/api/", "/metrics", "/healthz")

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
def cookie_value(token: str) -> str:
    """What the cookie holds: an HMAC of the token (never the token itself)."""
    return hmac.new(token.encode("utf-8"), b"gpuflow-cookie-v1", hashlib.sha256).hexdigest()


def cookie_name(host_header: str | None) -> str:
    """Cookies ignore ports; naming them by port keeps two agents on one host apart."""
    port = ""
    if host_header:
        h = host_header.strip()
        tail = h.rsplit("]", 1)[-1] if h.startswith("[") else h
        if ":" in tail:
            candidate = tail.rsplit(":", 1)[1]
            port = candidate if candidate.isdigit() else ""
    return f"{COOKIE_PREFIX}_{port}" if port else COOKIE_PREFIX


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).digest()


def same_secret(given: str | None, expected: str) -> bool:
    """Constant-time equality that does not reveal the length of either side."""
    if given is None:
        return False
    return hmac.compare_digest(_digest(given), _digest(expected))


class TokenAuth:
    def __init__(self, token: str) -> None:
        self.token = token
        self.cookie = cookie_value(token)

    def cookie_ok(self, req: falcon.Request) -> bool:
        values = req.get_cookie_values(cookie_name(req.get_header("Host"))) or []
        return any(same_secret(v, self.cookie) for v in values)

    def bearer_ok(self, req: falcon.Request) -> bool:
        if not req.path.startswith(BEARER_PREFIXES):
            return False
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
        if self.auth is None:
            return
        if req.path == "/" and req.get_param("token") is not None:
            self._exchange_token(req, resp)
            return
        if self.auth.cookie_ok(req) or self.auth.bearer_ok(req):
            return
        if req.path.startswith(BEARER_PREFIXES):
            resp.set_header("WWW-Authenticate", 'Bearer realm="gpuflow"')
        _refuse(resp, falcon.HTTP_401, "401 Unauthorized: open the URL (with ?token=...) that "
                "gpuflow printed when it started.\n")

    def _exchange_token(self, req: falcon.Request, resp: falcon.Response) -> None:
        assert self.auth is not None
        if not same_secret(req.get_param("token"), self.auth.token):
            _refuse(resp, falcon.HTTP_401, "401 Unauthorized: wrong token.\n")
            return
        resp.set_cookie(cookie_name(req.get_header("Host")), self.auth.cookie, path="/",
                        http_only=True, same_site="Strict",
                        secure=req.forwarded_scheme == "https")
        resp.status = falcon.HTTP_303
        resp.location = "/"
        resp.content_type = falcon.MEDIA_TEXT
        resp.text = "See /\n"
        resp.complete = True

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
