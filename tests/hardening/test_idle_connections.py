"""Idle connections against both real servers: a crowd that connects and sends nothing, or
trickles a request head a byte at a time, must not keep a well-behaved client on the same
address (127.0.0.1) from the page, /healthz and its open stream.

* ~120 (here 128) silent connections, against the session's agents (default settings), with and without a
  token: before the fix the embedded server answered 503 to everything for ten seconds at a time
  (its connection cap was full), gunicorn made each new request wait seconds behind them (a
  pool thread waited up to 5 s on each).
* 1,000 connections, half silent, half trickling a byte a second (never silent long enough for
  a per-silence timeout), held for longer than the request-head deadline so that the servers
  drop them and the crowd opens them again: the page and /healthz keep answering at once, the
  stream keeps its frame rate, and the agent's thread count does not follow the crowd.
* More idle connections than may wait, and a descriptor limit far below the crowd: the oldest
  waiting ones are closed to make room, nothing fails with EMFILE, the good client is served.
* gunicorn keeps a connection alive between requests: a client whose next request trickles
  (or trickles behind a pipelined one) holds no pool thread either.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import time

import pytest

from cli_process import gpuflow_env
from conn_crowd import Crowd, StreamWatch, timed_get
from gpuflow.core.board import SnapshotBoard
from gpuflow.transport.app import AppSettings, create_app
from gpuflow.transport.server import EmbeddedServer
from servers import FAKE_ENV, ROOT, free_port, wait_listening
from snapshots import make_snapshot

from .conftest import TOKEN, proc_status, start_embedded, start_gunicorn, stop_embedded
from .rawhttp import get

pytestmark = pytest.mark.serial   # times a run: alone, after the parallel pass

ANSWER_S = 1.0  # an unloaded agent answers / and /healthz in milliseconds


def served_throughout(port: int, seconds: float, paths: list[str], headers: str = "",
                      every: float = 0.25) -> list[tuple[str, int | None, float]]:
    """GET each path in turn for ``seconds``; every answer that was not a quick 200."""
    bad = []
    deadline = time.monotonic() + seconds
    for path in iter(lambda: paths[0], None):
        if time.monotonic() >= deadline:
            break
        paths.append(paths.pop(0))
        status, took = timed_get(port, path, timeout=5.0, headers=headers)
        if status != 200 or took > ANSWER_S:
            bad.append((path, status, round(took, 2)))
        time.sleep(every)
    return bad


def test_128_silent_connections_leave_the_page_and_healthz_answered(server):
    crowd = Crowd(server.port, silent=128).start_and_wait()
    try:
        time.sleep(0.5)
        bad = served_throughout(server.port, 6.0, ["/", "/healthz"])
    finally:
        crowd.stop()
    assert not bad, f"{server.kind}: answers that were not a quick 200: {bad} ({crowd.summary()})"
    assert server.healthy()


def test_128_silent_connections_do_not_lock_out_an_agent_with_a_token(token_server):
    crowd = Crowd(token_server.port, silent=128).start_and_wait()
    try:
        time.sleep(0.5)
        bad = served_throughout(token_server.port, 4.0, ["/healthz", "/api/snapshot"],
                                headers=f"Authorization: Bearer {TOKEN}\r\n")
    finally:
        crowd.stop()
    assert not bad, f"{token_server.kind}: {bad} ({crowd.summary()})"


@pytest.fixture(params=["gunicorn", "embedded"])
def fresh_agent(request):
    """An agent of its own (the crowd churns hundreds of connections through it)."""
    if request.param == "gunicorn":
        agent, g = start_gunicorn()
        yield agent
        g.stop()
    else:
        agent = start_embedded()
        yield agent
        stop_embedded(agent)


def test_a_thousand_silent_and_trickling_connections_leave_the_good_client_served(fresh_agent):
    port = fresh_agent.port
    assert timed_get(port, "/healthz")[0] == 200  # agent started, first snapshot taken
    stream = StreamWatch(port)
    stream.start()
    time.sleep(1.0)
    threads_before = int(proc_status(fresh_agent.serving_pid)["Threads"])
    crowd = Crowd(port, silent=500, trickling=500, trickle_s=1.0).start_and_wait()
    threads = []
    try:
        t0 = time.monotonic()
        # past the 10 s request-head deadline: the crowd is dropped and comes back meanwhile
        bad = []
        while time.monotonic() - t0 < 13.0:
            bad += served_throughout(port, 1.0, ["/", "/healthz"])
            threads.append(int(proc_status(fresh_agent.serving_pid)["Threads"]))
        t1 = time.monotonic()
        open_at_end = crowd.open_now
    finally:
        crowd.stop()
    frames, gap = stream.frames_between(t0, t1), stream.longest_gap(t0, t1)
    stream.close()
    kind = fresh_agent.kind
    assert open_at_end >= 900, f"{kind}: the crowd did not hold its connections ({crowd.summary()})"
    assert not bad, f"{kind}: answers that were not a quick 200: {bad[:12]} ({crowd.summary()})"
    assert stream.error is None, stream.error
    assert frames >= 0.8 * 10 * (t1 - t0) and gap < 1.5, (kind, frames, gap)  # the fake: 10/s
    assert max(threads) - threads_before < 100, (kind, threads_before, threads)
    assert fresh_agent.healthy()


def test_more_idle_connections_than_may_wait_the_oldest_make_room():
    board = SnapshotBoard()
    board.publish(make_snapshot(1))
    app = create_app(board, settings=AppSettings(header_timeout_s=30.0))
    server = EmbeddedServer(app, "127.0.0.1", 0, max_pending=64)
    server.serve_in_thread()
    crowd = Crowd(server.port, silent=300, reconnect_s=0.2).start_and_wait()
    try:
        time.sleep(0.5)
        bad = served_throughout(server.port, 3.0, ["/healthz", "/"])
        waiting = server.pending_connections
    finally:
        crowd.stop()
        server.shutdown()
    assert not bad, (bad, crowd.summary())
    assert waiting <= 64 and crowd.closed_silently >= 236, (waiting, crowd.summary())


def _limited_agent(kind: str, nofile: int) -> tuple[subprocess.Popen, int, int]:
    """An agent started under RLIMIT_NOFILE = ``nofile`` (soft and hard): (process, port, serving pid)."""
    env = gpuflow_env(**FAKE_ENV, GPUFLOW_FAKE_RATE_HZ="10",
                      PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    port = free_port()
    if kind == "gunicorn":
        cmd = [sys.executable, "-m", "gunicorn", "gpuflow.transport.app:get_app()", "-k",
               "gthread", "--workers", "1", "--threads", "64", "-c",
               "python:gpuflow.transport.gunicorn_conf", "--no-control-socket", "--log-level",
               "warning", "-b", f"127.0.0.1:{port}"]
    else:
        cmd = [sys.executable, "-m", "gpuflow", "watch", "--port", str(port), "--plugin",
               "gpuflow.testing.fake_collector"]
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE,
                                                                  (nofile, nofile)))
    wait_listening(port, proc)
    pid = proc.pid
    if kind == "gunicorn":
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (kids := open(
                f"/proc/{proc.pid}/task/{proc.pid}/children").read().split()):
            time.sleep(0.05)
        pid = int(kids[0])
    return proc, port, pid


@pytest.mark.parametrize("kind", ["gunicorn", "embedded"])
def test_a_crowd_beyond_the_descriptor_limit_fails_nothing(kind):
    proc, port, pid = _limited_agent(kind, 400)
    crowd = None
    try:
        assert timed_get(port, "/healthz")[0] == 200
        crowd = Crowd(port, silent=1000, reconnect_s=0.5).start_and_wait()
        time.sleep(0.5)
        bad = served_throughout(port, 4.0, ["/healthz", "/"])
        # the process that serves is the one that started (a gunicorn worker that died of EMFILE in
        # accept() was replaced by its arbiter, its connections lost)
        alive = proc.poll() is None and os.path.isdir(f"/proc/{pid}/fd")
        fds = len(os.listdir(f"/proc/{pid}/fd")) if alive else -1
    finally:
        if crowd is not None:
            crowd.stop()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert alive, f"{kind}: the agent died under the crowd"
    assert not bad, (kind, bad, crowd.summary())
    assert fds < 400, (kind, fds)


def _kept_alive(port: int, pipelined_tail: bytes = b"") -> socket.socket:
    """A connection that got one keep-alive answer and then sends ``pipelined_tail``."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(get("/healthz", "127.0.0.1", close=False) + pipelined_tail)
    data = b""
    while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
        data += s.recv(65536)
    assert data.startswith(b"HTTP/1.1 200 ") and b"close" not in data.lower().split(b"\r\n\r\n")[0]
    return s


def test_gunicorn_a_trickled_request_after_a_kept_alive_one_holds_no_thread(gunicorn_agent):
    port = gunicorn_agent.port
    socks = [_kept_alive(port) for _ in range(40)]
    socks += [_kept_alive(port, pipelined_tail=b"GET /healthz HT") for _ in range(40)]
    try:
        for _ in range(8):  # 80 trickling next requests on 64 threads, a byte every 0.5 s
            for s in socks:
                s.send(b"T")
            status, took = timed_get(port, "/healthz")
            assert status == 200 and took < ANSWER_S, (status, took)
            time.sleep(0.5)
    finally:
        for s in socks:
            s.close()
    assert gunicorn_agent.healthy()
