"""A token brute-force attempt against both real servers started with a token.

Hundreds of wrong tokens, through every way a credential can arrive (``/?token=``, Bearer on
each route that takes it, the cookie, the token on a route that does not exchange it): every one
is a 401 with the same short body, no cookie, and nothing of the token, the cookie or the
attempt in the answer. Afterwards the right token still works at once: there is no lockout (by
design, docs/security.md) and the agent is healthy. The comparison itself is checked to be
constant-time over fixed-length digests.
"""

from __future__ import annotations

import hmac
import secrets
import socket
from urllib.parse import quote

import pytest

from gpuflow.transport.security import TokenAuth, cookie_name, cookie_value, same_secret

from .conftest import TOKEN
from .rawhttp import Response, get, one, parse_all, request

ATTEMPTS_PER_SERVER = 400


def wrong_tokens(n: int) -> list[str]:
    fixed = ["", " ", TOKEN[:-1], TOKEN + "x", TOKEN.upper(), TOKEN[1:], TOKEN[:8],
             TOKEN + "\x00", "%00", "é" * 40, "x" * 3000, cookie_value(TOKEN)]
    return fixed + [secrets.token_urlsafe(n % 48 + 1) for n in range(n - len(fixed))]


def attempt(token: str, kind: str, host: str) -> bytes:
    if kind == "query":
        return request("GET", "/?token=" + quote(token, safe=""), [("Host", host)])
    if kind == "query-elsewhere":  # only / exchanges a token; here even the right one is refused
        return request("GET", "/api/snapshot?token=" + quote(TOKEN), [("Host", host)])
    if kind == "cookie":
        return request("GET", "/api/stream", [("Host", host),
                                              ("Cookie", f"{cookie_name(host)}={quote(token)}")])
    if kind == "cookie-token-itself":  # the cookie holds an HMAC; the raw token is no cookie
        return request("GET", "/api/snapshot", [("Host", host),
                                                ("Cookie", f"{cookie_name(host)}={TOKEN}")])
    route = {"bearer-snapshot": "/api/snapshot", "bearer-metrics": "/metrics",
             "bearer-healthz": "/healthz", "bearer-stream": "/api/stream"}[kind]
    return request("GET", route, [("Host", host), ("Authorization", "Bearer " + token)])


KINDS = ["query", "query-elsewhere", "cookie", "cookie-token-itself", "bearer-snapshot",
         "bearer-metrics", "bearer-healthz", "bearer-stream"]


def send_all(server, payloads: list[bytes]) -> list[Response]:
    """gunicorn: pipelined in batches on keep-alive connections; embedded: one connection each.

    A server closes the connection after a request it cannot parse (gunicorn: a control
    character in a header is a 400), so what was not answered is sent again on a new one.
    """
    out: list[Response] = []
    batch = 50 if server.kind == "gunicorn" else 1
    i = 0
    while i < len(payloads):
        chunk = payloads[i:i + batch]
        chunk[-1] = chunk[-1][:-2] + b"Connection: close\r\n\r\n"
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            try:
                s.sendall(b"".join(chunk))
            except OSError:
                pass
            data = b""
            while True:
                try:
                    b = s.recv(65536)
                except ConnectionResetError:
                    break
                if not b:
                    break
                data += b
        responses = parse_all(data)
        assert responses, f"no answer to request {i}"
        out += responses[:len(chunk)]
        i += min(len(responses), len(chunk))
    return out


def expected_status(server, payload: bytes) -> int:
    """401, unless gunicorn refuses the request before the app sees it (never 2xx/3xx)."""
    if server.kind == "gunicorn":
        head = payload.split(b"\r\n\r\n")[0]
        if any(c < 32 and c != 9 for c in head.replace(b"\r\n", b"")):
            return 400
    return 401


