"""The NVML collector's slow lane: the readings NVML takes its time over, sampled in the background.

Four NVML calls are far slower than the rest (measured on an H200, driver 580):
``nvmlDeviceGetPcieThroughput`` blocks ~20 ms per counter (NVML measures over a 20 ms window
inside the call; the cumulative ``NVML_FI_DEV_PCIE_COUNT_*_BYTES`` fields are 32-bit and wrap
several times a second under load, so they are no substitute),
``nvmlDeviceGetTotalEnergyConsumption`` takes ~3.2 ms (median; 7.3 ms p95; its field-values form
``NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` the same), the per-process utilization call ~1.7-2.3 ms
(even when it has nothing to report) and ``nvmlDeviceGetMigMode`` ~110 µs. The other fields take
2-40 µs. Making the slow calls on the poll thread would put a tick at ~46 ms per GPU against a
budget of 1 ms, so a second thread sweeps them once per interval and the tick uses the latest
sweep: PCIe throughput, MIG mode, per-process utilization and the energy counter are therefore
up to one interval older than the rest of a snapshot. The energy counter is cumulative
(millijoules since the driver was loaded), so each reading is exact for its moment: only when it
was read moves, by at most one interval.

The sweep also reads what changes slowly or needs no tick-rate view (health and links): the
energy counter (above), encoder
and decoder utilization, memory temperature, ECC counters, remapped rows, the PCIe replay counter,
the current PCIe generation and width, the XID events that arrived since the last sweep (one
NVML event set per GPU, polled with a 0 ms wait), each NVLink's state and its cumulative data
counters (one field-values call per GPU for all its links; rates from the difference between
sweeps), and, on a GPU in MIG mode, its GPU instance ids (the tick samples GPM per instance).
A GPU whose PCIe rates GPM gives exactly (:attr:`GpmTracker.pcie_exact`) skips NVML's 20 ms
throughput calls.

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
from typing import Any, Callable, Iterable, NamedTuple

from gpuflow.collectors.nvml.backend import MIG_DISABLE, MIG_ENABLE, NvmlBackend
from gpuflow.collectors.nvml.gpm import GpmTracker
from gpuflow.collectors.nvml.query import DeviceLost, entry_value, nvml_query
from gpuflow.core.frozen import positional_constructor
from gpuflow.core.snapshot import NvLink

log = logging.getLogger("gpuflow.nvml")

KIB = 1024  #: NVML's PCIe throughput unit is KB/s, its NVLink data counters' KiB; we report bytes

make_nvlink = positional_constructor(NvLink)

#: health_slow before the first sweep, or for a GPU the sweep could not read: every field None
NO_HEALTH = (None,) * 15
NO_LINKS = (None, None, ())  #: (pcie_gen, pcie_width, nvlinks)


class Remote(NamedTuple):
    """What one NVLink of a GPU reaches, read once per init."""

    link: int
    pci_bus_id: str | None
    device_index: int | None  #: the peer GPU on this host, if the link reaches one


class SweepTarget(NamedTuple):
    """One GPU as the sampler sees it (fixed per init)."""

    index: int
    handle: Any
    xid_watch: Any  #: the GPU's XID event set (None: NVML cannot watch it)
    nvlinks: tuple[Remote, ...]  #: the links NVML answered for at init
    gpm: GpmTracker | None  #: the GPU's GPM tracker (None: no GPM)


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
    #: HealthReadings' slow fields: energy_joules, memory_temperature_c, xid_errors, xid_last,
    #: the four ECC counters, remapped rows (correctable, uncorrectable, pending, failure),
    #: pcie_replays, encoder_util_pct, decoder_util_pct
    health_slow: tuple[Any, ...] = NO_HEALTH
    links_slow: tuple[Any, ...] = NO_LINKS  #: (pcie_gen, pcie_width, nvlinks)
    gpu_instance_ids: tuple[int, ...] = ()  #: MIG GPU instances (MIG mode only)
    #: what the tick puts in the Device: (pcie_tx_bytes_per_s, pcie_rx_bytes_per_s, mig_mode,
    #: health_slow, links_slow, gpu_instance_ids)
    device_fields: tuple[Any, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "device_fields",
                           (self.pcie_tx_bytes_per_s, self.pcie_rx_bytes_per_s, self.mig_mode,
                            self.health_slow, self.links_slow, self.gpu_instance_ids))


def mig_text(mode: int | None) -> str | None:
    if mode == MIG_ENABLE:
        return "enabled"
    if mode == MIG_DISABLE:
        return "disabled"
    return None


class Sampler:
    """Sweeps the slow readings of every device; :meth:`get` returns the latest sweep's result."""

    def __init__(self, backend: NvmlBackend, fresh_s: float, clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._b = backend
        self._clock = clock
        self.fresh_s = fresh_s  #: per-process samples older than this are not shown
        self._results: dict[int, Sampled] = {}
        self._last_seen_us: dict[int, int] = {}
        self._xids: dict[int, tuple[int, int | None]] = {}  #: index → (events seen, last code)
        #: index → (time, per link (tx bytes, rx bytes)) of the last sweep, for NVLink rates
        self._nvlink_before: dict[int, tuple[float, tuple[tuple[Any, Any], ...]]] = {}
        self._monotonic = monotonic  #: NVLink rates: bytes between sweeps over this clock's time
        self.sweeps = 0
        self.last_sweep_s: float | None = None

    def get(self, index: int) -> Sampled | None:
        return self._results.get(index)

    def forget(self) -> None:
        """Drop everything (NVML was re-initialized: handles changed)."""
        self._results = {}
        self._last_seen_us = {}
        self._xids = {}
        self._nvlink_before = {}

    def sweep(self, devices: Iterable[SweepTarget], busy: frozenset[int] | None) -> None:
        """Sample each GPU; per-process utilization only where ``busy`` has the index (all
        devices when ``busy`` is None: nothing is known yet)."""
        t0 = time.perf_counter()
        for target in devices:
            index = target.index
            try:
                self._results[index] = self._sample(target, busy is None or index in busy)
            except DeviceLost:
                self._results.pop(index, None)
                self._last_seen_us.pop(index, None)
            except Exception:  # noqa: BLE001 - one device's failure must not stop the sweep
                log.exception("sampling GPU %d failed", index)
                self._results.pop(index, None)
        self.sweeps += 1
        self.last_sweep_s = time.perf_counter() - t0

    def _sample(self, target: SweepTarget, busy: bool) -> Sampled:
        b = self._b
        index, handle = target.index, target.handle
        if target.gpm is not None and target.gpm.pcie_exact:
            tx = rx = None  # the tick has GPM's exact rates: skip NVML's 20 ms snapshots
        else:
            tx = nvml_query(b.pcie_tx, handle)
            rx = nvml_query(b.pcie_rx, handle)
        mig = nvml_query(b.mig_mode, handle)
        health = self._health(target)
        links = (*_link_now(b, handle), self._nvlinks(target))
        instances: tuple[int, ...] = ()
        if mig == MIG_ENABLE:
            instances = tuple(sorted(nvml_query(b.mig_gpu_instance_ids, handle) or ()))
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
            health_slow=health,
            links_slow=links,
            gpu_instance_ids=instances,
        )

    def _health(self, target: SweepTarget) -> tuple[Any, ...]:
        """Sampled.health_slow for one GPU: each reading None where NVML cannot give it."""
        b, h = self._b, target.handle
        millijoules = nvml_query(b.energy, h)
        answer = nvml_query(b.memory_temperature, h)
        memory_c = None if answer is None else entry_value(answer[0], answer[1], "memory temperature")
        ecc = nvml_query(b.ecc_counts, h) or (None, None, None, None)
        rows = nvml_query(b.remapped_rows, h)
        if rows is None:
            remap = (None, None, None, None)
        else:
            remap = (rows[0], rows[1], None if rows[2] is None else bool(rows[2]),
                     None if rows[3] is None else bool(rows[3]))
        xid_errors = xid_last = None
        if target.xid_watch is not None:
            seen, xid_last = self._xids.get(target.index, (0, None))
            codes = nvml_query(b.xid_poll, target.xid_watch, not_found=[]) or []
            if codes:
                seen += len(codes)
                xid_last = codes[-1]
                self._xids[target.index] = (seen, xid_last)
            xid_errors = seen
        return (None if millijoules is None else millijoules / 1000, memory_c, xid_errors, xid_last,
                *ecc, *remap, nvml_query(b.pcie_replay_counter, h),
                nvml_query(b.encoder_utilization, h), nvml_query(b.decoder_utilization, h))

    def _nvlinks(self, target: SweepTarget) -> tuple[NvLink, ...]:
        """Each NVLink's state, cumulative bytes and rate since the last sweep."""
        if not target.nvlinks:
            return ()
        b, h = self._b, target.handle
        numbers = tuple(r.link for r in target.nvlinks)
        answers = nvml_query(b.nvlink_throughput, h, numbers)
        now = self._monotonic()
        totals = []
        for i in range(len(numbers)):
            pair = []
            for j in (2 * i, 2 * i + 1):
                if answers is None or j >= len(answers):
                    pair.append(None)
                else:
                    kib = entry_value(answers[j][0], answers[j][1], "NVLink data counter")
                    pair.append(None if kib is None else int(kib) * KIB)
            totals.append(tuple(pair))
        before = self._nvlink_before.get(target.index)
        self._nvlink_before[target.index] = (now, tuple(totals))
        out = []
        for i, remote in enumerate(target.nvlinks):
            state = nvml_query(b.nvlink_state, h, remote.link)
            tx, rx = totals[i]
            tx_rate = rx_rate = None
            if before is not None and now > before[0]:
                tx0, rx0 = before[1][i]
                dt = now - before[0]
                if tx is not None and tx0 is not None and tx >= tx0:
                    tx_rate = (tx - tx0) / dt
                if rx is not None and rx0 is not None and rx >= rx0:
                    rx_rate = (rx - rx0) / dt
            out.append(make_nvlink(remote.link, None if state is None else ("up" if state else "down"),
                                   remote.pci_bus_id, remote.device_index, tx_rate, rx_rate, tx, rx))
        return tuple(out)


def _link_now(b: NvmlBackend, handle: Any) -> tuple[Any, Any]:
    link = nvml_query(b.pcie_link, handle)
    return (None, None) if link is None else (link[0], link[1])
