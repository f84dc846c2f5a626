"""One GPU's share of an NVML tick: its calls, their cleaning, and reusing unchanged objects.

:func:`read_gpu` makes the per-tick NVML calls of one GPU through the backend, each inline in
its own ``try`` (free in CPython 3.11+ when nothing is raised) with its error mapped by
:func:`~gpuflow.collectors.nvml.query.failed_query`, the mapping :func:`nvml_query` applies;
sentinels become None through :data:`~gpuflow.collectors.nvml.query.SENTINELS`. A
:class:`GpuState` remembers the raw answers of the last tick and what was made of them, so:

* answers equal to last tick's give the very same Device object, without cleaning them again;
* a new Device object always has new contents (other values than the last one), which lets the
  collector skip comparing parts when a device changed;
* an Attachment equal to last tick's (:func:`attachments_of`) is the same object.

The tick also reads the clock event reasons, and rolls each GPU's GPM pair
(:mod:`gpuflow.collectors.nvml.gpm`; per MIG instance too); the sampler's slow health and link
readings (the energy counter among them: ~3.2 ms a call on an H200) arrive in its latest sweep. :func:`device_values` assembles them into the Device's
nested :class:`HealthReadings` and :class:`LinkReadings` (a nested object equal to last tick's
is last tick's object).

Frozen snapshot objects are built positionally without ``__init__``'s setattr calls
(:mod:`gpuflow.core.frozen`); the field order is checked against
gpuflow/core/snapshot.py at import.

Constraints: the tick's hot path (docs/nvml.md, "Cost": the goal is a tick within 1.2× the
bare pynvml calls); only the poll thread calls these functions or touches a GpuState's
mutable half; the backend's methods are looked up on every call (tests replace them).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pynvml

from gpuflow.collectors.nvml.backend import NvmlBackend
from gpuflow.collectors.nvml.gpm import MIN_GAP_S, GpmTracker
from gpuflow.core.frozen import positional_constructor
from gpuflow.collectors.nvml.query import SENTINELS, failed_query
from gpuflow.collectors.nvml.sampler import NO_HEALTH, NO_LINKS, Remote, Sampled
from gpuflow.core.snapshot import (
    Attachment,
    Device,
    HealthReadings,
    LinkReadings,
    Process,
    SnapshotPart,
)

#: PCIe generation → (transfers per second per lane, line-code efficiency): gens 1-2 8b/10b,
#: 3-5 128b/130b, 6 FLIT mode (242 payload bytes of 256).
PCIE_GENERATIONS = {1: (2.5e9, 0.8), 2: (5e9, 0.8), 3: (8e9, 128 / 130), 4: (16e9, 128 / 130),
                    5: (32e9, 128 / 130), 6: (64e9, 242 / 256)}

#: NVML clocks event (throttle) reason bits → names (nvmlClocksEventReason*).
CLOCK_EVENT_NAMES = ((0x1, "gpu_idle"), (0x2, "applications_clocks_setting"), (0x4, "sw_power_cap"),
                     (0x8, "hw_slowdown"), (0x10, "sync_boost"), (0x20, "sw_thermal_slowdown"),
                     (0x40, "hw_thermal_slowdown"), (0x80, "hw_power_brake_slowdown"),
                     (0x100, "display_clock_setting"))
_KNOWN_CLOCK_BITS = sum(bit for bit, _ in CLOCK_EVENT_NAMES)
_clock_event_names: dict[int, tuple[str, ...]] = {}


def clock_event_names(mask: int) -> tuple[str, ...]:
    """The names of the bits set in an NVML clocks event reasons mask (unknown bits as hex)."""
    names = _clock_event_names.get(mask)
    if names is None:
        names = tuple(name for bit, name in CLOCK_EVENT_NAMES if mask & bit)
        if mask & ~_KNOWN_CLOCK_BITS:
            names += (f"0x{mask & ~_KNOWN_CLOCK_BITS:x}",)
        if len(_clock_event_names) < 4096:
            _clock_event_names[mask] = names
    return names


def pcie_peak_bytes_per_s(gen: int | None, width: int | None) -> float | None:
    """Theoretical bytes per second per direction of a PCIe link: gen 5 ×16 → 63.0 GB/s."""
    spec = PCIE_GENERATIONS.get(gen) if gen is not None else None
    if spec is None or not width:
        return None
    rate, efficiency = spec
    return rate * efficiency * width / 8


class GpuState:
    """One device: what is fetched once per init, and what the last tick made of it.

    The identity is fixed per init. ``readings`` (the raw answers of the last tick), ``values``
    (the Device fields made of them) and ``device`` (the Device of those values) let a tick
    whose answers did not change hand out the very same Device object, and make a new Device
    object mean new contents; ``attached`` keeps last tick's Attachment per pid for the same
    reason. Only the poll thread reads or writes the mutable half.
    """

    __slots__ = ("index", "handle", "uuid", "name", "pci_bus_id", "readings", "values", "device",
                 "attached", "shown", "lost_device", "blank_device", "gpm", "gpm_instances",
                 "pcie_max", "pcie_peak", "nvlinks", "xid_watch", "health", "links")

    def __init__(self, index: int, handle: Any, uuid: str, name: str | None,
                 pci_bus_id: str | None) -> None:
        self.index = index
        self.handle = handle
        self.uuid = uuid
        self.name = name
        self.pci_bus_id = pci_bus_id
        self.gpm: GpmTracker | None = None  #: the whole GPU's GPM pair (None: no GPM)
        self.gpm_instances: dict[int, GpmTracker] = {}  #: MIG GPU instance id → its GPM pair
        self.pcie_max: tuple[int | None, int | None] = (None, None)  #: max generation and width
        self.pcie_peak: float | None = None  #: theoretical bytes/s per direction at the max
        self.nvlinks: tuple[Remote, ...] = ()  #: the GPU's NVLinks and what each reaches
        self.xid_watch: Any = None  #: its XID event set (None: not watched)
        self.health: HealthReadings | None = None  #: last tick's, reused while equal
        self.links: LinkReadings | None = None
        self.readings: tuple[Any, ...] | None = None
        self.values: tuple[Any, ...] | None = None
        self.device: Device | None = None
        self.attached: dict[int, Attachment] = {}
        self.shown: Device | None = None  #: the Device in the last part the tick built
        #: what a lost GPU, or one whose reading failed with a bug, shows: its identity only
        self.lost_device = Device(index, uuid, name, pci_bus_id, True)
        self.blank_device = Device(index, uuid, name, pci_bus_id, False)


#: The fields in the order the tick passes them (positional construction, see build.py);
#: checked against the contract at import so a change in snapshot.py fails loudly, not silently.
_DEVICE_FIELDS = ("index", "uuid", "name", "pci_bus_id", "lost", "utilization_gpu_pct",
                  "utilization_memory_pct", "memory_used_bytes", "memory_total_bytes",
                  "temperature_c", "power_draw_w", "power_limit_w", "clock_sm_mhz", "clock_mem_mhz",
                  "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s", "mig_mode", "gpm", "gpm_instances",
                  "links", "health", "host")
_HEALTH_FIELDS = ("energy_joules", "memory_temperature_c", "xid_errors", "xid_last",
                  "ecc_corrected_volatile", "ecc_uncorrected_volatile", "ecc_corrected_aggregate",
                  "ecc_uncorrected_aggregate", "remapped_rows_correctable",
                  "remapped_rows_uncorrectable", "remap_pending", "remap_failure", "pcie_replays",
                  "clock_event_mask", "clock_events", "encoder_util_pct", "decoder_util_pct",
                  "memory_free_bytes", "memory_reserved_bytes")
_LINK_FIELDS = ("pcie_gen", "pcie_width", "pcie_gen_max", "pcie_width_max", "pcie_peak_bytes_per_s",
                "pcie_tx_bytes_total", "pcie_rx_bytes_total", "pcie_rate_source", "nvlinks")
_ATTACHMENT_FIELDS = ("device_index", "device_uuid", "kind", "memory_used_bytes", "sm_util_pct",
                      "mem_util_pct")
_PROCESS_FIELDS = ("pid", "name", "user", "cmdline", "attachments", "host", "workload")
_PART_FIELDS = ("source", "host", "devices", "processes", "traced", "problems", "traced_retired",
                "hosts", "in_merge_order")
for _cls, _names in ((Device, _DEVICE_FIELDS), (Attachment, _ATTACHMENT_FIELDS),
                     (Process, _PROCESS_FIELDS), (SnapshotPart, _PART_FIELDS),
                     (HealthReadings, _HEALTH_FIELDS), (LinkReadings, _LINK_FIELDS)):
    if tuple(f.name for f in fields(_cls)) != _names:  # pragma: no cover - a contract change
        raise ImportError(f"gpuflow.core.snapshot.{_cls.__name__} fields changed; update the "
                          "positional construction in gpuflow/collectors/nvml/readings.py and collector.py")

make_device = positional_constructor(Device)
make_attachment = positional_constructor(Attachment)
make_process = positional_constructor(Process)
make_part = positional_constructor(SnapshotPart)
make_health = positional_constructor(HealthReadings)
make_links = positional_constructor(LinkReadings)

#: Sampled.device_fields before the sampler's first sweep
_NO_SAMPLE = (None, None, None, NO_HEALTH, NO_LINKS, ())


def read_gpu(b: NvmlBackend, gpu: GpuState, sampled: Sampled | None, now: float = 0.0,
             gpm_gap_s: float = MIN_GAP_S) -> tuple[Device, Any]:
    """One tick's Device of ``gpu`` and its raw process entries ``(compute, graphics, sampled)``,
    or () when NVML lists no process on it. ``sampled``: the sampler's latest sweep of it;
    ``now``: monotonic seconds (GPM pairs are at least ``gpm_gap_s`` apart).

    :raises DeviceLost: the GPU stopped answering (any of its calls said GPU_IS_LOST or Unknown).
    """
    h, Error = gpu.handle, pynvml.NVMLError
    fields = _NO_SAMPLE if sampled is None else sampled.device_fields
    try:
        util = b.utilization(h)
    except Error as exc:
        util = failed_query(exc, b.utilization)
    try:
        mem = b.memory(h)
    except Error as exc:
        mem = failed_query(exc, b.memory)
    try:
        temperature = b.temperature(h)
    except Error as exc:
        temperature = failed_query(exc, b.temperature)
    try:
        power = b.power_usage(h)
    except Error as exc:
        power = failed_query(exc, b.power_usage)
    try:
        limit = b.power_limit(h)
    except Error as exc:
        limit = failed_query(exc, b.power_limit)
    try:
        clock_sm = b.clock_sm(h)
    except Error as exc:
        clock_sm = failed_query(exc, b.clock_sm)
    try:
        clock_mem = b.clock_mem(h)
    except Error as exc:
        clock_mem = failed_query(exc, b.clock_mem)
    try:
        compute = b.compute_processes(h)
    except Error as exc:
        compute = failed_query(exc, b.compute_processes)
    try:
        graphics = b.graphics_processes(h)
    except Error as exc:
        graphics = failed_query(exc, b.graphics_processes)
    try:
        reasons = b.clock_event_reasons(h)
    except Error as exc:
        reasons = failed_query(exc, b.clock_event_reasons)
    tracker = gpu.gpm
    if tracker is None:
        gpm = totals = None
    else:  # the byte totals grow even when a pair's means equal the last pair's
        gpm = tracker.roll(b, h, now, gpm_gap_s)
        totals = (tracker.pcie_tx_bytes, tracker.pcie_rx_bytes)
    instances = fields[5]
    if instances or gpu.gpm_instances:
        instances = roll_instances(b, gpu, instances, now, gpm_gap_s)
    readings = (util, mem, temperature, power, limit, clock_sm, clock_mem, reasons, gpm, totals,
                instances, fields)
    if readings == gpu.readings:
        device = gpu.device
    else:
        gpu.readings = readings
        values = device_values(readings, gpu)
        if values == gpu.values:  # e.g. a sentinel where NVML said NotSupported before
            device = gpu.device
        else:
            gpu.values = values
            gpu.device = device = make_device(gpu.index, gpu.uuid, gpu.name, gpu.pci_bus_id,
                                               False, *values, None)  # host: the agent tags it
    if compute or graphics:
        return device, (compute, graphics, sampled)
    if gpu.attached:
        gpu.attached = {}
    return device, ()

def roll_instances(b: NvmlBackend, gpu: GpuState, ids: tuple[int, ...], now: float,
                   gap_s: float) -> tuple[Any, ...]:
    """Roll the GPM pair of each MIG GPU instance in ``ids`` (opening and closing trackers as
    instances come and go; none without GPM): the instances' means, by instance id."""
    trackers = gpu.gpm_instances
    if gpu.gpm is None and not trackers:
        return ()
    for gone in [gi for gi in trackers if gi not in ids]:
        trackers.pop(gone).close(b)
    out = []
    for gi in ids:
        tracker = trackers.get(gi)
        if tracker is None:
            tracker = GpmTracker.open(b, gi)
            if tracker is None:
                continue
            trackers[gi] = tracker
        readings = tracker.roll(b, gpu.handle, now, gap_s)
        if readings is not None:
            out.append(readings)
    return tuple(out)


