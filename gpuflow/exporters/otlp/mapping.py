"""A snapshot → OpenTelemetry metrics (the SDK's ``MetricsData``), in semantic-convention names.

Where OpenTelemetry's hardware conventions (``hw.*``, status Development) name a reading, that
name, unit and instrument are used; where they are silent, ``gpuflow.*``:

================================  ==============  =====  =============================================
name                              instrument      unit   from
================================  ==============  =====  =============================================
hw.gpu.utilization                gauge           1      utilization_gpu_pct (hw.gpu.task=general),
                                                         encoder/decoder_util_pct (=encoder, decoder)
hw.gpu.memory.usage               updowncounter   By     memory_used_bytes
hw.gpu.memory.limit               updowncounter   By     memory_total_bytes
hw.gpu.memory.utilization         gauge           1      memory used / memory total
hw.gpu.io                         counter         By     PCIe bytes (network.io.direction=receive/transmit)
hw.power                          gauge           W      power_draw_w (hw.type=gpu)
hw.energy                         counter         J      health.energy_joules
hw.errors                         counter         {error} ECC since driver load (error.type=corrected/
                                                         uncorrected), critical XIDs (error.type=xid)
hw.status                         updowncounter   1      1 for the GPU's state (hw.state=ok, or failed
                                                         when lost), 0 for the other
hw.temperature                    gauge           Cel    temperature_c, health.memory_temperature_c (a
                                                         sensor of its own: hw.type=temperature,
                                                         hw.parent=the GPU)
gpuflow.gpu.memory.activity       gauge           1      utilization_memory_pct (time memory was busy)
gpuflow.gpu.power.limit           gauge           W      power_limit_w
gpuflow.gpu.clock.sm / .memory    gauge           Hz     clock_sm_mhz, clock_mem_mhz
gpuflow.gpu.<pipe>.active         gauge           1      GPM: sm, tensor, dram, fp64, fp32, fp16,
                                                         integer, graphics (gpuflow.gpu.instance: MIG)
gpuflow.gpu.sm.occupancy          gauge           1      GPM
gpuflow.gpu.nvlink.io             counter         By     each link's counters (gpuflow.nvlink.link)
gpuflow.gpu.processes             gauge           {process} processes holding the GPU
gpuflow.gpu.unallocated_processes gauge           {process} of them, on a GPU their container was not given
================================  ==============  =====  =============================================

Every GPU series has ``hw.id`` (its UUID), ``hw.type`` ``gpu``, ``hw.name`` (``GPU <index>``),
``hw.model``, ``hw.vendor`` and ``hw.driver_version``. Their resource is the host: ``host.name``
(NODE_NAME, else the hostname), ``service.name`` ``gpuflow`` and its version, ``k8s.node.name``
where the agent was given one.

With per-process series on, each GPU process is a resource of its own (``process.pid``,
``process.executable.name``, ``process.owner``, and who it belongs to: ``container.id``,
``container.runtime``, ``k8s.pod.uid``, ``k8s.pod.name``, ``k8s.namespace.name``,
``k8s.container.name``, ``gpuflow.slurm.job.id``) with ``gpuflow.process.gpu.memory.usage`` (By)
and ``gpuflow.process.gpu.utilization`` (1) per GPU (``hw.id``); each traced process too
(``gpuflow.session`` besides), with ``gpuflow.traced.kernel.launches`` ({launch}),
``gpuflow.traced.kernel.time`` (s), ``gpuflow.traced.transfer.io`` (By,
``gpuflow.transfer.direction``), ``gpuflow.traced.records`` and ``gpuflow.traced.records.dropped``
({record}, ``gpuflow.drop.reason``). Kernel names are never attributes.

Not available is absent, never 0, as on /metrics. Counters are cumulative, from ``start_ns`` (the
agent's start).

Constraints: pure: a function of the snapshot and its arguments, no I/O; O(size of the snapshot).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from opentelemetry.sdk.metrics.export import (
    AggregationTemporality, Gauge, Metric, MetricsData, NumberDataPoint, ResourceMetrics,
    ScopeMetrics, Sum,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

import gpuflow
from gpuflow.core.snapshot import Device, Process, Snapshot, Workload

GAUGE, UPDOWN, COUNTER = "gauge", "updowncounter", "counter"
SCOPE = InstrumentationScope("gpuflow", gpuflow.__version__)
GPM = (("sm", "sm_util_pct"), ("tensor", "tensor_util_pct"), ("dram", "dram_bw_util_pct"),
       ("fp64", "fp64_util_pct"), ("fp32", "fp32_util_pct"), ("fp16", "fp16_util_pct"),
       ("integer", "integer_util_pct"), ("graphics", "graphics_util_pct"))

Point = tuple[dict[str, Any], float]


class _Metrics:
    """Data points gathered per (name, instrument, unit, description), in a stable order."""

    def __init__(self, start_ns: int, time_ns: int) -> None:
        self.start_ns, self.time_ns = start_ns, time_ns
        self._points: dict[tuple[str, str, str, str], list[Point]] = {}

    def add(self, name: str, kind: str, unit: str, doc: str, value: Any, attributes: dict[str, Any]) -> None:
        if value is None:
            return
        if value is True or value is False:
            value = int(value)
        self._points.setdefault((name, kind, unit, doc), []).append((attributes, value))

    def metrics(self) -> list[Metric]:
        out = []
        for (name, kind, unit, doc), points in self._points.items():
            data_points = [NumberDataPoint(attributes=a, start_time_unix_nano=self.start_ns,
                                           time_unix_nano=self.time_ns, value=v) for a, v in points]
            data: Any = (Gauge(data_points=data_points) if kind == GAUGE else
                         Sum(data_points=data_points, is_monotonic=kind == COUNTER,
                             aggregation_temporality=AggregationTemporality.CUMULATIVE))
            out.append(Metric(name=name, description=doc, unit=unit, data=data))
        return out


def _pct(value: float | None) -> float | None:
    return None if value is None else value / 100.0


def _mhz(value: int | None) -> float | None:
    return None if value is None else value * 1e6


def host_attributes(snap: Snapshot, node_name: str | None) -> dict[str, Any]:
    h = snap.host
    attrs: dict[str, Any] = {"host.name": h.name or h.hostname or "localhost", "service.name": "gpuflow",
                             "service.version": gpuflow.__version__}
    if node_name:
        attrs["k8s.node.name"] = node_name
    return attrs


def gpu_attributes(d: Device, driver: str | None) -> dict[str, Any]:
    attrs: dict[str, Any] = {"hw.id": d.uuid, "hw.type": "gpu", "hw.name": f"GPU {d.index}", "hw.vendor": "NVIDIA"}
    if d.name:
        attrs["hw.model"] = d.name
    if driver:
        attrs["hw.driver_version"] = driver
    return attrs


def device_metrics(m: _Metrics, snap: Snapshot) -> None:
    """Every GPU's series into ``m``."""
    held: dict[str, int] = {}
    stray: dict[int, int] = {}
    for p in snap.processes:
        for a in p.attachments:
            held[a.device_uuid] = held.get(a.device_uuid, 0) + 1
        if p.workload is not None:
            for index in p.workload.gpus_unallocated:
                stray[index] = stray.get(index, 0) + 1
    for d in snap.devices:
        g = gpu_attributes(d, snap.host.driver_version)
        for state in ("ok", "failed"):
            m.add("hw.status", UPDOWN, "1", "Operational status: 1 for the GPU's state, 0 for the other",
                  int((state == "failed") == d.lost), {**g, "hw.state": state})
        m.add("gpuflow.gpu.processes", GAUGE, "{process}", "Processes holding the GPU", held.get(d.uuid, 0), g)
        m.add("gpuflow.gpu.unallocated_processes", GAUGE, "{process}", "Processes holding the GPU that "
              "the kubelet did not allocate it to", stray.get(d.index, 0), g)
        if d.lost:
            continue
        h, links = d.health, d.links
        util = "Fraction of time spent in a specific task"
        m.add("hw.gpu.utilization", GAUGE, "1", util, _pct(d.utilization_gpu_pct), {**g, "hw.gpu.task": "general"})
        if h is not None:
            m.add("hw.gpu.utilization", GAUGE, "1", util, _pct(h.encoder_util_pct), {**g, "hw.gpu.task": "encoder"})
            m.add("hw.gpu.utilization", GAUGE, "1", util, _pct(h.decoder_util_pct), {**g, "hw.gpu.task": "decoder"})
        m.add("hw.gpu.memory.usage", UPDOWN, "By", "GPU memory used", d.memory_used_bytes, g)
        m.add("hw.gpu.memory.limit", UPDOWN, "By", "Size of the GPU memory", d.memory_total_bytes, g)
        if d.memory_used_bytes is not None and d.memory_total_bytes:
            m.add("hw.gpu.memory.utilization", GAUGE, "1", "Fraction of GPU memory used",
                  d.memory_used_bytes / d.memory_total_bytes, g)
        if links is not None:
            for direction, value in (("receive", links.pcie_rx_bytes_total), ("transmit", links.pcie_tx_bytes_total)):
                m.add("hw.gpu.io", COUNTER, "By", "Received and transmitted bytes by the GPU (PCIe)",
                      value, {**g, "network.io.direction": direction})
            for n in links.nvlinks:
                for direction, value in (("receive", n.rx_bytes_total), ("transmit", n.tx_bytes_total)):
                    m.add("gpuflow.gpu.nvlink.io", COUNTER, "By", "NVLink data bytes of one link", value,
                          {**g, "gpuflow.nvlink.link": n.link, "network.io.direction": direction})
        m.add("hw.power", GAUGE, "W", "Instantaneous power consumed by the component", d.power_draw_w, g)
        m.add("gpuflow.gpu.power.limit", GAUGE, "W", "Enforced power limit", d.power_limit_w, g)
        m.add("gpuflow.gpu.memory.activity", GAUGE, "1", "Fraction of time device memory was read or written",
              _pct(d.utilization_memory_pct), g)
        m.add("gpuflow.gpu.clock.sm", GAUGE, "Hz", "SM clock", _mhz(d.clock_sm_mhz), g)
        m.add("gpuflow.gpu.clock.memory", GAUGE, "Hz", "Memory clock", _mhz(d.clock_mem_mhz), g)
        sensors = (("gpu", d.temperature_c), ("memory", h.memory_temperature_c if h is not None else None))
        for where, value in sensors:
            m.add("hw.temperature", GAUGE, "Cel", "Temperature in degrees Celsius", value,
                  {"hw.id": f"{d.uuid}/{where}", "hw.type": "temperature", "hw.parent": d.uuid,
                   "hw.name": f"GPU {d.index} {where}"})
        if h is not None:
            m.add("hw.energy", COUNTER, "J", "Energy consumed by the component", h.energy_joules, g)
            errors = "Number of errors encountered by the component"
            m.add("hw.errors", COUNTER, "{error}", errors, h.ecc_corrected_volatile, {**g, "error.type": "corrected"})
            m.add("hw.errors", COUNTER, "{error}", errors, h.ecc_uncorrected_volatile, {**g, "error.type": "uncorrected"})
            m.add("hw.errors", COUNTER, "{error}", errors, h.xid_errors, {**g, "error.type": "xid"})
        for gpm in ((d.gpm,) if d.gpm is not None else ()) + d.gpm_instances:
            attrs = g if gpm.gpu_instance_id is None else {**g, "gpuflow.gpu.instance": gpm.gpu_instance_id}
            for pipe, field in GPM:
                m.add(f"gpuflow.gpu.{pipe}.active", GAUGE, "1", f"Share of time the {pipe} units were active (GPM)",
                      _pct(getattr(gpm, field)), attrs)
            m.add("gpuflow.gpu.sm.occupancy", GAUGE, "1", "Active warps against the theoretical maximum (GPM)",
                  _pct(gpm.sm_occupancy_pct), attrs)


