"""/api/stream in-process: framing, full/delta choice per client, pings, age, shutdown, the cap.

The WSGI app is called directly and its body iterated chunk by chunk (``simulate_get`` would join
an endless body), the way a server does it.
"""

from __future__ import annotations

import json
import threading
import time

from falcon import testing

from gpuflow.core.board import SnapshotBoard
from gpuflow.transport.app import AppSettings, create_app
from gpuflow.transport.wire import StreamReader
from snapshots import board_with, lane, make_snapshot


class Stream:
    def __init__(self, app, headers=None):
        env = testing.create_environ(path="/api/stream",
                                     headers={"Host": "127.0.0.1:7717", **(headers or {})})
        self.start = testing.StartResponseMock()
        self.body = app(env, self.start)
        self.status = self.start.status
        self.headers = dict(self.start.headers)

    def next(self, timeout: float = 3.0) -> bytes:
        out: list = []
        t = threading.Thread(target=lambda: out.append(next(self.body, None)), daemon=True)
        t.start()
        t.join(timeout)
        assert out, "no chunk in time"
        return out[0]

    def close(self):
        self.body.close()


def parse(chunk: bytes) -> dict:
    assert chunk.endswith(b"\n\n") and chunk.count(b"\n\n") == 1, chunk[:200]
    fields = {}
    for line in chunk.decode().split("\n")[:-2]:
        name, _, value = line.partition(": ")
        fields[name] = value
    if "data" in fields:
        fields["json"] = json.loads(fields["data"])
    return fields


def app_for(board, **kw):
    kw.setdefault("poll_s", 0.05)
    return create_app(board, settings=AppSettings(**kw))


def test_headers_and_first_chunk_is_retry_plus_full_frame():
    app = app_for(board_with(make_snapshot(seq=4)))
    s = Stream(app)
    assert s.status == "200 OK"
    assert s.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert s.headers["cache-control"] == "no-cache"
    assert s.headers["x-accel-buffering"] == "no"
    assert "connection" not in {k.lower() for k in s.headers}
    first = parse(s.next())
    assert first["retry"] == "2000"
    assert first["id"] == f"{app.state.frames.boot_epoch}-4" and first["event"] == "snapshot"
    assert first["json"]["frame"] == "full" and first["json"]["seq"] == 4
    s.close()


def test_new_snapshots_arrive_as_deltas_against_what_this_client_received():
    board = board_with(make_snapshot(seq=1, lanes=(lane(13, [1, 2]),)))
    app = app_for(board)
    s = Stream(app)
    assert parse(s.next())["json"]["frame"] == "full"
    board.publish(make_snapshot(seq=2, lanes=(lane(13, [1, 2, 3]),)))
    ev = parse(s.next())
    assert "retry" not in ev
    assert ev["json"]["frame"] == "delta" and ev["json"]["base_seq"] == 1
    assert [sp[0] for sp in ev["json"]["traced"][0]["lanes"][0]["spans"]] == [3]  # first: absolute
    s.close()


def test_a_client_that_missed_the_base_gets_a_full_frame():
    board = board_with(make_snapshot(seq=1, lanes=(lane(13, [1]),)))
    app = app_for(board)
    slow, fast = Stream(app), Stream(app)
    slow.next(), fast.next()
    board.publish(make_snapshot(seq=2, lanes=(lane(13, [1, 2]),)))
    assert parse(fast.next())["json"]["frame"] == "delta"  # fast encodes 2 (base 1)
    board.publish(make_snapshot(seq=3, lanes=(lane(13, [1, 2, 3]),)))
    f3 = parse(fast.next())["json"]  # encodes 3 (base 2)
    assert f3["frame"] == "delta" and f3["base_seq"] == 2
    late = parse(slow.next())["json"]  # slow received 1, never 2: must get full 3
    assert late["frame"] == "full" and late["seq"] == 3
    plain = StreamReader().read(late)
    assert [sp["seq"] for sp in plain["traced"][0]["lanes"][0]["spans"]] == [1, 2, 3]
    slow.close(), fast.close()


def test_last_event_id_still_gets_a_full_frame_first():
    board = board_with(make_snapshot(seq=9))
    app = app_for(board)
    s = Stream(app, headers={"Last-Event-ID": f"{app.state.frames.boot_epoch}-8"})
    assert parse(s.next())["json"]["frame"] == "full"
    s.close()


def test_ping_after_silence():
    app = app_for(board_with(make_snapshot(seq=1)), ping_interval_s=0.1)
    s = Stream(app)
    s.next()
    t0 = time.monotonic()
    assert s.next() == b": ping\n\n"
    assert 0.05 < time.monotonic() - t0 < 1.0
    s.close()


def test_stream_without_data_yet_sends_retry_then_the_first_snapshot():
    board = SnapshotBoard()
    app = app_for(board, first_snapshot_wait_s=0.05)
    s = Stream(app)
    assert s.next() == b"retry: 2000\n\n"
    board.publish(make_snapshot(seq=1))
    assert parse(s.next())["json"]["frame"] == "full"
    s.close()


def test_stream_ends_at_max_age():
    app = app_for(board_with(make_snapshot(seq=1)), max_stream_age_s=0.2)
    s = Stream(app)
    s.next()
    t0 = time.monotonic()
    assert s.next() is None
    assert time.monotonic() - t0 < 1.0
    assert app.state.slots.open == 0


def test_shutdown_ends_open_streams_and_refuses_new_ones():
    app = app_for(board_with(make_snapshot(seq=1)))
    s = Stream(app)
    s.next()
    app.begin_shutdown()
    assert s.next(timeout=1.0) is None
    again = Stream(app)
    assert again.status.startswith("503") and again.headers["retry-after"] == "5"


def test_hub_close_ends_streams():
    board = board_with(make_snapshot(seq=1))
    app = app_for(board, poll_s=5)
    s = Stream(app)
    s.next()
    board.close()
    assert s.next(timeout=1.0) is None


def test_cap_answers_503_with_retry_after_and_frees_slots_on_close():
    app = app_for(board_with(make_snapshot(seq=1)), max_streams=2, retry_after_s=7)
    a, b = Stream(app), Stream(app)
    c = Stream(app)
    assert c.status.startswith("503") and c.headers["retry-after"] == "7"
    assert b"too many" in b"".join(c.body)
    assert app.state.slots.open == 2 and app.state.slots.rejected == 1
    a.close()  # never iterated: the slot must still come back
    assert app.state.slots.open == 1
    d = Stream(app)
    assert d.status == "200 OK"
    b.close(), d.close()
    b.close()  # idempotent
    assert app.state.slots.open == 0


def test_disconnect_runs_cleanup():
    board = board_with(make_snapshot(seq=1))
    app = app_for(board)
    s = Stream(app)
    s.next()
    assert app.state.slots.open == 1
    s.close()
    assert app.state.slots.open == 0
