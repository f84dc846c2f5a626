"""The NVML collector's history: every GPU's and GPU process's readings over time, in a fixed budget.

Fed by the poll thread once per tick (:meth:`HistoryStore.record`, never by a query), answered from
any thread (:meth:`HistoryStore.query`, the plugin's ``query_history``; docs/recorder.md, "History"):

* per GPU, the snapshot Device's changing numeric readings (history_track.DEVICE_METRICS); per
  process and GPU it holds, the Attachment's memory and SM %; "not available" is NaN, never 0;
* at the polling rate for ``fine_s`` (an hour): one row per tick holding every column (a frame:
  history_track.py) in a ring of :attr:`HistoryBudget.fine_ticks` rows, beside a ring of times;
* beyond that, one roll-up a minute (of wall-clock time, ``t // 60``) for ``coarse_s`` (a day):
  the mean, minimum and maximum of the minute's available samples, computed from its fine rows
  when the first tick of a later minute arrives (so exactly the samples it stands for);
* process slots are bounded (``processes``): a process that left keeps its slot until a new one
  needs it, the one that left longest ago first; processes beyond the bound while every slot's
  process still holds a GPU are not kept, and the answer says so;
* the rings grow as they fill (until they first wrap, row k is at k), up to the budget
  (:meth:`HistoryBudget.nbytes`) and no further.

An answer gives, per GPU or slot and metric, the roll-ups of the minutes before the oldest whole
minute still at the polling rate (the join), then the samples at the polling rate from there on:
two :class:`~gpuflow.core.recorded.Series` of different ``resolution_s``, never overlapping.

Constraints: the tick's cost (bench/history.py; the NVML tick's budget is 1 ms per GPU): the
columns of a GPU or process are rewritten in the frame only when its snapshot object changed
(one ``pack_into``), and the frame goes into the ring with one slice assignment; no Python object
per sample; the lock is held by a tick's writes (~15 µs) and by a reader's copy of one GPU's or
slot's columns at a time (~0.1 ms for an hour), never by the roll-up's arithmetic; times never go
backwards (a clock stepped back repeats the newest time until it catches up).
"""

from __future__ import annotations

import math
import struct
import threading
from array import array
from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

from gpuflow.collectors.nvml.history_track import (
    DEVICE_METRICS,
    DEVICE_ROW,
    NAN,
    PROCESS_METRICS,
    PROCESS_ROW,
    STATS,
    Track,
    column,
    fill_nan,
    stats,
    zeros,
)
from gpuflow.core.recorded import FLOAT, HistoryPart, Series
from gpuflow.core.snapshot import Problem

ROLLUP_S = 60.0  #: one roll-up per this many seconds of wall-clock time
#: the most ticks kept at the polling rate (an hour at 10 Hz), whatever the interval
MAX_FINE_TICKS = 36_000
GROW_ROWS = 64  #: a ring grows by at least this many rows (doubling) until it holds its budget


@dataclass(frozen=True)
class HistoryBudget:
    """How much the history keeps; its bytes follow (:meth:`nbytes`)."""

    interval_s: float  #: the polling interval
    fine_s: float = 3600.0  #: how long samples are kept at the polling rate
    coarse_s: float = 86_400.0  #: how long roll-ups are kept
    processes: int = 32  #: process slots (one per process and GPU it holds)
    #: the shortest time between two ticks (the poll loop's); sizes the ring for fast polling
    min_tick_s: float = 0.005

    def __post_init__(self) -> None:
        # a minute's ticks must all be in the ring when the minute is rolled up: keep 3 minutes
        if self.fine_ticks * max(self.interval_s, self.min_tick_s) < 3 * ROLLUP_S:
            raise ValueError(f"the history's fine stretch must be at least {3 * ROLLUP_S:g} s")
        if self.coarse_minutes < 1 or self.processes < 0:
            raise ValueError("the history keeps at least one roll-up and no negative slots")

    @property
    def fine_ticks(self) -> int:
        """Rows at the polling rate: ``fine_s`` of ticks, at most MAX_FINE_TICKS."""
        return min(MAX_FINE_TICKS, math.ceil(self.fine_s / max(self.interval_s, self.min_tick_s)))

    @property
    def coarse_minutes(self) -> int:
        return math.ceil(self.coarse_s / ROLLUP_S)

    def width(self, gpus: int) -> int:
        """Columns of a frame with ``gpus`` GPUs."""
        return gpus * len(DEVICE_METRICS) + self.processes * len(PROCESS_METRICS)

    def nbytes(self, gpus: int) -> int:
        """What the store holds with ``gpus`` GPUs, whatever comes and goes: the times, the fine
        ring, the roll-ups and the frame being filled, 8 bytes a value."""
        width = self.width(gpus)
        return 8 * (self.fine_ticks * (1 + width) + self.coarse_minutes * STATS * width + width)


