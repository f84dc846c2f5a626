"""The NVML history's layout: which columns a GPU or a GPU process has, and reading them back.

The store (history.py) keeps one row per tick holding every column (a *frame*), in a ring of
``array('d')``, and one row per minute of roll-ups, in another; "not available" is NaN, never 0:

* a GPU has the columns of DEVICE_METRICS, a process slot those of PROCESS_METRICS (one slot per
  process and GPU it holds; a slot outlives its process until it is needed for another);
* a :class:`Track` says where a GPU's or a slot's columns are (``offset``), which ticks of the
  fine ring are its own (``first`` .. ``left``) and which minutes of the coarse ring
  (``coarse_first`` .. ``coarse_last``);
* a roll-up row holds, per column, the mean, minimum and maximum of the minute's available
  samples (NaN, NaN, NaN when none was), in that order (STATS).

Constraints: no Python object per sample: a tick writes its changed columns into the current frame
with one ``struct.pack_into`` per GPU or process, and the frame into the ring with one slice
assignment; a reader copies a column with one strided slice (two where the ring wraps).
"""

from __future__ import annotations

import math
import struct
from array import array
from operator import attrgetter
from typing import Any

from gpuflow.core.recorded import FLOAT

NAN = float("nan")

#: What a GPU's columns keep: the snapshot's numeric Device readings that change tick by tick (its
#: memory total and power limit are fixed facts, in every snapshot), and their units.
DEVICE_METRICS: tuple[tuple[str, str], ...] = (
    ("utilization_gpu_pct", "%"), ("utilization_memory_pct", "%"), ("memory_used_bytes", "bytes"),
    ("temperature_c", "C"), ("power_draw_w", "W"), ("clock_sm_mhz", "MHz"),
    ("clock_mem_mhz", "MHz"), ("pcie_tx_bytes_per_s", "bytes/s"),
    ("pcie_rx_bytes_per_s", "bytes/s"),
)
#: What a process slot's columns keep on its GPU: the Attachment's memory and SM %.
PROCESS_METRICS: tuple[tuple[str, str], ...] = (("memory_used_bytes", "bytes"), ("sm_util_pct", "%"))
STATS = 3  #: columns per column in a roll-up row: mean, minimum, maximum


class RowWriter:
    """Writes one snapshot object's metrics into a frame at a column offset (None → NaN)."""

    __slots__ = ("read", "pack", "width")

    def __init__(self, metrics: tuple[tuple[str, str], ...]) -> None:
        self.read = attrgetter(*(name for name, _ in metrics))
        self.width = len(metrics)
        self.pack = struct.Struct(f"{self.width}d").pack_into

    def write(self, frame: array, offset: int, source: Any) -> None:
        """Write ``source``'s metrics at column ``offset`` (the tick inlines this; keep them alike)."""
        values = self.read(source)
        try:
            self.pack(frame, 8 * offset, *values)
        except struct.error:  # a None among them
            self.pack(frame, 8 * offset, *(NAN if v is None else v for v in values))

    def blank(self, frame: array, offset: int) -> None:
        frame[offset:offset + self.width] = array(FLOAT, [NAN]) * self.width


DEVICE_ROW = RowWriter(DEVICE_METRICS)
PROCESS_ROW = RowWriter(PROCESS_METRICS)


class Track:
    """Where one GPU's or one process slot's columns are, and since/until when they are its own."""

    __slots__ = ("entity", "order", "metrics", "writer", "offset", "first", "left", "coarse_first",
                 "coarse_last", "source")

    def __init__(self, writer: RowWriter, metrics: tuple[tuple[str, str], ...], offset: int) -> None:
        self.writer = writer
        self.metrics = metrics
        self.offset = offset  #: its first column in a frame
        self.entity: tuple[str, ...] = ()  #: ("device", uuid) or ("process", pid, device uuid)
        self.order: tuple[int, ...] = ()  #: where its series come in an answer
        self.first = -1  #: the tick from which the fine rows are its own (-1: no one's)
        self.left = -1  #: the first tick it was not there any more (-1: there now)
        self.coarse_first = self.coarse_last = -1  #: its first and last minutes rolled up
        self.source: Any = None  #: the snapshot object its columns in the current frame come from

    def take(self, entity: tuple[str, ...], order: tuple[int, ...], tick: int) -> None:
        """Make the columns this entity's from ``tick`` on (what they held before is unreachable)."""
        self.entity, self.order, self.first, self.left = entity, order, tick, -1
        self.coarse_first = self.coarse_last = -1
        self.source = None

    def until(self, ticks: int) -> int:
        """The tick after its last fine row, ``ticks`` being the store's count."""
        return ticks if self.left < 0 else self.left


def zeros(n: int) -> array:
    return array(FLOAT, bytes(8 * n))


def fill_nan(ring: array, width: int, capacity: int, start: int, stop: int) -> None:
    """Blank the rows at logical positions ``start .. stop - 1`` (modulo ``capacity``; at most
    ``capacity`` rows)."""
    count = min(stop - start, capacity)
    if count <= 0:
        return
    p = start % capacity
    head = min(count, capacity - p)
    ring[p * width:(p + head) * width] = array(FLOAT, [NAN]) * (head * width)
    if count > head:
        ring[0:(count - head) * width] = array(FLOAT, [NAN]) * ((count - head) * width)


def column(ring: array, width: int, capacity: int, col: int, start: int, stop: int) -> array:
    """Column ``col`` of the rows at logical positions ``start .. stop - 1`` (a copy)."""
    count = stop - start
    if count <= 0:
        return array(FLOAT)
    p = start % capacity
    if p + count <= capacity:
        return ring[p * width + col:(p + count) * width:width]
    return ring[p * width + col::width] + ring[col:(p + count - capacity) * width:width]


def stats(values: array) -> tuple[float, float, float]:
    """The mean (``math.fsum`` of the available values over their count), minimum and maximum of
    the values that are not NaN; NaN three times when none is."""
    available = values.tolist()
    total = math.fsum(available)  # NaN if any value is (readings are finite or NaN, never infinite)
    if total != total:
        available = [v for v in available if v == v]
        if not available:
            return NAN, NAN, NAN
        total = math.fsum(available)
    available.sort()
    return total / len(available), available[0], available[-1]
