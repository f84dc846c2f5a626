"""The real NVML backend: nvidia-ml-py (``import pynvml``) behind the :class:`NvmlBackend` interface.

Each method is one pynvml call converted to plain Python values; pynvml's exceptions pass
through untouched (the query function interprets them). Where NVML has versioned functions
this adapter picks the newest the driver has and remembers the choice:

* running processes: ``_v3`` → ``_v2`` → the unversioned call (older nvidia-ml-py bindings name
  their newest version unversioned), falling back on ``NVMLError_FunctionNotFound``;
* per-process utilization: ``nvmlDeviceGetProcessesUtilizationInfo`` (drivers ≥ 550) →
  ``nvmlDeviceGetProcessUtilization``, falling back on FunctionNotFound or
  ArgumentVersionMismatch;
* memory: ``nvmlDeviceGetMemoryInfo_v2`` (free and reserved too) → the first version;
* clock event reasons: ``nvmlDeviceGetCurrentClocksEventReasons`` → the older
  ``...ClocksThrottleReasons``.

GPM (``nvmlGpmMetricsGet``) fills one ``c_nvmlGpmMetricsGet_t`` of ~19 KB: the adapter keeps one
per thread and set of metric ids (the collector asks two: with and without GRAPHICS_UTIL,
gpm.py) instead of allocating it for every call, and reads back only the entries it asked for,
each with its own return code (:class:`FieldAnswer`), straight from the struct's bytes with
``struct`` (the layout taken from pynvml's ctypes definition at import); it sets the two sample
pointers without pynvml's Python ``__setattr__``. The call itself is pynvml's.

Constraints: importing this module must not load libnvidia-ml (pynvml loads it in nvmlInit), so
``pip install`` and imports work on machines without a driver. Measured on an H200 (driver 580):
most calls take 2-10 µs, the process lists 10-40 µs, nvmlDeviceGetMigMode ~110 µs, the
per-process utilization call ~1.7 ms and nvmlDeviceGetPcieThroughput ~20 ms (NVML samples for
20 ms inside the call) - which is why the collector makes the last three in a background sampler.
"""

from __future__ import annotations

import ctypes
import functools
import struct
import threading
from typing import Any, Callable

import pynvml

from gpuflow.collectors.nvml.backend import (
    EccCounts,
    FieldAnswer,
    MemoryInfo,
    PcieLink,
    ProcessInfo,
    ProcessUtilSample,
    RemappedRows,
    Utilization,
)

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
        self._memory_v2 = getattr(pynvml, "nvmlMemory_v2", None)
        self._clock_events = _first_available(("nvmlDeviceGetCurrentClocksEventReasons",
                                               "nvmlDeviceGetCurrentClocksThrottleReasons"))
        self._gpm_requests = threading.local()  #: per thread: metric ids → a reusable _GpmRequest

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
        if self._memory_v2 is not None:
            try:
                m = pynvml.nvmlDeviceGetMemoryInfo(handle, self._memory_v2)
            except (pynvml.NVMLError_FunctionNotFound, _ARGUMENT_VERSION_MISMATCH):
                self._memory_v2 = None
            else:
                return _new(MemoryInfo, (m.total, m.used, m.free, m.reserved))
        m = pynvml.nvmlDeviceGetMemoryInfo(handle)
        return _new(MemoryInfo, (m.total, m.used, m.free, None))

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

    # -- health and links ---------------------------------------------------------------------
    def energy(self, handle: Any) -> int:
        return pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)

    def clock_event_reasons(self, handle: Any) -> int:
        fns = self._clock_events
        while True:
            if not fns:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
            try:
                return fns[0](handle)
            except pynvml.NVMLError_FunctionNotFound:
                if len(fns) == 1:
                    raise
                del fns[0]

    def encoder_utilization(self, handle: Any) -> int:
        return pynvml.nvmlDeviceGetEncoderUtilization(handle)[0]

    def decoder_utilization(self, handle: Any) -> int:
        return pynvml.nvmlDeviceGetDecoderUtilization(handle)[0]

    def memory_temperature(self, handle: Any) -> FieldAnswer:
        (v,) = pynvml.nvmlDeviceGetFieldValues(handle, [pynvml.NVML_FI_DEV_MEMORY_TEMP])
        return _new(FieldAnswer, (v.nvmlReturn, _field_value(v)))

    def ecc_counts(self, handle: Any) -> EccCounts:
        get = pynvml.nvmlDeviceGetTotalEccErrors
        corr, unc = pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
        vol, agg = pynvml.NVML_VOLATILE_ECC, pynvml.NVML_AGGREGATE_ECC
        return _new(EccCounts, (get(handle, corr, vol), get(handle, unc, vol),
                                get(handle, corr, agg), get(handle, unc, agg)))

    def remapped_rows(self, handle: Any) -> RemappedRows:
        return _new(RemappedRows, tuple(pynvml.nvmlDeviceGetRemappedRows(handle)))

    def pcie_replay_counter(self, handle: Any) -> int:
        return pynvml.nvmlDeviceGetPcieReplayCounter(handle)

    def pcie_link(self, handle: Any) -> PcieLink:
        return _new(PcieLink, (pynvml.nvmlDeviceGetCurrPcieLinkGeneration(handle),
                               pynvml.nvmlDeviceGetCurrPcieLinkWidth(handle)))

    def pcie_link_max(self, handle: Any) -> PcieLink:
        return _new(PcieLink, (pynvml.nvmlDeviceGetMaxPcieLinkGeneration(handle),
                               pynvml.nvmlDeviceGetMaxPcieLinkWidth(handle)))

    def nvlink_state(self, handle: Any, link: int) -> int:
        return pynvml.nvmlDeviceGetNvLinkState(handle, link)

    def nvlink_remote_bus_id(self, handle: Any, link: int) -> str:
        return _text(pynvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId)

    def nvlink_throughput(self, handle: Any, links: tuple[int, ...]) -> list[FieldAnswer]:
        tx, rx = pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX
        ids = [pair for link in links for pair in ((tx, link), (rx, link))]
        return [_new(FieldAnswer, (v.nvmlReturn, _field_value(v)))
                for v in pynvml.nvmlDeviceGetFieldValues(handle, ids)]

    def xid_watch(self, handle: Any) -> Any:
        events = pynvml.nvmlEventSetCreate()
        try:
            pynvml.nvmlDeviceRegisterEvents(handle, pynvml.nvmlEventTypeXidCriticalError, events)
        except pynvml.NVMLError:
            pynvml.nvmlEventSetFree(events)
            raise
        return events

    def xid_poll(self, watch: Any) -> list[int]:
        codes: list[int] = []
        while len(codes) < _XID_PER_POLL:
            try:
                data = pynvml.nvmlEventSetWait(watch, 0)
            except pynvml.NVMLError_Timeout:
                break
            if data.eventType == pynvml.nvmlEventTypeXidCriticalError:
                codes.append(data.eventData)
        return codes

    def xid_unwatch(self, watch: Any) -> None:
        pynvml.nvmlEventSetFree(watch)

    # -- GPM ----------------------------------------------------------------------------------
    def gpm_supported(self, handle: Any) -> bool:
        return bool(pynvml.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice)

    def gpm_alloc(self) -> Any:
        return pynvml.nvmlGpmSampleAlloc()

    def gpm_free(self, sample: Any) -> None:
        pynvml.nvmlGpmSampleFree(sample)

    def gpm_sample(self, handle: Any, sample: Any, gpu_instance_id: int | None) -> None:
        if gpu_instance_id is None:
            pynvml.nvmlGpmSampleGet(handle, sample)
        else:
            pynvml.nvmlGpmMigSampleGet(handle, gpu_instance_id, sample)

    def gpm_metrics(self, first: Any, second: Any, metric_ids: tuple[int, ...]) -> list[FieldAnswer]:
        readers = getattr(self._gpm_requests, "by_ids", None)
        if readers is None:
            readers = self._gpm_requests.by_ids = {}
        reader = readers.get(metric_ids)
        if reader is None:
            reader = readers[metric_ids] = _GpmRequest(metric_ids)
        request = reader.request
        _set_field(request, "sample1", first)
        _set_field(request, "sample2", second)
        pynvml.nvmlGpmMetricsGet(request)
        return list(map(_field_answer, _GPM_ANSWER.iter_unpack(reader.answers)))

    def mig_gpu_instance_ids(self, handle: Any) -> list[int]:
        ids = []
        for i in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
            try:
                mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, i)
            except pynvml.NVMLError_NotFound:
                continue  # no MIG device at this index
            ids.append(pynvml.nvmlDeviceGetGpuInstanceId(mig))
        return ids


