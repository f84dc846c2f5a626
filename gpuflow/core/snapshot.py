"""The snapshot: the one contract between collectors, the core, the transport and the UI.

Collectors return :class:`SnapshotPart` objects from the ``produce_snapshot`` hook; the core
merges them (:mod:`gpuflow.core.merge`) into one immutable :class:`Snapshot`; the transport
reads nothing else: ``/api/snapshot`` is :meth:`Snapshot.to_json_dict`, and ``/api/stream`` is the
same data in a compact, lossless stream form (gpuflow/transport/wire.py turns it back into
exactly ``to_json_dict()``). docs/snapshot.md documents both; keep it in step (a test compares).

"Not available" is ``None`` here and ``null`` in JSON, never 0: NVML answers NotSupported or a
sentinel in many setups (WDDM, MIG, vGPU), and a zero is only ever a measured zero. Collectors
map such answers to ``None`` at their own boundary.

Constraints: pure data, no I/O, no imports from collectors or transport. Every class is a frozen
slotted dataclass so a snapshot can be shared between threads (the frame loop, every SSE client,
/metrics) without copies or locks.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:   # recorded.py imports this module: the columns' class is looked up when needed
    from gpuflow.core.recorded import SpanColumns

#: the plain form's schema; 1 before hosts were named (docs/snapshot.md, "Schemas")
SCHEMA_VERSION = 3

#: Attachment kinds: how a process holds a device.
ATTACHMENT_KINDS = ("compute", "graphics", "compute+graphics")

#: Transfer directions reported for traced processes, in display order.
TRANSFER_DIRECTIONS = ("h2d", "d2h", "d2d", "p2p", "h2h", "memset")

#: What a span is; a span's kind code (the stream's, a span column's) is its index here.
SPAN_KINDS = ("kernel", "memcpy", "memset")

#: A host's state in ``Snapshot.hosts``: its frames arrive; none came for 3 of its intervals; its
#: connection is gone (or was never made).
HOST_STATES = ("up", "stale", "down")


@dataclass(frozen=True, slots=True)
class Problem:
    """Something a collector wants the user to know: NVML missing, a GPU lost, a slow poll."""

    source: str  #: collector name, e.g. "nvml"
    message: str  #: one human sentence, says what is wrong and, where known, what to do
    severity: str = "warning"  #: "error" | "warning" | "info"


@dataclass(frozen=True, slots=True)
class HostInfo:
    """Facts about the machine; any of them may be unknown (None)."""

    hostname: str | None = None
    driver_version: str | None = None  #: e.g. "580.159.04"
    nvml_version: str | None = None  #: e.g. "13.580.159.04"
    cuda_driver_version: str | None = None  #: e.g. "13.0"
    #: the NVML collector's own state: NVML initialized and answering (None: no NVML collector)
    nvml_up: bool | None = None
    nvml_polls: int | None = None  #: ticks made so far, as of the tick that produced this part
    nvml_poll_seconds: float | None = None  #: how long the tick that produced these readings took
    #: ticks or GPU reads that failed so far (a lost GPU, a collector bug, a poll over the interval)
    nvml_poll_errors: int | None = None
    #: the host's name in a fleet: NODE_NAME, else the hostname (gpuflow.core.identity); set by
    #: the agent, never by a collector
    name: str | None = None
    #: when the agent that serves this host started, ms since the epoch (the stream's event ids
    #: carry it too): a new one is a restart
    boot_epoch: int | None = None
    #: the agent's interval (its NVML polling, its frame loop's wake-up): a hub judges silence by it
    interval_s: float | None = None


@dataclass(frozen=True, slots=True)
class Device:
    """One GPU as NVML sees it. Units are in the names; None means not available."""

    index: int
    uuid: str
    name: str | None = None
    pci_bus_id: str | None = None
    lost: bool = False  #: the GPU fell off the bus / stopped answering; readings are stale or None
    utilization_gpu_pct: float | None = None
    utilization_memory_pct: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    temperature_c: float | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    clock_sm_mhz: int | None = None
    clock_mem_mhz: int | None = None
    pcie_tx_bytes_per_s: int | None = None
    pcie_rx_bytes_per_s: int | None = None
    mig_mode: str | None = None  #: "enabled" | "disabled" | None
    #: NVML GPM means over the last pair of samples, whole GPU (None: GPM not supported, or no
    #: pair yet); docs/nvml.md, "GPM"
    gpm: GpmReadings | None = None
    gpm_instances: tuple[GpmReadings, ...] = ()  #: the same per MIG GPU instance, when MIG is on
    links: LinkReadings | None = None  #: PCIe and NVLink (None: the GPU is lost)
    health: HealthReadings | None = None  #: energy, errors, throttling, engines (None: lost)
    host: str | None = None  #: the name of the host it is on (set by the agent's merge)


@dataclass(frozen=True, slots=True)
class GpmReadings:
    """NVML GPM (GPU performance monitoring, Hopper and newer): device or MIG-instance means over
    the time between two samples. Not per SM: ``sm_util_pct`` is the share of SMs busy,
    ``sm_occupancy_pct`` the active warps against the maximum. A metric the GPU does not offer is
    None, never 0."""

    gpu_instance_id: int | None  #: the MIG GPU instance; None for the whole GPU
    interval_s: float  #: time between the two samples these means cover
    graphics_util_pct: float | None = None  #: any graphics or compute engine active
    sm_util_pct: float | None = None  #: share of SMs busy
    sm_occupancy_pct: float | None = None  #: active warps against the theoretical maximum
    integer_util_pct: float | None = None
    tensor_util_pct: float | None = None  #: any tensor pipe active
    dram_bw_util_pct: float | None = None  #: DRAM bandwidth against its peak
    fp64_util_pct: float | None = None
    fp32_util_pct: float | None = None
    fp16_util_pct: float | None = None
    pcie_tx_bytes_per_s: float | None = None  #: from the GPU
    pcie_rx_bytes_per_s: float | None = None  #: to the GPU
    nvlink_tx_bytes_per_s: float | None = None  #: all links
    nvlink_rx_bytes_per_s: float | None = None


@dataclass(frozen=True, slots=True)
class NvLink:
    """One NVLink of a GPU."""

    link: int
    state: str | None = None  #: "up" | "down" | None
    remote_pci_bus_id: str | None = None  #: what the link reaches (a GPU or an NVSwitch)
    remote_device_index: int | None = None  #: the peer GPU on this host, if it is one
    tx_bytes_per_s: float | None = None  #: over the last sampler sweep
    rx_bytes_per_s: float | None = None
    tx_bytes_total: int | None = None  #: NVML's cumulative data counter for this link
    rx_bytes_total: int | None = None


@dataclass(frozen=True, slots=True)
class LinkReadings:
    """A GPU's links: PCIe generation and width (current and maximum), its theoretical peak,
    exact byte counters where NVML has an exact source, and its NVLinks."""

    pcie_gen: int | None = None  #: current generation (drops when idle)
    pcie_width: int | None = None  #: current lanes
    pcie_gen_max: int | None = None  #: of the GPU and the slot together
    pcie_width_max: int | None = None
    #: theoretical bytes per second per direction at the maximum generation and width
    pcie_peak_bytes_per_s: float | None = None
    #: bytes moved since the collector started measuring (GPM rates over contiguous pairs of
    #: samples); None where no exact source exists
    pcie_tx_bytes_total: int | None = None
    pcie_rx_bytes_total: int | None = None
    #: where Device.pcie_tx/rx_bytes_per_s come from: "gpm" (mean over the last pair of samples)
    #: or "throughput" (NVML's 20 ms snapshot, taken once per sweep)
    pcie_rate_source: str | None = None
    nvlinks: tuple[NvLink, ...] = ()  #: the links NVML reports, by link number


@dataclass(frozen=True, slots=True)
class HealthReadings:
    """A GPU's health and engine readings; each None where NVML cannot give it."""

    energy_joules: float | None = None  #: since the driver was loaded
    memory_temperature_c: float | None = None
    xid_errors: int | None = None  #: critical XID events seen since the collector started
    xid_last: int | None = None  #: the latest XID code seen
    ecc_corrected_volatile: int | None = None  #: since the driver was loaded
    ecc_uncorrected_volatile: int | None = None
    ecc_corrected_aggregate: int | None = None  #: over the GPU's life
    ecc_uncorrected_aggregate: int | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remap_pending: bool | None = None  #: a remapping waits for a GPU reset
    remap_failure: bool | None = None  #: a remapping failed
    pcie_replays: int | None = None  #: PCIe replay counter
    clock_event_mask: int | None = None  #: NVML's clocks event (throttle) reasons bitmask
    clock_events: tuple[str, ...] | None = None  #: the same, as names
    encoder_util_pct: float | None = None
    decoder_util_pct: float | None = None
    memory_free_bytes: int | None = None
    memory_reserved_bytes: int | None = None  #: held by the driver and firmware