def test_many_wrong_tokens_are_all_401_with_nothing_leaked(token_server):
    host = f"127.0.0.1:{token_server.port}"
    tokens = wrong_tokens(ATTEMPTS_PER_SERVER)
    payloads = [attempt(t, KINDS[i % len(KINDS)], host) for i, t in enumerate(tokens)]
    responses = send_all(token_server, payloads)
    bodies: dict[str, set[bytes]] = {}
    secret_cookie = cookie_value(TOKEN).encode()
    assert len(responses) == len(payloads)
    for i, (token, r) in enumerate(zip(tokens, responses)):
        kind = KINDS[i % len(KINDS)]
        assert r.status == expected_status(token_server, payloads[i]), (kind, token[:20], r.status)
        if r.status != 401:
            continue  # refused by the HTTP parser: checked by test_http_bad_input
        assert r.header("set-cookie") is None
        assert r.header("x-content-type-options") == "nosniff"
        assert r.header("cache-control") == "no-store"
        assert TOKEN.encode() not in r.body and secret_cookie not in r.body
        if len(token) >= 4:
            assert token.encode("utf-8", "replace") not in r.body
        bodies.setdefault(kind, set()).add(r.body)
        if kind.startswith("bearer") or kind in ("query-elsewhere", "cookie-token-itself"):
            assert r.header("www-authenticate") == 'Bearer realm="gpuflow"'
    assert all(len(b) == 1 for b in bodies.values()), bodies  # same answer whatever was tried
    assert token_server.healthy()


def test_no_lockout_the_right_token_works_right_after(token_server):
    host = f"127.0.0.1:{token_server.port}"
    send_all(token_server, [attempt("wrong" + str(i), "query", host) for i in range(50)])
    login = one(token_server.port, get("/?token=" + TOKEN, host))
    assert login.status == 303 and login.header("location").endswith("/")
    cookie = login.header("set-cookie")
    name, _, rest = cookie.partition("=")
    assert name == cookie_name(host) and rest.split(";")[0] == cookie_value(TOKEN)
    assert TOKEN not in cookie
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    stream = one(token_server.port,
                 get("/api/stream", host, ("Cookie", f"{name}={cookie_value(TOKEN)}"),
                     method="HEAD"), head_only=True)
    assert stream.status == 200
    bearer = one(token_server.port, get("/api/snapshot", host, ("Authorization", f"Bearer {TOKEN}")))
    assert bearer.status == 200
    assert token_server.healthy()


def test_bearer_is_refused_on_the_page_itself(token_server):
    """The UI page takes the cookie only: a page that a script could open with a Bearer token
    is not what Bearer is for, and the EventSource cannot send one anyway."""
    host = f"127.0.0.1:{token_server.port}"
    r = one(token_server.port, get("/", host, ("Authorization", f"Bearer {TOKEN}")))
    assert r.status == 401


def test_secrets_are_compared_in_constant_time_over_fixed_length_digests(monkeypatch):
    seen: list[tuple[int, int]] = []
    real = hmac.compare_digest

    def spy(a, b):
        seen.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    for given in ("", "a", TOKEN[:-1], TOKEN, TOKEN * 50, "é" * 7):
        assert same_secret(given, TOKEN) == (given == TOKEN)
    assert seen and all(pair == (32, 32) for pair in seen), seen
    assert not same_secret(None, TOKEN)
    assert TokenAuth(TOKEN).cookie == cookie_value(TOKEN) != TOKEN


@pytest.mark.parametrize("header", [f"Bearer {TOKEN} ", f"bearer {TOKEN}", f"BEARER  {TOKEN}"])
def test_bearer_spelling_variants_that_are_accepted(gunicorn_token_agent, header):
    """Scheme names are case-insensitive (RFC 9110) and surrounding spaces are trimmed."""
    r = one(gunicorn_token_agent.port,
            get("/healthz", f"127.0.0.1:{gunicorn_token_agent.port}", ("Authorization", header)))
    assert r.status == 200
