"""The thin interface between the NVML collector and NVML itself, so tests can script a GPU set.

Two implementations: :class:`~gpuflow.collectors.nvml.pynvml_backend.PynvmlBackend` (the real
library through nvidia-ml-py) and :class:`~gpuflow.collectors.nvml.fake_backend.FakeBackend`
(scripted GPUs for tests and demos). Each method is one NVML question. Methods raise pynvml's
own ``NVMLError`` subclasses, whichever the implementation, and return plain Python values, so
that every call can go through one function, :func:`gpuflow.collectors.nvml.query.nvml_query`,
which turns "not available" answers into ``None``.

Constraints: no logic here beyond the types; a backend does not catch NVML errors (the query
function decides what they mean); a backend may return NVML's raw sentinels (``UINT_MAX``,
``ULLONG_MAX``): the query function maps them.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

#: NVML's "value not available" sentinels (NVML_VALUE_NOT_AVAILABLE_uint / _ulonglong).
UINT_MAX = 0xFFFF_FFFF
ULLONG_MAX = 0xFFFF_FFFF_FFFF_FFFF

#: nvmlDeviceGetMigMode's current-mode values.
MIG_DISABLE = 0
MIG_ENABLE = 1


class Utilization(NamedTuple):
    """nvmlDeviceGetUtilizationRates: percent of the last sample period (nvidia-smi utilization.gpu/.memory)."""

    gpu: int | None  #: % of time a kernel was running
    memory: int | None  #: % of time device memory was being read or written


class MemoryInfo(NamedTuple):
    """nvmlDeviceGetMemoryInfo_v2 (else the first version, without ``reserved``), in bytes
    (nvidia-smi memory.total/.used/.free/.reserved)."""

    total: int | None
    used: int | None
    free: int | None = None
    reserved: int | None = None  #: held by the driver and firmware (v2 only)


class PcieLink(NamedTuple):
    """A PCIe link's generation and width (lanes)."""

    gen: int | None
    width: int | None


class EccCounts(NamedTuple):
    """nvmlDeviceGetTotalEccErrors for corrected/uncorrected × volatile/aggregate."""

    corrected_volatile: int | None
    uncorrected_volatile: int | None
    corrected_aggregate: int | None
    uncorrected_aggregate: int | None


class RemappedRows(NamedTuple):
    """nvmlDeviceGetRemappedRows."""

    correctable: int | None
    uncorrectable: int | None
    pending: int | None  #: 1: a remapping waits for a GPU reset
    failure: int | None  #: 1: a remapping failed


class FieldAnswer(NamedTuple):
    """One entry of nvmlDeviceGetFieldValues or nvmlGpmMetricsGet: its own NVML return code and
    value (the value means nothing unless ``code`` is NVML_SUCCESS, 0)."""

    code: int
    value: float | int


class ProcessInfo(NamedTuple):
    """One entry of nvmlDeviceGet{Compute,Graphics}RunningProcesses."""

    pid: int
    used_memory: int | None  #: bytes; None (or ULLONG_MAX) where NVML cannot say (WDDM)


class ProcessUtilSample(NamedTuple):
    """One sample of nvmlDeviceGetProcessUtilization / nvmlDeviceGetProcessesUtilizationInfo."""

    pid: int
    timestamp_us: int  #: CPU wall clock, microseconds since the epoch
    sm: int | None  #: % of SM time this process had over the sample period
    mem: int | None  #: % of memory-controller time


