"""/metrics' GPU series: one table from snapshot Device fields to Prometheus families in base units.

Each row of :data:`DEVICE_SERIES` names a family, its type, its help text, the Device field it
reads (a dotted path into the nested readings: ``health.energy_joules``), the scale to base units
and its dcgm-exporter counterpart (docs/metrics.md is written from this table; a test checks that
every family is documented there). A reading the snapshot has as null is *absent*, never 0.

Every device series carries the labels ``gpu`` (index), ``uuid``, ``name``, ``pci_bus_id`` and
``Hostname`` (dcgm-exporter's own label names for the last two, so dashboards and joins written
for it work here; ``Hostname`` is the host's name in the fleet, ``NODE_NAME`` when set). GPM families also carry ``gpu_instance``: empty for the whole GPU, the MIG GPU
instance id otherwise. NVLink families carry ``link``; ECC, remapped rows and clock events say
which counter or reason in a label of their own.

PCIe traffic is exported as ``_bytes_total`` counters (GPM's exact rates summed over contiguous
pairs of samples), never as a per-second gauge: ``rate()`` gives bytes per second over any window
without the aliasing of a sampled gauge.

Constraints: runs on a server thread per scrape, O(size of the snapshot); reads nothing but the
snapshot it is given.
"""

from __future__ import annotations

from typing import Any, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from gpuflow.core.snapshot import Device, Snapshot

GPU_LABELS = ["gpu", "uuid", "name", "pci_bus_id", "Hostname"]
GAUGE, COUNTER = "gauge", "counter"