@dataclass(frozen=True, slots=True)
class Attachment:
    """One process's hold on one device."""

    device_index: int
    device_uuid: str
    kind: str = "compute"  #: one of ATTACHMENT_KINDS
    memory_used_bytes: int | None = None
    sm_util_pct: float | None = None
    mem_util_pct: float | None = None


@dataclass(frozen=True, slots=True)
class Workload:
    """Who a process belongs to: its container, Kubernetes pod and Slurm job, from its cgroup
    (ids), the node's Kubernetes API (names) and the kubelet (allocations); None: not known."""

    container_id: str | None = None  #: 64 hex digits
    container_runtime: str | None = None  #: "containerd" | "cri-o" | "docker" | None
    pod_uid: str | None = None
    pod_name: str | None = None
    pod_namespace: str | None = None
    container_name: str | None = None
    slurm_job_id: int | None = None
    #: the GPU device ids the kubelet allocated to its container (None: not known)
    gpus_allocated: tuple[str, ...] | None = None
    #: indexes of the GPUs it holds that its container was not allocated
    gpus_unallocated: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Process:
    """A process holding one or more GPUs: one process on four GPUs has four attachments."""

    pid: int
    name: str | None = None  #: from /proc/<pid>/comm
    user: str | None = None
    cmdline: str | None = None  #: the executable only, unless --show-cmdline
    attachments: tuple[Attachment, ...] = ()
    host: str | None = None  #: the name of the host it runs on (set by the agent's merge)
    workload: Workload | None = None  #: its container, pod and job (None: none, or not known)


