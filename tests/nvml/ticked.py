"""A collector with a history over a fake scenario, ticked by hand with a clock the test moves.

:class:`Ticked` keeps every part the collector made with the time it was stamped with: the
reference the history's answers are checked against (:func:`samples`, :func:`minute_stats`).
"""

from __future__ import annotations

import math
from typing import Any

from gpuflow.collectors.nvml.collector import NvmlCollector
from gpuflow.collectors.nvml.fake_backend import FakeBackend
from gpuflow.collectors.nvml.fake_scenarios import Scenario
from gpuflow.collectors.nvml.history import HistoryBudget, HistoryStore
from gpuflow.collectors.nvml.query import reset_log_once
from gpuflow.core.context import AgentConfig
from gpuflow.core.snapshot import SnapshotPart

#: where the clock starts: 10 s into a minute, so the first minute is a partial one
EPOCH = 1_764_600_010.0
NAN = float("nan")


class Ticked:
    def __init__(self, scenario: str | Scenario, interval_s: float = 1.0, seed: int = 0,
                 **budget: Any) -> None:
        reset_log_once()
        self.now = EPOCH
        self.interval_s = interval_s
        self.backend = FakeBackend(scenario, seed=seed, clock=lambda: self.now)
        self.backend.slow = {}
        self.store = HistoryStore(HistoryBudget(interval_s=interval_s, **budget))
        self.collector = NvmlCollector(
            self.backend, AgentConfig(interval_s=interval_s), proc_reader=self.backend.proc_reader,
            clock=lambda: self.now, hostname="h", history=self.store)
        self.parts: list[tuple[float, SnapshotPart]] = []

    def tick(self, n: int = 1) -> SnapshotPart:
        """``n`` intervals of the two threads: a sampler sweep, then a poll; the clock moves one
        interval after each."""
        c = self.collector
        for _ in range(n):
            c.sample_once()
            part = c.poll_once()
            self.parts.append((self.now, part))
            self.now += self.interval_s
        return part

    def query(self, start: float = 0.0, end: float = math.inf):
        return self.store.query(start, end, "nvml")


def value(v: Any) -> float:
    return NAN if v is None else float(v)


def reading(part: SnapshotPart, entity: tuple[str, ...], metric: str) -> float | None:
    """What ``part`` says of ``metric`` for ``entity`` (None: the entity is not in it)."""
    if entity[0] == "device":
        for d in part.devices:
            if d.uuid == entity[1]:
                return value(getattr(d, metric))
        return None
    for p in part.processes:
        if str(p.pid) == entity[1]:
            for a in p.attachments:
                if a.device_uuid == entity[2]:
                    return value(getattr(a, metric))
    return None


def samples(parts: list[tuple[float, SnapshotPart]], entity: tuple[str, ...],
            metric: str) -> list[tuple[float, float]]:
    """(t, value) of every part that holds ``entity``."""
    out = []
    for t, part in parts:
        v = reading(part, entity, metric)
        if v is not None:
            out.append((t, v))
    return out


def minute_stats(values: list[float]) -> tuple[float, float, float]:
    """The roll-up a minute of these samples must have: the mean of the available ones (exactly
    ``math.fsum / count``), their minimum and maximum; NaN three times if none is available."""
    available = [v for v in values if not math.isnan(v)]
    if not available:
        return NAN, NAN, NAN
    return math.fsum(available) / len(available), min(available), max(available)


def same(a: float, b: float) -> bool:
    """Equal, NaN equal to NaN (and a NaN never equal to 0)."""
    return (math.isnan(a) and math.isnan(b)) or a == b
