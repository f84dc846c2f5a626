"""A traced process's devices, GPU busy share, copy bandwidth and kernel occupancy, at frame time.

The decoders keep the complete aggregates (``kernel_configs``, ``activity``, ``device_facts``,
``launch_config``: docs/decoder.md, "Devices, configurations and busy time"); this module turns
them into the snapshot's :class:`~gpuflow.core.snapshot.TracedDevice` and
:class:`~gpuflow.core.snapshot.KernelLaunch` entries (docs/snapshot.md), for
:class:`~gpuflow.collectors.cupti.traced_builder.TracedBuilder`:

* **occupancy** of each launch configuration by :func:`~.occupancy.launch_occupancy`, with the
  compute capability and SM count of its device's DEVICE record (none: not available, said why);
  computed once per (device facts, block, registers, launch id) and kept, never per launch. A
  name's figures are its main configuration's (the most time, else the most launches), the
  range over all of them beside;
* **GPU busy share**: each build first settles the decoder's busy time up to ``SETTLE_NS`` (or
  four flush periods, if longer) before now, when every kernel that ended before has been
  drained (a kernel longer than that arrives "late" and is counted so); the busy share is the
  busy time between two settled moments at least ``WINDOW_NS`` apart, over their distance: the
  union of the process's kernel intervals over that window, exactly. An exited process is settled
  to its last kernel's end.
* **copy bandwidth**: bytes over time of its timed copies, by device, direction and host memory.

Constraints: runs on the collector's thread with the decoder idle (settling changes it); no
Python object per record; a traced program chooses every value here (device facts included), so
nothing read from the ring is trusted beyond the decoders' bounds (an SM count, a compute
capability, a grid: ``occupancy`` refuses what no device has).
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable

from gpuflow.collectors.cupti import _activity_layout as A
from gpuflow.collectors.cupti import _layout as L
from gpuflow.collectors.cupti import _retain_layout as RL
from gpuflow.collectors.cupti.occupancy import LaunchConfig, NotAvailable, Occupancy, launch_occupancy
from gpuflow.collectors.cupti.protocol import RingDecoder
from gpuflow.core.snapshot import CopyRate, KernelLaunch, KernelStat, TracedDevice

#: how long after a kernel ended its record is surely drained: CUPTI hands a buffer over at the
#: next flush (--flush-ms, 50 ms by default), the collector drains every 20 ms
SETTLE_NS = 500_000_000
#: the busy share's window: the two settled moments it lies between are at least this far apart
WINDOW_NS = 1_000_000_000
NO_LAUNCH = "no launch configuration was recorded (shared memory unknown)"
NO_FACTS = "the device's compute capability and SM count are not known (no DEVICE record)"

#: how often every kernel name's figures are looked at again, not only the changed ones'
FULL_EVERY_NS = 1_000_000_000


class _Window:
    """One device's settled checkpoints (CUPTI time, busy ns), oldest first."""

    __slots__ = ("points",)

    def __init__(self) -> None:
        self.points: deque[tuple[int, int]] = deque()

    def add(self, t: int, busy: int) -> tuple[int, int, int, int] | None:
        """Record a checkpoint; the window (start, end, busy start, busy end) if one is wide enough."""
        points = self.points
        if t > 0 and (not points or t > points[-1][0]):
            points.append((t, busy))
        if not points:
            return None
        end, busy_end = points[-1]
        while len(points) > 2 and points[1][0] <= end - WINDOW_NS:
            points.popleft()
        start, busy_start = points[0]
        if end - start < WINDOW_NS:
            return None
        return start, end, busy_start, busy_end


