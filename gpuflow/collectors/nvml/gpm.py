"""NVML GPM (GPU performance monitoring): a rolling pair of samples per GPU or MIG instance.

GPM (Hopper and newer) gives device-wide (or MIG-instance-wide) means over the time between two
samples: the share of SMs busy, SM occupancy, tensor/DRAM/FP activity, PCIe and NVLink bytes per
second. Nothing in it is per SM or per process. The call sequence (docs/nvml.md, "GPM"):
``nvmlGpmQueryDeviceSupport`` once per init, two buffers from ``nvmlGpmSampleAlloc``, then each
tick ``nvmlGpmSampleGet`` into the spare buffer and one ``nvmlGpmMetricsGet`` over (previous,
new); the new sample becomes the previous one. The driver refreshes its counters about every
100 ms, so a pair closer than :data:`MIN_GAP_S` is not taken: the tick keeps the last means until
the gap is there (a ``--interval`` below 100 ms rolls every other tick or so). Each metric has
its own return code: one the GPU or driver does not offer (NotSupported, or InvalidArgument for
an id this driver does not know) is None, never 0.

Which ids each pair evaluates: evaluating ``GRAPHICS_UTIL`` alone costs the driver ~1.2 ms on an
H200 (driver 580), where each other id costs ~4 µs (bench/nvml_calls.py; docs/nvml.md, "Cost").
So :data:`FAST_IDS` (the other 12) are evaluated over every pair and ``GRAPHICS_UTIL`` only over
the first pair and then at most once every :data:`GRAPHICS_EVERY_S` seconds of the collector's
clock, in the same ``nvmlGpmMetricsGet`` as the others (:data:`METRIC_IDS`, over the pair in force
then). Between evaluations ``graphics_util_pct`` is the latest evaluation's: it covers a pair
that ended less than :data:`GRAPHICS_EVERY_S` before the tick that took the newest pair. A tracker
that loses its GPU (or its pair) evaluates it again with its next pair.

PCIe byte totals: the per-second PCIe means of contiguous pairs, times each pair's length,
summed since the tracker started: the bytes that crossed the link, as exact as GPM's rates
(the GPU check compares them with a program's own copy bytes, docs/gpu-metrics.md).

Constraints: on the poll thread only (the tick); two NVML calls per GPU and tick when a pair is
taken, none otherwise; the two id sets are constants and the values list is the tracker's own,
reused, so a tick that takes no pair makes no Python object here and one that takes a pair makes
only the backend's answers and the new GpmReadings; the buffers are given back
(:meth:`GpmTracker.close`) before nvmlShutdown, and a tracker that lost its GPU starts a new pair
when the GPU answers again.
"""

from __future__ import annotations

from typing import Any

import pynvml

from gpuflow.collectors.nvml.backend import NvmlBackend
from gpuflow.collectors.nvml.query import DeviceLost, entry_value, failed_query
from gpuflow.core.frozen import positional_constructor
from gpuflow.core.snapshot import GpmReadings

MIB = 1 << 20
MIN_GAP_S = 0.1  #: NVML's GPM refresh period: a pair closer than this says nothing new
#: GRAPHICS_UTIL (dcgm-exporter's DCGM_FI_PROF_GR_ENGINE_ACTIVE) is evaluated at most this often
#: (seconds of the collector's monotonic clock): it costs the driver ~300 times another id
GRAPHICS_EVERY_S = 10.0

