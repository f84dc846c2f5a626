"""The theoretical occupancy of a retained process's kernels, for the flight recorder's windows.

A window's exact lane carries, per span, its kernel's launch configuration id (the retained
records keep it); an export writes on each kernel slice the occupancy, limiter, blocks per SM and
waves of *that execution's* configuration (docs/recorder.md, "Export"). A launch id alone does not
say the registers per thread, which the retained records do not keep: the decoder's
``kernel_configs`` does, per kernel name, for its first :data:`~._activity_layout.CONFIGS_PER_NAME`
configurations by (device, block, registers, launch id). So a lane's figures are found by
(name, launch id, block) on the lane's device: one configuration matches, and its figures are
exact; none (a configuration beyond those tracked) or several with different registers, and the
export says "not available" rather than pick one. What is kept is bounded by the decoder's caps:
its names, and its configurations per name.

:class:`LaunchBook` keeps, per retained process, what the decoder says of its configurations,
launch definitions and device facts, brought up to date by :meth:`LaunchBook.update` on the drain
thread after each pass (the decoder is idle there: its calls refuse to run during a drain), and
answers :meth:`LaunchBook.lane` on any thread from what it holds: plain dict reads of values that
are replaced whole, never mutated. The figures are :func:`~.occupancy.launch_occupancy`'s,
computed on the drain thread once per (compute capability, SM count, block, registers, launch
id), and kept per (device, kernel name) until its configurations change: a window's lane takes
them with one look-up per name (a page asks windows again and again).

Constraints: no Python object per record or per span, only per distinct configuration; what the
decoder reports came from a traced program (bounded by the decoder's caps and occupancy's
refusals), and is written as data.
"""

from __future__ import annotations

from typing import Any

from gpuflow.collectors.cupti import _activity_layout as A
from gpuflow.collectors.cupti.occupancy import LaunchConfig, NotAvailable, Occupancy, launch_occupancy
from gpuflow.collectors.cupti.protocol import RingDecoder
from gpuflow.core.recorded import LaunchFigures

NO_FACTS = "the device's compute capability is not known (no DEVICE record)"
NO_LAUNCH = "no launch configuration was recorded (shared memory unknown)"
AMBIGUOUS = "the kernel ran with this launch configuration and block with different registers per thread"
NO_SMS = "the device's SM count is not known"
CLUSTER = "a cluster launch (the calculator does not model where clusters fit)"
NO_BLOCK_FITS = "no block fits an SM (0 blocks per SM)"

Key = tuple[Any, ...]
#: how often the device facts are asked for again while a device kernels ran on is not described
#: and no configuration changed (asking builds every device's facts: ~30 us)
FACTS_EVERY_NS = 1_000_000_000


