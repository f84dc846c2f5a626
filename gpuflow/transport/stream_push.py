"""A stream's frames written to its socket by the thread that publishes them, not by its own thread.

Why: a hub whose pages watch 64 hosts publishes each host's frames ten times a second. With each
stream's thread waiting for its view's next snapshot, every frame woke one of 64 threads, and the
wake-up, its wait for the interpreter's lock, the write and the wait again cost the hub more than
encoding the frame (docs/fleet.md, "The frames written by the publishing thread"). Here the view's
listener, on the producer's thread (the frame loop, which has just made the view), takes the view's
frame (encoded once for all its streams, as before) and writes it to each of the view's streams'
sockets with one ``write`` that cannot block; the stream's own thread sleeps until it has
something to do that the listener does not: the rest of a frame the socket's send buffer had no
room for, a frame the listener could not write (the stream's thread was writing), a ping, the
stream's age, the app's shutdown, the board's close (sse.py checks those at least every
``poll_s``).

What stays as it was (sse.py): the first frame, pings and the end are the stream thread's; a
stream gets the shared delta when it has the delta's base, else the full frame; the bytes on the
wire are the same events in the same order, one writer at a time (the listener writes only while
the stream's thread is not writing, under the stream's lock); a client that stops reading is
dropped by the stream thread's ``sendall`` within the send timeout, as before, since the listener
never waits for a socket: what its write could not place is handed to the stream's thread, at
most one frame a stream.

Only where a write cannot block or be framed: the embedded server's plain TCP sockets, which have
a timeout (so are non-blocking underneath) and take the body as it is (HTTP/1.0, no chunking).
TLS sockets and gunicorn's workers keep the stream thread's own writes.

Constraints: the listener holds one stream's lock at a time, and a stream's thread holds it only
to hand work over (never while writing), so neither waits long on the other; a stream is written
to only between its first frame (the response's head goes out with it) and its end.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any, Callable

#: what :meth:`PushedStream.claim` returns once a write of the listener's failed (the client is gone)
GONE: Any = object()


class PushedStream:
    """One stream's socket and what has been written to it (by its thread or the listener)."""

    def __init__(self, sock: Any, pusher: StreamPusher, clock: Callable[[], float] = time.monotonic) -> None:
        self._sock = sock
        self._pusher = pusher
        self._clock = clock
        self._lock = threading.Lock()
        self.wake = threading.Event()   #: set when the stream's thread has something to do
        self.last_seq: int | None = None   #: the seq of the latest frame written
        self.last_write = 0.0   #: when something was last written (the clock's time)
        self._fd = -1
        self._pending: memoryview | None = None   # a frame's rest, for the stream's thread
        self._writing = False   # the stream's thread is writing a chunk
        self._live = False
        self._gone = False

    def start(self, last_seq: int | None, last_write: float) -> bool:
        """From now on the listener may write (the first frame is out); False where it cannot
        (not a plain socket with a timeout: the stream's thread then writes everything)."""
        sock = self._sock
        if type(sock) is not socket.socket or not sock.gettimeout():
            return False
        with self._lock:
            self._fd = sock.fileno()
            self.last_seq, self.last_write, self._live = last_seq, last_write, True
        self._pusher.add(self)
        return True

    def end(self) -> None:
        """No more writes by the listener (the stream ends; its socket is closed after this)."""
        self._pusher.remove(self)
        with self._lock:
            self._live = False

    # -- the stream's thread ---------------------------------------------------------------------
    def claim(self, frames: Any, ping_interval_s: float, ping: bytes) -> Any:
        """What the stream's thread writes next: the rest of a frame, a frame the listener did
        not write, a ping when one is due; None: nothing (``wake`` is cleared, wait on it); GONE:
        the client is gone. A chunk returned must be followed by :meth:`wrote` once written."""
        frames.current()   # a frame the listener skipped is encoded here, not under the lock
        with self._lock:
            if self._gone:
                return GONE
            pending, self._pending = self._pending, None
            if pending is not None:
                self._writing = True
                return bytes(pending)
            frame = frames.current()
            if frame is not None and frame.seq != self.last_seq:
                data = frame.after(self.last_seq)
                self.last_seq, self._writing = frame.seq, True
                return data
            if self._clock() - self.last_write >= ping_interval_s:
                self._writing = True
                return ping
            self.wake.clear()   # under the lock: a listener's set after this is not lost
            return None

    def wrote(self) -> None:
        with self._lock:
            self._writing, self.last_write = False, self._clock()

    def ping_left(self, ping_interval_s: float) -> float:
        return ping_interval_s - (self._clock() - self.last_write)

    # -- the listener's thread -------------------------------------------------------------------
    def offer(self, frame: Any) -> None:
        """Write ``frame`` (the view's latest) if the stream is idle and has not had it."""
        with self._lock:
            if not self._live or self._gone or frame.seq == self.last_seq:
                return
            if self._writing or self._pending is not None:
                self.wake.set()   # its thread catches up when its write is done
                return
            data = frame.after(self.last_seq)
            try:
                sent = os.write(self._fd, data)
            except BlockingIOError:
                sent = 0
            except OSError:
                self._gone = True
                self.wake.set()
                return
            self.last_seq, self.last_write = frame.seq, self._clock()
            if sent < len(data):
                self._pending = memoryview(data)[sent:]
                self.wake.set()

    def rouse(self) -> None:
        self.wake.set()


class StreamPusher:
    """The streams of one view that the listener writes to: told of each new view by its board
    (``listen``), it writes the view's frame to each (see the module's docstring)."""

    def __init__(self, frames: Any) -> None:
        self.frames = frames
        self._lock = threading.Lock()
        self._streams: tuple[PushedStream, ...] = ()
        #: no more of the board's snapshots (the view's last stream ended)
        self.stop_listening = frames.board.listen(self._published)

    def add(self, stream: PushedStream) -> None:
        with self._lock:
            self._streams += (stream,)

    def remove(self, stream: PushedStream) -> None:
        with self._lock:
            self._streams = tuple(s for s in self._streams if s is not stream)

    @property
    def streams(self) -> int:
        return len(self._streams)

    def _published(self, snap: Any) -> None:
        streams = self._streams
        if not streams:
            return
        frame = None
        if snap is not None:
            try:
                frame = self.frames.current()
                if frame is not None and frame.delta is None:
                    frame.full  # noqa: B018 - built here, once, not under a stream's lock
            except Exception:  # noqa: BLE001 - each stream's thread meets it making the frame itself
                frame = None
        for stream in streams:
            if frame is None:   # the board closed, or no frame to write: the threads see to it
                stream.rouse()
            else:
                stream.offer(frame)
