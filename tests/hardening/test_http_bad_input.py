"""Bad HTTP input against both real servers (gunicorn gthread and the embedded one), raw sockets.

Every case is sent as exact bytes to a running agent and must get:

* the right status (400/403/404/405/414/431/505, or 200 where the input is odd but harmless),
  in a well-formed HTTP response;
* the security headers, on error answers too (also the ones the servers write themselves);
* a body with no traceback, no file system path, no server or Python version, and nothing of
  the request echoed back;
* no CORS header;
* an agent still healthy afterwards (``/healthz`` 200, no stream slot left taken).

Where the two servers legitimately differ (gunicorn parses HTTP/1.1 strictly, the embedded
wsgiref server is a lenient HTTP/1.0 one) the table gives both answers.
"""

from __future__ import annotations

import json
import sys
import time

import pytest

from servers import ROOT

from .rawhttp import Response, exchange, get, one, parse_all, request, wait_for

ECHO = "zq7echo"  # planted in requests; must never come back in an error answer
LEAKS = ("Traceback", 'File "', str(ROOT), "site-packages", sys.prefix, "/usr/lib/python",
         "WSGIServer", "CPython", "Python/", "gunicorn/", ".py\"", ".py,")
SECURITY = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}

LOCAL = "127.0.0.1"


def H(host: str | None, target: str = "/healthz", *extra, method: str = "GET",
      version: str = "HTTP/1.1") -> bytes:
    return get(target, host, *extra, method=method, version=version)


def L(target: str = "/healthz", *extra, method: str = "GET") -> bytes:
    return H(LOCAL, target, *extra, method=method)


# (id, request bytes, status on gunicorn, status on the embedded server)
HOSTS = [
    ("no-host-1.1", H(None), 403, 403),
    ("no-host-1.0", H(None, version="HTTP/1.0"), 403, 403),
    ("empty-host", H(""), 403, 403),
    ("foreign", H("attacker.example"), 403, 403),
    ("foreign-port", H("attacker.example:7717"), 403, 403),
    ("localhost-prefix", H("localhost.evil.com"), 403, 403),
    ("loopback-prefix", H("127.0.0.1.evil.com"), 403, 403),
    ("rebind-service", H("7f000001.c0a80001.rbndr.us"), 403, 403),
    ("userinfo", H("evil.com@127.0.0.1"), 403, 403),
    ("any-address", H("0.0.0.0"), 403, 403),
    ("lan-address", H("10.0.0.5:7717"), 403, 403),
    ("decimal-ip", H("2130706433"), 403, 403),
    ("hex-ip", H("0x7f.0.0.1"), 403, 403),
    ("short-ip", H("127.1"), 403, 403),
    ("octal-ip", H("0177.0.0.1"), 403, 403),
    ("leading-zeros", H("127.000.000.001"), 403, 403),
    ("double-dot", H("localhost.."), 403, 403),
    ("ipv6-unterminated", H("[::1"), 403, 403),
    ("ipv6-trailing", H("[::1]evil.com"), 403, 403),
    ("ipv6-zone", H("[fe80::1%25eth0]"), 403, 403),
    ("ipv6-unspecified", H("[::]:7717"), 403, 403),
    ("ipv6-mapped-lan", H("[::ffff:10.0.0.1]"), 403, 403),
    ("ipv4-compatible", H("[::127.0.0.1]"), 403, 403),
    ("port-not-digits", H("127.0.0.1:http"), 403, 403),
    ("port-empty", H("127.0.0.1:"), 403, 403),
    ("port-only", H(":7717"), 403, 403),
    ("unicode-lookalike", H("ľocalhost".encode().decode("latin-1")), 403, 403),
    ("two-hosts-foreign-first",
     request("GET", "/healthz", [("Host", "evil.com"), ("Host", LOCAL), ("Connection", "close")]),
     400, 403),
    ("two-hosts-foreign-last",
     request("GET", "/healthz", [("Host", LOCAL), ("Host", "evil.com"), ("Connection", "close")]),
     400, 403),
    ("host-folded", b"GET /healthz HTTP/1.1\r\nHost: evil.com\r\n 127.0.0.1\r\nConnection: close\r\n\r\n",
     400, 403),
    ("host-nul", b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\x00.evil\r\nConnection: close\r\n\r\n",
     400, 403),
    ("host-space-before-colon", b"GET /healthz HTTP/1.1\r\nHost : 127.0.0.1\r\nConnection: close\r\n\r\n",
     400, 403),
    ("forwarded-host-ignored", H("evil.com", "/healthz", ("X-Forwarded-Host", LOCAL),
                                 ("Forwarded", f"host={LOCAL}")), 403, 403),
    ("absolute-form-foreign", H(LOCAL, "http://evil.com/healthz"), 403, 403),
    ("absolute-form-foreign-host", H("evil.com", f"http://{LOCAL}/healthz"), 403, 403),
    ("absolute-form-userinfo", H(LOCAL, "http://evil.com@127.0.0.1/healthz"), 403, 403),
    ("connect-foreign", H("evil.com:443", "evil.com:443", method="CONNECT"), 403, 403),
]