@dataclass(frozen=True, slots=True)
class KernelStat:
    """Complete per-kernel-name aggregate of a traced process (never sampled)."""

    name: str  #: demangled, for display
    mangled: str  #: as the compiler emitted it
    count: int  #: every launch
    total_ns: int  #: over the timed launches
    min_ns: int | None  #: None when no launch had timing
    max_ns: int | None
    timed: int | None = None  #: launches with timing (CUPTI can give none); the mean is total_ns / timed


def kernel_order(k: KernelStat) -> tuple[int, int, str, str]:
    """The order of a kernel table: total time descending, then launches descending, then name
    and mangled name. A total order (a process has one entry per mangled name), so a client that
    updates some entries of a table can restore the agent's order exactly."""
    return (-k.total_ns, -k.count, k.name, k.mangled)


@dataclass(frozen=True, slots=True)
class KernelLaunch:
    """A kernel name's launch configurations and their theoretical occupancy (docs/occupancy.md):
    the figures of its main configuration (the one with the most time, else launches), the range
    over all of them. Found by its kernel table entry's ``mangled``. None: not known (no launch configuration recorded, no device facts)."""

    #: the kernel's KernelStat's ``mangled``, which names it here (the shown name is that entry's:
    #: repeating it would double what a process's long names take of the snapshot)
    mangled: str
    configs: int  #: configurations it ran with (device, block, registers, shared memory ...), at most 4
    configs_more: int = 0  #: its launches in configurations beyond those
    device: int | None = None  #: the main configuration's device (the process's ordinal, as a Lane's)
    block_threads: int | None = None  #: the main configuration's threads per block
    registers: int | None = None  #: per thread
    shared_bytes: int | None = None  #: static + dynamic shared memory per block
    occupancy_pct: float | None = None  #: active warps an SM allows of it against the SM's most, 0-100
    blocks_per_sm: int | None = None
    limiters: str | None = None  #: what holds the blocks down, "+"-joined: "registers", "warps+blocks"
    #: grid blocks / (blocks per SM x SMs), for its launches with the fewest and the most blocks
    #: (None also for a cluster launch, whose residency the calculator does not model)
    waves_min: float | None = None
    waves_max: float | None = None
    occupancy_min_pct: float | None = None  #: the range over its configurations with a figure
    occupancy_max_pct: float | None = None
    unavailable: str | None = None  #: why the main configuration has no figure


