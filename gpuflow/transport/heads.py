"""Request heads read for many connections on one thread: an idle connection costs no thread.

Both servers hand a connection to a thread only once its whole request head has arrived
(:class:`HeadReader`); until then it is one entry on a selector, read without blocking. The
embedded server (server.py) accepts on it too; in a gunicorn worker it sits in front of gthread's
pool (gunicorn_hardening.py). Without it, each connection that had sent nothing, or a request head
a byte every few seconds, held a thread: about 120 of them filled the embedded server's cap
(503 to everyone) and made gunicorn's pool answer others seconds late (tests/hardening/
test_idle_connections.py).

Per connection, until its head is complete:

* **one deadline for the whole head** (``deadline_s`` from when it was accepted, the server's
  ``header_timeout_s``), not per silence, so trickling a byte at a time does not extend it; at
  the deadline the connection is closed without an answer;
* **at most ``max_head_bytes``** (32 KiB, nginx's total): a longer head is refused, 414 when no
  line has ended yet, else 431;
* **at most ``max_pending`` connections** wait (2048 by default): the next one closes the
  oldest waiting one (its deadline is nearest, and a well-behaved client, whose head arrives in
  the same moment as its connection, is rarely the oldest), after reading it once more: one whose
  head has arrived meanwhile is handed over instead. So no number of idle connections keeps a new
  one from being read, and memory stays below ``max_pending * max_head_bytes``.

The head ends at the first empty line (``\\n\\n`` or ``\\n\\r\\n``, as both servers' parsers
read it); whatever arrived with it (a body, a pipelined request) is handed over too.

Constraints: one daemon thread; ``add`` may be called from any thread; the callbacks run on this
thread and must not block (writing a short refusal to a socket is fine); every socket this
class drops it closes itself, except when ``on_drop`` is given (then the callback closes it);
:meth:`stop` drops everything still pending and returns once the thread has left the loop.
"""

from __future__ import annotations

import collections
import enum
import logging
import os
import resource
import selectors
import socket
import threading
import time
from typing import Any, Callable

log = logging.getLogger("gpuflow.transport.heads")

MAX_HEAD_BYTES = 32 * 1024
DEFAULT_MAX_PENDING = 2048
MIN_PENDING = 64  # however low the descriptor limit
RECV_BYTES = 16 * 1024
ACCEPT_BURST = 128  # accepts per wake-up, so that reading heads is never starved
FD_RESERVE = 256  # descriptors left for everything else the process opens


class Head(enum.Enum):
    """What the reader hands over: a complete head, or the reason it never will be."""

    COMPLETE = "complete"
    LINE_TOO_LONG = "request line too long"  # 414
    TOO_LARGE = "request head too large"  # 431


class _Pending:
    __slots__ = ("sock", "token", "buf", "deadline")

    def __init__(self, sock: socket.socket, token: Any, seed: bytes, deadline: float) -> None:
        self.sock, self.token, self.deadline = sock, token, deadline
        self.buf = bytearray(seed)


def head_state(buf: bytes | bytearray, start: int, max_head_bytes: int) -> Head | None:
    """Whether ``buf`` holds a whole head (searching from ``start``), an oversized one, or neither."""
    for end in (b"\n\n", b"\n\r\n"):
        if buf.find(end, max(0, start - len(end) + 1)) >= 0:
            return Head.COMPLETE
    if len(buf) >= max_head_bytes:
        return Head.TOO_LARGE if b"\n" in buf else Head.LINE_TOO_LONG
    return None


