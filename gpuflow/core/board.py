"""The latest snapshot, shared by one producer (the agent's frame loop) and many readers.

Readers are SSE streams, /api/snapshot and /metrics, each in its own server thread. They block in
:meth:`SnapshotBoard.wait_newer` (a condition variable, no polling) and are all released by
:meth:`close` at shutdown so a graceful stop is never held up by an open stream.

A reader that wants only part of each snapshot (a stream of one host of a hub's many) waits on a
condition of its own instead and is told of each snapshot by a listener (:meth:`listen`), called
on the producer's thread after the board has it, and with None once the board closes; the
listener wakes its readers only when their part changed, so a page watching one host of a fleet
is not woken by every other host's frames (gpuflow.transport.stream_views.DerivedBoard).

Constraints: called from gunicorn/threaded-server worker threads; O(1) per publish plus one call
per listener; holds a reference to the latest snapshot only (history is the transport's
business); a listener that raises is logged and the others are still called.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

from gpuflow.core.snapshot import Snapshot

log = logging.getLogger("gpuflow.core.board")

#: told of each snapshot published (on the producer's thread), then of the board's close (None)
Listener = Callable[[Snapshot | None], None]


class Listeners:
    """The listeners of a board (or of a view read as one), added and removed under a lock of
    their own. The call that removes one lets go of it: a holder that keeps that call and whose
    listener is its own method (a reference cycle while it listens) is freed by reference counting
    once it has stopped, not left for the collector's full pass with whatever it holds (a view's
    last snapshot)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now: tuple[Listener, ...] = ()   #: the listeners at this moment

    def __len__(self) -> int:
        return len(self.now)

    def add(self, listener: Listener) -> Callable[[], None]:
        """Add ``listener``; returns the call that removes it (idempotent)."""
        with self._lock:
            self.now += (listener,)
        held = [listener]

        def stop() -> None:
            with self._lock:
                if held:
                    gone = held.pop()
                    self.now = tuple(fn for fn in self.now if fn is not gone)
        return stop


class SnapshotBoard:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._latest: Snapshot | None = None
        self._closed = False
        self._listeners = Listeners()

    def publish(self, snapshot: Snapshot) -> None:
        with self._cond:
            self._latest = snapshot
            self._cond.notify_all()
            listeners = self._listeners.now
        tell(listeners, snapshot)

    def latest(self) -> Snapshot | None:
        return self._latest

    @property
    def closed(self) -> bool:
        return self._closed

    def listen(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` with each snapshot published from now on, after the board has it,
        and with None when the board closes (at once if it is closed already); returns the call
        that stops it (idempotent)."""
        with self._cond:
            stop = self._listeners.add(listener)
            closed = self._closed
        if closed:
            tell((listener,), None)
        return stop

    def wait_newer(self, seq: int, timeout: float) -> Snapshot | None:
        """The latest snapshot if its seq differs from ``seq``, waiting up to ``timeout`` seconds.

        Returns None on timeout or once the board is closed. A seq that *differs* (not only a larger
        one) counts as newer, so a reader never stalls on a number from an earlier agent.
        """
        with self._cond:
            self._cond.wait_for(
                lambda: self._closed or (self._latest is not None and self._latest.seq != seq),
                timeout=timeout,
            )
            if self._closed:
                return None
            latest = self._latest
            return latest if latest is not None and latest.seq != seq else None

    def wait_first(self, timeout: float) -> Snapshot | None:
        """The latest snapshot, waiting up to ``timeout`` for the first one to exist."""
        with self._cond:
            self._cond.wait_for(lambda: self._closed or self._latest is not None, timeout=timeout)
            return self._latest

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            listeners = self._listeners.now
        tell(listeners, None)


def tell(listeners: tuple[Listener, ...], snapshot: Snapshot | None) -> None:
    """Call each listener with ``snapshot``; one that raises is logged, the others still called."""
    for listener in listeners:
        try:
            listener(snapshot)
        except Exception:  # noqa: BLE001 - one listener's bug must not stop the frames or the others
            log.exception("a board listener failed")
