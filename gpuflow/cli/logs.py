"""The CLI's log output: one line per record on stderr, and no Problem said twice.

``gpuflow watch``/``run`` print the agent's problems in their start banner. A collector may also
log a Problem (marked with :func:`gpuflow.core.problem_log.restates`, for gunicorn's logs); until
the banner is out such records are held, then the ones whose Problem the banner showed are
dropped and the others written. Later records restating a Problem the banner showed are dropped
too; every other record passes at once.

Constraints: installed once per command, before the agent starts; holds at most
``HELD_MAX`` records (the oldest go first); thread-safe (records come from collectors' threads).
"""

from __future__ import annotations

import logging
import threading
from typing import Iterable

from gpuflow.core.problem_log import restated

FORMAT = "gpuflow: %(levelname)s: %(name)s: %(message)s"
HELD_MAX = 100


class BannerDedup(logging.Filter):
    """Holds Problem-restating records until :meth:`banner_shown`, then drops what it showed."""

    def __init__(self, handler: logging.Handler) -> None:
        super().__init__()
        self._handler = handler
        self._lock = threading.Lock()
        self._held: list[logging.LogRecord] = []
        self._shown: set[str] | None = None  # None: the banner is not out yet

    def filter(self, record: logging.LogRecord) -> bool:
        problem = restated(record)
        if problem is None:
            return True
        with self._lock:
            if self._shown is None:
                self._held.append(record)
                del self._held[:-HELD_MAX]
                return False
            return problem not in self._shown

    def banner_shown(self, messages: Iterable[str]) -> None:
        """The banner printed these Problem texts: write what was held and is not among them."""
        with self._lock:
            self._shown = set(messages)
            held, self._held = self._held, []
        for record in held:
            if restated(record) not in self._shown:
                self._handler.handle(record)


def install() -> BannerDedup:
    """Log WARNING and above to stderr through a :class:`BannerDedup`; idempotent per process.

    Where logging is configured already (an embedding program, a test runner), that configuration
    is kept, as ``logging.basicConfig`` keeps it, and the returned filter is attached to nothing.
    """
    root = logging.getLogger()
    for existing in root.handlers:
        dedup = next((f for f in existing.filters if isinstance(f, BannerDedup)), None)
        if dedup is not None:
            return dedup
    handler = logging.StreamHandler()
    if root.handlers:
        return BannerDedup(handler)
    handler.setFormatter(logging.Formatter(FORMAT))
    dedup = BannerDedup(handler)
    handler.addFilter(dedup)
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.WARNING:
        root.setLevel(logging.WARNING)
    return dedup
