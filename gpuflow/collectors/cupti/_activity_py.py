"""Per-device and per-configuration aggregates of the pure-Python decoder (``_decoder_py``).

The readable statement of what the compiled twin's ``_activity.pxi`` does (the tests compare the
two): each kernel's launch configuration, per kernel name; each device's timed copies by
direction and host memory; each device's GPU busy time as the union of its timed kernels'
intervals. :mod:`._activity_layout` describes them and their bounds.

The busy intervals are kept canonical: sorted, and no two overlap or touch (an interval that
overlaps or touches another is merged with it), so both twins hold the same list whatever order
the kernels come in, and settle the older half at the same moment when it is full.

Constraints: called once per kernel and copy record by ``_decoder_py`` (slow, like the rest of
that twin); memory bounded by the caps (devices: ``max_devices``; intervals:
BUSY_INTERVALS_MAX per device; configurations: CONFIGS_PER_NAME per name).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from gpuflow.collectors.cupti import _activity_layout as A
from gpuflow.collectors.cupti import _layout as L


#: a kernel name's current run is in a configuration beyond the CONFIGS_PER_NAME kept
_MORE = object()


class _Device:
    __slots__ = ("starts", "ends", "settled", "busy", "late", "late_ns", "first", "last", "copies")

    def __init__(self) -> None:
        self.starts: list[int] = []   # the unsettled intervals, canonical (module docstring)
        self.ends: list[int] = []
        self.settled = 0
        self.busy = 0
        self.late = 0
        self.late_ns = 0
        self.first: int | None = None
        self.last: int | None = None
        self.copies: dict[tuple[int, int], list[int]] = {}   # (direction, memory) -> count, bytes, ns


class Activity:
    """The aggregates of one ring (see the module docstring)."""

    def __init__(self, max_devices: int) -> None:
        self._max_devices = max_devices
        self._devices: dict[int, _Device] = {}
        #: kernel name id -> [configurations (key -> [count, timed, total, grid min, grid max]), more,
        #: stamp of its latest change]
        self._configs: dict[int, list[Any]] = {}
        self._stamp = 0   # counts the changes configs(since) reports
        self.overflow = 0   # kernels and copies on devices beyond max_devices (busy, copies)
        self.saturated = False

    def _add(self, acc: int, value: int) -> int:
        total = acc + value
        if total > L.U64_MAX:
            self.saturated = True
            return L.U64_MAX
        return total

    def _device(self, dev: int) -> _Device | None:
        d = self._devices.get(dev)
        if d is None:
            if len(self._devices) >= self._max_devices:
                self.overflow += 1
                return None
            d = self._devices[dev] = _Device()
        return d

    # -- per record --------------------------------------------------------------------------
    def kernel(self, name_id: int, counters: list[Any], dev: int, grid: tuple[int, int, int],
               block: tuple[int, int, int], registers: int, launch_id: int, timed: bool, start: int,
               end: int) -> None:
        """A valid kernel record of ``name_id``, whose counters (``[count, timed, total, ...]``,
        the decoder's) do not count it yet.

        A name's launches come in runs of one configuration: a run's launches are the name's
        counters since the run began (``mark``), given to its configuration when it ends, so a
        launch with the configuration of the one before it changes nothing here but the grid's
        extremes. A configuration is one of the first CONFIGS_PER_NAME, or a further one ("more")."""
        entry = self._configs.get(name_id)
        if entry is None:   # [configurations (key -> [count, timed, total, grid min, grid max]),
            #                 more, stamp of its latest change, current run's key (MORE: a further
            #                 one), mark: the name's counters when the run began]
            entry = self._configs[name_id] = [{}, [0, 0, 0], 0, None, (0, 0, 0)]
        configs, more = entry[0], entry[1]
        key = (dev, block, registers, launch_id)
        blocks = grid[0] * grid[1] * grid[2]
        changed = False
        if key != entry[3]:
            run = configs.get(entry[3]) if entry[3] is not None else None
            if entry[3] is _MORE:
                run = more
            if run is not None:   # the run ends: its launches go to its configuration
                for i in range(3):
                    run[i] += counters[i] - entry[4][i]
            entry[4] = (counters[0], counters[1], counters[2])
            if key not in configs and len(configs) < A.CONFIGS_PER_NAME:
                configs[key] = [0, 0, 0, blocks, blocks]
                changed = True
            if key in configs:
                entry[3] = key
            else:
                changed = entry[3] is not _MORE and more[0] == 0
                entry[3] = _MORE
        c = configs.get(key)
        if c is not None and not c[3] <= blocks <= c[4]:
            c[3] = min(c[3], blocks)
            c[4] = max(c[4], blocks)
            changed = True
        if changed:
            self._stamp += 1
            entry[2] = self._stamp
        d = self._device(dev)
        if d is not None and timed:
            self._busy(d, start, end)

    def copy(self, dev: int, direction: int, src_kind: int, dst_kind: int, nbytes: int, timed: bool,
             start: int, end: int) -> None:
        d = self._device(dev)
        if d is None or not timed:
            return
        key = (direction, A.memory_class(direction, src_kind, dst_kind))
        c = d.copies.get(key)
        if c is None:
            c = d.copies[key] = [0, 0, 0]
        c[0] += 1
        c[1] = self._add(c[1], nbytes)
        c[2] = self._add(c[2], end - start)

    def _busy(self, d: _Device, start: int, end: int) -> None:
        d.first = start if d.first is None else min(d.first, start)
        d.last = end if d.last is None else max(d.last, end)
        if start < d.settled:                  # reaches back into settled time: late
            d.late += 1
            d.late_ns = self._add(d.late_ns, min(end, d.settled) - start)
            start = d.settled
        if end <= start:
            return
        starts, ends = d.starts, d.ends
        i = bisect_right(starts, start)        # intervals [0, i) start at or before it
        if i and ends[i - 1] >= start:         # overlaps or touches the one before
            i -= 1
            start = starts[i]
        j = i                                  # [i, j): the intervals it overlaps or touches
        while j < len(starts) and starts[j] <= end:
            end = max(end, ends[j])
            j += 1
        starts[i:j] = [start]
        ends[i:j] = [end]
        if len(starts) > A.BUSY_INTERVALS_MAX:   # settle the older half
            half = A.BUSY_INTERVALS_MAX // 2
            self._settle(d, ends[half - 1])

    def _settle(self, d: _Device, until: int) -> None:
        """Fold every interval (or part of one) before ``until`` into the busy total."""
        if until <= d.settled:
            return
        starts, ends = d.starts, d.ends
        n = 0
        while n < len(starts) and starts[n] < until:
            d.busy = self._add(d.busy, min(ends[n], until) - starts[n])
            n += 1
        if n and ends[n - 1] > until:          # the last one straddles: its rest stays
            starts[n - 1] = until
            n -= 1
        del starts[:n], ends[:n]
        d.settled = until

    # -- at frame time -----------------------------------------------------------------------
    def settle(self, until_ns: int) -> None:
        """Settle every device's busy time up to ``until_ns`` (CUPTI clock)."""
        for d in self._devices.values():
            self._settle(d, until_ns)

    def devices(self) -> list[A.DeviceActivity]:
        out = []
        for dev in sorted(self._devices):
            d = self._devices[dev]
            copies = tuple((direction, memory, *c) for (direction, memory), c in sorted(d.copies.items()))
            out.append(A.DeviceActivity(dev, d.settled, d.busy, d.late, d.late_ns, d.first, d.last, copies))
        return out

    def configs(self, since: int, counters: dict[int, list[Any]]) -> tuple[int, list[tuple[int, tuple[A.KernelConfig, ...],
                                                                                    tuple[int, int, int]]]]:
        """The names whose configurations changed after stamp ``since``, each current run counted
        in (``counters``: the decoder's per name)."""
        out = []
        for name_id in sorted(self._configs):
            configs, more, stamp, cur, mark = self._configs[name_id]
            if stamp <= since:
                continue
            now = counters[name_id]
            run = tuple(now[i] - mark[i] for i in range(3))
            kept = []
            for key, c in configs.items():
                count, timed, total = (c[i] + run[i] for i in range(3)) if key == cur else c[:3]
                kept.append(A.KernelConfig(*key, count, timed, total, c[3], c[4]))
            further = tuple(more[i] + run[i] for i in range(3)) if cur is _MORE else tuple(more)
            out.append((name_id, tuple(kept), further))
        return self._stamp, out
