"""What the core hands every collector: the agent's configuration, a wake-up call, a state slot.

Constraints: created once per agent, inside the process that serves requests; shared by the
frame thread and the collectors' own threads, so ``notify`` is thread-safe and cheap (it only
sets an event).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

DEFAULT_INTERVAL_S = 1.0
DEFAULT_RING_CAPACITY = 1 << 16
DEFAULT_FLUSH_MS = 50
DEFAULT_LANE_SPAN_CAP = 512


@dataclass(frozen=True)
class AgentConfig:
    """Options every collector may read. Built by the CLI or by ``get_app()`` from the environment."""

    interval_s: float = DEFAULT_INTERVAL_S  #: NVML polling period
    show_cmdline: bool = False  #: full command lines (else the executable only)
    ring_capacity: int = DEFAULT_RING_CAPACITY  #: records per traced process ring (power of two)
    flush_ms: int = DEFAULT_FLUSH_MS  #: CUPTI flush period inside traced programs
    lane_span_cap: int = DEFAULT_LANE_SPAN_CAP  #: spans kept per lane (most recent)
    session: str | None = None  #: the ``gpuflow run`` session whose rings to drain
    options: dict[str, Any] = field(default_factory=dict)  #: collector-specific settings


class CollectorContext:
    """Passed to every hook. ``slots`` holds per-agent collector state, keyed by plugin name."""

    def __init__(self, config: AgentConfig, wake: threading.Event | None = None) -> None:
        self.config = config
        self.slots: dict[str, Any] = {}
        self.exit_statuses: dict[int, int] = {}
        self._wake = wake if wake is not None else threading.Event()

    def record_exit(self, pid: int, status: int) -> None:
        """The launcher saw process ``pid`` end with shell-style ``status`` (128+N for signal N).

        Only the process that started a program knows its exit status; collectors that report on
        that pid (the CUPTI collector's TracedProcess.exit_status) read ``exit_statuses``.
        """
        self.exit_statuses[pid] = status
        self.notify()

    def notify(self) -> None:
        """Tell the core a collector has new data; a frame follows within 50 ms."""
        self._wake.set()

    @property
    def wake_event(self) -> threading.Event:
        return self._wake


NotifyFn = Callable[[], None]