def device_values(readings: tuple[Any, ...], gpu: GpuState) -> tuple[Any, ...]:
    """Device's reading fields (utilization_gpu_pct ... health) from one tick's raw answers:
    sentinels → None, mW → W; GPM's PCIe rates where it gives them, else the sampler's."""
    (util, mem, temperature, power, limit, clock_sm, clock_mem, reasons, gpm, totals, instances,
     (tx, rx, mig, health_slow, links_slow, _)) = readings
    if util is None:
        util_gpu = util_mem = None
    else:
        util_gpu, util_mem = util
        if util_gpu in SENTINELS:
            util_gpu = None
        if util_mem in SENTINELS:
            util_mem = None
    if mem is None:
        mem_total = mem_used = mem_free = mem_reserved = None
    else:
        mem_total, mem_used, mem_free, mem_reserved = mem
        if mem_total in SENTINELS:
            mem_total = None
        if mem_used in SENTINELS:
            mem_used = None
        if mem_free in SENTINELS:
            mem_free = None
        if mem_reserved in SENTINELS:
            mem_reserved = None
    if reasons is None or reasons in SENTINELS:
        mask = names = None
    else:
        mask, names = reasons, clock_event_names(reasons)
    health = make_health(*health_slow[:13], mask, names, *health_slow[13:], mem_free, mem_reserved)
    if health != gpu.health:
        gpu.health = health
    source = None
    if gpm is not None and gpm.pcie_tx_bytes_per_s is not None and gpm.pcie_rx_bytes_per_s is not None:
        tx, rx, source = round(gpm.pcie_tx_bytes_per_s), round(gpm.pcie_rx_bytes_per_s), "gpm"
    elif tx is not None or rx is not None:
        source = "throughput"
    tx_total = rx_total = None
    if totals is not None:
        if totals[0] is not None:
            tx_total = int(totals[0])
        if totals[1] is not None:
            rx_total = int(totals[1])
    gen_max, width_max = gpu.pcie_max
    links = make_links(links_slow[0], links_slow[1], gen_max, width_max, gpu.pcie_peak, tx_total,
                       rx_total, source, links_slow[2])
    if links != gpu.links:
        gpu.links = links
    return (util_gpu, util_mem, mem_used, mem_total,
            None if temperature in SENTINELS else temperature,
            None if power is None or power in SENTINELS else power / 1000,
            None if limit is None or limit in SENTINELS else limit / 1000,
            None if clock_sm in SENTINELS else clock_sm,
            None if clock_mem in SENTINELS else clock_mem,
            tx, rx, mig, gpm, instances, gpu.links, gpu.health)