@dataclass(frozen=True, slots=True)
class CopyRate:
    """A traced process's timed copies on one device in one direction from one kind of host memory:
    the achieved bandwidth is ``bytes / total_ns``."""

    direction: str  #: one of TRANSFER_DIRECTIONS
    memory: str  #: "pinned" | "pageable" (the host side of h2d, d2h) | "other"
    count: int
    bytes: int
    total_ns: int
    bytes_per_s: float | None  #: None when the copies took no measured time


@dataclass(frozen=True, slots=True)
class TracedDevice:
    """One device a traced process used, as its own records describe it (docs/snapshot.md)."""

    device: int  #: the process's CUDA device ordinal (as a Lane's; CUDA_VISIBLE_DEVICES renumbers)
    uuid: str | None = None  #: "GPU-…", to match a Device's (None: no DEVICE record said)
    name: str | None = None
    compute_capability: tuple[int, int] | None = None
    sm_count: int | None = None
    #: the union of the process's kernel intervals on this device over ``busy_window_ms``, ending
    #: ``busy_window_end_us``: its GPU busy share, exact (None until a window has settled)
    busy_pct: float | None = None
    busy_window_ms: float | None = None
    busy_window_end_us: int | None = None
    busy_ns: int = 0  #: the union of its kernel intervals over all settled time (at exit: the run)
    kernel_span_ns: int | None = None  #: from its first kernel's start to its last kernel's end
    busy_late: int = 0  #: kernels that arrived after their time had settled (busy figures are lower bounds)
    copies: tuple[CopyRate, ...] = ()


@dataclass(frozen=True, slots=True)
class TransferStat:
    """Complete per-direction transfer totals of a traced process."""

    direction: str  #: one of TRANSFER_DIRECTIONS
    count: int
    bytes: int
    total_ns: int  #: over the timed transfers
    timed: int | None = None  #: transfers with timing


@dataclass(frozen=True, slots=True)
class Span:
    """One sampled execution on a lane. Times are wall clock, microseconds since the epoch."""

    seq: int  #: monotonically increasing per traced process; deltas are "seq > last seen"
    kind: str  #: "kernel" | "memcpy" | "memset"
    start_us: int
    dur_ns: int
    name: str | None = None  #: kernel name (demangled); None for copies
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    bytes: int | None = None  #: copies and memsets
    direction: str | None = None  #: copies and memsets: one of TRANSFER_DIRECTIONS


@dataclass(frozen=True, slots=True)
class Lane:
    """One (device, context, stream) of a traced process, with a capped sample of its spans.

    ``spans`` are columns (:class:`~gpuflow.core.recorded.SpanColumns`: one array per field, the
    lane's names once), as the collectors that retain records hand them out, so a snapshot carries
    thousands of spans without a Python object each; or a tuple of :class:`Span` (a collector
    without columns, and spans outside the columns' shapes: an unknown kind or direction). Either
    way, oldest first; iterating them gives Spans, and the JSON is the same.
    """

    device: int
    context: int
    stream: int
    label: str  #: NVTX name, "default" for the null stream, else the stream id as text
    executions: int  #: every kernel/copy seen on this lane, spans or not
    spans_elided: int  #: executions not in ``spans`` (exact)
    spans: SpanColumns | tuple[Span, ...] = ()  #: oldest first; most recent kept when capped


