"""The latest snapshot, shared by one producer (the agent's frame loop) and many readers.

Readers are SSE streams, /api/snapshot and /metrics, each in its own server thread. They block in
:meth:`SnapshotBoard.wait_newer` (a condition variable, no polling) and are all released by
:meth:`close` at shutdown so a graceful stop is never held up by an open stream.

Constraints: called from gunicorn/threaded-server worker threads; O(1) per publish; holds a
reference to the latest snapshot only (history is the transport's business).
"""

from __future__ import annotations

import threading

from gpuflow.core.snapshot import Snapshot


class SnapshotBoard:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._latest: Snapshot | None = None
        self._closed = False

    def publish(self, snapshot: Snapshot) -> None:
        with self._cond:
            self._latest = snapshot
            self._cond.notify_all()

    def latest(self) -> Snapshot | None:
        return self._latest

    @property
    def closed(self) -> bool:
        return self._closed

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