class _GpmRequest:
    """One reusable ``c_nvmlGpmMetricsGet_t`` for a set of metric ids, and a view of the bytes of
    its answered entries: each entry's return code and value are read by one C-level unpack per
    entry (``struct``), not through pynvml's Python ``__getattribute__`` on a struct object per
    entry and field (about 3/4 of what reading them cost)."""

    __slots__ = ("request", "answers")

    def __init__(self, metric_ids: tuple[int, ...]) -> None:
        self.request = request = pynvml.c_nvmlGpmMetricsGet_t()
        request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(metric_ids)
        for i, metric in enumerate(metric_ids):
            request.metrics[i].metricId = metric
        whole = memoryview(request).cast("B")  # the struct's own memory (the request outlives it)
        self.answers = whole[_GPM_METRICS_AT:_GPM_METRICS_AT + len(metric_ids) * _GPM_METRIC_SIZE]


#: Sets a field of pynvml's structs without their Python-level ``__setattr__`` (which only
#: encodes str values: a sample pointer is not one).
_set_field = ctypes.Structure.__setattr__
#: FieldAnswer(code, value) from a (code, value) tuple, in C (no Python ``__new__`` frame).
_field_answer = functools.partial(tuple.__new__, FieldAnswer)


def _gpm_answer_struct() -> struct.Struct:
    """One c_nvmlGpmMetric_t as ``struct`` sees it: its return code and value, the rest skipped;
    offsets and size from pynvml's own ctypes definition."""
    metric = pynvml.c_nvmlGpmMetric_t
    code, value, size = metric.nvmlReturn.offset, metric.value.offset, ctypes.sizeof(metric)
    if not (ctypes.sizeof(pynvml._nvmlReturn_t) == 4 and code + 4 <= value and value + 8 <= size):
        raise ImportError("pynvml's c_nvmlGpmMetric_t has an unexpected layout")
    return struct.Struct(f"={code}xI{value - code - 4}xd{size - value - 8}x")


_GPM_ANSWER = _gpm_answer_struct()
_GPM_METRICS_AT = pynvml.c_nvmlGpmMetricsGet_t.metrics.offset
_GPM_METRIC_SIZE = ctypes.sizeof(pynvml.c_nvmlGpmMetric_t)
assert _GPM_ANSWER.size == _GPM_METRIC_SIZE

#: At most this many XID events are taken per device and poll (a storm waits for the next poll).
_XID_PER_POLL = 64

_VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


def _field_value(v: Any) -> float | int:
    """A c_nvmlFieldValue_t's value by its valueType (NVML_VALUE_TYPE_*)."""
    return getattr(v.value, _VALUE_MEMBERS.get(v.valueType, "ullVal"))