class _RingTimes:
    """The times ring seen oldest first, for bisect (no copy)."""

    __slots__ = ("times", "oldest", "capacity", "count")

    def __init__(self, times: array, oldest: int, capacity: int, count: int) -> None:
        self.times, self.oldest, self.capacity, self.count = times, oldest, capacity, count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> float:
        return self.times[(self.oldest + i) % self.capacity]


class HistoryStore:
    """The history of one collector (docs/recorder.md, "History"). Laid out at the first tick for
    its GPUs; another set of GPUs (NVML initialised anew) starts it over."""

    def __init__(self, budget: HistoryBudget) -> None:
        self.budget = budget
        self._cap = budget.fine_ticks
        self._minutes = budget.coarse_minutes
        self._lock = threading.Lock()
        self._lay_out(())

    def _lay_out(self, devices: tuple[Any, ...]) -> None:
        width = self.budget.width(len(devices))
        self._width = width
        # the rings grow to their budget as they fill (until they first wrap, row k is at k)
        self._times, self._fine, self._coarse = zeros(0), zeros(0), zeros(0)
        self._frame = array(FLOAT, [NAN]) * width  # the row the next tick writes
        step = len(DEVICE_METRICS)
        self._devices = []
        for i, d in enumerate(devices):
            track = Track(DEVICE_ROW, DEVICE_METRICS, i * step)
            track.take(("device", d.uuid), (d.index,), 0)
            self._devices.append(track)
        base = len(devices) * step
        self._slots = [Track(PROCESS_ROW, PROCESS_METRICS, base + s * len(PROCESS_METRICS))
                       for s in range(self.budget.processes)]
        self._slot_of: dict[tuple[int, str], Track] = {}  # (pid, device uuid) → its slot
        self._present: set[Track] = set()  # the slots of the processes of the last tick
        self._untracked = 0  # processes on a GPU the last tick found no slot for
        self._seen: tuple[Any, Any] = (None, None)  # the devices and processes written to the frame
        self._ticks = 0  # ticks recorded; tick k's row is at position k % _cap
        self._last_t = -math.inf
        self._minute = -1  # the minute being filled, and its first tick
        self._minute_first = 0
        self._rolled_first = self._rolled_last = -1  # the first and newest minutes rolled up

    # -- the poll thread ------------------------------------------------------------------------
    def record(self, t: float, devices: tuple[Any, ...], processes: tuple[Any, ...]) -> None:
        """One tick at ``t`` (seconds since the epoch): the part's Devices and Processes."""
        if not devices:
            return
        if len(devices) != len(self._devices):
            self._start_over(devices)
        if t < self._last_t:
            t = self._last_t
        minute = int(t // ROLLUP_S)
        if minute != self._minute:
            if self._minute >= 0 and self._ticks > self._minute_first:
                self._roll_up()
            self._minute, self._minute_first = minute, self._ticks
        frame, width = self._frame, self._width
        if devices is not self._seen[0]:
            read, pack = DEVICE_ROW.read, DEVICE_ROW.pack  # DEVICE_ROW.write, inline
            for track, d in zip(self._devices, devices):
                if d is not track.source:
                    if d.uuid != track.entity[1]:  # other GPUs: a new layout (see the class)
                        self._start_over(devices)
                        return self.record(t, devices, processes)
                    track.source = d
                    try:  # the frame is this thread's alone
                        pack(frame, 8 * track.offset, *read(d))
                    except struct.error:
                        DEVICE_ROW.write(frame, track.offset, d)
        with self._lock:
            k = self._ticks
            if processes is not self._seen[1]:
                self._place_processes(k, processes)
            self._seen = (devices, processes)
            position = k % self._cap
            if position == len(self._times):
                self._grow_fine()
            o = position * width
            self._fine[o:o + width] = frame
            self._times[position] = t
            self._ticks = k + 1
            self._last_t = t

    def _grow_fine(self) -> None:
        rows = len(self._times)
        more = min(self._cap, max(2 * rows, GROW_ROWS)) - rows
        self._times.frombytes(bytes(8 * more))
        self._fine.frombytes(bytes(8 * more * self._width))

    def _start_over(self, devices: tuple[Any, ...]) -> None:
        with self._lock:
            self._lay_out(devices)

    def _place_processes(self, k: int, processes: tuple[Any, ...]) -> None:
        """Each process on each GPU into its slot's columns of the frame; a new one takes a free
        slot, else the slot of the process that left longest ago; one that left is blanked."""
        frame, slot_of = self._frame, self._slot_of
        read, pack = PROCESS_ROW.read, PROCESS_ROW.pack  # PROCESS_ROW.write, inline
        now: set[Track] = set()
        new = []
        for p in processes:
            pid = p.pid
            for a in p.attachments:
                slot = slot_of.get((pid, a.device_uuid))
                if slot is None:
                    new.append((pid, a))
                    continue
                now.add(slot)
                if a is not slot.source:
                    slot.source = a
                    slot.left = -1
                    try:
                        pack(frame, 8 * slot.offset, *read(a))
                    except struct.error:
                        PROCESS_ROW.write(frame, slot.offset, a)
        for slot in self._present - now:
            slot.left, slot.source = k, None
            PROCESS_ROW.blank(frame, slot.offset)
        untracked = 0
        for pid, a in new:
            free = [s for s in self._slots if s not in now]
            if not free:
                untracked += 1
                continue
            slot = min(free, key=lambda s: (bool(s.entity), s.left))
            if slot.entity:
                del slot_of[(int(slot.entity[1]), slot.entity[2])]
            slot.take(("process", str(pid), a.device_uuid), (pid, a.device_index), k)
            slot_of[(pid, a.device_uuid)] = slot
            now.add(slot)
            slot.source = a
            PROCESS_ROW.write(frame, slot.offset, a)
        self._present = now
        self._untracked = untracked

    def _roll_up(self) -> None:
        """Roll the minute that just ended up: per column, the mean, minimum and maximum of its
        samples (computed outside the lock: only this thread writes the fine ring)."""
        minute, k, cap, minutes, width = self._minute, self._ticks, self._cap, self._minutes, self._width
        start = max(self._minute_first, k - cap)  # the ring holds the whole minute (the budget)
        row = array(FLOAT, [NAN]) * (STATS * width)
        rolled = []
        for track in (*self._devices, *self._slots):
            if not track.entity:
                continue
            a, b = max(track.first, start), min(track.until(k), k)
            if a >= b:
                continue
            rolled.append(track)
            for c in range(track.offset, track.offset + len(track.metrics)):
                row[STATS * c], row[STATS * c + 1], row[STATS * c + 2] = stats(column(
                    self._fine, width, cap, c, a, b))
        with self._lock:
            if self._rolled_first < 0:
                self._rolled_first = minute
            last, base, coarse = self._rolled_last, self._rolled_first, self._coarse
            rows = len(coarse) // (STATS * width)
            if rows < minutes and minute - base >= rows:
                more = min(minutes, max(2 * rows, minute - base + 1, GROW_ROWS)) - rows
                coarse.frombytes(bytes(8 * more * STATS * width))
            if last >= 0 and minute - last > 1:  # minutes without a tick
                fill_nan(coarse, STATS * width, minutes, last + 1 - base, minute - base)
            o = ((minute - base) % minutes) * STATS * width
            coarse[o:o + STATS * width] = row
            for track in rolled:
                if track.coarse_first < 0:
                    track.coarse_first = minute
                track.coarse_last = minute
            self._rolled_last = minute

    # -- any thread -----------------------------------------------------------------------------
    @property
    def nbytes(self) -> int:
        """The bytes the store's columns hold."""
        with self._lock:
            arrays = (self._times, self._fine, self._coarse, self._frame)
            return sum(len(a) * a.itemsize for a in arrays)

    def query(self, start_s: float, end_s: float, source: str) -> HistoryPart:
        """Every series kept in ``[start_s, end_s)``: the roll-ups of the minutes overlapping it
        before the join, the samples in it from the join on (docs/recorder.md, "History")."""
        cap, minutes, interval = self._cap, self._minutes, self.budget.interval_s
        with self._lock:
            n = self._ticks
            if n == 0:
                return HistoryPart(source=source)
            count = min(n, cap)
            oldest = n - count
            view = _RingTimes(self._times, oldest, cap, count)
            if n > cap and self._rolled_last >= 0:
                # the oldest minute at the polling rate is partly gone: roll-ups up to its end
                join_m = min(int(view[0] // ROLLUP_S) + 1, self._rolled_last + 1)
                retained_from = max(self._rolled_first, self._rolled_last - minutes + 1) * ROLLUP_S
            else:
                join_m, retained_from = -1, view[0]
            retained_to = view[count - 1]
            lo = oldest + bisect_left(view, max(start_s, join_m * ROLLUP_S))
            hi = oldest + bisect_left(view, end_s)
            times = column(self._times, 1, cap, 0, lo, hi)
            # the minutes m whose [m * 60, (m + 1) * 60) overlaps [start, end), before the join
            m_lo = int(max(start_s, 0.0) // ROLLUP_S)
            m_hi = join_m if end_s >= join_m * ROLLUP_S else math.ceil(end_s / ROLLUP_S)
            tracks = [*self._devices, *sorted((s for s in self._slots if s.entity),
                                              key=lambda s: s.order)]
            untracked = self._untracked
            layout, width = self._devices, self._width
        series: list[Series] = []
        for track in tracks:
            with self._lock:
                if layout is not self._devices:  # laid out anew meanwhile: none of it is kept
                    break
                entity, metrics, offset = track.entity, track.metrics, track.offset
                a = max(lo, track.first, self._ticks - cap)
                b = min(hi, track.until(self._ticks))
                columns = [column(self._fine, width, cap, offset + j, a, b)
                           for j in range(len(metrics))] if a < b else None
                ca = max(m_lo, track.coarse_first, self._rolled_last - minutes + 1)
                cb = min(m_hi, track.coarse_last + 1)
                base = self._rolled_first
                rolled = [column(self._coarse, STATS * width, minutes, STATS * (offset + j) + s,
                                 ca - base, cb - base)
                          for j in range(len(metrics)) for s in range(STATS)] if ca < cb else None
            if rolled is not None:
                t_rolled = array(FLOAT, [m * ROLLUP_S for m in range(ca, cb)])
                for j, (metric, unit) in enumerate(metrics):
                    series.append(Series(entity, metric, unit, ROLLUP_S, t_rolled,
                                         *rolled[STATS * j:STATS * j + STATS]))
            if columns is not None:
                t_fine = times[a - lo:b - lo]
                for (metric, unit), values in zip(metrics, columns):
                    series.append(Series(entity, metric, unit, interval, t_fine, values))
        problems = () if not untracked else (Problem(source, severity="info", message=(
            f"{untracked} GPU process series are not in the history: it keeps {self.budget.processes} "
            "process slots (GPUFLOW_NVML_HISTORY_PROCESSES), and processes holding GPUs now use "
            "them all")),)
        return HistoryPart(source=source, retained_from_s=retained_from, retained_to_s=retained_to,
                           series=tuple(series), problems=problems)
