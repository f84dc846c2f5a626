"""Shared by bench/connections.py and tests/hardening/test_idle_connections.py: a crowd of idle
connections, and the well-behaved client that must still be served beside it.

* :class:`Crowd` — a thread that keeps ``silent`` connections that never send a byte and
  ``trickling`` ones that send a request head one byte every ``trickle_s`` (never finishing it),
  all from 127.0.0.1; whatever the server closes or answers is opened again after
  ``reconnect_s``, so the count holds for as long as the crowd runs. It counts what the server
  did to them (closed in silence, answered, refused the connection).
* :class:`StreamWatch` — one established ``/api/stream`` read in a thread of its own; the
  times its frames arrived.
* :func:`timed_get` — one ``GET`` (``Connection: close``): its status and how long the whole
  answer took, ``None`` as the status when none came within the timeout.

Constraints: standard library only (bench scripts run where only it is guaranteed); one thread
for the whole crowd (a selector for the closes, the trickle on a timer); the crowd's reconnects
are paced (``reconnect_s``), so a server that answers every connection at once with 503 is not
turned into a connect storm on a shared machine.
"""

from __future__ import annotations

import itertools
import resource
import selectors
import socket
import threading
import time

from sse_client import connect as connect_stream
from sse_client import events

TRICKLE_HEAD = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Trickle: "


def raise_fd_limit(needed: int) -> None:
    """Lift this process's soft RLIMIT_NOFILE to ``needed`` descriptors (up to the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


class _Idle:
    __slots__ = ("sock", "trickling", "sent")

    def __init__(self, sock: socket.socket, trickling: bool) -> None:
        self.sock, self.trickling, self.sent = sock, trickling, 0


class Crowd(threading.Thread):
    """``silent`` + ``trickling`` idle connections to ``port``, kept open until :meth:`stop`."""

    def __init__(self, port: int, silent: int, trickling: int = 0, *, trickle_s: float = 2.0,
                 reconnect_s: float = 1.0, host: str = "127.0.0.1") -> None:
        super().__init__(name="idle-crowd", daemon=True)
        self.port, self.host = port, host
        self.silent, self.trickling = silent, trickling
        self.trickle_s, self.reconnect_s = trickle_s, reconnect_s
        self.opened = 0  #: connections made, reconnections included
        self.closed_silently = 0  #: closed (or reset) by the server without an answer
        self.answered = 0  #: the server sent bytes (a 503, a 408, ...) and closed
        self.connect_failures = 0  #: connect() itself failed or timed out
        self._sel = selectors.DefaultSelector()
        self._halt = threading.Event()
        self._due: list[tuple[float, bool]] = []  # (when, trickling) of connections to reopen
        self._ready = threading.Event()
        raise_fd_limit(silent + trickling + 256)

    @property
    def open_now(self) -> int:
        return len(self._sel.get_map()) if not self._halt.is_set() else 0

    def start_and_wait(self, timeout: float = 60.0) -> Crowd:
        """Start, and return once every connection has been opened once, or after ``timeout``
        (a server that stops accepting leaves connect() waiting: ``open_now`` tells)."""
        self.start()
        self._ready.wait(timeout)
        return self

    def _open(self, trickling: bool) -> None:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=2.0)
        except OSError:
            self.connect_failures += 1
            self._due.append((time.monotonic() + self.reconnect_s, trickling))
            return
        sock.setblocking(False)
        self.opened += 1
        self._sel.register(sock, selectors.EVENT_READ, _Idle(sock, trickling))

    def _closed(self, idle: _Idle) -> None:
        self._sel.unregister(idle.sock)
        answered = False
        try:
            answered = bool(idle.sock.recv(4096))
        except OSError:
            pass
        idle.sock.close()
        if answered:
            self.answered += 1
        else:
            self.closed_silently += 1
        self._due.append((time.monotonic() + self.reconnect_s, idle.trickling))

    def _trickle(self) -> None:
        for key in list(self._sel.get_map().values()):
            idle: _Idle = key.data
            if not idle.trickling:
                continue
            byte = TRICKLE_HEAD[idle.sent:idle.sent + 1] or b"a"
            try:
                idle.sock.send(byte)
                idle.sent += 1
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                self._closed(idle)

    def run(self) -> None:
        for trickling in itertools.chain([False] * self.silent, [True] * self.trickling):
            if self._halt.is_set():
                break
            self._open(trickling)
        self._ready.set()
        next_trickle = time.monotonic() + self.trickle_s
        while not self._halt.is_set():
            timeout = max(0.0, min(next_trickle - time.monotonic(), 0.1))
            for key, _ in self._sel.select(timeout) if self._sel.get_map() else ():
                self._closed(key.data)
            now = time.monotonic()
            if now >= next_trickle:
                self._trickle()
                next_trickle = now + self.trickle_s
            due, self._due = [d for d in self._due if d[0] <= now], [d for d in self._due if d[0] > now]
            for _, trickling in due:
                if self._halt.is_set():
                    break
                self._open(trickling)
            if not self._sel.get_map():
                time.sleep(0.05)
        for key in list(self._sel.get_map().values()):
            key.data.sock.close()
        self._sel.close()

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=10)

    def summary(self) -> str:
        return (f"opened={self.opened} closed_silently={self.closed_silently} "
                f"answered={self.answered} connect_failures={self.connect_failures}")


class StreamWatch(threading.Thread):
    """One ``/api/stream`` connection, read in its own thread: the arrival time of each frame."""

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        super().__init__(name="stream-watch", daemon=True)
        self.sock = connect_stream(host, port)
        self.sock.settimeout(30.0)
        self.arrivals: list[float] = []
        self.error: str | None = None

    def run(self) -> None:
        try:
            for _ in events(self.sock):
                self.arrivals.append(time.monotonic())
        except (OSError, RuntimeError) as exc:
            self.error = repr(exc)

    def frames_between(self, t0: float, t1: float) -> int:
        return sum(t0 <= t < t1 for t in self.arrivals)

    def longest_gap(self, t0: float, t1: float) -> float:
        """The longest time without a frame inside [t0, t1]."""
        marks = [t0] + [t for t in self.arrivals if t0 <= t < t1] + [t1]
        return max(b - a for a, b in zip(marks, marks[1:]))

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.join(timeout=5)


def timed_get(port: int, path: str, timeout: float = 5.0, headers: str = "",
              host: str = "127.0.0.1") -> tuple[int | None, float]:
    """(status or None, seconds) of one GET, from connect to the end of the answer."""
    t0 = time.monotonic()
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n{headers}"
                      "Connection: close\r\n\r\n".encode())
            data = b""
            while True:
                left = timeout - (time.monotonic() - t0)
                if left <= 0:
                    return None, time.monotonic() - t0
                s.settimeout(left)
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None, time.monotonic() - t0
    try:
        status = int(data.split(b" ", 2)[1])
    except (IndexError, ValueError):
        status = None
    return status, time.monotonic() - t0
