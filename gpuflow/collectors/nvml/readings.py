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
from gpuflow.core.frozen import positional_constructor
from gpuflow.collectors.nvml.query import SENTINELS, failed_query
from gpuflow.collectors.nvml.sampler import Sampled
from gpuflow.core.snapshot import Attachment, Device, Process, SnapshotPart


class GpuState:
    """One device: what is fetched once per init, and what the last tick made of it.

    The identity is fixed per init. ``readings`` (the raw answers of the last tick), ``values``
    (the Device fields made of them) and ``device`` (the Device of those values) let a tick
    whose answers did not change hand out the very same Device object, and make a new Device
    object mean new contents; ``attached`` keeps last tick's Attachment per pid for the same
    reason. Only the poll thread reads or writes the mutable half.
    """

    __slots__ = ("index", "handle", "uuid", "name", "pci_bus_id", "readings", "values", "device",
                 "attached", "shown", "lost_device", "blank_device")

    def __init__(self, index: int, handle: Any, uuid: str, name: str | None,
                 pci_bus_id: str | None) -> None:
        self.index = index
        self.handle = handle
        self.uuid = uuid
        self.name = name
        self.pci_bus_id = pci_bus_id
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
                  "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s", "mig_mode")
_ATTACHMENT_FIELDS = ("device_index", "device_uuid", "kind", "memory_used_bytes", "sm_util_pct",
                      "mem_util_pct")
_PROCESS_FIELDS = ("pid", "name", "user", "cmdline", "attachments")
_PART_FIELDS = ("source", "host", "devices", "processes", "traced", "problems", "traced_retired")
for _cls, _names in ((Device, _DEVICE_FIELDS), (Attachment, _ATTACHMENT_FIELDS),
                     (Process, _PROCESS_FIELDS), (SnapshotPart, _PART_FIELDS)):
    if tuple(f.name for f in fields(_cls)) != _names:  # pragma: no cover - a contract change
        raise ImportError(f"gpuflow.core.snapshot.{_cls.__name__} fields changed; update the "
                          "positional construction in gpuflow/collectors/nvml/readings.py and collector.py")

make_device = positional_constructor(Device)
make_attachment = positional_constructor(Attachment)
make_process = positional_constructor(Process)
make_part = positional_constructor(SnapshotPart)

_NO_SAMPLE = (None, None, None)  #: Sampled.device_fields before the sampler's first sweep


def read_gpu(b: NvmlBackend, gpu: GpuState, sampled: Sampled | None) -> tuple[Device, Any]:
    """One tick's Device of ``gpu`` and its raw process entries ``(compute, graphics, sampled)``,
    or () when NVML lists no process on it. ``sampled``: the sampler's latest sweep of it.

    :raises DeviceLost: the GPU stopped answering (any of its calls said GPU_IS_LOST or Unknown).
    """
    h, Error = gpu.handle, pynvml.NVMLError
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
    readings = (util, mem, temperature, power, limit, clock_sm, clock_mem,
                _NO_SAMPLE if sampled is None else sampled.device_fields)
    if readings == gpu.readings:
        device = gpu.device
    else:
        gpu.readings = readings
        values = device_values(readings)
        if values == gpu.values:  # e.g. a sentinel where NVML said NotSupported before
            device = gpu.device
        else:
            gpu.values = values
            gpu.device = device = make_device(gpu.index, gpu.uuid, gpu.name, gpu.pci_bus_id,
                                               False, *values)
    if compute or graphics:
        return device, (compute, graphics, sampled)
    if gpu.attached:
        gpu.attached = {}
    return device, ()

def device_values(readings: tuple[Any, ...]) -> tuple[Any, ...]:
    """Device's reading fields (utilization_gpu_pct ... mig_mode) from one tick's raw answers:
    sentinels → None, mW → W."""
    util, mem, temperature, power, limit, clock_sm, clock_mem, (tx, rx, mig) = readings
    if util is None:
        util_gpu = util_mem = None
    else:
        util_gpu, util_mem = util
        if util_gpu in SENTINELS:
            util_gpu = None
        if util_mem in SENTINELS:
            util_mem = None
    if mem is None:
        mem_total = mem_used = None
    else:
        mem_total, mem_used = mem
        if mem_total in SENTINELS:
            mem_total = None
        if mem_used in SENTINELS:
            mem_used = None
    return (util_gpu, util_mem, mem_used, mem_total,
            None if temperature in SENTINELS else temperature,
            None if power is None or power in SENTINELS else power / 1000,
            None if limit is None or limit in SENTINELS else limit / 1000,
            None if clock_sm in SENTINELS else clock_sm,
            None if clock_mem in SENTINELS else clock_mem,
            tx, rx, mig)

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
