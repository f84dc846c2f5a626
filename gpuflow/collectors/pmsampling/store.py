"""The PM samples the agent keeps: per GPU, every sample in a fixed byte budget, oldest out first,
answered as ``query_history`` series (docs/recorder.md, "History"; docs/gpu-metrics.md).

A sample is kept as its start (wall-clock seconds, a float64) and its slots' values (float32
each, NaN for "not available"): :data:`BYTES_PER_SAMPLE` bytes, no Python object per sample. The
budget (``--gpu-metrics-retain-mb``) is shared equally by the GPUs that send samples, each GPU's
share fixed when its first sample arrives from how many GPUs its sampler saw: its columns grow as
samples come, up to that share, and then the newest overwrites the oldest. So the store never
holds more than the budget, whatever the rate or the run's length (1 ms samples of one GPU:
32 MiB keep about 12.7 minutes).

An answer is, per GPU and slot collected, one :class:`~gpuflow.core.recorded.Series`
(``("device", uuid)``, the slot's metric, its unit, the sampling interval as resolution) of the
samples starting in ``[start, end)``; every series of one GPU shares one time array (arrays are
never mutated once answered). The least and the greatest SM are series of their own
(``pm_warps_active_min_pct`` ...), so exports write them as counter tracks like any reading.

Constraints: thread-safe (the drain thread adds, server threads query); a query holds the lock
only to copy the columns' slices (memory copies), and converts them outside it.
"""

from __future__ import annotations

import math
import threading
from array import array
from dataclasses import dataclass, field

from gpuflow.collectors.pmsampling import samples_layout as L
from gpuflow.core.recorded import FLOAT, HistoryPart, Series

BYTES_PER_SAMPLE = 8 + 4 * L.SLOT_COUNT
#: GPUs a budget is split between at most (a sampler that claims more is held to this)
MAX_DEVICES = 64


@dataclass
class _Device:
    uuid: str
    capacity: int
    resolution_s: float
    slots: int                                   #: bit i: slot i is collected
    t: array = field(default_factory=lambda: array("d"))
    columns: list[array] = field(default_factory=lambda: [array("f") for _ in range(L.SLOT_COUNT)])
    first: int = 0                               #: physical index of the oldest sample, once full
    evicted: int = 0

    def add(self, start: float, values: tuple[float, ...]) -> None:
        if len(self.t) < self.capacity:
            self.t.append(start)
            for column, v in zip(self.columns, values):
                column.append(v)
            return
        i = self.first
        self.t[i] = start
        for column, v in zip(self.columns, values):
            column[i] = v
        self.first = (i + 1) % self.capacity
        self.evicted += 1

    def logical(self, i: int) -> int:
        """The physical index of the i-th oldest sample."""
        return (self.first + i) % self.capacity if len(self.t) == self.capacity else i

    def time_at(self, i: int) -> float:
        return self.t[self.logical(i)]

    def index_of(self, t: float) -> int:
        """The first logical index whose start is at or after ``t`` (binary search)."""
        lo, hi = 0, len(self.t)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.time_at(mid) < t:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def copy(self, lo: int, hi: int) -> tuple[array, list[array]]:
        """Logical [lo, hi) of the time column and of every value column (slices: memory copies)."""
        a, n = self.logical(lo), hi - lo
        if a + n <= len(self.t):
            return self.t[a:a + n], [c[a:a + n] for c in self.columns]
        b = a + n - len(self.t)   # wraps: the rest is at the columns' start
        return self.t[a:] + self.t[:b], [c[a:] + c[:b] for c in self.columns]


class SampleStore:
    """Every GPU's samples within ``budget_bytes`` (0: keep none)."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self._devices: dict[str, _Device] = {}
        self._lock = threading.Lock()

    def add(self, uuid: str, device_count: int, interval_ns: int, slots: int, starts: list[float],
            values: list[tuple[float, ...]]) -> None:
        """Keep these samples of GPU ``uuid`` (starts ascending, each with its slots' values)."""
        if not starts or self.budget_bytes <= 0:
            return
        with self._lock:
            d = self._devices.get(uuid)
            if d is None:
                shares = max(1, min(MAX_DEVICES, device_count), len(self._devices) + 1)
                capacity = max(1, self.budget_bytes // shares // BYTES_PER_SAMPLE)
                d = self._devices[uuid] = _Device(uuid, capacity, max(interval_ns, 1) / 1e9, slots)
            d.slots |= slots
            last = d.time_at(len(d.t) - 1) if len(d.t) else -math.inf
            for start, row in zip(starts, values):
                if start < last:     # a restarted sampler's older clock: never out of order
                    continue
                d.add(start, row)
                last = start

    def held(self) -> int:
        """Samples kept now, all GPUs together."""
        with self._lock:
            return sum(len(d.t) for d in self._devices.values())

    def bytes_held(self) -> int:
        with self._lock:
            return sum(len(d.t) * BYTES_PER_SAMPLE for d in self._devices.values())

    def query(self, start_s: float, end_s: float, source: str) -> HistoryPart | None:
        """The series of the samples starting in ``[start_s, end_s)``; None when nothing is kept."""
        copies = []
        with self._lock:
            if not self._devices:
                return None
            froms = [d.time_at(0) for d in self._devices.values() if len(d.t)]
            tos = [d.time_at(len(d.t) - 1) + d.resolution_s for d in self._devices.values() if len(d.t)]
            for d in self._devices.values():
                lo, hi = d.index_of(start_s), d.index_of(end_s)
                if hi > lo:
                    copies.append((d.uuid, d.resolution_s, d.slots, *d.copy(lo, hi)))
        series = []
        for uuid, resolution, slots, t, columns in copies:
            for i, (metric, unit, _bounds) in enumerate(L.SLOT_METRICS):
                if slots >> i & 1:
                    series.append(Series(entity=("device", uuid), metric=metric, unit=unit, resolution_s=resolution,
                                         t_s=t, value=array(FLOAT, columns[i])))
        return HistoryPart(source=source, retained_from_s=min(froms) if froms else None,
                           retained_to_s=max(tos) if tos else None, series=tuple(series))
