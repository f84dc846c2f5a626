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
"""

from __future__ import annotations

import time

import pytest

from conn_crowd import Crowd, StreamWatch, timed_get

from .conftest import TOKEN, proc_status, start_embedded, start_gunicorn, stop_embedded

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
