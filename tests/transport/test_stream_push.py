"""Frames written by the view's listener (stream_push.py): through the real embedded server and a
real client, every event arrives whole and in order (each delta on the frame before it), with
the stream's own thread asleep; a client whose buffer fills gets the rest of a frame from the
stream's thread; a client that goes away ends its stream; and, on a socket pair, one writer at a
time and the pull path where a write could block."""

from __future__ import annotations

import gc
import json
import socket
import threading
import time
import weakref

import pytest

from gpuflow.collectors.fleet.sse_events import SseParser
from gpuflow.core.board import SnapshotBoard
from gpuflow.core.snapshot import FleetHost, HostInfo
from gpuflow.transport.app import AppSettings, create_app
from gpuflow.transport.frames import FrameEncoder
from gpuflow.transport.server import EmbeddedServer
from gpuflow.transport.stream_push import GONE, PushedStream, StreamPusher
from gpuflow.transport.stream_views import ViewFrames
from gpuflow.transport.wire import StreamReader
from snapshots import lane, make_snapshot

PING = b": ping\n\n"


def snapshot(seq: int, spans_per_lane: int = 5):
    """Lanes that grow by ``spans_per_lane`` a snapshot, so that each delta carries new spans."""
    top = seq * spans_per_lane
    return make_snapshot(seq, lanes=tuple(lane(s, range(max(0, top - 400), top)) for s in (7, 8)))


class Claims:
    """Counts what the streams' own threads wrote (PushedStream.claim), the rest of a frame apart,
    and the frames the listener wrote (PushedStream.offer)."""

    def __init__(self, monkeypatch) -> None:
        self.calls, self.chunks, self.offered = 0, [], 0
        real, real_offer = PushedStream.claim, PushedStream.offer

        def offer(stream, frame):
            before = stream.last_seq
            real_offer(stream, frame)
            self.offered += stream.last_seq != before
        monkeypatch.setattr(PushedStream, "offer", offer)

        def claim(stream, *args):
            self.calls += 1
            out = real(stream, *args)
            if out is not None and out is not GONE:
                self.chunks.append(out)
            return out
        monkeypatch.setattr(PushedStream, "claim", claim)

    def rests(self) -> int:
        return sum(1 for c in self.chunks if not c.startswith((b"id:", b":")))


@pytest.fixture
def served():
    board = SnapshotBoard()
    board.publish(snapshot(1))
    app = create_app(board, settings=AppSettings(poll_s=0.5, send_timeout_s=5.0, send_buffer_bytes=16384))
    server = EmbeddedServer(app, "127.0.0.1", 0)
    server.serve_in_thread()
    yield board, app, server
    server.shutdown()


