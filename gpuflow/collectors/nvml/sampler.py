"""The NVML collector's slow lane: the readings NVML takes its time over, sampled in the background.

Three NVML calls are far slower than the rest (measured on an H200, driver 580):
``nvmlDeviceGetPcieThroughput`` blocks ~20 ms per counter (NVML measures over a 20 ms window
inside the call; the cumulative ``NVML_FI_DEV_PCIE_COUNT_*_BYTES`` fields are 32-bit and wrap
several times a second under load, so they are no substitute), the per-process utilization call
takes ~1.7 ms (even when it has nothing to report) and ``nvmlDeviceGetMigMode`` ~110 µs. The
other fields take 2-40 µs. Making the slow calls on the poll thread would put a tick at ~43 ms
per GPU against a budget of 1 ms, so a second thread sweeps them once per interval and the tick
uses the latest sweep: PCIe throughput, MIG mode and per-process utilization are therefore up
to one interval older than the rest of a snapshot.

Per-process utilization keeps a ``lastSeenTimeStamp`` per device (NVML then returns only newer
samples) and the latest sample per pid. NVML samples only processes that ran on the GPU, so a
process with no sample in the last :attr:`Sampler.fresh_s` seconds has no SM % (None, not 0),
as ``nvidia-smi pmon`` shows ``-``. The call is skipped for GPUs with no processes.

Constraints: runs on its own daemon thread; publishes per-device results by replacing immutable
objects in a dict (no lock needed by the reader); a lost or failing GPU loses its own results only.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from gpuflow.collectors.nvml.backend import MIG_DISABLE, MIG_ENABLE, NvmlBackend
from gpuflow.collectors.nvml.query import DeviceLost, nvml_query

log = logging.getLogger("gpuflow.nvml")

KIB = 1024  #: NVML's PCIe throughput unit is KB/s; we report bytes/s


@dataclass(frozen=True)
class ProcUtil:
    sm: int | None  #: %
    mem: int | None  #: %
    timestamp_us: int  #: when NVML took the sample (wall clock, µs)


@dataclass(frozen=True)
class Sampled:
    """One sweep's results for one device."""

    pcie_tx_bytes_per_s: int | None = None
    pcie_rx_bytes_per_s: int | None = None
    mig_mode: str | None = None  #: "enabled" | "disabled" | None
    proc_util_supported: bool = False  #: NVML answered the per-process utilization call
    proc_util: dict[int, ProcUtil] = field(default_factory=dict)  #: pid → latest sample
    #: (pcie_tx_bytes_per_s, pcie_rx_bytes_per_s, mig_mode): what the tick puts in the Device
    device_fields: tuple[Any, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "device_fields",
                           (self.pcie_tx_bytes_per_s, self.pcie_rx_bytes_per_s, self.mig_mode))


def mig_text(mode: int | None) -> str | None:
    if mode == MIG_ENABLE:
        return "enabled"
    if mode == MIG_DISABLE:
        return "disabled"
    return None


class Sampler:
    """Sweeps the slow readings of every device; :meth:`get` returns the latest sweep's result."""

    def __init__(self, backend: NvmlBackend, fresh_s: float, clock: Callable[[], float] = time.time) -> None:
        self._b = backend
        self._clock = clock
        self.fresh_s = fresh_s  #: per-process samples older than this are not shown
        self._results: dict[int, Sampled] = {}
        self._last_seen_us: dict[int, int] = {}
        self.sweeps = 0
        self.last_sweep_s: float | None = None

    def get(self, index: int) -> Sampled | None:
        return self._results.get(index)

    def forget(self) -> None:
        """Drop everything (NVML was re-initialized: handles changed)."""
        self._results = {}
        self._last_seen_us = {}

    def sweep(self, devices: Iterable[tuple[int, Any]], busy: frozenset[int] | None) -> None:
        """Sample each ``(index, handle)``; per-process utilization only where ``busy`` has the index
        (all devices when ``busy`` is None: nothing is known yet)."""
        t0 = time.perf_counter()
        for index, handle in devices:
            try:
                self._results[index] = self._sample(index, handle, busy is None or index in busy)
            except DeviceLost:
                self._results.pop(index, None)
                self._last_seen_us.pop(index, None)
            except Exception:  # noqa: BLE001 - one device's failure must not stop the sweep
                log.exception("sampling GPU %d failed", index)
                self._results.pop(index, None)
        self.sweeps += 1
        self.last_sweep_s = time.perf_counter() - t0

    def _sample(self, index: int, handle: Any, busy: bool) -> Sampled:
        b = self._b
        tx = nvml_query(b.pcie_tx, handle)
        rx = nvml_query(b.pcie_rx, handle)
        mig = nvml_query(b.mig_mode, handle)
        previous = self._results.get(index)
        util: dict[int, ProcUtil] = {}
        supported = False
        if busy:
            samples = nvml_query(b.process_utilization, handle, self._last_seen_us.get(index, 0),
                                 not_found=[])
            supported = samples is not None
            now_us = int(self._clock() * 1e6)
            oldest_kept = now_us - int(2e6 * self.fresh_s)
            if previous is not None:
                util = {pid: u for pid, u in previous.proc_util.items() if u.timestamp_us >= oldest_kept}
            last_seen = self._last_seen_us.get(index, 0)
            for s in samples or ():
                known = util.get(s.pid)
                if known is None or s.timestamp_us >= known.timestamp_us:
                    util[s.pid] = ProcUtil(s.sm, s.mem, s.timestamp_us)
                if s.timestamp_us > last_seen:
                    last_seen = s.timestamp_us
            self._last_seen_us[index] = last_seen
        return Sampled(
            pcie_tx_bytes_per_s=None if tx is None else tx * KIB,
            pcie_rx_bytes_per_s=None if rx is None else rx * KIB,
            mig_mode=mig_text(mig),
            proc_util_supported=supported,
            proc_util=util,
        )