#: (family, type, help, Device field path, scale to base units, dcgm-exporter counterpart)
DEVICE_SERIES: tuple[tuple[str, str, str, str, float, str], ...] = (
    ("gpuflow_gpu_utilization_ratio", GAUGE, "Share of the last sample period a kernel ran (0-1)",
     "utilization_gpu_pct", 0.01, "DCGM_FI_DEV_GPU_UTIL (%)"),
    ("gpuflow_gpu_memory_utilization_ratio", GAUGE, "Share of time device memory was read or written (0-1)",
     "utilization_memory_pct", 0.01, "DCGM_FI_DEV_MEM_COPY_UTIL (%)"),
    ("gpuflow_gpu_memory_used_bytes", GAUGE, "Device memory in use (without the reserved part)",
     "memory_used_bytes", 1, "DCGM_FI_DEV_FB_USED (MiB)"),
    ("gpuflow_gpu_memory_total_bytes", GAUGE, "Device memory installed", "memory_total_bytes", 1,
     "DCGM_FI_DEV_FB_TOTAL (MiB)"),
    ("gpuflow_gpu_memory_free_bytes", GAUGE, "Device memory free", "health.memory_free_bytes", 1,
     "DCGM_FI_DEV_FB_FREE (MiB)"),
    ("gpuflow_gpu_memory_reserved_bytes", GAUGE, "Device memory held by the driver and firmware",
     "health.memory_reserved_bytes", 1, "DCGM_FI_DEV_FB_RESERVED (MiB)"),
    ("gpuflow_gpu_temperature_celsius", GAUGE, "GPU core temperature", "temperature_c", 1,
     "DCGM_FI_DEV_GPU_TEMP"),
    ("gpuflow_gpu_memory_temperature_celsius", GAUGE, "Memory (HBM) temperature",
     "health.memory_temperature_c", 1, "DCGM_FI_DEV_MEMORY_TEMP"),
    ("gpuflow_gpu_power_watts", GAUGE, "Power draw", "power_draw_w", 1, "DCGM_FI_DEV_POWER_USAGE"),
    ("gpuflow_gpu_power_limit_watts", GAUGE, "Enforced power limit", "power_limit_w", 1,
     "DCGM_FI_DEV_ENFORCED_POWER_LIMIT"),
    ("gpuflow_gpu_energy_joules", COUNTER, "Energy used since the driver was loaded",
     "health.energy_joules", 1, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ)"),
    ("gpuflow_gpu_sm_clock_hertz", GAUGE, "SM clock", "clock_sm_mhz", 1e6, "DCGM_FI_DEV_SM_CLOCK (MHz)"),
    ("gpuflow_gpu_memory_clock_hertz", GAUGE, "Memory clock", "clock_mem_mhz", 1e6,
     "DCGM_FI_DEV_MEM_CLOCK (MHz)"),
    ("gpuflow_gpu_encoder_utilization_ratio", GAUGE, "Video encoder busy fraction (0-1)",
     "health.encoder_util_pct", 0.01, "DCGM_FI_DEV_ENC_UTIL (%)"),
    ("gpuflow_gpu_decoder_utilization_ratio", GAUGE, "Video decoder busy fraction (0-1)",
     "health.decoder_util_pct", 0.01, "DCGM_FI_DEV_DEC_UTIL (%)"),
    ("gpuflow_gpu_pcie_transmit_bytes", COUNTER, "PCIe bytes sent by the GPU since the agent "
     "started measuring (GPM)", "links.pcie_tx_bytes_total", 1,
     "DCGM_FI_PROF_PCIE_TX_BYTES (a bytes/s gauge: rate() of this)"),
    ("gpuflow_gpu_pcie_receive_bytes", COUNTER, "PCIe bytes received by the GPU since the agent "
     "started measuring (GPM)", "links.pcie_rx_bytes_total", 1,
     "DCGM_FI_PROF_PCIE_RX_BYTES (a bytes/s gauge: rate() of this)"),
    ("gpuflow_gpu_pcie_link_generation", GAUGE, "PCIe generation now (drops when idle)",
     "links.pcie_gen", 1, "DCGM_FI_DEV_PCIE_LINK_GEN"),
    ("gpuflow_gpu_pcie_link_width", GAUGE, "PCIe lanes now", "links.pcie_width", 1,
     "DCGM_FI_DEV_PCIE_LINK_WIDTH"),
    ("gpuflow_gpu_pcie_link_generation_max", GAUGE, "Highest PCIe generation of the GPU and its slot",
     "links.pcie_gen_max", 1, "DCGM_FI_DEV_PCIE_MAX_LINK_GEN"),
    ("gpuflow_gpu_pcie_link_width_max", GAUGE, "Most PCIe lanes of the GPU and its slot",
     "links.pcie_width_max", 1, "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH"),
    ("gpuflow_gpu_pcie_peak_bytes_per_second", GAUGE, "Theoretical PCIe bytes per second per "
     "direction at the highest generation and width", "links.pcie_peak_bytes_per_s", 1, "(none)"),
    ("gpuflow_gpu_pcie_replays", COUNTER, "PCIe replays (link-level retries)", "health.pcie_replays",
     1, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"),
    ("gpuflow_gpu_xid_errors", COUNTER, "Critical XID events seen since the agent started",
     "health.xid_errors", 1, "(none: dcgm-exporter exports the last code only)"),
    ("gpuflow_gpu_xid_last", GAUGE, "The latest critical XID code seen", "health.xid_last", 1,
     "DCGM_FI_DEV_XID_ERRORS"),
    ("gpuflow_gpu_row_remap_pending", GAUGE, "1 if a row remapping waits for a GPU reset",
     "health.remap_pending", 1, "DCGM_FI_DEV_ROW_REMAP_PENDING"),
    ("gpuflow_gpu_row_remap_failed", GAUGE, "1 if a row remapping failed", "health.remap_failure", 1,
     "DCGM_FI_DEV_ROW_REMAP_FAILURE"),
    ("gpuflow_gpu_clock_event_reasons", GAUGE, "NVML clocks event (throttle) reasons bitmask",
     "health.clock_event_mask", 1, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"),
)

#: GPM families (labels GPU_LABELS + gpu_instance): (family, help, GpmReadings field, dcgm name)
GPM_SERIES: tuple[tuple[str, str, str, str], ...] = (
    ("gpuflow_gpu_graphics_active_ratio", "Share of time any graphics or compute engine was active (GPM)",
     "graphics_util_pct", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
    ("gpuflow_gpu_sm_active_ratio", "Share of SMs busy (GPM SM_UTIL; a device mean, not per SM)",
     "sm_util_pct", "DCGM_FI_PROF_SM_ACTIVE"),
    ("gpuflow_gpu_sm_occupancy_ratio", "Active warps against the theoretical maximum (GPM)",
     "sm_occupancy_pct", "DCGM_FI_PROF_SM_OCCUPANCY"),
    ("gpuflow_gpu_tensor_active_ratio", "Share of time any tensor pipe was active (GPM)",
     "tensor_util_pct", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"),
    ("gpuflow_gpu_dram_active_ratio", "DRAM bandwidth used against its peak (GPM)", "dram_bw_util_pct",
     "DCGM_FI_PROF_DRAM_ACTIVE"),
    ("gpuflow_gpu_fp64_active_ratio", "Share of time the FP64 pipes were active (GPM)", "fp64_util_pct",
     "DCGM_FI_PROF_PIPE_FP64_ACTIVE"),
    ("gpuflow_gpu_fp32_active_ratio", "Share of time the FP32 pipes were active (GPM)", "fp32_util_pct",
     "DCGM_FI_PROF_PIPE_FP32_ACTIVE"),
    ("gpuflow_gpu_fp16_active_ratio", "Share of time the FP16 pipes were active (GPM)", "fp16_util_pct",
     "DCGM_FI_PROF_PIPE_FP16_ACTIVE"),
    ("gpuflow_gpu_integer_active_ratio", "Share of time the integer pipes were active (GPM)",
     "integer_util_pct", "DCGM_FI_PROF_PIPE_INT_ACTIVE"),
)

#: Families with a label of their own, documented in docs/metrics.md beside the tables above.
LABELLED_SERIES: tuple[tuple[str, str, str], ...] = (
    ("gpuflow_gpu_ecc_errors_total", "type=corrected|uncorrected, counter=volatile|aggregate",
     "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL, _DBE_VOL_TOTAL, _SBE_AGG_TOTAL, _DBE_AGG_TOTAL"),
    ("gpuflow_gpu_remapped_rows_total", "cause=correctable|uncorrectable",
     "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS, DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"),
    ("gpuflow_gpu_clock_event_active", "reason=gpu_idle|sw_power_cap|hw_slowdown|...",
     "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS (one bit each)"),
    ("gpuflow_gpu_nvlink_up", "link, peer_gpu", "(none)"),
    ("gpuflow_gpu_nvlink_transmit_bytes_total", "link",
     "DCGM_FI_PROF_NVLINK_TX_BYTES (a bytes/s gauge), DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"),
    ("gpuflow_gpu_nvlink_receive_bytes_total", "link", "DCGM_FI_PROF_NVLINK_RX_BYTES (a bytes/s gauge)"),
)

_ECC = (("corrected", "volatile", "ecc_corrected_volatile"), ("uncorrected", "volatile", "ecc_uncorrected_volatile"),
        ("corrected", "aggregate", "ecc_corrected_aggregate"),
        ("uncorrected", "aggregate", "ecc_uncorrected_aggregate"))
#: the clock event reasons exported one by one (HealthReadings.clock_events' names)
CLOCK_REASONS = ("gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
                 "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
                 "display_clock_setting")


def _s(value: Any) -> str:
    return "" if value is None else str(value)


def host_label(snap: Snapshot) -> str:
    """The ``Hostname`` of a snapshot's own host: its name in the fleet (``NODE_NAME`` when set,
    else the hostname: gpuflow.core.identity), else the hostname NVML's collector gave."""
    return _s(snap.host.name or snap.host.hostname)


def device_labels(d: Device, host: str) -> list[str]:
    """A device's labels; ``Hostname`` is the host the device is on (a hub's snapshot holds
    several), ``host`` where the snapshot did not say."""
    return [str(d.index), d.uuid, _s(d.name), _s(d.pci_bus_id), d.host or host]


def _family(kind: str, name: str, doc: str, labels: list[str]) -> Metric:
    if kind == COUNTER:
        return CounterMetricFamily(name, doc, labels=labels)
    return GaugeMetricFamily(name, doc, labels=labels)


def _read(d: Device, path: tuple[str, ...]) -> Any:
    value: Any = d
    for part in path:
        value = getattr(value, part)
        if value is None:
            return None
    return value


_PATHS = tuple(tuple(row[3].split(".")) for row in DEVICE_SERIES)


def gpu_families(snap: Snapshot) -> Iterator[Metric]:
    """Every device family of ``snap`` (each GPU's readings, GPM, links, health)."""
    host = host_label(snap)
    families = [_family(kind, name, doc, GPU_LABELS) for name, kind, doc, _, _, _ in DEVICE_SERIES]
    gpm = [GaugeMetricFamily(name, doc, labels=GPU_LABELS + ["gpu_instance"]) for name, doc, _, _ in GPM_SERIES]
    ecc = CounterMetricFamily("gpuflow_gpu_ecc_errors", "ECC errors (volatile: since the driver was "
                              "loaded; aggregate: over the GPU's life)", labels=GPU_LABELS + ["type", "counter"])
    rows = CounterMetricFamily("gpuflow_gpu_remapped_rows", "Memory rows remapped",
                               labels=GPU_LABELS + ["cause"])
    reasons = GaugeMetricFamily("gpuflow_gpu_clock_event_active", "1 while NVML reports this clocks "
                                "event (throttle) reason", labels=GPU_LABELS + ["reason"])
    link_up = GaugeMetricFamily("gpuflow_gpu_nvlink_up", "1 if the NVLink is up; peer_gpu: the GPU it "
                                "reaches on this host, if any", labels=GPU_LABELS + ["link", "peer_gpu"])
    link_tx = CounterMetricFamily("gpuflow_gpu_nvlink_transmit_bytes", "NVLink data bytes sent (NVML's "
                                  "cumulative counter)", labels=GPU_LABELS + ["link"])
    link_rx = CounterMetricFamily("gpuflow_gpu_nvlink_receive_bytes", "NVLink data bytes received "
                                  "(NVML's cumulative counter)", labels=GPU_LABELS + ["link"])
    for d in snap.devices:
        labels = device_labels(d, host)
        for family, (_, _, _, _, scale, _), path in zip(families, DEVICE_SERIES, _PATHS):
            value = _read(d, path)
            if value is not None:
                if value is True or value is False:
                    value = int(value)
                family.add_metric(labels, value * scale if scale != 1 else value)
        for g in ((d.gpm,) if d.gpm is not None else ()) + d.gpm_instances:
            instance = labels + [_s(g.gpu_instance_id)]
            for family, (_, _, attr, _) in zip(gpm, GPM_SERIES):
                value = getattr(g, attr)
                if value is not None:
                    family.add_metric(instance, value / 100)
        h = d.health
        if h is not None:
            for kind, counter, attr in _ECC:
                value = getattr(h, attr)
                if value is not None:
                    ecc.add_metric(labels + [kind, counter], value)
            for cause, value in (("correctable", h.remapped_rows_correctable),
                                 ("uncorrectable", h.remapped_rows_uncorrectable)):
                if value is not None:
                    rows.add_metric(labels + [cause], value)
            if h.clock_events is not None:
                active = set(h.clock_events)
                for reason in CLOCK_REASONS:
                    reasons.add_metric(labels + [reason], 1 if reason in active else 0)
        if d.links is not None:
            for n in d.links.nvlinks:
                link = labels + [str(n.link)]
                if n.state is not None:
                    link_up.add_metric(link + [_s(n.remote_device_index)], 1 if n.state == "up" else 0)
                if n.tx_bytes_total is not None:
                    link_tx.add_metric(link, n.tx_bytes_total)
                if n.rx_bytes_total is not None:
                    link_rx.add_metric(link, n.rx_bytes_total)
    yield from families
    yield from gpm
    yield from (ecc, rows, reasons, link_up, link_tx, link_rx)