class ActivityBuilder:
    """Per traced process: its devices' figures and its kernels' occupancy (module docstring)."""

    def __init__(self) -> None:
        self._windows: dict[int, _Window] = {}
        self._latest: dict[int, TracedDevice] = {}
        #: (compute capability, SMs, block, registers, launch id) -> Occupancy | NotAvailable
        self._occupancy: dict[tuple[Any, ...], Occupancy | NotAvailable] = {}
        self._launches: dict[int, tuple[Any, ...] | None] = {}
        self._facts: dict[int, A.DeviceFacts] = {}
        self._facts_changed = False
        self._stamp = 0            # the decoder's configuration stamp at the last look
        self._full_at = -FULL_EVERY_NS
        self._shown = 0            # how many kernels were shown by name then
        self._by_id: dict[int, KernelLaunch] = {}
        #: name id -> what its KernelLaunch in _by_id was made from (_launch_inputs)
        self._inputs: dict[int, tuple[Any, ...]] = {}
        self._table: tuple[KernelLaunch, ...] = ()

    # -- devices -----------------------------------------------------------------------------
    def devices(self, decoder: RingDecoder, *, offset_ns: int | None, now_ns: int, exited: bool,
                flush_ms: int) -> tuple[TracedDevice, ...]:
        """Settle the decoder's busy time and describe every device with activity.

        ``offset_ns``: wall clock minus CUPTI's (None: no clock pair, nothing is settled but an
        exited process's end)."""
        facts = decoder.device_facts()
        if facts != self._facts:
            self._facts, self._facts_changed = facts, True
        activity = decoder.activity()["devices"]
        until = None
        if exited:
            ends = [d.last_end_ns for d in activity if d.last_end_ns is not None]
            until = max(ends) if ends else None
        elif offset_ns is not None:
            until = now_ns - offset_ns - max(SETTLE_NS, 4 * flush_ms * 1_000_000)
        if until is not None and 0 < until <= L.U64_MAX:
            decoder.settle(until)
            activity = decoder.activity()["devices"]
        out = []
        for d in activity:
            window = self._windows.setdefault(d.device, _Window()).add(d.settled_to_ns, d.busy_ns)
            facts = self._facts.get(d.device)
            named = decoder.name(facts.name_id) if facts is not None and facts.name_id else None
            busy_pct = window_ms = window_end_us = None
            if window is not None:
                start, end, busy_start, busy_end = window
                busy_pct = round(min(100.0, (busy_end - busy_start) * 100 / (end - start)), 3)
                window_ms = round((end - start) / 1e6, 3)
                if offset_ns is not None and -RL.TIME_LIMIT < end + offset_ns < RL.TIME_LIMIT:
                    window_end_us = (end + offset_ns) // 1000
            span = None
            if d.first_start_ns is not None and d.last_end_ns is not None:
                span = d.last_end_ns - d.first_start_ns
            copies = tuple(CopyRate(direction=L.DIRECTIONS[direction], memory=A.MEMORY_CLASSES[memory],
                                    count=count, bytes=nbytes, total_ns=total,
                                    bytes_per_s=round(nbytes * 1e9 / total, 1) if total else None)
                           for direction, memory, count, nbytes, total in d.copies)
            device = TracedDevice(
                device=d.device, uuid=facts.uuid if facts else None, name=named[0] if named else None,
                compute_capability=facts.compute_capability if facts else None,
                sm_count=facts.sm_count if facts else None, busy_pct=busy_pct, busy_window_ms=window_ms,
                busy_window_end_us=window_end_us, busy_ns=d.busy_ns, kernel_span_ns=span, busy_late=d.late,
                copies=copies)
            if self._latest.get(d.device) != device:
                self._latest[d.device] = device
            out.append(self._latest[d.device])
        return tuple(out)

    # -- kernels -----------------------------------------------------------------------------
    def launches(self, decoder: RingDecoder, shown: dict[int, KernelStat], now_ns: int) -> tuple[KernelLaunch, ...]:
        """The launch configurations and occupancy of the kernels shown by name (``shown``: name id
        -> KernelStat), by (name, mangled). Only the names whose configurations changed since the
        last build are looked at (``kernel_configs(since)``: a configuration, a grid extreme), and
        every name once a second (the main configuration is the one with the most time, which moves
        with the launches), when a name was added to ``shown``, and when the device facts changed.
        Of those, only a name whose entry's inputs moved (``_launch_inputs``) is made again."""
        full = (now_ns - self._full_at >= FULL_EVERY_NS or now_ns < self._full_at
                or len(shown) != self._shown or self._facts_changed)
        stamp, entries = decoder.kernel_configs(0 if full else self._stamp)
        if not entries and not full:
            return self._table
        if self._facts_changed:   # every figure is computed again
            self._inputs.clear()
        self._stamp, self._facts_changed, self._shown = stamp, False, len(shown)
        if full:
            self._full_at = now_ns
        changed = False
        inputs_of, made = self._inputs, self._by_id
        for name_id, configs, more in entries:
            stat = shown.get(name_id)
            if stat is None or not configs:
                continue
            main = 0 if len(configs) == 1 else _main(configs)
            inputs = _launch_inputs(stat, configs, main, more)
            if inputs_of.get(name_id) == inputs and name_id in made:
                continue   # the same entry as the last one made (most names, at the full look)
            inputs_of[name_id] = inputs
            launch = self._kernel_launch(decoder, stat, configs, more, main)
            if made.get(name_id) != launch:
                made[name_id] = launch
                changed = True
        if changed:
            self._table = tuple(sorted((x for nid, x in self._by_id.items() if nid in shown),
                                       key=lambda x: x.mangled))
        return self._table

    def _kernel_launch(self, decoder: RingDecoder, stat: KernelStat, configs: tuple[A.KernelConfig, ...],
                       more: tuple[int, int, int], main: int) -> KernelLaunch:
        """One kernel name's KernelLaunch (docs/snapshot.md); ``main``: its main configuration's index."""
        figures = [self._figure(decoder.launch_config, c) for c in configs]
        c, fig = configs[main], figures[main]
        launch = self._launch(decoder.launch_config, c.launch_id)
        fields: dict[str, Any] = dict(
            mangled=stat.mangled, configs=len(configs), configs_more=more[0], device=c.device,
            block_threads=c.block[0] * c.block[1] * c.block[2], registers=c.registers,
            shared_bytes=launch[0] + launch[1] if launch is not None else None)
        if isinstance(fig, Occupancy):
            facts = self._facts.get(c.device)
            sms = facts.sm_count if facts else None
            fields.update(occupancy_pct=round(fig.occupancy * 100, 3), blocks_per_sm=fig.blocks_per_sm,
                          limiters="+".join(fig.limiters) or None, waves_min=_waves(c.grid_min, fig, sms),
                          waves_max=_waves(c.grid_max, fig, sms))
        else:
            fields["unavailable"] = fig.reason
        known = [f.occupancy * 100 for f in figures if isinstance(f, Occupancy)]
        if known:
            fields.update(occupancy_min_pct=round(min(known), 3), occupancy_max_pct=round(max(known), 3))
        return KernelLaunch(**fields)

    def _launch(self, ask: Callable[[int], Any], launch_id: int) -> tuple[Any, ...] | None:
        """A launch id's configuration (a definition never changes: asked once)."""
        if launch_id == 0:
            return None
        if launch_id not in self._launches:
            self._launches[launch_id] = ask(launch_id)
        return self._launches[launch_id]

    def _figure(self, ask: Callable[[int], Any], c: A.KernelConfig) -> Occupancy | NotAvailable:
        facts = self._facts.get(c.device)
        if facts is None or facts.compute_capability is None:
            return NotAvailable(NO_FACTS)
        key = (facts.compute_capability, facts.sm_count, c.block, c.registers, c.launch_id)
        fig = self._occupancy.get(key)
        if fig is None:
            launch = self._launch(ask, c.launch_id)
            if launch is None:
                fig = NotAvailable(NO_LAUNCH)
            else:
                _registers, config = LaunchConfig.from_launch_tuple((c.registers, *launch))
                fig = launch_occupancy(facts.compute_capability, facts.sm_count, (1, 1, 1), c.block,
                                       c.registers, config)
            self._occupancy[key] = fig
        return fig


def _main(configs: tuple[A.KernelConfig, ...]) -> int:
    """The main configuration's index: the most time, else the most launches, else the first seen."""
    return max(range(len(configs)), key=lambda i: (configs[i].total_ns, configs[i].count, -i))


def _launch_inputs(stat: KernelStat, configs: tuple[A.KernelConfig, ...], main: int,
                   more: tuple[int, int, int]) -> tuple[Any, ...]:
    """Everything a name's KernelLaunch is made of, with the device facts (ActivityBuilder forgets
    them all when those change): its name, each configuration's shape (device, block, registers,
    launch id: its occupancy), which one is main and that one's grid extremes (its waves), and the
    launches in further configurations; not the launches' counts and times, which move with every
    launch and which the entry does not carry."""
    return stat.mangled, main, more[0], configs[main][7:], tuple([c[:4] for c in configs])


def _waves(grid_blocks: int, fig: Occupancy, sm_count: int | None) -> float | None:
    """As occupancy.launch_occupancy gives them: none without SMs, blocks, or for a cluster launch."""
    if not sm_count or not fig.blocks_per_sm or fig.cluster is not None:
        return None
    return round(grid_blocks / (fig.blocks_per_sm * sm_count), 4)
