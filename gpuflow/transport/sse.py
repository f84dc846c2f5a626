"""GET /api/stream: Server-Sent Events over plain WSGI (Falcon's SSE helpers are ASGI-only).

Per connection: ``retry:`` once, then at once the latest snapshot as a *full* frame (whatever
``Last-Event-ID`` says: snapshots are state, not a log), then one frame per new snapshot — the
shared delta when this client received its ``base_seq``, else the shared full frame — and a
``: ping`` comment after ``ping_interval_s`` of silence. Each yielded chunk is exactly one complete
event, so every server flushes it as is.

The stream ends (and EventSource reconnects by itself) at ``max_stream_age_s``, when the app is
shutting down (checked at least every ``poll_s``) or when the board closes; a client that stops
reading is dropped once its socket's send buffer (``send_buffer_bytes``, fixed so that it cannot
grow to megabytes) has been full for ``send_timeout_s``. A client that
falls behind skips snapshots (it always gets the latest) and gets a full frame after a gap;
nothing is queued per client. Concurrent streams are capped (:class:`StreamSlots`); over the cap
the answer is 503 with Retry-After, before any thread is held for long.

The route itself, with its views (``detail=summary``), is
:class:`gpuflow.transport.stream_views.ViewStreamResource`.

On the embedded server's plain sockets the view's listener writes the frames after the first
(stream_push.py, ``pushed``); the stream's thread then writes only what the listener leaves it,
with the same checks of age, shutdown and close.

Constraints: one server thread per open stream (gunicorn gthread / threaded embedded server), so
the cap must stay below the thread count; the slot is released exactly once, in ``close()``,
whether or not the body was ever iterated.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Callable, Iterator

import falcon

from gpuflow.core.board import SnapshotBoard
from gpuflow.transport.frames import FrameEncoder
from gpuflow.transport.settings import AppSettings
from gpuflow.transport.stream_push import GONE, PushedStream

PING = b": ping\n\n"


class StreamSlots:
    """A counter of open streams with a hard cap; also counts refusals (for /metrics)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self.open = 0
        self.rejected = 0
        self.served = 0

    def acquire(self) -> bool:
        with self._lock:
            if self.open >= self.limit:
                self.rejected += 1
                return False
            self.open += 1
            self.served += 1
            return True

    def release(self) -> None:
        with self._lock:
            self.open -= 1


class SseBody:
    """The WSGI body of one stream: iterates the event generator, releases the slot on close()."""

    def __init__(self, events: Iterator[bytes], release: Callable[[], None]) -> None:
        self._events = events
        self._release: Callable[[], None] | None = release

    def __iter__(self) -> SseBody:
        return self

    def __next__(self) -> bytes:
        try:
            return next(self._events)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        release, self._release = self._release, None
        if release is None:
            return
        try:
            self._events.close()  # type: ignore[attr-defined]
        finally:
            release()


def event_stream(
    board: SnapshotBoard,
    frames: FrameEncoder,
    settings: AppSettings,
    stopping: Callable[[], bool],
    clock: Callable[[], float] = time.monotonic,
    pushed: PushedStream | None = None,
) -> Iterator[bytes]:
    """The events of one connection, as bytes, one complete event per item; with ``pushed``
    (stream_push.py), after the first frame the view's listener writes its frames where it can."""
    started = last_write = clock()
    retry = b"retry: %d\n" % settings.retry_ms
    frame = frames.current()
    if frame is None:
        board.wait_first(settings.first_snapshot_wait_s)
        frame = frames.current()
    if frame is None:
        yield retry + b"\n"
        last_seq = None
    else:
        yield retry + frame.full
        last_seq = frame.seq
    last_write = clock()
    if pushed is not None and pushed.start(last_seq, last_write):
        try:
            yield from _pushed_events(board, frames, settings, stopping, clock, started, pushed)
        finally:
            pushed.end()
        return
    while True:
        now = clock()
        age_left = settings.max_stream_age_s - (now - started)
        if age_left <= 0 or stopping():
            return
        ping_left = settings.ping_interval_s - (now - last_write)
        if ping_left <= 0:
            yield PING
            last_write = clock()
            continue
        snap = board.wait_newer(-1 if last_seq is None else last_seq,
                              timeout=min(ping_left, age_left, settings.poll_s))
        if snap is None:
            if board.closed:
                return
            continue
        frame = frames.current()
        if frame is None or frame.seq == last_seq:
            continue
        yield frame.after(last_seq)
        last_seq = frame.seq
        last_write = clock()


def _pushed_events(board: SnapshotBoard, frames: FrameEncoder, settings: AppSettings,
                   stopping: Callable[[], bool], clock: Callable[[], float], started: float,
                   pushed: PushedStream) -> Iterator[bytes]:
    """The rest of a stream whose frames the view's listener writes: only what it leaves to the
    stream's thread (stream_push.py), the same checks of age, shutdown and close as above."""
    while True:
        age_left = settings.max_stream_age_s - (clock() - started)
        if age_left <= 0 or stopping() or board.closed:
            return
        chunk = pushed.claim(frames, settings.ping_interval_s, PING)
        if chunk is GONE:
            return
        if chunk is not None:
            yield chunk
            pushed.wrote()
            continue
        pushed.wake.wait(max(0.0, min(pushed.ping_left(settings.ping_interval_s), age_left, settings.poll_s)))


def bound_send_time(environ: dict, seconds: float, buffer_bytes: int | None = None) -> None:
    """Make a stalled client's writes fail after ``seconds``, and bound what it can pin.

    Both servers expose the connection's socket (gunicorn as ``gunicorn.socket``, the embedded
    one as ``gpuflow.socket``). Left alone, Linux grows a socket's send buffer up to
    ``net.ipv4.tcp_wmem``'s maximum (4 MiB): a client that never reads would pin that much
    kernel memory and, at a stream's few tens of kB/s, take minutes to fill it before the send
    timeout even starts. A fixed ``SO_SNDBUF`` (the kernel doubles it) keeps both small.
    """
    sock = environ.get("gunicorn.socket") or environ.get("gpuflow.socket")
    if sock is None:
        return
    try:
        if buffer_bytes:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffer_bytes)
        sock.settimeout(seconds)
    except (OSError, AttributeError):
        pass


def stream_headers(resp: falcon.Response) -> None:
    resp.content_type = "text/event-stream; charset=utf-8"
    resp.cache_control = ["no-cache"]
    resp.set_header("X-Accel-Buffering", "no")


def unavailable(resp: falcon.Response, settings: AppSettings, why: str) -> None:
    resp.status = falcon.HTTP_503
    resp.set_header("Retry-After", str(settings.retry_after_s))
    resp.content_type = falcon.MEDIA_TEXT
    resp.text = f"503 Service Unavailable: {why}; retry in {settings.retry_after_s} s\n"
