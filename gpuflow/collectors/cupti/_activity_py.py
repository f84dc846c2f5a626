"""Per-device and per-configuration aggregates of the pure-Python decoder (``_decoder_py``).

The readable statement of what the compiled twin's ``_activity.pxi`` does (the tests compare the
two): each kernel's launch configuration, per kernel name; each device's timed copies by
direction and host memory; each device's GPU busy time as the union of its timed kernels'
intervals. :mod:`._activity_layout` describes them and their bounds.

The busy intervals are kept canonical: sorted, and no two overlap or touch (an interval that
overlaps or touches another is merged with it). A device's kernels are noted as they come and
merged into its intervals at merge points: every BUSY_MERGE_KERNELS kernels noted on the device,
and at the end of each drain() call (:meth:`Activity.end_pass`). There, if more than
BUSY_INTERVALS_MAX intervals are left, the older ones are settled. So both twins hold the same
list and settle at the same moments whatever order the kernels come in, however each keeps what it
noted in between (here a list, sorted at the merge; the compiled twin's sorted runs).

Constraints: called once per kernel and copy record by ``_decoder_py`` (slow, like the rest of
that twin); memory bounded by the caps (devices: ``max_devices``; intervals:
BUSY_INTERVALS_MAX per device; configurations: CONFIGS_PER_NAME per name).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from gpuflow.collectors.cupti import _activity_layout as A
from gpuflow.collectors.cupti import _layout as L


class _Device:
    __slots__ = ("starts", "ends", "noted", "settled", "busy", "late", "late_ns", "first", "last", "copies")

    def __init__(self) -> None:
        self.starts: list[int] = []   # the unsettled intervals, canonical (module docstring)
        self.ends: list[int] = []
        self.noted: list[tuple[int, int]] = []   # kernels noted since the last merge point
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
    def kernel(self, name_id: int, dev: int, grid: tuple[int, int, int], block: tuple[int, int, int],
               registers: int, launch_id: int, timed: bool, start: int, end: int) -> None:
        """A valid kernel record of ``name_id`` (OTHER_NAME_ID: a name beyond max_names).

        Its configuration is one of the name's first CONFIGS_PER_NAME, counted there, or a further
        one, counted in "more"; a change (kernel_configs' stamp) is a configuration or "more"
        appearing, or a launch with fewer or more blocks than its configuration had."""
        entry = self._configs.get(name_id)
        if entry is None:   # [configurations (key -> [count, timed, total, grid min, grid max]),
            #                 more (count, timed, total), stamp of its latest change]
            entry = self._configs[name_id] = [{}, [0, 0, 0], 0]
        configs = entry[0]
        key = (dev, block, registers, launch_id)
        blocks = grid[0] * grid[1] * grid[2]
        dur = end - start if timed else 0
        c = configs.get(key)
        changed = False
        if c is None and len(configs) < A.CONFIGS_PER_NAME:
            c = configs[key] = [0, 0, 0, blocks, blocks]
            changed = True
        if c is None:
            c = entry[1]
            changed = c[0] == 0
        elif not c[3] <= blocks <= c[4]:
            c[3] = min(c[3], blocks)
            c[4] = max(c[4], blocks)
            changed = True
        c[0] += 1
        c[1] += bool(timed)
        c[2] = self._add(c[2], dur)
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
        d.noted.append((start, end))
        if len(d.noted) >= A.BUSY_MERGE_KERNELS:
            self._merge(d)

    def _merge(self, d: _Device) -> None:
        """A merge point: the kernels noted merged into the intervals; more than BUSY_INTERVALS_MAX
        of them: the older ones settle, the newest BUSY_INTERVALS_MAX // 2 + 1 stay."""
        starts, ends = [], []
        for start, end in sorted([*zip(d.starts, d.ends), *d.noted]):
            if ends and start <= ends[-1]:     # overlaps or touches the one before
                ends[-1] = max(ends[-1], end)
            else:
                starts.append(start)
                ends.append(end)
        d.starts, d.ends, d.noted = starts, ends, []
        if len(starts) > A.BUSY_INTERVALS_MAX:
            self._settle(d, ends[len(starts) - A.BUSY_INTERVALS_MAX // 2 - 2])

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

    def end_pass(self) -> None:
        """The end of a drain() call: a merge point for every device that noted a kernel."""
        for d in self._devices.values():
            if d.noted:
                self._merge(d)

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

    def configs(self, since: int) -> tuple[int, list[tuple[int, tuple[A.KernelConfig, ...], tuple[int, int, int]]]]:
        """The names whose configurations changed after stamp ``since``."""
        out = []
        for name_id in sorted(self._configs):
            configs, more, stamp = self._configs[name_id]
            if stamp <= since:
                continue
            kept = tuple(A.KernelConfig(*key, *c) for key, c in configs.items())
            out.append((name_id, kept, tuple(more)))
        return self._stamp, out