def workload_attributes(w: Workload | None) -> dict[str, Any]:
    if w is None:
        return {}
    pairs = (("container.id", w.container_id), ("container.runtime", w.container_runtime),
             ("k8s.pod.uid", w.pod_uid), ("k8s.pod.name", w.pod_name), ("k8s.namespace.name", w.pod_namespace),
             ("k8s.container.name", w.container_name), ("gpuflow.slurm.job.id", w.slurm_job_id))
    return {k: v for k, v in pairs if v is not None}


def build(snap: Snapshot, *, start_ns: int, per_process: bool, node_name: str | None = None) -> MetricsData:
    """The metrics of ``snap``: the host's resource, then one per process and traced process
    (``per_process``)."""
    time_ns = int(snap.timestamp * 1e9)
    base = host_attributes(snap, node_name)
    host = _Metrics(start_ns, time_ns)
    device_metrics(host, snap)
    resources = [(base, host)]
    if per_process:
        resources += list(_processes(snap, base, start_ns, time_ns))
    return MetricsData(resource_metrics=[
        ResourceMetrics(resource=Resource(attrs), schema_url="",
                        scope_metrics=[ScopeMetrics(scope=SCOPE, metrics=m.metrics(), schema_url="")])
        for attrs, m in resources if m.metrics()])


