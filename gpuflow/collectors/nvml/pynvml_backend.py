"""The real NVML backend: nvidia-ml-py (``import pynvml``) behind the :class:`NvmlBackend` interface.

Each method is one pynvml call converted to plain Python values; pynvml's exceptions pass
through untouched (the query function interprets them). Where NVML has versioned functions
this adapter picks the newest the driver has and remembers the choice:

* running processes: ``_v3`` → ``_v2`` → the unversioned call (older nvidia-ml-py bindings name
  their newest version unversioned), falling back on ``NVMLError_FunctionNotFound``;
* per-process utilization: ``nvmlDeviceGetProcessesUtilizationInfo`` (drivers ≥ 550) →
  ``nvmlDeviceGetProcessUtilization``, falling back on FunctionNotFound or
  ArgumentVersionMismatch.

Constraints: importing this module must not load libnvidia-ml (pynvml loads it in nvmlInit), so
``pip install`` and imports work on machines without a driver. Measured on an H200 (driver 580):
most calls take 2-10 µs, the process lists 10-40 µs, nvmlDeviceGetMigMode ~110 µs, the
per-process utilization call ~1.7 ms and nvmlDeviceGetPcieThroughput ~20 ms (NVML samples for
20 ms inside the call) - which is why the collector makes the last three in a background sampler.
"""

from __future__ import annotations

from typing import Any, Callable

import pynvml

from gpuflow.collectors.nvml.backend import MemoryInfo, ProcessInfo, ProcessUtilSample, Utilization

# NOTE: NVMLError_ArgumentVersionMismatch appeared in nvidia-ml-py 12.550; older bindings lack it.
_ARGUMENT_VERSION_MISMATCH = getattr(pynvml, "NVMLError_ArgumentVersionMismatch",
                                     pynvml.NVMLError_FunctionNotFound)


#: Builds a NamedTuple without its Python-level ``__new__`` (a frame less on the tick's path).
_new = tuple.__new__


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _first_available(names: tuple[str, ...]) -> list[Callable[..., Any]]:
    """The pynvml functions of these names that this binding defines, in order."""
    return [getattr(pynvml, n) for n in names if hasattr(pynvml, n)]


class PynvmlBackend:
    """NVML through nvidia-ml-py. One instance per collector; thread-safe as NVML itself is."""

    def __init__(self) -> None:
        self._compute_fns = _first_available((
            "nvmlDeviceGetComputeRunningProcesses_v3",
            "nvmlDeviceGetComputeRunningProcesses_v2",
            "nvmlDeviceGetComputeRunningProcesses",
        ))
        self._graphics_fns = _first_available((
            "nvmlDeviceGetGraphicsRunningProcesses_v3",
            "nvmlDeviceGetGraphicsRunningProcesses_v2",
            "nvmlDeviceGetGraphicsRunningProcesses",
        ))
        self._use_util_info = hasattr(pynvml, "nvmlDeviceGetProcessesUtilizationInfo")

    # -- library and system -------------------------------------------------------------------
    def init(self) -> None:
        pynvml.nvmlInit()

    def shutdown(self) -> None:
        pynvml.nvmlShutdown()

    def device_count(self) -> int:
        return pynvml.nvmlDeviceGetCount()

    def handle_by_index(self, index: int) -> Any:
        return pynvml.nvmlDeviceGetHandleByIndex(index)

    def driver_version(self) -> str:
        return _text(pynvml.nvmlSystemGetDriverVersion())

    def nvml_version(self) -> str:
        return _text(pynvml.nvmlSystemGetNVMLVersion())

    def cuda_driver_version(self) -> int:
        return pynvml.nvmlSystemGetCudaDriverVersion()

    # -- static per device --------------------------------------------------------------------
    def uuid(self, handle: Any) -> str:
        return _text(pynvml.nvmlDeviceGetUUID(handle))

    def name(self, handle: Any) -> str:
        return _text(pynvml.nvmlDeviceGetName(handle))

    def pci_bus_id(self, handle: Any) -> str:
        return _text(pynvml.nvmlDeviceGetPciInfo(handle).busId)

    # -- every tick ---------------------------------------------------------------------------
    def utilization(self, handle: Any) -> Utilization:
        u = pynvml.nvmlDeviceGetUtilizationRates(handle)
        return _new(Utilization, (u.gpu, u.memory))

    def memory(self, handle: Any) -> MemoryInfo:
        m = pynvml.nvmlDeviceGetMemoryInfo(handle)
        return _new(MemoryInfo, (m.total, m.used))

    def temperature(self, handle: Any) -> int:
        return pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)

    def power_usage(self, handle: Any) -> int:
        return pynvml.nvmlDeviceGetPowerUsage(handle)

    def power_limit(self, handle: Any) -> int:
        return pynvml.nvmlDeviceGetEnforcedPowerLimit(handle)

    def clock_sm(self, handle: Any) -> int:
        return pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)

    def clock_mem(self, handle: Any) -> int:
        return pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM)

    def compute_processes(self, handle: Any) -> list[ProcessInfo]:
        return self._processes(self._compute_fns, handle)

    def graphics_processes(self, handle: Any) -> list[ProcessInfo]:
        return self._processes(self._graphics_fns, handle)

    @staticmethod
    def _processes(fns: list[Callable[..., Any]], handle: Any) -> list[ProcessInfo]:
        """Call the newest available version; drop versions the driver lacks, for good."""
        while True:
            if not fns:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
            try:
                procs = fns[0](handle)
            except (pynvml.NVMLError_FunctionNotFound, pynvml.NVMLLibraryMismatchError):
                if len(fns) == 1:
                    raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND) from None
                del fns[0]
                continue
            return [_new(ProcessInfo, (p.pid, p.usedGpuMemory)) for p in procs] if procs else []

    # -- background sampler -------------------------------------------------------------------
    def pcie_tx(self, handle: Any) -> int:
        return pynvml.nvmlDeviceGetPcieThroughput(handle, pynvml.NVML_PCIE_UTIL_TX_BYTES)

    def pcie_rx(self, handle: Any) -> int:
        return pynvml.nvmlDeviceGetPcieThroughput(handle, pynvml.NVML_PCIE_UTIL_RX_BYTES)

    def mig_mode(self, handle: Any) -> int:
        return pynvml.nvmlDeviceGetMigMode(handle)[0]

    def process_utilization(self, handle: Any, last_seen_us: int) -> list[ProcessUtilSample]:
        if self._use_util_info:
            try:
                samples = pynvml.nvmlDeviceGetProcessesUtilizationInfo(handle, last_seen_us)
            except (pynvml.NVMLError_FunctionNotFound, _ARGUMENT_VERSION_MISMATCH):
                self._use_util_info = False
            else:
                return [ProcessUtilSample(s.pid, s.timeStamp, s.smUtil, s.memUtil) for s in samples]
        samples = pynvml.nvmlDeviceGetProcessUtilization(handle, last_seen_us)
        return [ProcessUtilSample(s.pid, s.timeStamp, s.smUtil, s.memUtil) for s in samples]
