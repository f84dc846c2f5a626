"""The pieces the hardening added to gpuflow/transport, tested in-process and without servers.

Host patterns that would widen the allow-list by accident are refused at start-up; an
absolute-form request target is judged by the host it names; the servers' own error answers
echo nothing and carry the security headers; an exception inside a route is a bare 500 with the
same headers and no traceback; the gunicorn pieces behave on plain sockets.
"""

from __future__ import annotations

import logging
import socket
import sys
import time

import falcon.testing
import pytest

from gpuflow.transport.app import AppSettings, create_app
from gpuflow.transport.gunicorn_hardening import (
    StalledClientFilter, harden_worker, settle_close, write_error,
)
from gpuflow.transport.security import SECURITY_HEADERS, HostAllowList, plain_error
from snapshots import board_with, make_snapshot


@pytest.mark.parametrize("pattern", ["*.", "*..", "*.example.com:8080", "*.*.example.com",
                                     "*.[::1]", "*.a/b", "*.user@example.com", "*. example"])
def test_host_patterns_that_would_match_too_much_or_nothing_are_refused(pattern):
    with pytest.raises(ValueError, match="not a host pattern"):
        HostAllowList([pattern])
    with pytest.raises(ValueError):
        AppSettings(allow_hosts=(pattern,))


def test_suffix_pattern_still_matches_only_below_the_domain():
    hosts = HostAllowList(["*.lab.example."])
    assert hosts.allows("gpu1.lab.example:7717") and hosts.allows("a.b.lab.example")
    assert not hosts.allows("lab.example") and not hosts.allows("evil-lab.example")
    assert not hosts.allows("lab.example.evil.com")


@pytest.mark.parametrize("target,ok", [
    ("/api/snapshot", True), ("*", True), ("//evil.com/x", True),  # origin form: routed, 404
    ("http://127.0.0.1/api/snapshot", True), ("http://localhost:7717/", True),
    ("http://[::1]:7717/healthz", True),
    ("http://evil.com/api/snapshot", False), ("https://evil.com/", False),
    ("http://evil.com@127.0.0.1/", False), ("http:/nohost", False), ("http://", False),
    ("http://[::1/", False),
])
def test_absolute_form_targets_are_judged_by_their_host(target, ok):
    assert HostAllowList().allows_target({"RAW_URI": target}) is ok


def test_plain_error_echoes_nothing_and_carries_the_headers():
    raw = plain_error(431, "Request Header Fields Too Large", "HTTP/1.0",
                      extra=[("Retry-After", "5")])
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 431 Request Header Fields Too Large\r\n")
    assert body == b"431 Request Header Fields Too Large\n"
    for name, value in SECURITY_HEADERS:
        assert f"\r\n{name}: {value}".encode() in head
    assert b"Content-Length: 36" in head and b"Connection: close" in head
    assert plain_error(400, "Bad Request", body=False).endswith(b"\r\n\r\n")


def test_an_exception_in_a_route_is_a_bare_500_with_the_security_headers(caplog):
    app = create_app(board_with(make_snapshot(1)))

    class Broken:
        def on_get(self, req, resp):
            raise RuntimeError("secret internal detail /etc/gpuflow/x.py")

    app.add_route("/broken", Broken())
    with caplog.at_level(logging.ERROR):
        r = falcon.testing.TestClient(app).simulate_get("/broken", headers={"Host": "127.0.0.1"})
    assert r.status_code == 500
    assert "secret" not in r.text and "Traceback" not in r.text and ".py" not in r.text
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["cache-control"] == "no-store"


def test_not_built_page_names_no_directory(tmp_path):
    app = create_app(board_with(make_snapshot(1)),
                     settings=AppSettings(ui_path=str(tmp_path / "deep" / "ui.html")))
    r = falcon.testing.TestClient(app).simulate_get("/", headers={"Host": "127.0.0.1"})
    assert r.status_code == 200 and "ui.html" in r.text
    assert str(tmp_path) not in r.text


