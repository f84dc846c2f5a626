"""The request-head reader both servers put in front of their threads (gpuflow/transport/heads.py),
on real sockets: where a head ends, one deadline for the whole head however it trickles, the
oldest waiting connection closed for a new one, oversized heads refused, bytes already read
handed over, and nothing left behind when it stops."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from gpuflow.transport.heads import Head, HeadReader, head_state

GET = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


@pytest.mark.parametrize("data,state", [
    (GET, Head.COMPLETE),
    (b"GET / HTTP/1.1\nHost: x\n\n", Head.COMPLETE),  # bare LF: the parser decides, not us
    (b"GET / HTTP/1.1\r\nHost: x\n\r\n", Head.COMPLETE),
    (b"GET /healthz\r\n\r\n", Head.COMPLETE),  # HTTP/0.9: the server refuses it, not us
    (GET + b"body and a second request", Head.COMPLETE),
    (b"GET / HTTP/1.1\r\nHost: x\r\n", None),
    (b"GET / HTTP/1.1\r\n", None),
    (b"", None),
    (b"G" * 100, Head.LINE_TOO_LONG),
    (b"GET / HTTP/1.1\r\nX: " + b"a" * 100, Head.TOO_LARGE),
])
def test_head_state(data, state):
    assert head_state(data, 0, 100) is state


def test_an_end_split_across_reads_is_found_from_where_the_new_bytes_start():
    buf = b"GET / HTTP/1.1\r\nHost: x\r\n\r"
    assert head_state(buf, 0, 1000) is None
    assert head_state(buf + b"\n", len(buf), 1000) is Head.COMPLETE


class Recorder:
    def __init__(self) -> None:
        self.heads: list[tuple[object, bytes, Head]] = []
        self.drops: list[tuple[object, str, float]] = []
        self.event = threading.Event()

    def on_head(self, sock, token, data, state):
        self.heads.append((token, data, state))
        sock.close()
        self.event.set()

    def on_drop(self, sock, token, why):
        self.drops.append((token, why, time.monotonic()))
        sock.close()
        self.event.set()


@pytest.fixture
def reader():
    made = []

    def make(**kwargs):
        rec = Recorder()
        r = HeadReader(on_head=rec.on_head, on_drop=rec.on_drop,
                       **{"deadline_s": 5.0, **kwargs})
        r.start()
        made.append(r)
        return r, rec

    yield make
    for r in made:
        r.stop()


def pair() -> tuple[socket.socket, socket.socket]:
    return socket.socketpair()


def wait(predicate, timeout=3.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def test_a_head_in_pieces_is_handed_over_whole_with_what_came_after_it(reader):
    r, rec = reader()
    ours, theirs = pair()
    r.add(ours, "a")
    for piece in (b"GET /healthz HT", b"TP/1.1\r\nHost: 127.0.0.1\r\n", b"\r\nBODY"):
        theirs.sendall(piece)
        time.sleep(0.05)
    assert wait(lambda: rec.heads)
    assert rec.heads == [("a", GET + b"BODY", Head.COMPLETE)] and not rec.drops
    theirs.close()


def test_one_deadline_for_the_whole_head_however_it_trickles(reader):
    r, rec = reader(deadline_s=0.6)
    ours, theirs = pair()
    t0 = time.monotonic()
    r.add(ours, "slow")
    for byte in b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n":  # a byte every 50 ms, never silent long
        try:
            theirs.send(bytes([byte]))
        except OSError:
            break
        if rec.drops:
            break
        time.sleep(0.05)
    assert wait(lambda: rec.drops)
    (token, why, at), = rec.drops
    assert (token, why) == ("slow", "deadline") and 0.55 < at - t0 < 1.0
    assert not rec.heads and r.expired == 1 and r.pending == 0
    theirs.close()


def test_a_silent_connection_is_dropped_at_the_deadline_and_costs_no_thread(reader):
    before = threading.active_count()
    r, rec = reader(deadline_s=0.3)
    socks = [pair() for _ in range(50)]
    for i, (ours, _) in enumerate(socks):
        r.add(ours, i)
    assert wait(lambda: r.pending == 50)
    assert threading.active_count() - before == 1  # the reader's own thread
    assert wait(lambda: len(rec.drops) == 50)
    assert {why for _, why, _ in rec.drops} == {"deadline"}
    for _, theirs in socks:
        theirs.close()


def test_the_oldest_waiting_connection_makes_room_for_a_new_one(reader):
    r, rec = reader(max_pending=3)
    socks = [pair() for _ in range(5)]
    for i, (ours, _) in enumerate(socks):
        r.add(ours, i)
        assert wait(lambda: r.pending == min(i + 1, 3) and len(rec.drops) == max(0, i - 2))
    assert [(t, why) for t, why, _ in rec.drops] == [(0, "evicted"), (1, "evicted")]
    assert r.evicted == 2
    socks[4][1].sendall(GET)  # the newest is still read
    assert wait(lambda: rec.heads)
    assert rec.heads[0][0] == 4
    for _, theirs in socks:
        theirs.close()


def test_make_room_closes_the_oldest_waiting_connection_from_any_thread(reader):
    # what gunicorn's accept() asks for when it ran out of descriptors (gunicorn_hardening)
    r, rec = reader(max_pending=8)
    socks = [pair() for _ in range(3)]
    for i, (ours, _) in enumerate(socks):
        r.add(ours, i)
    assert wait(lambda: r.pending == 3)
    threading.Thread(target=r.make_room).start()
    assert wait(lambda: rec.drops)
    assert [(t, why) for t, why, _ in rec.drops] == [(0, "evicted")] and r.pending == 2 and r.evicted == 1
    time.sleep(0.3)
    assert r.pending == 2     # once per ask
    for _, theirs in socks:
        theirs.close()


def test_the_oldest_is_read_before_it_is_evicted_and_kept_if_its_head_has_come():
    """A client's head may arrive while the loop is busy accepting a crowd; when its connection
    is the oldest, the loop reads it before closing it, and hands a whole head over. The loop's
    steps are called here in this thread, so the head is there and unread when room is made."""
    rec = Recorder()
    r = HeadReader(on_head=rec.on_head, on_drop=rec.on_drop, deadline_s=5.0, max_pending=1)
    (a, a_peer), (b, b_peer), (c, c_peer) = pair(), pair(), pair()
    try:
        r.add(a, "a")
        r._take_inbox()
        assert r.pending == 1 and not rec.heads
        a_peer.sendall(GET)           # arrives, unread
        r.add(b, "b")
        r._take_inbox()               # room for b: a is read, and handed over
        assert rec.heads == [("a", GET, Head.COMPLETE)] and not rec.drops and r.evicted == 0
        b_peer.sendall(b"GET / HT")   # part of a head: still waiting when c comes
        r.add(c, "c")
        r._take_inbox()
        assert [(t, why) for t, why, _ in rec.drops] == [("b", "evicted")] and r.evicted == 1
        assert r.pending == 1
    finally:
        r.stop()
        for s in (a_peer, b_peer, c_peer):
            s.close()


@pytest.mark.parametrize("data,state", [(b"A" * 5000, Head.LINE_TOO_LONG),
                                        (b"GET / HTTP/1.1\r\nX: " + b"a" * 5000, Head.TOO_LARGE)])
def test_an_oversized_head_is_handed_over_as_refused(reader, data, state):
    r, rec = reader(max_head_bytes=4096)
    ours, theirs = pair()
    r.add(ours, "big")
    theirs.sendall(data)
    assert wait(lambda: rec.heads)
    token, got, verdict = rec.heads[0]
    assert verdict is state and len(got) >= 4096
    theirs.close()


def test_bytes_already_read_count_and_a_whole_head_among_them_is_handed_over_at_once(reader):
    r, rec = reader()
    ours, theirs = pair()
    r.add(ours, "pipelined", seed=GET + b"GET /next")
    assert wait(lambda: rec.heads)
    assert rec.heads == [("pipelined", GET + b"GET /next", Head.COMPLETE)]
    ours2, theirs2 = pair()
    r.add(ours2, "partial", seed=b"GET / HTTP/1.1\r\n")
    theirs2.sendall(b"Host: x\r\n\r\n")
    assert wait(lambda: len(rec.heads) == 2)
    assert rec.heads[1] == ("partial", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", Head.COMPLETE)
    theirs.close()
    theirs2.close()


def test_a_peer_that_closes_is_dropped(reader):
    r, rec = reader()
    ours, theirs = pair()
    r.add(ours, "gone")
    theirs.sendall(b"GET / HT")
    theirs.close()
    assert wait(lambda: rec.drops)
    assert [(t, why) for t, why, _ in rec.drops] == [("gone", "closed")]


def test_stop_drops_what_is_pending_and_what_comes_after(reader):
    r, rec = reader()
    socks = [pair() for _ in range(3)]
    for i, (ours, _) in enumerate(socks[:2]):
        r.add(ours, i)
    assert wait(lambda: r.pending == 2)
    r.stop()
    assert sorted((t, why) for t, why, _ in rec.drops) == [(0, "stopping"), (1, "stopping")]
    r.add(socks[2][0], 2)
    assert (2, "stopping") in [(t, why) for t, why, _ in rec.drops]
    r.stop()  # idempotent
    for _, theirs in socks:
        assert theirs.recv(1) == b""
        theirs.close()


def test_stopping_callback_ends_the_loop():
    flag = threading.Event()
    rec = Recorder()
    r = HeadReader(deadline_s=5.0, on_head=rec.on_head, on_drop=rec.on_drop,
                   stopping=flag.is_set)
    thread = r.start()
    ours, theirs = pair()
    r.add(ours, "x")
    assert wait(lambda: r.pending == 1)
    flag.set()
    thread.join(2)
    assert not thread.is_alive() and r.closed
    assert [(t, why) for t, why, _ in rec.drops] == [("x", "stopping")]
    theirs.close()


def test_without_on_drop_the_reader_closes_what_it_drops():
    r = HeadReader(deadline_s=0.2, on_head=lambda *a: None)
    r.start()
    ours, theirs = pair()
    r.add(ours, "x")
    theirs.settimeout(3)
    t0 = time.monotonic()
    assert theirs.recv(1) == b""
    assert time.monotonic() - t0 < 1.5
    r.stop()
    theirs.close()


def test_bad_limits_are_refused():
    for kwargs in ({"max_pending": 0}, {"max_head_bytes": 10}, {"deadline_s": 0}):
        with pytest.raises(ValueError):
            HeadReader(on_head=lambda *a: None, **{"deadline_s": 1.0, **kwargs})