@dataclass(frozen=True, slots=True)
class TracedProcess:
    """A CUDA process launched under ``gpuflow run`` (or a descendant), as its ring reports it."""

    pid: int
    session: str
    name: str | None = None
    state: str = "running"  #: "running" | "exited"
    exit_status: int | None = None  #: shell-style: 128+N for signal N; None while running/unknown
    truncated: bool = False  #: the producer died without its exit flush: the tail may be missing
    cupti_status: str = "starting"  #: "ok" or why tracing is not happening
    cupti_detail: str | None = None
    records: int = 0  #: records decoded so far
    dropped_ring: int = 0  #: records lost because the ring was full
    dropped_cupti: int = 0  #: records CUPTI itself reported lost
    kernels: tuple[KernelStat, ...] = ()  #: in kernel_order (total_ns descending first)
    transfers: tuple[TransferStat, ...] = ()
    lanes: tuple[Lane, ...] = ()
    #: GPUFlow's own cost inside the process, as its injected library measured it: CPU time spent
    #: turning CUPTI's records into ring records and recycling their buffers
    translate_cpu_ns: int = 0
    window_start_us: int | None = None  #: earliest span start shown on any lane
    window_end_us: int | None = None  #: latest span end shown on any lane
    behind_live_ms: float | None = None  #: now - window_end, at the time of the snapshot
    devices: tuple[TracedDevice, ...] = ()  #: per device it used: facts, GPU busy, copy bandwidth
    #: per kernel shown by name that ran with a recorded configuration, by (name, mangled)
    kernel_launches: tuple[KernelLaunch, ...] = ()
    host: str | None = None  #: the name of the host it runs on (set by the agent's merge)

    @property
    def complete(self) -> bool:
        """Aggregates are complete only if nothing was dropped."""
        return self.dropped_ring == 0 and self.dropped_cupti == 0


@dataclass(frozen=True, slots=True)
class RetiredTraced:
    """Exited traced processes of one session, folded together to keep the snapshot bounded.

    A long session can start thousands of CUDA processes (a shell loop, a job runner); only the
    most recent exited ones stay in ``Snapshot.traced`` with their lanes. Older ones are folded
    here, so their complete totals are never lost: kernels merged by (name, mangled), transfers
    by direction, counters summed.
    """

    session: str
    processes: int = 0  #: exited traced processes folded in
    failed: int = 0  #: of them, with a known non-zero exit status
    truncated: int = 0  #: of them, that died without their exit flush
    not_traced: int = 0  #: of them, whose CUPTI status was not "ok" at the end
    records: int = 0
    dropped_ring: int = 0
    dropped_cupti: int = 0
    kernels: tuple[KernelStat, ...] = ()  #: in kernel_order (total_ns descending first)
    transfers: tuple[TransferStat, ...] = ()
    translate_cpu_ns: int = 0  #: summed
    host: str | None = None  #: the name of the host they ran on (set by the agent's merge)

    @property
    def complete(self) -> bool:
        """The folded totals are complete only if nothing was dropped and nothing was cut short."""
        return self.dropped_ring == 0 and self.dropped_cupti == 0 and self.truncated == 0