def test_bad_accept_on_metrics_falls_back_to_text():
    app = create_app(board_with(make_snapshot(1)))
    r = falcon.testing.TestClient(app).simulate_get(
        "/metrics", headers={"Host": "127.0.0.1",
                             "Accept": "application/openmetrics-text; version=x.y"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    assert "gpuflow_snapshot_seq" in r.text


def test_gunicorn_error_writer_sends_no_message():
    a, b = socket.socketpair()
    with a, b:
        write_error(a, 400, "Bad Request", "Invalid request line 'GET /<script>'")
        data = b.recv(4096)
    assert data.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert b"script" not in data and b"Invalid" not in data
    assert b"X-Content-Type-Options: nosniff" in data


def test_settle_close_returns_at_once_when_the_peer_closes_and_bounded_when_it_stalls():
    a, b = socket.socketpair()
    with a, b:
        b.close()
        t0 = time.monotonic()
        settle_close(a, linger_s=3.0)
        assert time.monotonic() - t0 < 1.0   # at once, not after the linger (a loaded machine's slack)
    a, b = socket.socketpair()
    with a, b:
        t0 = time.monotonic()
        settle_close(a, linger_s=0.3)  # the peer never closes
        assert 0.25 < time.monotonic() - t0 < 1.0
        assert b.recv(10) == b""  # it saw our FIN
        assert a.recv(10) == b""  # and a read on ours no longer waits


def test_stall_log_record_becomes_one_info_line():
    f = StalledClientFilter()
    for exc in (BlockingIOError(11, "Resource temporarily unavailable"), TimeoutError("timed out")):
        try:
            raise exc
        except OSError:
            record = logging.LogRecord("gunicorn.error", logging.ERROR, __file__, 1,
                                       "Socket error processing request.", (), sys.exc_info())
        assert f.filter(record) and record.levelno == logging.INFO and record.exc_info is None
    other = logging.LogRecord("gunicorn.error", logging.ERROR, __file__, 1, "something else", (),
                              None)
    assert f.filter(other) and other.levelno == logging.ERROR


def test_accept_out_of_descriptors_makes_room_and_pauses_instead_of_ending_the_worker():
    import errno

    from gpuflow.transport import gunicorn_hardening as gh

    class Reader:
        rooms = 0

        def make_room(self):
            self.rooms += 1

    class Log:
        warnings: list = []

        def warning(self, *a):
            self.warnings.append(a)

    failures = [OSError(errno.EMFILE, "Too many open files"), OSError(errno.ENFILE, "x"),
                OSError(errno.ENOBUFS, "x"), OSError(errno.ENOMEM, "x"), OSError(errno.EBADF, "x")]

    class Worker:
        log = Log()
        accepted = 0

        def accept(self, listener):   # gthread lets all but EAGAIN/ECONNABORTED out: the worker ends
            if failures:
                raise failures.pop(0)
            self.accepted += 1

    worker, reader = Worker(), Reader()
    gh._guard_accept(worker, reader)
    t = time.monotonic()
    for _ in range(4):
        worker.accept("listener")
    assert reader.rooms == 4 and time.monotonic() - t >= 4 * gh.ACCEPT_BACKOFF_S * 0.9
    assert len(Log.warnings) == 1          # one line per 10 s, not one per failure
    with pytest.raises(OSError):           # anything else is gthread's to handle, as before
        worker.accept("listener")
    worker.accept("listener")
    assert worker.accepted == 1
    accept = worker.accept
    gh._guard_accept(worker, reader)       # idempotent
    assert worker.accept is accept


def test_harden_worker_outside_gunicorn_is_harmless():
    class NotAWorker:
        handle = None

    w = NotAWorker()
    harden_worker(w, 1.0)
    harden_worker(w, 1.0)
    assert w.handle is None


def test_settings_reject_a_send_buffer_too_small_to_hold_a_frame():
    with pytest.raises(ValueError):
        AppSettings(send_buffer_bytes=100)
    with pytest.raises(ValueError):
        AppSettings(header_timeout_s=0)


