"""GET /metrics: Prometheus text built from the cached latest snapshot, never from NVML per scrape.

A private ``CollectorRegistry`` holds one custom collector whose ``collect()`` reads the board's
latest snapshot, so exited processes simply stop appearing (no stale labelled gauges to remove).
Names use the ``gpuflow_`` prefix and base units (ratios 0–1, bytes, joules, watts, celsius,
hertz, seconds; counters end in ``_total``); device series carry the labels ``gpu`` (index),
``uuid``, ``name``, ``pci_bus_id`` and ``Hostname`` (the host's name in the fleet: ``NODE_NAME``
when set, else the hostname; :mod:`gpuflow.transport.metrics_gpu` holds their table and its
dcgm-exporter counterparts; docs/metrics.md). A reading the snapshot has as null is *absent* from
the output, never 0. The agent's own series: ``gpuflow_build_info``, ``gpuflow_nvml_up`` and the
NVML collector's ticks, last tick duration and failures (from the snapshot's host). Per-process
and traced-process series (labels ``pid``, ``process``, ``user``, and who the process belongs
to: :data:`WORKLOAD_LABELS`) only appear with ``metrics_per_process``: they are high-cardinality
and say who runs what. The workload labels are named as OpenTelemetry's attributes are
(``k8s_pod_name``...), never ``pod``/``namespace``/``container``, which a Kubernetes scrape's own
target labels take (a clash Prometheus resolves by renaming the series' label ``exported_pod``).
Kernel names are never labels.

Constraints: runs on a server thread per scrape; O(size of the snapshot); no locks beyond the
board's; the Host/token middleware applies as for every route.
"""

from __future__ import annotations

import platform
from typing import Any, Callable, Iterator

import falcon
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder

import gpuflow
from gpuflow.core.snapshot import Process, Snapshot, Workload
from gpuflow.transport.metrics_gpu import GPU_LABELS, device_labels, gpu_families, host_label

#: who a process belongs to (snapshot.Workload); empty where not known
WORKLOAD_LABELS = ["container_id", "k8s_pod_uid", "k8s_pod_name", "k8s_namespace_name",
                   "k8s_container_name", "slurm_job_id"]
PROC_LABELS = GPU_LABELS + ["pid", "process", "user"] + WORKLOAD_LABELS
TRACED_LABELS = ["pid", "session", "process", "Hostname"] + WORKLOAD_LABELS
NO_WORKLOAD = [""] * len(WORKLOAD_LABELS)
#: the pid label of a session's roll-up of older exited processes (snapshot.RetiredTraced)
FOLDED_PID = "folded"

#: (metric name, help, Attachment field, scale)
PROCESS_GAUGES: tuple[tuple[str, str, str, float], ...] = (
    ("gpuflow_process_gpu_memory_used_bytes", "Device memory used by the process",
     "memory_used_bytes", 1),
    ("gpuflow_process_sm_utilization_ratio", "SM busy fraction attributed to the process (0-1)",
     "sm_util_pct", 0.01),
    ("gpuflow_process_memory_utilization_ratio",
     "Memory controller busy fraction attributed to the process (0-1)", "mem_util_pct", 0.01),
)


def _s(value: Any) -> str:
    return "" if value is None else str(value)


def _scaled(value: Any, scale: float) -> float | None:
    if value is None:
        return None
    return value * scale if scale != 1 else value


def workload_labels(w: Workload | None) -> list[str]:
    """The values of :data:`WORKLOAD_LABELS` for a process's workload (empty: not known)."""
    if w is None:
        return NO_WORKLOAD
    return [_s(w.container_id), _s(w.pod_uid), _s(w.pod_name), _s(w.pod_namespace),
            _s(w.container_name), _s(w.slurm_job_id)]


