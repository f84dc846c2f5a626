"""A token brute-force attempt against both real servers started with a token.

Hundreds of wrong tokens, through every way a credential could arrive (Bearer on each data
route, a cookie under the name the agent's login cookie once had, with a wrong value, the right
one's HMAC or the token itself, the token in a query string): every one is a 401 with the same
short body, no cookie, and nothing of the token or the attempt in the answer. The page takes no
token and sets no cookie. Afterwards the right token still works at once: there is no lockout
(by design, docs/security.md) and the agent is healthy. The comparison itself is checked to be
constant-time over fixed-length digests.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import socket
from urllib.parse import quote

import pytest

from gpuflow.transport.security import same_secret

from gpuflow.transport.ui import DEFAULT_UI as PAGE

from .conftest import TOKEN
from .rawhttp import Response, get, one, parse_all, request

ATTEMPTS_PER_SERVER = 400


def old_cookie(host: str, value: str) -> tuple[str, str]:
    """The login cookie the agent used to set (named by port, an HMAC of the token), with ``value``."""
    return ("Cookie", f"gpuflow_auth_{host.rsplit(':', 1)[1]}={value}")


def old_cookie_value(token: str) -> str:
    return hmac.new(token.encode(), b"gpuflow-cookie-v1", hashlib.sha256).hexdigest()


def wrong_tokens(n: int) -> list[str]:
    fixed = ["", " ", TOKEN[:-1], TOKEN + "x", TOKEN.upper(), TOKEN[1:], TOKEN[:8],
             TOKEN + "\x00", "%00", "é" * 40, "x" * 3000, old_cookie_value(TOKEN)]
    return fixed + [secrets.token_urlsafe(n % 48 + 1) for n in range(n - len(fixed))]


def attempt(token: str, kind: str, host: str) -> bytes:
    if kind == "query-right-token":  # a token in a query string is no credential, even the right one
        return request("GET", "/api/snapshot?token=" + quote(TOKEN), [("Host", host)])
    if kind == "query":
        return request("GET", "/api/stream?token=" + quote(token, safe=""), [("Host", host)])
    if kind == "cookie":
        return request("GET", "/api/stream", [("Host", host), old_cookie(host, quote(token))])
    if kind == "cookie-right-hmac":  # what a server on another port of the host used to receive
        return request("GET", "/api/snapshot", [("Host", host), old_cookie(host, old_cookie_value(TOKEN))])
    if kind == "cookie-token-itself":
        return request("GET", "/metrics", [("Host", host), old_cookie(host, TOKEN)])
    route = {"bearer-snapshot": "/api/snapshot", "bearer-metrics": "/metrics",
             "bearer-healthz": "/healthz", "bearer-stream": "/api/stream"}[kind]
    return request("GET", route, [("Host", host), ("Authorization", "Bearer " + token)])


KINDS = ["query", "query-right-token", "cookie", "cookie-right-hmac", "cookie-token-itself",
         "bearer-snapshot", "bearer-metrics", "bearer-healthz", "bearer-stream"]


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
    secret_cookie = old_cookie_value(TOKEN).encode()
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
        assert r.header("www-authenticate") == 'Bearer realm="gpuflow"'
    assert len(set().union(*bodies.values())) == 1, bodies  # the same answer whatever was tried
    assert token_server.healthy()


def test_no_lockout_the_right_token_works_right_after(token_server):
    host = f"127.0.0.1:{token_server.port}"
    send_all(token_server, [attempt("wrong" + str(i), "bearer-snapshot", host) for i in range(50)])
    stream = one(token_server.port, get("/api/stream", host, ("Authorization", f"Bearer {TOKEN}"),
                                        method="HEAD"), head_only=True)
    assert stream.status == 200
    bearer = one(token_server.port, get("/api/snapshot", host, ("Authorization", f"Bearer {TOKEN}")))
    assert bearer.status == 200 and bearer.header("set-cookie") is None
    assert token_server.healthy()


@pytest.mark.parametrize("extra", [[], [("Authorization", f"Bearer {TOKEN}")],
                                   [("Authorization", "Bearer wrong")]])
@pytest.mark.parametrize("target", ["/", "/?token=wrong", "/?token=" + quote(TOKEN)])
def test_the_page_takes_no_token_and_sets_no_cookie(token_server, target, extra):
    """The page is a fixed file without data: the same for everyone, whatever they send; the
    token reaches the page in the URL's fragment or its form, never the server's query."""
    host = f"127.0.0.1:{token_server.port}"
    r = one(token_server.port, get(target, host, *extra))
    assert r.status == 200 and r.header("set-cookie") is None
    assert TOKEN.encode() not in r.body and b"wrong" not in r.body
    assert re.sub(rb' nonce="[^"]*"', b"", r.body) == PAGE.read_bytes()


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


@pytest.mark.parametrize("header", [f"Bearer {TOKEN} ", f"bearer {TOKEN}", f"BEARER  {TOKEN}"])
def test_bearer_spelling_variants_that_are_accepted(gunicorn_token_agent, header):
    """Scheme names are case-insensitive (RFC 9110) and surrounding spaces are trimmed."""
    r = one(gunicorn_token_agent.port,
            get("/healthz", f"127.0.0.1:{gunicorn_token_agent.port}", ("Authorization", header)))
    assert r.status == 200