def attachments_of(gpu: GpuState, raw: Any, oldest_us: int) -> list[tuple[int, Attachment]]:
    """(pid, Attachment) for each process NVML lists on this GPU, in NVML's order.

    A pid in both lists is one "compute+graphics" attachment (memory from the compute entry,
    else the graphics one). An attachment equal to last tick's is that same object."""
    compute, graphics, sampled = raw
    kinds: dict[int, list[Any]] = {}  # pid → [kind, memory]
    for pid, memory in compute or ():
        kinds[pid] = ["compute", memory]
    for pid, memory in graphics or ():
        known = kinds.get(pid)
        if known is None:
            kinds[pid] = ["graphics", memory]
        else:
            known[0] = "compute+graphics"
            if known[1] is None or known[1] in SENTINELS:
                known[1] = memory
    util = sampled.proc_util if sampled is not None and sampled.proc_util_supported else None
    before, now = gpu.attached, {}
    out = []
    for pid, (kind, memory) in kinds.items():
        if memory in SENTINELS:
            memory = None
        sample = None if util is None else util.get(pid)
        if sample is None or sample.timestamp_us < oldest_us:
            sm = mem_util = None
        else:
            sm, mem_util = sample.sm, sample.mem
        a = before.get(pid)
        if (a is None or a.kind != kind or a.memory_used_bytes != memory
                or a.sm_util_pct != sm or a.mem_util_pct != mem_util):
            a = make_attachment(gpu.index, gpu.uuid, kind, memory, sm, mem_util)
        now[pid] = a
        out.append((pid, a))
    gpu.attached = now
    return out