def raise_fd_limit(wanted: int) -> int:
    """Lift the soft RLIMIT_NOFILE towards ``wanted`` (never above the hard limit); the result."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return wanted if soft == resource.RLIM_INFINITY else soft
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (OSError, ValueError):
        return soft
    return target


def pending_budget(wanted: int, others: int) -> int:
    """How many connections may wait for their heads, given ``others`` descriptors in use.

    Raises the descriptor limit if it can; where the hard limit is lower, fewer connections
    wait (and the oldest is closed sooner) rather than accept() failing with EMFILE.
    """
    limit = raise_fd_limit(wanted + others + FD_RESERVE)
    budget = min(wanted, limit - others - FD_RESERVE)
    if budget < wanted:
        log.warning("only %d connections can wait for their request heads (RLIMIT_NOFILE %d); "
                    "raise the limit for more", max(budget, MIN_PENDING), limit)
    return max(budget, MIN_PENDING)


class HeadReader:
    """A selector thread that reads request heads and hands each complete one to ``on_head``.

    ``on_head(sock, token, data, state)`` gets the socket (non-blocking, no longer watched) with
    everything read from it; ``on_drop(sock, token, why)``, if given, gets connections dropped
    before that (deadline, evicted, closed by the peer, stopping) and must close them.
    ``stopping()``, polled a few times a second, drops everything and ends the loop when true.
    """

    def __init__(self, *, deadline_s: float, on_head: Callable[..., None],
                 on_drop: Callable[..., None] | None = None,
                 max_pending: int = DEFAULT_MAX_PENDING, max_head_bytes: int = MAX_HEAD_BYTES,
                 stopping: Callable[[], bool] | None = None, name: str = "gpuflow-heads") -> None:
        if max_pending < 1 or max_head_bytes < 64 or not deadline_s > 0:
            raise ValueError("HeadReader needs max_pending >= 1, max_head_bytes >= 64, deadline_s > 0")
        self.deadline_s = deadline_s
        self.max_pending = max_pending
        self.max_head_bytes = max_head_bytes
        self._on_head, self._on_drop, self._stopping = on_head, on_drop, stopping
        self._name = name
        self._sel = selectors.DefaultSelector()
        self._pending: collections.OrderedDict[int, _Pending] = collections.OrderedDict()
        self._inbox: collections.deque[tuple[socket.socket, Any, bytes, float]] = collections.deque()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._listener: socket.socket | None = None
        self._halt = threading.Event()
        self._left = threading.Event()
        self._state_lock = threading.Lock()  # guards _running, _finished and the wake pipe
        self._running = False
        self._finished = False
        self._loop_thread: threading.Thread | None = None
        self._room_wanted = False  # set by make_room (any thread), read by the loop
        self.evicted = 0  #: connections closed to make room for a newer one
        self.expired = 0  #: connections closed at their deadline

    # -- the interface -----------------------------------------------------------------------------
    @property
    def pending(self) -> int:
        return len(self._pending)

    @property
    def closed(self) -> bool:
        return self._halt.is_set()

    def listen(self, listener: socket.socket) -> None:
        """Accept from ``listener`` on this thread; each new connection's token is its address."""
        listener.setblocking(False)
        self._listener = listener
        self._sel.register(listener, selectors.EVENT_READ, listener)

    def add(self, sock: socket.socket, token: Any, seed: bytes = b"") -> None:
        """Read ``sock``'s head from here on (``seed``: bytes of it already read). Any thread."""
        self._inbox.append((sock, token, seed, time.monotonic() + self.deadline_s))
        if not self._wake():  # the loop has ended: nobody will take it from the inbox
            self._take_inbox()

    def make_room(self) -> None:
        """Ask the loop to close its oldest waiting connection soon (any thread): the way a server
        whose own accept() ran out of descriptors gets one back, as :meth:`listen`'s accept
        does here."""
        self._room_wanted = True
        self._wake()

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name=self._name, daemon=True)
        thread.start()
        return thread

    def stop(self, timeout: float = 5.0) -> None:
        """End the loop and drop what is pending; returns once the loop has left. Idempotent."""
        self._halt.set()
        self._wake()
        with self._state_lock:
            running = self._running
        if not running:
            self._finish()
        elif threading.current_thread() is not self._loop_thread:
            self._left.wait(timeout)

    # -- the loop ----------------------------------------------------------------------------------
    def run(self) -> None:
        """Serve in the calling thread until :meth:`stop` (or ``stopping()``)."""
        with self._state_lock:
            if self._finished or self._running:
                return
            self._running = True
            self._loop_thread = threading.current_thread()
        try:
            while not self._halt.is_set():
                if self._stopping is not None and self._stopping():
                    break
                now = time.monotonic()
                first = next(iter(self._pending.values()), None)
                timeout = 0.25 if first is None else min(0.25, max(0.0, first.deadline - now))
                events = self._sel.select(timeout)
                accept = inbox = False
                for key, _ in events:  # heads first: a newer connection may close an older one
                    if key.data is None:
                        inbox = True
                    elif key.data is self._listener:
                        accept = True
                    else:
                        p = self._pending.get(key.data.sock.fileno())
                        if p is not None and p is key.data:  # not closed earlier in this pass
                            self._read(p)
                if inbox:
                    self._take_inbox()
                if self._room_wanted:
                    self._room_wanted = False
                    self._evict_oldest()
                if accept:
                    self._accept()
                self._expire(time.monotonic())
        finally:
            self._finish()

    def _finish(self) -> None:
        with self._state_lock:
            if self._finished:
                return
            self._finished = True
            self._halt.set()
            for fd in (self._wake_r, self._wake_w):
                os.close(fd)
        self._take_inbox()
        for p in list(self._pending.values()):
            self._drop(p, "stopping")
        self._sel.close()
        self._left.set()

    def _wake(self) -> bool:
        """Wake the loop; False once it has ended."""
        with self._state_lock:
            if self._finished:
                return False
            try:
                os.write(self._wake_w, b"\0")
            except OSError:
                pass  # the pipe is full: a wake-up is pending anyway
            return True

    def _take_inbox(self) -> None:
        with self._state_lock:
            if not self._finished:
                try:
                    while os.read(self._wake_r, 4096):
                        pass
                except OSError:
                    pass
        while True:
            try:
                sock, token, seed, deadline = self._inbox.popleft()
            except IndexError:
                return
            p = _Pending(sock, token, seed, deadline)
            if self._halt.is_set():
                self._drop(p, "stopping", pending=False)
            else:
                self._admit(p)

    def _accept(self) -> None:
        assert self._listener is not None
        for _ in range(min(ACCEPT_BURST, max(1, self.max_pending // 4))):
            try:
                sock, addr = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # EMFILE, ENFILE, ENOBUFS: make room, try again next wake-up
                log.warning("accept failed: %s", exc.strerror or exc)
                self._evict_oldest()
                return
            self._admit(_Pending(sock, addr, b"", time.monotonic() + self.deadline_s))

    def _admit(self, p: _Pending) -> None:
        try:
            p.sock.setblocking(False)
        except OSError:
            self._drop(p, "closed", pending=False)
            return
        if p.buf:
            state = head_state(p.buf, 0, self.max_head_bytes)
            if state is not None:
                self._hand_over(p, state, pending=False)
                return
        while len(self._pending) >= self.max_pending:
            self._evict_oldest()
        try:
            self._sel.register(p.sock, selectors.EVENT_READ, p)
        except (OSError, ValueError):
            self._drop(p, "closed", pending=False)
            return
        self._pending[p.sock.fileno()] = p
        self._read(p)  # a client's head usually arrives with its connection: take it now

    def _evict_oldest(self) -> None:
        """Make room for one: the oldest waiting connection is read first, and closed only if its
        head has still not come whole (a client whose head arrived while this loop was busy
        accepting a crowd is handed over, not dropped)."""
        if not self._pending:
            return
        p = next(iter(self._pending.values()))
        self._read(p)
        if self._pending.get(p.sock.fileno()) is p:   # still waiting: it goes
            self.evicted += 1
            self._drop(p, "evicted")

    def _expire(self, now: float) -> None:
        while self._pending:
            p = next(iter(self._pending.values()))
            if p.deadline > now:
                return
            self.expired += 1
            self._drop(p, "deadline")

    def _read(self, p: _Pending) -> None:
        try:
            data = p.sock.recv(RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(p, "closed")
            return
        start = len(p.buf)
        p.buf += data
        state = head_state(p.buf, start, self.max_head_bytes)
        if state is not None:
            self._hand_over(p, state)

    def _forget(self, p: _Pending) -> None:
        self._pending.pop(p.sock.fileno(), None)
        try:
            self._sel.unregister(p.sock)
        except (KeyError, ValueError, OSError):
            pass

    def _hand_over(self, p: _Pending, state: Head, pending: bool = True) -> None:
        if pending:
            self._forget(p)
        try:
            self._on_head(p.sock, p.token, bytes(p.buf), state)
        except Exception:
            log.exception("handing over a request head failed")

    def _drop(self, p: _Pending, why: str, pending: bool = True) -> None:
        if pending:
            self._forget(p)
        log.debug("dropped a connection before its request head was complete (%s)", why)
        if self._on_drop is not None:
            try:
                self._on_drop(p.sock, p.token, why)
            except Exception:
                log.exception("dropping a connection failed")
            return
        try:
            p.sock.close()
        except OSError:
            pass