def open_stream(port: int, rcvbuf: int | None = None) -> socket.socket:
    sock = socket.socket()
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect(("127.0.0.1", port))
    sock.settimeout(10)
    sock.sendall(b"GET /api/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
    return sock


def read_events(sock: socket.socket, until_seq: int, pause: float = 0.0) -> list[dict]:
    """Every snapshot event up to ``until_seq``, each read by a StreamReader (which refuses a delta
    that does not follow the frame before it) and checked to be one whole JSON document."""
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(4096)
    head, _, rest = head.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200") and b"text/event-stream" in head
    parser, reader, frames = SseParser(64 << 20), StreamReader(), []
    chunk = rest
    while True:
        for event in parser.feed(chunk):
            doc = json.loads(event.data)
            frames.append(doc)
            reader.read(doc)
            if doc["seq"] >= until_seq:
                return frames
        if pause:
            time.sleep(pause)
        chunk = sock.recv(65536)
        assert chunk, "the stream ended early"


def test_every_frame_arrives_in_order_while_the_streams_thread_sleeps(served, monkeypatch):
    board, _app, server = served
    claims = Claims(monkeypatch)
    sock = open_stream(server.port)
    got: list[dict] = []
    reader = threading.Thread(target=lambda: got.extend(read_events(sock, 120)))
    reader.start()
    time.sleep(0.3)   # the first frame is out
    for seq in range(2, 121):
        board.publish(snapshot(seq))
        time.sleep(0.005)
    reader.join(20)
    sock.close()
    seqs = [f["seq"] for f in got]
    assert seqs[-1] == 120 and seqs == sorted(seqs)
    assert sum(f["frame"] == "delta" for f in got) >= 100   # each on the frame before it (StreamReader)
    # the listener wrote them; the stream's thread woke at most every poll_s (0.5 s), not for each
    assert claims.offered >= 100 and claims.calls < 20, (claims.offered, claims.calls)


def test_a_slow_reader_gets_the_rest_of_each_frame_from_the_streams_thread(served, monkeypatch):
    board, _app, server = served
    claims = Claims(monkeypatch)
    sock = open_stream(server.port, rcvbuf=4096)
    got: list[dict] = []
    reader = threading.Thread(target=lambda: got.extend(read_events(sock, 60, pause=0.01)))
    reader.start()
    time.sleep(0.3)
    for seq in range(2, 61):
        board.publish(snapshot(seq, spans_per_lane=200))   # frames of tens of kB, buffers of a few
        time.sleep(0.01)
    reader.join(30)
    sock.close()
    assert got and got[-1]["seq"] == 60
    assert claims.rests() > 0   # the listener's writes did not fit, its thread wrote the rest


def test_a_client_that_goes_away_ends_its_stream(served):
    board, app, server = served
    sock = open_stream(server.port)
    read_events(sock, 1)
    sock.close()
    deadline = time.monotonic() + 5
    seq = 2
    while app.state.slots.open and time.monotonic() < deadline:
        board.publish(snapshot(seq))
        seq += 1
        time.sleep(0.02)
    assert app.state.slots.open == 0


# -- one stream on a socket pair -----------------------------------------------------------------
def pushed_pair(board: SnapshotBoard, timeout: float | None = 5.0):
    frames = FrameEncoder(board)
    pusher = StreamPusher(frames)
    a, b = socket.socketpair()
    a.settimeout(timeout)
    return frames, pusher, PushedStream(a, pusher), a, b


def test_the_listener_writes_the_delta_on_the_frame_the_stream_had():
    board = SnapshotBoard()
    board.publish(snapshot(1))
    frames, pusher, stream, a, b = pushed_pair(board)
    first = frames.current()
    assert stream.start(first.seq, time.monotonic())
    board.publish(snapshot(2))
    frame = frames.current()
    assert frame.base_seq == 1 and b.recv(1 << 20) == frame.delta and stream.last_seq == 2
    assert stream.claim(frames, 60.0, PING) is None   # nothing left for its thread
    a.close(), b.close()


def test_no_write_while_the_streams_thread_writes_and_it_catches_up_after():
    board = SnapshotBoard()
    board.publish(snapshot(1))
    frames, pusher, stream, a, b = pushed_pair(board)
    assert stream.start(frames.current().seq, time.monotonic())
    assert stream.claim(frames, 0.0, PING) == PING   # its thread writes a ping
    board.publish(snapshot(2))
    b.setblocking(False)
    with pytest.raises(BlockingIOError):
        b.recv(100)   # the listener wrote nothing meanwhile
    assert stream.wake.is_set()
    stream.wrote()
    assert stream.claim(frames, 60.0, PING) == frames.current().delta
    a.close(), b.close()


def test_a_peer_gone_makes_the_stream_end():
    board = SnapshotBoard()
    board.publish(snapshot(1))
    frames, pusher, stream, a, b = pushed_pair(board)
    assert stream.start(1, time.monotonic())
    b.close()
    for seq in range(2, 5):   # the first write after the close may still land in the buffer
        board.publish(snapshot(seq))
    assert stream.claim(frames, 60.0, PING) is GONE
    stream.end()
    assert pusher.streams == 0
    a.close()


def test_a_socket_whose_write_could_block_keeps_the_pull_path():
    board = SnapshotBoard()
    board.publish(snapshot(1))
    _frames, pusher, stream, a, b = pushed_pair(board, timeout=None)
    assert not stream.start(1, time.monotonic()) and pusher.streams == 0
    a.close(), b.close()



@pytest.mark.parametrize("detail, host", [("hosts", None), ("summary", None), ("full", "h")])
def test_a_views_encoder_and_writer_go_with_its_last_stream_without_the_collector(detail, host):
    """Freed by reference counting when the last stream ends: the view's encoder holds its last
    snapshot, which a reference cycle would keep until a full collection (once a minute in a hub)."""
    board = SnapshotBoard()
    board.publish(make_snapshot(1, hosts=(FleetHost(HostInfo(name="h")),)))
    views = ViewFrames(board, FrameEncoder(board))
    gc.collect()
    gc.disable()
    try:
        use = views.acquire(detail, host)
        assert use.frames.current() is not None
        frames, pusher = weakref.ref(use.frames), weakref.ref(use.pusher)
        use.release()
        del use
        assert frames() is None and pusher() is None and len(board._listeners) == 0
    finally:
        gc.enable()


@pytest.mark.serial
def test_a_client_that_never_reads_never_holds_up_the_publishing_thread(served):
    """The listener's writes cannot block: with a client whose buffers are full, each publish
    (which writes to it) returns at once, and the client is dropped by its stream's own thread."""
    board, app, server = served
    sock = open_stream(server.port, rcvbuf=4096)   # and never read
    time.sleep(0.3)
    longest = 0.0
    for seq in range(2, 120):
        t0 = time.monotonic()
        board.publish(snapshot(seq, spans_per_lane=200))   # tens of kB a frame: the buffers fill
        longest = max(longest, time.monotonic() - t0)
        time.sleep(0.005)
    # a blocking write would wait for the send timeout (5 s here)
    assert longest < 1.0, longest
    deadline = time.monotonic() + 15   # dropped after 5 s of a full buffer
    while app.state.slots.open and time.monotonic() < deadline:
        time.sleep(0.1)
    assert app.state.slots.open == 0
    sock.close()