@dataclass(frozen=True, slots=True)
class FleetHost:
    """One host whose devices and processes a snapshot holds: the agent's own, or each agent a hub
    follows. ``info`` holds its name (``info.name``), boot epoch, interval and machine facts."""

    info: HostInfo
    state: str = "up"  #: one of HOST_STATES
    problems: tuple[Problem, ...] = ()  #: what is wrong on that host, or with reaching it
    seen: float | None = None  #: wall clock of the latest frame or ping from it (None: own host)
    restarts: int = 0  #: new boot epochs seen since the hub began following it
    address: str | None = None  #: the address a hub dials (scheme://host:port); None: own host
    detail: str | None = None  #: the stream a hub holds from it: "summary", "full"; None: own host
    #: its latest frame's age when the hub took it: receipt - the frame's timestamp (clock skew
    #: between the hosts included); None: own host
    lag_ms: float | None = None

    @property
    def name(self) -> str | None:
        return self.info.name


@dataclass(frozen=True, slots=True)
class SnapshotPart:
    """What one collector contributes; every field is optional. ``source`` names the collector.

    A part of this agent's own host leaves ``hosts`` empty: the agent tags its items with its own
    host name. A part about other hosts (a hub's fleet collector) lists them in ``hosts`` and tags
    every item itself.

    ``in_merge_order``: the part's items are already as the merge would leave them, each key once
    and in the snapshot's order (gpuflow.core.merge); when no other part has items, the merge
    then takes them as they are (a hub's thousands of items, at every snapshot).
    """

    source: str
    host: HostInfo | None = None
    devices: tuple[Device, ...] = ()
    processes: tuple[Process, ...] = ()
    traced: tuple[TracedProcess, ...] = ()
    problems: tuple[Problem, ...] = ()
    traced_retired: tuple[RetiredTraced, ...] = ()
    hosts: tuple[FleetHost, ...] = ()
    in_merge_order: bool = False


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything the browser is told at one instant."""

    seq: int  #: increases by one per snapshot produced by this agent
    timestamp: float  #: wall clock, seconds since the epoch
    host: HostInfo = field(default_factory=HostInfo)
    problems: tuple[Problem, ...] = ()
    devices: tuple[Device, ...] = ()
    processes: tuple[Process, ...] = ()
    traced: tuple[TracedProcess, ...] = ()
    sources: tuple[str, ...] = ()  #: collectors that contributed, sorted
    traced_retired: tuple[RetiredTraced, ...] = ()  #: older exited traced processes, per session
    #: every host the items name, by name: an agent's own (a fleet of one), or a hub's agents
    hosts: tuple[FleetHost, ...] = ()

    def to_json_dict(self) -> dict[str, Any]:
        """The plain JSON form (schema 3) documented in docs/snapshot.md (None → null).

        /api/snapshot and --summary-json are this; /api/stream sends the same snapshot in a compact
        form (names once, spans as arrays) made by gpuflow.transport.wire, which reads back to this.
        """
        return snapshot_json(self, host_json(self.host, self.problems),
                             [fleet_host_json(h) for h in self.hosts],
                             [_plain(d) for d in self.devices], [_plain(p) for p in self.processes],
                             [_traced_json(t) for t in self.traced],
                             [_traced_json(r) for r in self.traced_retired])


def snapshot_json(snap: Snapshot, host: dict[str, Any], hosts: list[Any], devices: list[Any],
                  processes: list[Any], traced: list[Any], traced_retired: list[Any]) -> dict[str, Any]:
    """The plain form's members, in their order, given each part already plain: the one layout
    :meth:`Snapshot.to_json_dict` and a frame encoder's kept parts (transport/plain_parts.py) share."""
    return {
        "schema": SCHEMA_VERSION,
        "seq": snap.seq,
        "timestamp": snap.timestamp,
        "host": host,
        "hosts": hosts,
        "sources": list(snap.sources),
        "devices": devices,
        "processes": processes,
        "traced": traced,
        "traced_retired": traced_retired,
    }


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


def _span_json(s: Span) -> dict[str, Any]:
    """Spans are most of a busy snapshot: built directly, without the generic walk."""
    return {"seq": s.seq, "kind": s.kind, "start_us": s.start_us, "dur_ns": s.dur_ns, "name": s.name,
            "grid": list(s.grid) if s.grid is not None else None,
            "block": list(s.block) if s.block is not None else None,
            "bytes": s.bytes, "direction": s.direction}