class SnapshotCollector:
    """prometheus_client custom collector over ``latest()``; ``streams`` feeds the SSE counters."""

    def __init__(self, latest: Callable[[], Snapshot | None], per_process: bool,
                 streams: Any = None) -> None:
        self._latest = latest
        self.per_process = per_process
        self.streams = streams

    def collect(self) -> Iterator[Metric]:
        yield from self._transport()
        snap = self._latest()
        if snap is None:
            return
        yield from self._agent(snap)
        yield from self._devices(snap)
        if self.per_process:
            yield from self._processes(snap)
            yield from self._traced(snap)

    def _transport(self) -> Iterator[Metric]:
        if self.streams is None:
            return
        g = GaugeMetricFamily("gpuflow_sse_streams_open", "Open /api/stream connections")
        g.add_metric([], self.streams.open)
        yield g
        c = CounterMetricFamily("gpuflow_sse_streams_rejected", "Streams refused at max_streams")
        c.add_metric([], self.streams.rejected)
        yield c
        c = CounterMetricFamily("gpuflow_sse_streams_served", "Streams accepted since start")
        c.add_metric([], self.streams.served)
        yield c

    def _agent(self, snap: Snapshot) -> Iterator[Metric]:
        g = GaugeMetricFamily("gpuflow_snapshot_seq", "Sequence number of the latest snapshot")
        g.add_metric([], snap.seq)
        yield g
        g = GaugeMetricFamily("gpuflow_snapshot_timestamp_seconds",
                              "Wall-clock time the latest snapshot was built")
        g.add_metric([], snap.timestamp)
        yield g
        h = snap.host
        g = GaugeMetricFamily("gpuflow_build_info", "GPUFlow's version (value is always 1)",
                              labels=["version", "python"])
        g.add_metric([gpuflow.__version__, platform.python_version()], 1)
        yield g
        if h.nvml_up is not None:
            g = GaugeMetricFamily("gpuflow_nvml_up", "1 if the NVML collector has NVML initialized "
                                  "and answering")
            g.add_metric([], 1 if h.nvml_up else 0)
            yield g
        if h.nvml_polls is not None:
            c = CounterMetricFamily("gpuflow_nvml_polls", "NVML collector ticks")
            c.add_metric([], h.nvml_polls)
            yield c
        if h.nvml_poll_errors is not None:
            c = CounterMetricFamily("gpuflow_nvml_poll_errors", "NVML collector failures: GPU reads "
                                    "that failed and ticks longer than the interval")
            c.add_metric([], h.nvml_poll_errors)
            yield c
        if h.nvml_poll_seconds is not None:
            g = GaugeMetricFamily("gpuflow_nvml_poll_duration_seconds", "How long the NVML "
                                  "collector's latest tick took")
            g.add_metric([], h.nvml_poll_seconds)
            yield g
        g = GaugeMetricFamily("gpuflow_driver_info", "NVIDIA driver versions (value is always 1)",
                              labels=["driver_version", "cuda_driver_version", "nvml_version"])
        g.add_metric([_s(h.driver_version), _s(h.cuda_driver_version), _s(h.nvml_version)], 1)
        yield g
        counts: dict[tuple[str, str], int] = {}
        for p in snap.problems:
            counts[(p.source, p.severity)] = counts.get((p.source, p.severity), 0) + 1
        g = GaugeMetricFamily("gpuflow_problems", "Problems reported by collectors",
                              labels=["source", "severity"])
        for (source, severity), n in sorted(counts.items()):
            g.add_metric([source, severity], n)
        yield g

    def _devices(self, snap: Snapshot) -> Iterator[Metric]:
        info = GaugeMetricFamily("gpuflow_gpu_info", "GPU identity (value is always 1)",
                                 labels=GPU_LABELS + ["mig_mode"])
        lost = GaugeMetricFamily("gpuflow_gpu_lost", "1 if the GPU stopped answering",
                                 labels=GPU_LABELS)
        procs = GaugeMetricFamily("gpuflow_gpu_processes", "Processes holding the GPU",
                                  labels=GPU_LABELS)
        unallocated = GaugeMetricFamily("gpuflow_gpu_unallocated_processes", "Processes holding "
                                        "the GPU that the kubelet did not allocate it to",
                                        labels=GPU_LABELS)
        per_gpu: dict[tuple[str | None, str], int] = {}
        stray: dict[tuple[str | None, int], int] = {}
        for p in snap.processes:
            for a in p.attachments:
                key = (p.host, a.device_uuid)
                per_gpu[key] = per_gpu.get(key, 0) + 1
            if p.workload is not None:
                for index in p.workload.gpus_unallocated:
                    stray[(p.host, index)] = stray.get((p.host, index), 0) + 1
        host = host_label(snap)
        for d in snap.devices:
            labels = device_labels(d, host)
            info.add_metric(labels + [_s(d.mig_mode)], 1)
            lost.add_metric(labels, 1 if d.lost else 0)
            procs.add_metric(labels, per_gpu.get((d.host, d.uuid), 0))
            unallocated.add_metric(labels, stray.get((d.host, d.index), 0))
        yield info
        yield lost
        yield procs
        yield unallocated
        yield from gpu_families(snap)

    def _processes(self, snap: Snapshot) -> Iterator[Metric]:
        host = host_label(snap)
        devices = {(d.host, d.uuid): d for d in snap.devices}
        families = [GaugeMetricFamily(name, doc, labels=PROC_LABELS)
                    for name, doc, _, _ in PROCESS_GAUGES]
        for p in snap.processes:
            who = workload_labels(p.workload)
            for a in p.attachments:
                d = devices.get((p.host, a.device_uuid))
                gpu = ([str(a.device_index), a.device_uuid, "", "", p.host or host] if d is None
                       else device_labels(d, host))
                labels = gpu + [str(p.pid), _s(p.name), _s(p.user)] + who
                for family, (_, _, attr, scale) in zip(families, PROCESS_GAUGES):
                    value = _scaled(getattr(a, attr), scale)
                    if value is not None:
                        family.add_metric(labels, value)
        yield from families

    def _traced(self, snap: Snapshot) -> Iterator[Metric]:
        records = CounterMetricFamily("gpuflow_traced_records", "Trace records decoded",
                                      labels=TRACED_LABELS)
        dropped = CounterMetricFamily("gpuflow_traced_dropped_records",
                                      "Trace records lost (reason: ring full or inside CUPTI)",
                                      labels=TRACED_LABELS + ["reason"])
        launches = CounterMetricFamily("gpuflow_traced_kernel_launches", "Kernels run",
                                       labels=TRACED_LABELS)
        ktime = CounterMetricFamily("gpuflow_traced_kernel_seconds", "Kernel time summed",
                                    labels=TRACED_LABELS)
        xbytes = CounterMetricFamily("gpuflow_traced_transfer_bytes", "Bytes copied or set",
                                     labels=TRACED_LABELS + ["direction"])
        xcount = CounterMetricFamily("gpuflow_traced_transfers", "Copies and memsets",
                                     labels=TRACED_LABELS + ["direction"])
        own_cpu = CounterMetricFamily("gpuflow_traced_translate_cpu_seconds",
                                      "GPUFlow's own CPU time inside the traced process (turning "
                                      "CUPTI's records into its ring)", labels=TRACED_LABELS)
        folded = CounterMetricFamily("gpuflow_traced_folded_processes",
                                     "Exited traced processes folded into the session's roll-up",
                                     labels=["session"])
        # the roll-up of older exited processes: the same series under pid="folded", so a sum
        # by session is the session's complete total; a traced process's workload is the one
        # its pid has among the GPU processes of its host
        host = host_label(snap)
        owners: dict[tuple[str | None, int], Process] = {(p.host, p.pid): p for p in snap.processes}
        rows = [(str(t.pid), t.name, t, owners.get((t.host, t.pid))) for t in snap.traced]
        rows += [(FOLDED_PID, None, r, None) for r in snap.traced_retired]
        for r in snap.traced_retired:
            folded.add_metric([r.session], r.processes)
        for pid, name, t, owner in rows:
            labels = [pid, t.session, _s(name), t.host or host] + workload_labels(
                owner.workload if owner is not None else None)
            records.add_metric(labels, t.records)
            dropped.add_metric(labels + ["ring"], t.dropped_ring)
            dropped.add_metric(labels + ["cupti"], t.dropped_cupti)
            launches.add_metric(labels, sum(k.count for k in t.kernels))
            ktime.add_metric(labels, sum(k.total_ns for k in t.kernels) / 1e9)
            own_cpu.add_metric(labels, t.translate_cpu_ns / 1e9)
            for x in t.transfers:
                xbytes.add_metric(labels + [x.direction], x.bytes)
                xcount.add_metric(labels + [x.direction], x.count)
        yield from (records, dropped, launches, ktime, xbytes, xcount, own_cpu, folded)


def make_registry(collector: SnapshotCollector) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


class MetricsResource:
    def __init__(self, state, registry: CollectorRegistry) -> None:
        self.state = state
        self.registry = registry

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.state.wait_first_snapshot()
        try:
            encoder, content_type = choose_encoder(req.get_header("Accept") or "")
        except Exception:  # noqa: BLE001 - prometheus_client chokes on some Accept values
            # (a non-numeric "version=" raises TypeError): a bad Accept gets the plain text
            # format, as no Accept at all does, rather than a 500.
            encoder, content_type = choose_encoder("")
        resp.data = encoder(self.registry)
        resp.content_type = content_type

    on_head = on_get