class LaunchBook:
    """One retained process's launch configurations, launch definitions, device facts and figures."""

    def __init__(self) -> None:
        self._stamp = 0
        self._configs: dict[int, tuple[A.KernelConfig, ...]] = {}   # name id -> its configurations
        self._launches: dict[int, tuple[Any, ...] | None] = {}      # launch id -> its definition
        self._facts: dict[int, A.DeviceFacts] = {}                  # device -> its DEVICE record
        self._unknown: set[int] = set()   # devices kernels ran on that no DEVICE record described yet
        self._facts_at = 0   # when the facts were last asked for
        self._occupancy: dict[Key, tuple[Any, ...]] = {}            # see _compute
        #: (device, name id) -> the figures of the configurations that kernel ran with there
        self._figures: dict[tuple[int, int], tuple[LaunchFigures, ...]] = {}
        self.final = False  #: updated once after its process stopped running: nothing changes after

    # -- the drain thread, the decoder idle ----------------------------------------------------
    def update(self, decoder: RingDecoder, now_ns: int) -> None:
        """Take the configurations that changed since the last update, with the definitions of new
        launch ids, and the device facts while a device kernels ran on is not described (when a
        configuration changed, else once every :data:`FACTS_EVERY_NS`); figure the names whose
        configurations changed (every name, when the facts did)."""
        stamp, entries = decoder.kernel_configs(self._stamp)
        changed: list[int] = []
        for name_id, configs, _more in entries:
            known = self._configs.get(name_id, ())
            if [_key(c) for c in configs] != [_key(c) for c in known]:   # (a grid extreme changes no figure)
                for c in configs:
                    if c.launch_id and c.launch_id not in self._launches:
                        self._launches[c.launch_id] = decoder.launch_config(c.launch_id)
                self._configs[name_id] = tuple(configs)
                self._unknown |= {c.device for c in configs} - self._facts.keys()
                changed.append(name_id)
        if self._unknown and (changed or not 0 <= now_ns - self._facts_at < FACTS_EVERY_NS):
            self._facts_at = now_ns   # a device its kernels ran on has not been described (yet)
            facts = dict(decoder.device_facts())
            if facts != self._facts:
                self._facts = facts
                changed = list(self._configs)
            self._unknown -= facts.keys()
        for name_id in changed:
            self._figure(name_id)
        self._stamp = stamp

    def _figure(self, name_id: int) -> None:
        by_device: dict[int, dict[tuple[int, tuple[int, int, int]], set[int]]] = {}
        for c in self._configs[name_id]:
            block = (c.block[0], c.block[1], c.block[2])
            by_device.setdefault(c.device, {}).setdefault((c.launch_id, block), set()).add(c.registers)
        for device, registers in by_device.items():
            facts = self._facts.get(device)
            self._figures[(device, name_id)] = tuple(self._one(launch_id, block, regs, facts)
                                                     for (launch_id, block), regs in registers.items())

    def _one(self, launch_id: int, block: tuple[int, int, int], regs: set[int],
             facts: A.DeviceFacts | None) -> LaunchFigures:
        if len(regs) != 1:
            return LaunchFigures(launch_id, block, unavailable=AMBIGUOUS)
        if facts is None or facts.compute_capability is None:
            return LaunchFigures(launch_id, block, unavailable=NO_FACTS)
        (registers,) = regs
        key = (facts.compute_capability, facts.sm_count, block, registers, launch_id)
        found = self._occupancy.get(key)
        if found is None:
            found = self._occupancy[key] = self._compute(facts, block, registers, launch_id)
        return LaunchFigures(launch_id, block, *found)

    def _compute(self, facts: A.DeviceFacts, block: tuple[int, int, int], registers: int,
                 launch_id: int) -> tuple[Any, ...]:
        """LaunchFigures' fields after the launch id and block, for one configuration."""
        launch = self._launches.get(launch_id) if launch_id else None
        if launch is None:
            return (None, None, None, None, None, NO_LAUNCH)
        _registers, config = LaunchConfig.from_launch_tuple((registers, *launch))
        assert facts.compute_capability is not None
        fig = launch_occupancy(facts.compute_capability, facts.sm_count, (1, 1, 1), block, registers, config)
        if isinstance(fig, NotAvailable):
            return (None, None, None, None, None, fig.reason)
        assert isinstance(fig, Occupancy)
        wave_blocks, no_waves = None, None
        if not facts.sm_count:
            no_waves = NO_SMS
        elif fig.cluster is not None:
            no_waves = CLUSTER
        elif not fig.blocks_per_sm:
            no_waves = NO_BLOCK_FITS
        else:
            wave_blocks = fig.blocks_per_sm * facts.sm_count
        return (fig.occupancy * 100, fig.blocks_per_sm, "+".join(fig.limiters) or None, wave_blocks, no_waves, None)

    # -- any thread ----------------------------------------------------------------------------
    def lane(self, device: int, name_ids: tuple[int, ...]) -> tuple[tuple[LaunchFigures, ...], ...]:
        """Per kernel of the lane (``name_ids``, in the lane's name order), the figures of the
        configurations it ran with on ``device``: a look-up per name."""
        figures = self._figures
        return tuple(figures.get((device, name_id), ()) for name_id in name_ids)


def _key(c: A.KernelConfig) -> tuple[Any, ...]:
    """What of a configuration its figures depend on."""
    return (c.device, tuple(c.block), c.registers, c.launch_id)