#: (NVML_GPM_METRIC_* id, scale to GpmReadings' unit), in GpmReadings' field order after
#: gpu_instance_id and interval_s. GPM's PCIe and NVLink rates are MiB/s.
METRICS: tuple[tuple[int, float], ...] = (
    (1, 1.0),     # GRAPHICS_UTIL → graphics_util_pct
    (2, 1.0),     # SM_UTIL → sm_util_pct
    (3, 1.0),     # SM_OCCUPANCY → sm_occupancy_pct
    (4, 1.0),     # INTEGER_UTIL → integer_util_pct
    (5, 1.0),     # ANY_TENSOR_UTIL → tensor_util_pct
    (10, 1.0),    # DRAM_BW_UTIL → dram_bw_util_pct
    (11, 1.0),    # FP64_UTIL
    (12, 1.0),    # FP32_UTIL
    (13, 1.0),    # FP16_UTIL
    (20, MIB),    # PCIE_TX_PER_SEC → pcie_tx_bytes_per_s
    (21, MIB),    # PCIE_RX_PER_SEC → pcie_rx_bytes_per_s
    (61, MIB),    # NVLINK_TOTAL_TX_PER_SEC → nvlink_tx_bytes_per_s
    (60, MIB),    # NVLINK_TOTAL_RX_PER_SEC → nvlink_rx_bytes_per_s
)
METRIC_IDS: tuple[int, ...] = tuple(m for m, _ in METRICS)  #: a pair that evaluates GRAPHICS_UTIL
FAST_IDS: tuple[int, ...] = METRIC_IDS[1:]  #: every other pair: all but GRAPHICS_UTIL
_SCALES = tuple(s for _, s in METRICS)
_NAMES = {1: "GRAPHICS_UTIL", 2: "SM_UTIL", 3: "SM_OCCUPANCY", 4: "INTEGER_UTIL", 5: "ANY_TENSOR_UTIL",
          10: "DRAM_BW_UTIL", 11: "FP64_UTIL", 12: "FP32_UTIL", 13: "FP16_UTIL",
          20: "PCIE_TX_PER_SEC", 21: "PCIE_RX_PER_SEC", 61: "NVLINK_TOTAL_TX_PER_SEC",
          60: "NVLINK_TOTAL_RX_PER_SEC"}
_WHAT = tuple(f"GPM metric {_NAMES[m]}" for m in METRIC_IDS)
_PCIE_TX, _PCIE_RX = METRIC_IDS.index(20), METRIC_IDS.index(21)
_GRAPHICS = METRIC_IDS.index(1)
_AT_ONCE = float("-inf")  #: a due time every clock has passed
assert _GRAPHICS == 0 and FAST_IDS == METRIC_IDS[_GRAPHICS + 1:], "GRAPHICS_UTIL must come first"

make_gpm = positional_constructor(GpmReadings)