@runtime_checkable
class NvmlBackend(Protocol):
    """The NVML calls GPUFlow makes. ``handle`` is whatever :meth:`handle_by_index` returned."""

    # -- library and system -----------------------------------------------------------------
    def init(self) -> None:
        """nvmlInit. Raises NVMLError_LibraryNotFound, _DriverNotLoaded, _NoPermission, ..."""

    def shutdown(self) -> None:
        """nvmlShutdown."""

    def device_count(self) -> int:
        """nvmlDeviceGetCount."""

    def handle_by_index(self, index: int) -> Any:
        """nvmlDeviceGetHandleByIndex."""

    def driver_version(self) -> str:
        """nvmlSystemGetDriverVersion, e.g. "580.159.04"."""

    def nvml_version(self) -> str:
        """nvmlSystemGetNVMLVersion, e.g. "13.580.159.04"."""

    def cuda_driver_version(self) -> int:
        """nvmlSystemGetCudaDriverVersion: 1000 * major + 10 * minor, e.g. 13000."""

    # -- per device, fetched once per init ---------------------------------------------------
    def uuid(self, handle: Any) -> str:
        """nvmlDeviceGetUUID."""

    def name(self, handle: Any) -> str:
        """nvmlDeviceGetName."""

    def pci_bus_id(self, handle: Any) -> str:
        """nvmlDeviceGetPciInfo(...).busId, e.g. "00000000:19:00.0"."""

    # -- per device, every tick ---------------------------------------------------------------
    def utilization(self, handle: Any) -> Utilization:
        """nvmlDeviceGetUtilizationRates."""

    def memory(self, handle: Any) -> MemoryInfo:
        """nvmlDeviceGetMemoryInfo."""

    def temperature(self, handle: Any) -> int:
        """nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU), °C."""

    def power_usage(self, handle: Any) -> int:
        """nvmlDeviceGetPowerUsage, milliwatts."""

    def power_limit(self, handle: Any) -> int:
        """nvmlDeviceGetEnforcedPowerLimit, milliwatts."""

    def clock_sm(self, handle: Any) -> int:
        """nvmlDeviceGetClockInfo(NVML_CLOCK_SM), MHz."""

    def clock_mem(self, handle: Any) -> int:
        """nvmlDeviceGetClockInfo(NVML_CLOCK_MEM), MHz."""

    def compute_processes(self, handle: Any) -> list[ProcessInfo]:
        """nvmlDeviceGetComputeRunningProcesses (v3, else v2, else the unversioned call)."""

    def graphics_processes(self, handle: Any) -> list[ProcessInfo]:
        """nvmlDeviceGetGraphicsRunningProcesses (v3, else v2, else the unversioned call)."""

    # -- per device, sampled in the background (slow calls) -----------------------------------
    def pcie_tx(self, handle: Any) -> int:
        """nvmlDeviceGetPcieThroughput(NVML_PCIE_UTIL_TX_BYTES), KB/s. Blocks ~20 ms."""

    def pcie_rx(self, handle: Any) -> int:
        """nvmlDeviceGetPcieThroughput(NVML_PCIE_UTIL_RX_BYTES), KB/s. Blocks ~20 ms."""

    def mig_mode(self, handle: Any) -> int:
        """nvmlDeviceGetMigMode(...)[0]: the current mode, MIG_ENABLE or MIG_DISABLE."""

    def process_utilization(self, handle: Any, last_seen_us: int) -> list[ProcessUtilSample]:
        """Per-process samples newer than ``last_seen_us``; NVMLError_NotFound when there are none."""

    # -- health and links: clock events every tick, the rest (energy too) in the sampler --------
    def energy(self, handle: Any) -> int:
        """nvmlDeviceGetTotalEnergyConsumption: millijoules since the driver was loaded (~3.2 ms
        a call on an H200: the sampler's)."""

    def clock_event_reasons(self, handle: Any) -> int:
        """nvmlDeviceGetCurrentClocksEventReasons (else ...ThrottleReasons): a bitmask."""

    def encoder_utilization(self, handle: Any) -> int:
        """nvmlDeviceGetEncoderUtilization(...)[0], %."""

    def decoder_utilization(self, handle: Any) -> int:
        """nvmlDeviceGetDecoderUtilization(...)[0], %."""

    def memory_temperature(self, handle: Any) -> FieldAnswer:
        """Field NVML_FI_DEV_MEMORY_TEMP (°C)."""

    def ecc_counts(self, handle: Any) -> EccCounts:
        """nvmlDeviceGetTotalEccErrors, four counters (NotSupported where ECC is off or absent)."""

    def remapped_rows(self, handle: Any) -> RemappedRows:
        """nvmlDeviceGetRemappedRows (Ampere and newer; NotSupported before)."""

    def pcie_replay_counter(self, handle: Any) -> int:
        """nvmlDeviceGetPcieReplayCounter."""

    def pcie_link(self, handle: Any) -> PcieLink:
        """nvmlDeviceGetCurrPcieLinkGeneration / ...Width: the link now (it drops when idle)."""

    def pcie_link_max(self, handle: Any) -> PcieLink:
        """nvmlDeviceGetMaxPcieLinkGeneration / ...Width: the most the GPU and its slot allow."""

    def nvlink_state(self, handle: Any, link: int) -> int:
        """nvmlDeviceGetNvLinkState: 1 up, 0 down; NotSupported / InvalidArgument past the last link."""

    def nvlink_remote_bus_id(self, handle: Any, link: int) -> str:
        """nvmlDeviceGetNvLinkRemotePciInfo(...).busId: what the link reaches."""

    def nvlink_throughput(self, handle: Any, links: tuple[int, ...]) -> list[FieldAnswer]:
        """One nvmlDeviceGetFieldValues for NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX and _RX of each
        link (scope = link): cumulative KiB, answers in the order (tx l0, rx l0, tx l1, ...)."""

    def xid_watch(self, handle: Any) -> Any:
        """nvmlEventSetCreate + nvmlDeviceRegisterEvents(nvmlEventTypeXidCriticalError): a watch."""

    def xid_poll(self, watch: Any) -> list[int]:
        """The XID codes that arrived on ``watch`` since the last poll (nvmlEventSetWait, 0 ms)."""

    def xid_unwatch(self, watch: Any) -> None:
        """nvmlEventSetFree."""

    # -- GPM (Hopper and newer) ------------------------------------------------------------------
    def gpm_supported(self, handle: Any) -> bool:
        """nvmlGpmQueryDeviceSupport(...).isSupportedDevice."""

    def gpm_alloc(self) -> Any:
        """nvmlGpmSampleAlloc: a sample buffer, to be given back with :meth:`gpm_free`."""

    def gpm_free(self, sample: Any) -> None:
        """nvmlGpmSampleFree."""

    def gpm_sample(self, handle: Any, sample: Any, gpu_instance_id: int | None) -> None:
        """nvmlGpmSampleGet (whole GPU, ``gpu_instance_id`` None) or nvmlGpmMigSampleGet."""

    def gpm_metrics(self, first: Any, second: Any, metric_ids: tuple[int, ...]) -> list[FieldAnswer]:
        """One nvmlGpmMetricsGet over two samples: each metric's own return code and value."""

    def mig_gpu_instance_ids(self, handle: Any) -> list[int]:
        """The GPU instance id of each MIG device of this GPU (nvmlDeviceGetMigDeviceHandleByIndex,
        nvmlDeviceGetGpuInstanceId)."""