# Names every browser on this machine uses for the agent: the check must not refuse them.
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "LOCALHOST:7717", "localhost.", "127.0.0.2",
                 "[::1]", "[::1]:7717", "[::ffff:127.0.0.1]", "ui.localhost"]

OVERSIZED = [
    ("request-line-70k", L("/" + "a" * 70_000), 414, 414),
    ("request-line-8k", L("/healthz?q=" + "a" * 8_000), 414, 200),
    ("method-5k", L("/", method="A" * 5_000), 414, 405),
    ("header-70k", L("/healthz", ("X-Big", ECHO + "a" * 70_000)), 431, 431),
    ("header-9k", L("/healthz", ("X-Big", ECHO + "a" * 9_000)), 431, 200),
    ("headers-200", L("/healthz", *[(f"X-{ECHO}-{i}", "v") for i in range(200)]), 431, 431),
]

MALFORMED = [
    ("one-word", b"GARBAGE" + ECHO.encode() + b"\r\n\r\n", 400, 400),
    ("http-0.9", b"GET /healthz" + b"\r\n\r\n", 400, 400),
    ("no-target", b"GET HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400, 400),
    ("four-words", b"GET /a b HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400, 400),
    ("version-9.9", b"GET / HTTP/9.9\r\nHost: 127.0.0.1\r\n\r\n", 400, 505),
    ("version-garbage", b"GET / HTTQ/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400, 400),
    ("h2-preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400, 505),
    ("lowercase-method", L("/healthz", method="get"), 400, 405),
    ("control-char-target", b"GET /\x01" + ECHO.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
     400, 404),
    ("raw-8bit-target", b"GET /\xff\xfe HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400, 404),
    ("header-no-colon", b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nBroken" + ECHO.encode()
     + b"\r\nConnection: close\r\n\r\n", 400, 200),
    ("header-8bit-name", b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-\xff: 1\r\nConnection: close\r\n\r\n",
     400, 200),
    ("bad-content-length", L("/healthz", ("Content-Length", "abc")), 400, 200),
    ("negative-content-length", L("/healthz", ("Content-Length", "-1")), 400, 200),
    ("bare-lf", b"GET /healthz HTTP/1.1\nHost: 127.0.0.1\nConnection: close\n\n", 400, 200),
    ("star-target", L("*"), 400, 404),
    ("unknown-transfer-coding", L("/healthz", ("Transfer-Encoding", "gzip, zork")), 501, 200),
]

QUERIES = [
    ("bad-percent-query", L("/api/snapshot?%zz=%ff&a=%E0%A4&%"), 200, 200),
    ("bad-percent-metrics", L("/metrics?name[]=%ZZ&&&==&%"), 200, 200),
    ("empty-query", L("/?"), 200, 200),
    ("repeated-keys", L("/healthz?a=1&a=2&a=&=&&"), 200, 200),
    ("token-without-auth", L("/?token=%ff%fe"), 200, 200),
    ("bad-percent-path", L("/api/%zz"), 404, 404),
    ("invalid-utf8-path", L("/%ff%fe"), 404, 404),
    ("nul-in-path", L("/api/snapshot%00"), 404, 404),
    ("bidi-in-path", L("/%E2%80%AEtoh"), 404, 404),
    ("overlong-utf8", L("/%C0%AE%C0%AE/"), 404, 404),
    ("bad-accept-metrics", L("/metrics", ("Accept", "application/openmetrics-text; version=x; "
                                                   "escaping=zz")), 200, 200),
    ("garbage-accept-404", L("/nope", ("Accept", ";;;,,,=")), 404, 404),
    ("garbage-cookie", L("/api/snapshot", ("Cookie", '=;;;a="\\;gpuflow_auth=' + ECHO)), 200, 200),
    ("garbage-last-event-id", L("/api/stream", ("Last-Event-ID", "\xff" + ECHO), method="HEAD"),
     200, 200),
    ("garbage-authorization", L("/api/snapshot", ("Authorization", "Bearer " + ECHO)), 200, 200),
]

PATHS = [
    ("unknown", L("/nope"), 404, 404),
    ("api-root", L("/api/"), 404, 404),
    ("trailing-slash", L("/api/snapshot/"), 404, 404),
    ("case", L("/API/SNAPSHOT"), 404, 404),
    ("index-html", L("/index.html"), 404, 404),
    ("static", L("/static/app.js"), 404, 404),
    ("ui-dir", L("/ui/index.html"), 404, 404),
    ("traversal", L("/../../etc/passwd"), 404, 404),
    ("traversal-encoded", L("/%2e%2e/%2e%2e/etc/passwd"), 404, 404),
    ("traversal-encoded-slash", L("/..%2f..%2fetc%2fpasswd"), 404, 404),
    ("traversal-double-encoded", L("/%252e%252e/etc/passwd"), 404, 404),
    ("traversal-backslash", L("/..\\..\\etc\\passwd"), 404, 404),
    ("traversal-after-route", L("/favicon.ico/../../etc/passwd"), 404, 404),
    ("traversal-in-query", L("/?f=../../etc/passwd"), 200, 200),
    ("double-slash-root", L("//etc/passwd"), 404, 404),
    ("source-file", L("/gpuflow/transport/app.py"), 404, 404),
]

METHODS = [(f"{m.lower()}-{p.strip('/').replace('/', '-') or 'root'}",
            L(p, ("Content-Length", "0"), method=m), 405, 405)
           for m in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "PROPFIND")
           for p in ("/", "/api/stream", "/api/snapshot", "/metrics", "/healthz")]
METHODS += [
    ("options-star", L("*", method="OPTIONS"), 405, 405),
    ("options-preflight", L("/api/snapshot", ("Origin", "http://evil.com"),
                            ("Access-Control-Request-Method", "GET"), method="OPTIONS"), 405, 405),
    ("connect-loopback", H(LOCAL, "127.0.0.1:80", method="CONNECT"), 405, 405),
    ("trace-echo", L("/", ("X-Secret", ECHO), method="TRACE"), 405, 405),
    ("post-huge-body-never-sent", L("/api/snapshot", ("Content-Length", "100000000"),
                                    method="POST"), 405, 405),
    ("post-chunked-garbage", L("/api/snapshot", ("Transfer-Encoding", "chunked"), method="POST")
     + b"zz\r\n", 405, 405),
]

CASES = HOSTS + OVERSIZED + MALFORMED + QUERIES + PATHS + METHODS


def check_answer(r: Response, server, expected: int) -> None:
    assert r.status == expected, (r.status, r.reason, r.body[:300])
    for name, value in SECURITY.items():
        assert r.header(name) == value, (name, r.headers)
    assert "frame-ancestors 'none'" in (r.header("content-security-policy") or "")
    assert not any(k.startswith("access-control-") for k in r.headers), r.headers
    assert "Python" not in (r.header("server") or "")
    if r.status >= 400:
        text = r.body.decode("utf-8", "replace") + r.reason
        for leak in LEAKS:
            assert leak not in text, (leak, text[:300])
        assert ECHO not in text, text[:300]
        assert len(r.body) < 2048, len(r.body)
        assert (r.header("cache-control") or "") == "no-store"
    if r.status == 405:
        assert r.header("allow") == "GET, HEAD"


def check_still_healthy(server) -> None:
    r = one(server.port, L("/healthz"))
    assert r.status == 200, r.body
    body = json.loads(r.body)
    assert body["status"] == "ok"
    assert wait_for(lambda: json.loads(one(server.port, L("/healthz")).body)["streams"] == 0)
    assert server.proc.poll() is None


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_request_gets_a_clean_answer(server, case):
    name, data, on_gunicorn, on_embedded = case
    expected = on_gunicorn if server.kind == "gunicorn" else on_embedded
    t0 = time.monotonic()
    raw = exchange(server.port, data, timeout=5)
    assert time.monotonic() - t0 < 4, "the server waited for something it should not need"
    responses = parse_all(raw, head_only=data.startswith(b"HEAD"))
    assert len(responses) == 1, [(r.status, r.body[:80]) for r in responses]
    check_answer(responses[0], server, expected)
    assert b"root:x:0:0" not in raw
    check_still_healthy(server)


@pytest.mark.parametrize("host", ALLOWED_HOSTS)
def test_local_names_are_served(server, host):
    r = one(server.port, H(host))
    assert r.status == 200, (host, r.body)


def test_only_the_first_of_two_smuggled_requests_is_answered(server):
    """A GET with both Content-Length and chunked encoding hiding a second request."""
    hidden = L("/metrics", ("X-Smuggled", ECHO))
    body = b"0\r\n\r\n" + hidden
    data = request("GET", "/healthz", [("Host", LOCAL), ("Content-Length", str(len(body))),
                                       ("Transfer-Encoding", "chunked")]) + body
    responses = parse_all(exchange(server.port, data))
    assert len(responses) == 1
    assert responses[0].status == (400 if server.kind == "gunicorn" else 200)
    assert b"gpuflow_" not in responses[0].body
    check_still_healthy(server)


def test_http_1_0_is_answered_and_closed(server):
    r = one(server.port, H(LOCAL, version="HTTP/1.0"))  # one() also checks the close
    assert r.status == 200 and r.version == "1.0"
    assert json.loads(r.body)["status"] == "ok"


def test_pipelined_requests(server):
    """gunicorn answers pipelined requests in order; the embedded HTTP/1.0 server answers the
    first and closes. A foreign Host in the middle of a pipeline is still refused."""
    data = (request("GET", "/healthz", [("Host", LOCAL)])
            + request("GET", "/healthz", [("Host", "evil.com")])
            + request("GET", "/favicon.ico", [("Host", LOCAL)])
            + request("GET", "/nope", [("Host", LOCAL), ("Connection", "close")]))
    responses = parse_all(exchange(server.port, data))
    if server.kind == "gunicorn":
        assert [r.status for r in responses] == [200, 403, 204, 404]
    else:
        assert [r.status for r in responses] == [200]
    for r in responses:
        assert r.header("x-content-type-options") == "nosniff"
    check_still_healthy(server)


def test_keep_alive_connection_serves_several_requests(gunicorn_agent):
    import socket

    with socket.create_connection(("127.0.0.1", gunicorn_agent.port), timeout=5) as s:
        for _ in range(3):
            s.sendall(request("GET", "/healthz", [("Host", LOCAL)]))
            data = b""
            while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
                data += s.recv(4096)
            assert data.startswith(b"HTTP/1.1 200")


def test_a_connection_closed_mid_request_leaves_the_agent_healthy(server):
    import socket

    for cut in (5, 20, 40):
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
            s.sendall(L("/api/stream")[:cut])
    for _ in range(20):
        with socket.create_connection(("127.0.0.1", server.port), timeout=5):
            pass  # connect and close at once
    check_still_healthy(server)


def test_stream_and_snapshot_still_served_after_everything(server):
    r = one(server.port, L("/api/snapshot"))
    assert r.status == 200 and json.loads(r.body)["schema"] == 3
    head = one(server.port, L("/api/stream", method="HEAD"), head_only=True)
    assert head.status == 200 and head.header("content-type").startswith("text/event-stream")
