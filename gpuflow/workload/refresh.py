"""A background fetch that the poll thread asks for and never waits on: the Kubernetes names and the
kubelet's allocations both work this way.

:class:`Refresher` owns one daemon thread that calls ``fetch()`` when asked (:meth:`want`, from a
miss on the poll thread) or every ``every_s`` seconds, at most once every ``gap_s`` seconds
whatever asks, and publishes the result: a new index object swapped in whole (readers take one
reference, no lock) and ``version`` bumped, or, when the fetch fails, ``problem`` set to its
one-line reason (the last index stays: a name once known is still true). A key that a fetch did
not find is not asked for again for ``miss_s`` (misses are cached too), so one unknown pod cannot
make the agent ask every ``gap_s`` forever.

Constraints: ``want`` and reading ``index``/``version``/``problem`` are O(1) and lock-free (the
poll thread calls them every tick); the fetch runs on this thread only, bounded in time by the
source itself; :meth:`stop` returns within a second.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Hashable

log = logging.getLogger("gpuflow.workload")


class FetchFailed(Exception):
    """A fetch failed for a reason worth one line to the user (no traceback, no secret)."""


class Refresher:
    """Runs ``fetch() -> index`` on its own thread, when asked and every ``every_s``."""

    def __init__(self, name: str, fetch: Callable[[], Any], *, every_s: float, gap_s: float,
                 miss_s: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self._fetch = fetch
        self.every_s, self.gap_s, self.miss_s = every_s, gap_s, miss_s
        self._monotonic = monotonic
        self.index: Any = None  #: the latest fetched index (None: no fetch has succeeded)
        self.version = 0  #: bumped with every successful fetch
        self.problem: str | None = None  #: why the latest fetch failed; None after a success
        self.fetches = 0  #: fetches made (tests count them)
        self._wanted = threading.Event()
        self._stop = threading.Event()
        self._missed: dict[Hashable, float] = {}  # key → when a fetch last missed it
        self._thread: threading.Thread | None = None

    def want(self, key: Hashable) -> None:
        """``key`` is not in the index: fetch again, unless a fetch missed it less than
        ``miss_s`` ago."""
        now = self._monotonic()
        asked = self._missed.get(key)
        if asked is not None and now - asked < self.miss_s:
            return
        self._missed[key] = now
        if len(self._missed) > 4096:
            self._missed.clear()
        self._wanted.set()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"gpuflow-{self.name}", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wanted.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)

    def refresh_once(self) -> None:
        """One fetch now, on the caller's thread (tests and the first fetch)."""
        self.fetches += 1
        try:
            index = self._fetch()
        except FetchFailed as exc:
            if self.problem != str(exc):
                log.warning("%s: %s", self.name, exc)
            self.problem = str(exc)
            return
        except Exception as exc:  # noqa: BLE001 - a bug here must not end the thread
            log.exception("%s: fetch failed", self.name)
            self.problem = f"{self.name} failed ({type(exc).__name__})"
            return
        self.index = index
        self.problem = None
        self.version += 1

    def _run(self) -> None:
        last = None
        while not self._stop.is_set():
            now = self._monotonic()
            if last is not None and now - last < self.gap_s:
                self._stop.wait(self.gap_s - (now - last))
                continue
            self._wanted.clear()
            self.refresh_once()
            last = self._monotonic()
            self._wanted.wait(self.every_s)