def _processes(snap: Snapshot, base: dict[str, Any], start_ns: int,
               time_ns: int) -> Iterable[tuple[dict[str, Any], _Metrics]]:
    owners = {p.pid: p for p in snap.processes}
    for p in snap.processes:
        attrs = {**base, "process.pid": p.pid, **workload_attributes(p.workload)}
        if p.name:
            attrs["process.executable.name"] = p.name
        if p.user:
            attrs["process.owner"] = p.user
        m = _Metrics(start_ns, time_ns)
        for a in p.attachments:
            gpu = {"hw.id": a.device_uuid, "hw.name": f"GPU {a.device_index}"}
            m.add("gpuflow.process.gpu.memory.usage", UPDOWN, "By", "GPU memory used by the process",
                  a.memory_used_bytes, gpu)
            m.add("gpuflow.process.gpu.utilization", GAUGE, "1", "Share of SM time attributed to the process",
                  _pct(a.sm_util_pct), gpu)
        yield attrs, m
    for t in snap.traced:
        owner = owners.get(t.pid)
        attrs = {**base, "process.pid": t.pid, "gpuflow.session": t.session,
                 **workload_attributes(owner.workload if owner is not None else None)}
        if t.name:
            attrs["process.executable.name"] = t.name
        m = _Metrics(start_ns, time_ns)
        _traced(m, t.kernels, t.transfers, t.records, t.dropped_ring, t.dropped_cupti)
        yield attrs, m


def _traced(m: _Metrics, kernels, transfers, records: int, dropped_ring: int, dropped_cupti: int) -> None:
    add: Callable[..., None] = m.add
    add("gpuflow.traced.kernel.launches", COUNTER, "{launch}", "Kernels run", sum(k.count for k in kernels), {})
    add("gpuflow.traced.kernel.time", COUNTER, "s", "Kernel time summed", sum(k.total_ns for k in kernels) / 1e9, {})
    for x in transfers:
        add("gpuflow.traced.transfer.io", COUNTER, "By", "Bytes copied or set", x.bytes,
            {"gpuflow.transfer.direction": x.direction})
    add("gpuflow.traced.records", COUNTER, "{record}", "Trace records decoded", records, {})
    for reason, n in (("ring", dropped_ring), ("cupti", dropped_cupti)):
        add("gpuflow.traced.records.dropped", COUNTER, "{record}", "Trace records lost", n,
            {"gpuflow.drop.reason": reason})
