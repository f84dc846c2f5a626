"""Slow and stalled clients against both servers: nothing they do may stop the agent answering.

* A client that sends half a request head and stalls is dropped after ``header_timeout_s``
  (gunicorn: SO_RCVTIMEO on the listener; embedded: the head's socket timeout), even when there
  are more of them than the server has threads.
* A client that opens the stream and never reads is dropped once its (bounded) send buffer has
  been full for ``send_timeout_s``, and its stream slot comes back.
* Dropping many of them at once does not stall gunicorn's main thread (its graceful close
  lingers in the pool thread instead).
* The embedded server reads request heads without a thread (a stalled head holds none), serves
  at most ``max_connections`` requests at once and answers the next one 503 with Retry-After;
  its thread count stays bounded.
"""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from gpuflow.core.board import SnapshotBoard
from gpuflow.transport.app import AppSettings, create_app
from gpuflow.transport.server import EmbeddedServer
from snapshots import make_snapshot

from .conftest import proc_status, start_gunicorn
from .rawhttp import get, one, wait_for

HALF = b"GET /api/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"


def half_requests(port: int, n: int) -> list[socket.socket]:
    out = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(HALF)
        out.append(s)
    return out


def never_readers(port: int, n: int) -> list[socket.socket]:
    out = []
    for _ in range(n):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(30)
        s.connect(("127.0.0.1", port))
        s.sendall(HALF + b"\r\n")
        out.append(s)
    return out


def closed_by_server(s: socket.socket, timeout: float) -> float | None:
    """Seconds until the server closed a connection that never got an answer (None: it did not)."""
    t0 = time.monotonic()
    s.settimeout(timeout)
    try:
        data = s.recv(1)
    except TimeoutError:
        return None
    except ConnectionResetError:
        data = b""
    return time.monotonic() - t0 if not data else None


def healthz_seconds(port: int) -> float:
    t0 = time.monotonic()
    r = one(port, get("/healthz", "127.0.0.1"), timeout=20)
    assert r.status == 200
    return time.monotonic() - t0


def streams(port: int) -> int:
    return json.loads(one(port, get("/healthz", "127.0.0.1")).body)["streams"]


@pytest.fixture(scope="module")
def tight_gunicorn():
    """The documented command with short timeouts and the stream cap sized to --threads 64."""
    agent, g = start_gunicorn(env={"GPUFLOW_HEADER_TIMEOUT_S": "1", "GPUFLOW_SEND_TIMEOUT_S": "1",
                                   "GPUFLOW_SEND_BUFFER_BYTES": "16384",
                                   "GPUFLOW_MAX_STREAMS": "60", "GPUFLOW_FAKE_RATE_HZ": "20",
                                   "GPUFLOW_FAKE_LANES": "8", "GPUFLOW_FAKE_SPANS": "16"})
    yield agent
    g.stop()


def test_gunicorn_more_stalled_heads_than_threads_do_not_stop_it(tight_gunicorn):
    port = tight_gunicorn.port
    socks = half_requests(port, 80)  # --threads 64
    try:
        assert healthz_seconds(port) < 1 + 2 + 1.5  # header timeout + the pool thread's linger
        waits = [closed_by_server(s, 10) for s in socks]
        assert all(w is not None for w in waits), waits
    finally:
        for s in socks:
            s.close()
    assert healthz_seconds(port) < 0.5
    threads = int(proc_status(tight_gunicorn.serving_pid)["Threads"])
    assert threads <= 64 + 16, threads  # the pool never grows past --threads


def test_gunicorn_never_reading_streams_are_dropped_without_stalling_the_worker(tight_gunicorn):
    port = tight_gunicorn.port
    assert wait_for(lambda: streams(port) == 0, 10)
    socks = never_readers(port, 30)
    try:
        assert wait_for(lambda: streams(port) == 30, 5)
        latencies = []
        # 16 KiB buffer (32 KiB in the kernel) at the fake's ~0.2 MB/s: full in well under 1 s
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and streams(port) > 0:
            latencies.append(healthz_seconds(port))
            time.sleep(0.2)
        assert streams(port) == 0, "never-reading streams still hold their slots"
        assert max(latencies) < 1.0, latencies  # dropping 30 at once: no 2 s linger each
    finally:
        for s in socks:
            s.close()
    assert tight_gunicorn.healthy()


@pytest.fixture
def embedded():
    board = SnapshotBoard()
    board.publish(make_snapshot(1))
    app = create_app(board, settings=AppSettings(max_streams=4, header_timeout_s=1.0,
                                               send_timeout_s=1.0, send_buffer_bytes=8192))
    server = EmbeddedServer(app, "127.0.0.1", 0, max_connections=12)
    server.serve_in_thread()
    stop = threading.Event()

    def publish():  # a new snapshot every 20 ms keeps the never-readers' buffers filling
        seq = 2
        while not stop.wait(0.02):
            board.publish(make_snapshot(seq))
            seq += 1

    t = threading.Thread(target=publish, daemon=True)
    t.start()
    yield server
    stop.set()
    t.join()
    server.shutdown()


def test_embedded_stalled_heads_hold_no_thread_and_are_dropped(embedded):
    port = embedded.port
    socks = half_requests(port, 12)  # as many as max_connections: none of them takes one
    try:
        assert wait_for(lambda: embedded.pending_connections == 12, 3)
        assert embedded.active_connections == 0
        assert one(port, get("/healthz", "127.0.0.1")).status == 200
        waits = [closed_by_server(s, 5) for s in socks]
        assert all(w is not None and w < 3 for w in waits), waits
    finally:
        for s in socks:
            s.close()
    assert wait_for(lambda: embedded.pending_connections == 0, 3)
    assert one(port, get("/healthz", "127.0.0.1")).status == 200


def test_embedded_requests_in_progress_are_capped_with_503():
    board = SnapshotBoard()
    board.publish(make_snapshot(1))
    app = create_app(board, settings=AppSettings(max_streams=4, header_timeout_s=1.0))
    server = EmbeddedServer(app, "127.0.0.1", 0, max_connections=4)
    server.serve_in_thread()
    streams = []
    try:
        for _ in range(4):  # four open streams: four requests in progress
            s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            s.sendall(HALF + b"\r\n")
            assert s.recv(4096).startswith(b"HTTP/1.0 200 ")
            streams.append(s)
        assert server.active_connections == 4
        extra = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        extra.sendall(get("/healthz", "127.0.0.1"))
        head = extra.recv(4096)
        extra.close()
        assert head.startswith(b"HTTP/1.0 503 ")
        assert b"\r\nRetry-After: 5\r\n" in head and b"nosniff" in head
    finally:
        for s in streams:
            s.close()
        server.shutdown()
    assert server.active_connections == 0


def test_embedded_never_readers_are_dropped_and_the_cap_answers_503(embedded):
    port = embedded.port
    socks = never_readers(port, 4)  # max_streams=4
    try:
        assert wait_for(lambda: streams(port) == 4, 3)
        r = one(port, get("/api/stream", "127.0.0.1"))
        assert r.status == 503 and r.header("retry-after") == "5"
        assert wait_for(lambda: streams(port) == 0, 10), "never-readers not dropped"
    finally:
        for s in socks:
            s.close()
    assert wait_for(lambda: embedded.active_connections == 0, 3)


def test_embedded_thread_count_stays_bounded(embedded):
    before = threading.active_count()
    socks = half_requests(embedded.port, 40)  # 28 over max_connections
    try:
        time.sleep(0.3)
        assert embedded.active_connections <= embedded.max_connections
        assert threading.active_count() - before <= embedded.max_connections
    finally:
        for s in socks:
            s.close()