class GpmTracker:
    """One GPU's (or MIG instance's) rolling pair of GPM samples and what the last pair gave."""

    __slots__ = ("gpu_instance_id", "_samples", "_have_previous", "_previous_t", "latest",
                 "pcie_tx_bytes", "pcie_rx_bytes", "pcie_exact", "broken", "_values",
                 "_graphics_due", "graphics_evaluations")

    def __init__(self, samples: list[Any], gpu_instance_id: int | None = None) -> None:
        self.gpu_instance_id = gpu_instance_id
        self._samples = samples  #: [previous, spare]
        self._have_previous = False
        self._previous_t = 0.0
        self.latest: GpmReadings | None = None  #: the means of the last pair
        self.pcie_tx_bytes: float | None = None  #: bytes summed over the pairs so far
        self.pcie_rx_bytes: float | None = None
        #: whether GPM gives this GPU's PCIe rates (None: no pair yet); the sampler keeps NVML's
        #: slow throughput call for GPUs where it does not
        self.pcie_exact: bool | None = None
        #: closed, or a sample could not be taken (NotSupported): no more tries this init
        self.broken = False
        #: the means of the last pair, in METRIC_IDS' order, scaled; reused from pair to pair
        #: (index 0, GRAPHICS_UTIL, holds its latest evaluation between evaluations)
        self._values: list[float | None] = [None] * len(METRIC_IDS)
        #: the clock's time from which a pair evaluates GRAPHICS_UTIL again (-inf: the next pair)
        self._graphics_due = _AT_ONCE
        self.graphics_evaluations = 0  #: pairs that evaluated GRAPHICS_UTIL (the bench prints it)

    @classmethod
    def open(cls, b: NvmlBackend, gpu_instance_id: int | None = None) -> GpmTracker | None:
        """Two sample buffers, or None when NVML cannot give them."""
        samples: list[Any] = []
        try:
            for _ in range(2):
                samples.append(b.gpm_alloc())
        except pynvml.NVMLError as exc:
            for s in samples:
                _free(b, s)
            failed_query(exc, b.gpm_alloc)
            return None
        return cls(samples, gpu_instance_id)

    def close(self, b: NvmlBackend) -> None:
        """Give the buffers back (before nvmlShutdown); the tracker is done."""
        for s in self._samples:
            _free(b, s)
        self._samples = []
        self.broken = True

    def forget_pair(self) -> None:
        """Start a new pair at the next roll (the GPU was lost, or not sampled for a while); the
        GRAPHICS_UTIL value is dropped and evaluated again over that pair."""
        self._have_previous = False
        self._values[_GRAPHICS] = None
        self._graphics_due = _AT_ONCE

    def graphics_next(self) -> None:
        """Evaluate GRAPHICS_UTIL over the next pair, whenever it was due (bench/nvml_tick.py
        times pairs that evaluate it: lowering GRAPHICS_EVERY_S alone waits for the due time)."""
        self._graphics_due = _AT_ONCE

    def roll(self, b: NvmlBackend, handle: Any, now: float, min_gap_s: float = MIN_GAP_S) -> GpmReadings | None:
        """Take a sample if the last one is at least ``min_gap_s`` old and evaluate the pair.

        :returns: the means of the latest pair (the same object while no new pair was taken), or
            None before the first pair and when GPM does not answer.
        :raises DeviceLost: the GPU stopped answering (the next roll starts a new pair).
        """
        if self.broken:
            return None
        if self._have_previous and now - self._previous_t < min_gap_s:
            return self.latest
        previous, spare = self._samples
        try:
            b.gpm_sample(handle, spare, self.gpu_instance_id)
        except pynvml.NVMLError as exc:
            self.forget_pair()
            if isinstance(exc, pynvml.NVMLError_NotSupported):
                self.close(b)  # e.g. the whole GPU in MIG mode: its buffers go back at once
            failed_query(exc, b.gpm_sample)  # raises DeviceLost for a lost GPU
            self.latest = None
            return None
        self._samples = [spare, previous]
        if not self._have_previous:
            self._have_previous = True
            self._previous_t = now
            return self.latest
        interval = now - self._previous_t
        self._previous_t = now
        graphics = now >= self._graphics_due
        try:
            answers = b.gpm_metrics(previous, spare, METRIC_IDS if graphics else FAST_IDS)
        except pynvml.NVMLError as exc:  # GRAPHICS_UTIL, if due, stays due
            self.latest = failed_query(exc, b.gpm_metrics)  # None, or DeviceLost raised
            return None
        values = self._values
        i = _GRAPHICS if graphics else _GRAPHICS + 1
        try:
            for code, value in answers:
                if code or type(value) is not float:  # an entry's error, or an integer sentinel
                    value = entry_value(code, value, _WHAT[i])
                values[i] = value * _SCALES[i] if value is not None and value >= 0 else None
                i += 1
        except DeviceLost:
            self.forget_pair()
            raise
        if graphics:
            self._graphics_due = now + GRAPHICS_EVERY_S
            self.graphics_evaluations += 1
        tx, rx = values[_PCIE_TX], values[_PCIE_RX]
        if self.gpu_instance_id is None:
            self.pcie_exact = tx is not None and rx is not None
            if tx is not None:
                self.pcie_tx_bytes = (self.pcie_tx_bytes or 0.0) + tx * interval
            if rx is not None:
                self.pcie_rx_bytes = (self.pcie_rx_bytes or 0.0) + rx * interval
        self.latest = make_gpm(self.gpu_instance_id, interval, *values)
        return self.latest


def _free(b: NvmlBackend, sample: Any) -> None:
    try:
        b.gpm_free(sample)
    except Exception:  # noqa: BLE001 - giving a buffer back must not raise
        pass