def _kernel_json(k: KernelStat) -> dict[str, Any]:
    """A kernel table holds up to thousands of entries (docs/decoder.md, "Caps"): built directly too
    (12 times faster than the generic walk, which took 41 ms for 4,097 of them)."""
    return {"name": k.name, "mangled": k.mangled, "count": k.count, "total_ns": k.total_ns,
            "min_ns": k.min_ns, "max_ns": k.max_ns, "timed": k.timed}


def json_value(obj: Any) -> Any:
    """Any snapshot value (a dataclass, a tuple of them, a number ...) in its plain JSON form, as
    :meth:`Snapshot.to_json_dict` writes it."""
    return _plain(obj)


def _plain(obj: Any) -> Any:
    """Dataclass → dict, tuples → lists, recursively; faster than dataclasses.asdict's deepcopy."""
    if isinstance(obj, tuple):
        return [_plain(x) for x in obj]
    cls = type(obj)
    if cls is Span:
        return _span_json(obj)
    if cls is _span_columns():
        return obj.to_json_list()
    if cls is KernelStat:
        return _kernel_json(obj)
    plain = _PLAINERS.get(cls)
    if plain is not None:
        return plain(obj)
    if hasattr(cls, "__dataclass_fields__"):
        return _plainer(cls)(obj)
    return obj


#: by dataclass, the function that makes one plain (made on first use by _plainer)
_PLAINERS: dict[type, Callable[[Any], dict[str, Any]]] = {}
#: the exact types _plain gives back as they are
_PLAIN_AS_IS = frozenset((str, int, float, bool, type(None)))


def _plainer(cls: type) -> Callable[[Any], dict[str, Any]]:
    """A dataclass's own plain-maker: ``{name: _plain(obj.name), ...}`` written out field by field,
    a value of a scalar type taken as it is without a call. A device is some 150 objects and a
    hundred fields, made plain whenever its readings change (a hub's page: each watched host's
    GPUs every second); the generic walk called _plain, isinstance and hasattr for each value.
    The field names are the class's own identifiers (never text from a snapshot)."""
    names = _field_names(cls)
    body = ", ".join(f"{n!r}: (v if (v := o.{n}).__class__ in AS_IS else plain(v))" for n in names)
    scope: dict[str, Any] = {"AS_IS": _PLAIN_AS_IS, "plain": _plain}
    exec(f"def plain_{cls.__name__}(o):\n    return {{{body}}}\n", scope)  # noqa: S102 - our own field names
    made = _PLAINERS[cls] = scope[f"plain_{cls.__name__}"]
    return made


_COLUMNS: list[type] = []


def _span_columns() -> type[SpanColumns]:
    """The columns' class (gpuflow.core.recorded imports this module, so it is looked up late)."""
    if not _COLUMNS:
        from gpuflow.core.recorded import SpanColumns

        _COLUMNS.append(SpanColumns)
    return _COLUMNS[0]


def host_json(host: HostInfo, problems: tuple[Problem, ...]) -> dict[str, Any]:
    """A snapshot's own ``host``: its HostInfo's fields, then the snapshot's problems."""
    d = _plain(host)
    d["problems"] = [_plain(p) for p in problems]
    return d


def fleet_host_json(h: FleetHost, head: dict[str, Any] | None = None) -> dict[str, Any]:
    """A host entry: its HostInfo's fields, then its problems and the hub's view of it.
    ``head``: ``host_json(h.info, h.problems)`` already made (copied here, not changed)."""
    d = dict(head) if head is not None else host_json(h.info, h.problems)
    d.update(state=h.state, seen=h.seen, restarts=h.restarts, address=h.address, detail=h.detail,
             lag_ms=h.lag_ms)
    return d


def _traced_json(t: TracedProcess | RetiredTraced) -> dict[str, Any]:
    d = _plain(t)
    d["complete"] = t.complete
    return d
