"""A stand-in for libnvidia-ml at the ctypes boundary: pynvml's own Python runs, the driver does not.

pynvml finds each C function through ``_nvmlGetFunctionPointer(name)``, which reads a cache and
otherwise ``getattr(nvmlLib, name)`` on the loaded ``CDLL``. :class:`StandInNvml` installs itself
as ``pynvml.nvmlLib`` (with an empty cache), so pynvml's real lookup hands out this object's
function pointers: ctypes function pointers of the same kind ``CDLL`` makes (cdecl, ``int``
result, no ``argtypes``) whose addresses are ``CFUNCTYPE`` callbacks. A call therefore takes the
whole path a driver call takes from Python - pynvml's wrapper, ctypes' argument conversion, a
call through a C pointer - and the callback fills the caller's structs as the driver would
(``c_nvmlGpmMetricsGet_t``: each metric's return code and value; process lists by the two-call
size protocol; handles and GPM sample buffers are real addresses).

Each call lasts at least its time in :data:`H200_CALL_US` (the median of each call on an H200,
driver 580, as ``bench/nvml_calls.py`` timed it from Python: docs/gpu-metrics.md), busy-waited,
unless the stand-in is made with ``call_us={}``. A function it does not script answers
NVML_ERROR_NOT_SUPPORTED, as a GPU without that feature does.

It counts every call by name, and the metric ids of every ``nvmlGpmMetricsGet``, so a benchmark
or a test can check that two code paths made the same calls.

Constraints: one stand-in installed at a time (it replaces module state of pynvml; :meth:`remove`
puts it back); a handle or sample that is not the stand-in's own gets NVML_ERROR_INVALID_ARGUMENT,
as from the driver; the callbacks must outlive every pointer handed out (the object keeps them).
Imported by tests (pytest's pythonpath) and loaded by path by bench/nvml_tick.py.
"""

from __future__ import annotations

import ctypes
import struct
import time
from collections import Counter
from ctypes import CFUNCTYPE, POINTER, c_int, c_uint, c_ulonglong, c_void_p
from typing import Any, Callable

import pynvml

SUCCESS = pynvml.NVML_SUCCESS
NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
INVALID_ARGUMENT = pynvml.NVML_ERROR_INVALID_ARGUMENT
INSUFFICIENT_SIZE = pynvml.NVML_ERROR_INSUFFICIENT_SIZE
GPU_IS_LOST = pynvml.NVML_ERROR_GPU_IS_LOST

#: Each call's median on an H200 (driver 580.159.04), microseconds, timed from Python through
#: pynvml (measurements/2026-12-01-h200-10-hardening-gpm/run10-nvml-calls.txt). The
#: ``nvmlGpmMetricsGet`` entry is for the 12 cheap ids; with GRAPHICS_UTIL it is
#: :data:`H200_GRAPHICS_METRICS_US`.
H200_CALL_US: dict[str, float] = {
    "nvmlDeviceGetUtilizationRates": 1.0,
    "nvmlDeviceGetMemoryInfo_v2": 6.0,
    "nvmlDeviceGetMemoryInfo": 5.5,
    "nvmlDeviceGetTemperature": 1.2,
    "nvmlDeviceGetPowerUsage": 1.0,
    "nvmlDeviceGetEnforcedPowerLimit": 1.0,
    "nvmlDeviceGetClockInfo": 1.2,
    "nvmlDeviceGetComputeRunningProcesses_v3": 6.5,
    "nvmlDeviceGetGraphicsRunningProcesses_v3": 6.5,
    "nvmlDeviceGetCurrentClocksEventReasons": 1.0,
    "nvmlGpmSampleGet": 37.2,
    "nvmlGpmMigSampleGet": 37.2,
    "nvmlGpmMetricsGet": 1.2,
    "nvmlDeviceGetTotalEnergyConsumption": 3154.0,
    "nvmlDeviceGetMigMode": 137.5,
    "nvmlDeviceGetPcieReplayCounter": 173.5,
    "nvmlDeviceGetCurrPcieLinkGeneration": 1.1,
    "nvmlDeviceGetCurrPcieLinkWidth": 1.1,
}
H200_GRAPHICS_METRICS_US = 1412.7  #: nvmlGpmMetricsGet with GRAPHICS_UTIL among the ids

#: What GPM answers on an idle-ish H200 for the ids the collector asks (value per metric id);
#: any other id is NVML_ERROR_NOT_SUPPORTED.
H200_GPM_VALUES: dict[int, float] = {
    1: 12.5, 2: 41.0, 3: 22.5, 4: 3.0, 5: 17.25, 10: 9.5, 11: 0.0, 12: 6.0, 13: 11.0,
    20: 220.0, 21: 1830.0, 60: 0.0, 61: 0.0,
}

_PROTOTYPE = {  # argument types of each scripted C function, after the int result
    "nvmlInitWithFlags": (c_uint,),
    "nvmlShutdown": (),
    "nvmlDeviceGetCount_v2": (POINTER(c_uint),),
    "nvmlDeviceGetHandleByIndex_v2": (c_uint, POINTER(c_void_p)),
    "nvmlSystemGetDriverVersion": (c_void_p, c_uint),
    "nvmlSystemGetNVMLVersion": (c_void_p, c_uint),
    "nvmlSystemGetCudaDriverVersion": (POINTER(c_int),),
    "nvmlDeviceGetUUID": (c_void_p, c_void_p, c_uint),
    "nvmlDeviceGetName": (c_void_p, c_void_p, c_uint),
    "nvmlDeviceGetPciInfo_v3": (c_void_p, POINTER(pynvml.nvmlPciInfo_t)),
    "nvmlDeviceGetUtilizationRates": (c_void_p, POINTER(pynvml.c_nvmlUtilization_t)),
    "nvmlDeviceGetMemoryInfo_v2": (c_void_p, POINTER(pynvml.c_nvmlMemory_v2_t)),
    "nvmlDeviceGetTemperature": (c_void_p, c_int, POINTER(c_uint)),
    "nvmlDeviceGetPowerUsage": (c_void_p, POINTER(c_uint)),
    "nvmlDeviceGetEnforcedPowerLimit": (c_void_p, POINTER(c_uint)),
    "nvmlDeviceGetClockInfo": (c_void_p, c_int, POINTER(c_uint)),
    "nvmlDeviceGetComputeRunningProcesses_v3": (c_void_p, POINTER(c_uint), c_void_p),
    "nvmlDeviceGetGraphicsRunningProcesses_v3": (c_void_p, POINTER(c_uint), c_void_p),
    "nvmlDeviceGetCurrentClocksEventReasons": (c_void_p, POINTER(c_ulonglong)),
    "nvmlDeviceGetMaxPcieLinkGeneration": (c_void_p, POINTER(c_uint)),
    "nvmlDeviceGetMaxPcieLinkWidth": (c_void_p, POINTER(c_uint)),
    "nvmlDeviceGetCurrPcieLinkGeneration": (c_void_p, POINTER(c_uint)),
    "nvmlDeviceGetCurrPcieLinkWidth": (c_void_p, POINTER(c_uint)),
    "nvmlDeviceGetMigMode": (c_void_p, POINTER(c_uint), POINTER(c_uint)),
    "nvmlDeviceGetTotalEnergyConsumption": (c_void_p, POINTER(c_ulonglong)),
    "nvmlDeviceGetPcieReplayCounter": (c_void_p, POINTER(c_uint)),
    "nvmlGpmQueryDeviceSupport": (c_void_p, POINTER(pynvml.c_nvmlGpmSupport_t)),
    "nvmlGpmSampleAlloc": (POINTER(c_void_p),),
    "nvmlGpmSampleFree": (c_void_p,),
    "nvmlGpmSampleGet": (c_void_p, c_void_p),
    "nvmlGpmMigSampleGet": (c_void_p, c_uint, c_void_p),
    "nvmlGpmMetricsGet": (POINTER(pynvml.c_nvmlGpmMetricsGet_t),),
}


class _CdllFunction(ctypes._CFuncPtr):  # type: ignore[name-defined,misc]
    """What ``CDLL.__getattr__`` hands pynvml: cdecl, an ``int`` result, no argtypes."""

    _flags_ = ctypes._FUNCFLAG_CDECL  # type: ignore[attr-defined]
    _restype_ = c_int


class StandInNvml:
    """``gpus`` H200s (GPM on each) behind pynvml; see the module docstring.

    ``call_us``: each function's least duration in microseconds (default :data:`H200_CALL_US`;
    ``{}``: as fast as the callbacks go). ``processes``: GPU index → [(pid, used bytes)] listed as
    compute processes. ``gpm_values``: metric id → value (default :data:`H200_GPM_VALUES`).
    """

    def __init__(self, gpus: int = 1, call_us: dict[str, float] | None = None,
                 processes: dict[int, list[tuple[int, int]]] | None = None,
                 gpm_values: dict[int, float] | None = None) -> None:
        self.call_s = {k: v / 1e6 for k, v in (H200_CALL_US if call_us is None else call_us).items()}
        self.graphics_metrics_s = (H200_GRAPHICS_METRICS_US if call_us is None
                                   else call_us.get("nvmlGpmMetricsGet_graphics", 0.0)) / 1e6
        self.processes = processes or {}
        self.gpm_values = dict(H200_GPM_VALUES if gpm_values is None else gpm_values)
        #: metric id → (return code, value) overriding gpm_values for every request
        self.metric_answers: dict[int, tuple[int, float]] = {}
        self.lost: set[int] = set()  #: GPU indexes whose every call says GPU_IS_LOST
        self.calls: Counter[str] = Counter()
        self.metric_requests: Counter[tuple[int, ...]] = Counter()  #: ids of each nvmlGpmMetricsGet
        self._devices = (ctypes.c_char * 64 * gpus)()  # one real address per handle
        self._by_handle = {ctypes.addressof(self._devices[i]): i for i in range(gpus)}
        self._samples: dict[int, Any] = {}  # address → the buffer behind a GPM sample
        self._sampled: Counter[int] = Counter()  # sample address → times filled
        self._functions: dict[str, _CdllFunction] = {}
        self._callbacks: list[Any] = []
        self._saved: tuple[Any, Any, Any] | None = None
        self._unsupported = CFUNCTYPE(c_int)(lambda: NOT_SUPPORTED)
        self._slow = False  #: set by a call that takes the driver's slow path (GRAPHICS_UTIL)

    @property
    def samples_held(self) -> int:
        """GPM sample buffers allocated and not freed."""
        return len(self._samples)

    # -- installing ---------------------------------------------------------------------------
    def install(self) -> StandInNvml:
        """Become pynvml's loaded library (pynvml's own function-pointer lookup then finds
        this object's functions); :meth:`remove` undoes it."""
        if self._saved is None:
            self._saved = (pynvml.nvmlLib, pynvml._nvmlGetFunctionPointer_cache, pynvml._nvmlLib_refcount)
        pynvml.nvmlLib = self
        pynvml._nvmlGetFunctionPointer_cache = {}
        return self

    def remove(self) -> None:
        if self._saved is not None:
            pynvml.nvmlLib, pynvml._nvmlGetFunctionPointer_cache, pynvml._nvmlLib_refcount = self._saved
            self._saved = None

    def __enter__(self) -> StandInNvml:
        return self.install()

    def __exit__(self, *exc: Any) -> None:
        self.remove()

    def __getattr__(self, name: str) -> Any:
        """The C function ``name``, as ``CDLL`` gives it (pynvml caches it)."""
        if name.startswith("_"):
            raise AttributeError(name)
        fn = self._functions.get(name)
        if fn is None:
            implementation = getattr(self, "_c_" + name, None)
            if implementation is None:
                callback = self._unsupported
            else:
                callback = CFUNCTYPE(c_int, *_PROTOTYPE[name])(self._timed(name, implementation))
                self._callbacks.append(callback)
            fn = self._functions[name] = _CdllFunction(ctypes.cast(callback, c_void_p).value)
        return fn

    def _timed(self, name: str, implementation: Callable[..., int]) -> Callable[..., int]:
        least = self.call_s.get(name, 0.0)
        calls, clock = self.calls, time.perf_counter

        def call(*args: Any) -> int:
            start = clock()
            calls[name] += 1
            self._slow = False
            code = implementation(*args)
            wait = self.graphics_metrics_s if self._slow else least
            while clock() - start < wait:
                pass
            return code
        return call

    def _gpu(self, handle: int | None) -> int | None:
        """The GPU index behind a handle, or None (not ours, or lost: the caller says which)."""
        return self._by_handle.get(handle or 0)

    def _device_call(self, handle: int | None, out: Any, value: Any) -> int:
        i = self._gpu(handle)
        if i is None:
            return INVALID_ARGUMENT
        if i in self.lost:
            return GPU_IS_LOST
        out[0] = value(i) if callable(value) else value
        return SUCCESS

    # -- library and system -------------------------------------------------------------------
    def _c_nvmlInitWithFlags(self, flags: int) -> int:
        return SUCCESS

    def _c_nvmlShutdown(self) -> int:
        return SUCCESS

    def _c_nvmlDeviceGetCount_v2(self, count: Any) -> int:
        count[0] = len(self._by_handle)
        return SUCCESS

    def _c_nvmlDeviceGetHandleByIndex_v2(self, index: int, out: Any) -> int:
        if index >= len(self._by_handle):
            return INVALID_ARGUMENT
        out[0] = ctypes.addressof(self._devices[index])
        return SUCCESS

    @staticmethod
    def _text(buffer: int, size: int, text: bytes) -> int:
        if len(text) + 1 > size:
            return INSUFFICIENT_SIZE
        ctypes.memmove(buffer, text + b"\0", len(text) + 1)
        return SUCCESS

    def _c_nvmlSystemGetDriverVersion(self, buffer: int, size: int) -> int:
        return self._text(buffer, size, b"580.159.04")

    def _c_nvmlSystemGetNVMLVersion(self, buffer: int, size: int) -> int:
        return self._text(buffer, size, b"13.580.159.04")

    def _c_nvmlSystemGetCudaDriverVersion(self, out: Any) -> int:
        out[0] = 13000
        return SUCCESS

    # -- static per device --------------------------------------------------------------------
    def _c_nvmlDeviceGetUUID(self, handle: int, buffer: int, size: int) -> int:
        i = self._gpu(handle)
        return INVALID_ARGUMENT if i is None else self._text(
            buffer, size, b"GPU-%08x-0000-4000-8000-0000000000%02x" % (0x5200 + i, i))

    def _c_nvmlDeviceGetName(self, handle: int, buffer: int, size: int) -> int:
        return INVALID_ARGUMENT if self._gpu(handle) is None else self._text(buffer, size, b"NVIDIA H200")

    def _c_nvmlDeviceGetPciInfo_v3(self, handle: int, info: Any) -> int:
        i = self._gpu(handle)
        if i is None:
            return INVALID_ARGUMENT
        info[0].busId = b"00000000:%02X:00.0" % (0x18 + i)
        return SUCCESS

    def _c_nvmlDeviceGetMaxPcieLinkGeneration(self, handle: int, out: Any) -> int:
        return self._device_call(handle, out, 5)

    def _c_nvmlDeviceGetMaxPcieLinkWidth(self, handle: int, out: Any) -> int:
        return self._device_call(handle, out, 16)

    # -- every tick ---------------------------------------------------------------------------
    def _c_nvmlDeviceGetUtilizationRates(self, handle: int, util: Any) -> int:
        i = self._gpu(handle)
        if i is None:
            return INVALID_ARGUMENT
        if i in self.lost:
            return GPU_IS_LOST
        util[0].gpu, util[0].memory = 41, 9
        return SUCCESS

    def _c_nvmlDeviceGetMemoryInfo_v2(self, handle: int, memory: Any) -> int:
        i = self._gpu(handle)
        if i is None or memory[0].version != pynvml.nvmlMemory_v2:
            return INVALID_ARGUMENT
        if i in self.lost:
            return GPU_IS_LOST
        m = memory[0]
        m.total, m.reserved, m.used = 150754820096, 497025024, 8 << 30
        m.free = m.total - m.reserved - m.used
        return SUCCESS

    def _c_nvmlDeviceGetTemperature(self, handle: int, sensor: int, out: Any) -> int:
        return self._device_call(handle, out, 38)

    def _c_nvmlDeviceGetPowerUsage(self, handle: int, out: Any) -> int:
        return self._device_call(handle, out, 118_250)

    def _c_nvmlDeviceGetEnforcedPowerLimit(self, handle: int, out: Any) -> int:
        return self._device_call(handle, out, 700_000)

    def _c_nvmlDeviceGetClockInfo(self, handle: int, clock: int, out: Any) -> int:
        return self._device_call(handle, out, 1980 if clock == pynvml.NVML_CLOCK_SM else 3201)

    def _c_nvmlDeviceGetCurrentClocksEventReasons(self, handle: int, out: Any) -> int:
        return self._device_call(handle, out, 0x1)

    def _process_list(self, handle: int, count: Any, infos: int | None, compute: bool) -> int:
        i = self._gpu(handle)
        if i is None:
            return INVALID_ARGUMENT
        if i in self.lost:
            return GPU_IS_LOST
        listed = self.processes.get(i, []) if compute else []
        if not listed:
            count[0] = 0
            return SUCCESS
        if not infos or count[0] < len(listed):
            count[0] = len(listed)
            return INSUFFICIENT_SIZE
        array = ctypes.cast(infos, POINTER(pynvml.c_nvmlProcessInfo_v3_t))
        for k, (pid, used) in enumerate(listed):
            array[k].pid, array[k].usedGpuMemory = pid, used
            array[k].gpuInstanceId = array[k].computeInstanceId = 0xFFFFFFFF
        count[0] = len(listed)
        return SUCCESS

    def _c_nvmlDeviceGetComputeRunningProcesses_v3(self, handle: int, count: Any, infos: int | None) -> int:
        return self._process_list(handle, count, infos, True)

    def _c_nvmlDeviceGetGraphicsRunningProcesses_v3(self, handle: int, count: Any, infos: int | None) -> int:
        return self._process_list(handle, count, infos, False)

    # -- the sampler's --------------------------------------------------------------------------
    def _c_nvmlDeviceGetMigMode(self, handle: int, current: Any, pending: Any) -> int:
        code = self._device_call(handle, current, 0)
        if code == SUCCESS:
            pending[0] = 0
        return code

    def _c_nvmlDeviceGetTotalEnergyConsumption(self, handle: int, out: Any) -> int:
        return self._device_call(handle, out, lambda i: int(time.monotonic() * 118_250))

    def _c_nvmlDeviceGetPcieReplayCounter(self, handle: int, out: Any) -> int:
        return self._device_call(handle, out, 0)

    def _c_nvmlDeviceGetCurrPcieLinkGeneration(self, handle: int, out: Any) -> int:
        return self._device_call(handle, out, 5)

    def _c_nvmlDeviceGetCurrPcieLinkWidth(self, handle: int, out: Any) -> int:
        return self._device_call(handle, out, 16)

    # -- GPM ----------------------------------------------------------------------------------
    def _c_nvmlGpmQueryDeviceSupport(self, handle: int, support: Any) -> int:
        if self._gpu(handle) is None or support[0].version != pynvml.NVML_GPM_SUPPORT_VERSION:
            return INVALID_ARGUMENT
        support[0].isSupportedDevice = 1
        return SUCCESS

    def _c_nvmlGpmSampleAlloc(self, out: Any) -> int:
        buffer = ctypes.create_string_buffer(256)
        self._samples[ctypes.addressof(buffer)] = buffer
        out[0] = ctypes.addressof(buffer)
        return SUCCESS

    def _c_nvmlGpmSampleFree(self, sample: int | None) -> int:
        return SUCCESS if self._samples.pop(sample or 0, None) is not None else INVALID_ARGUMENT

    def _c_nvmlGpmSampleGet(self, handle: int, sample: int | None) -> int:
        i = self._gpu(handle)
        if i is None or (sample or 0) not in self._samples:
            return INVALID_ARGUMENT
        if i in self.lost:
            return GPU_IS_LOST
        self._sampled[sample or 0] += 1
        return SUCCESS

    def _c_nvmlGpmMigSampleGet(self, handle: int, gpu_instance_id: int, sample: int | None) -> int:
        return self._c_nvmlGpmSampleGet(handle, sample)

    def _c_nvmlGpmMetricsGet(self, request: Any) -> int:
        """Fill each asked metric's return code and value, straight into the caller's memory (as
        the driver's C does: going through pynvml's Python struct accessors here would make this
        call cost the stand-in far more than the driver's ~1.2 µs)."""
        address = ctypes.cast(request, c_void_p).value
        version, count, first, second = _REQUEST_HEAD.unpack_from(_memory(address, _REQUEST_HEAD.size))
        if (version != pynvml.NVML_GPM_METRICS_GET_VERSION or first == second
                or not self._sampled.get(first or 0) or not self._sampled.get(second or 0)
                or not 0 < count <= pynvml.NVML_GPM_METRIC_MAX):
            return INVALID_ARGUMENT
        metrics = _memory(address + _METRICS_AT, count * _METRIC_SIZE)
        ids = tuple(_METRIC_ID.unpack_from(metrics, k * _METRIC_SIZE)[0] for k in range(count))
        for k, metric in enumerate(ids):
            answer = self.metric_answers.get(metric)
            if answer is None:
                value = self.gpm_values.get(metric)
                answer = (NOT_SUPPORTED, 0.0) if value is None else (SUCCESS, value)
            _METRIC_ANSWER.pack_into(metrics, k * _METRIC_SIZE + _ANSWER_AT, *answer)
        self.metric_requests[ids] += 1
        self._slow = pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL in ids  # the driver's slow evaluation
        return SUCCESS


def _memory(address: int, size: int) -> memoryview:
    return memoryview((ctypes.c_char * size).from_address(address)).cast("B")


# c_nvmlGpmMetricsGet_t's layout, from pynvml's own ctypes definitions
_Request, _Metric = pynvml.c_nvmlGpmMetricsGet_t, pynvml.c_nvmlGpmMetric_t
assert (_Request.version.offset, _Request.numMetrics.offset) == (0, 4) and _Request.sample2.offset == 16
_REQUEST_HEAD = struct.Struct("=IIQQ")  # version, numMetrics, sample1, sample2
_METRICS_AT, _METRIC_SIZE = _Request.metrics.offset, ctypes.sizeof(_Metric)
_METRIC_ID = struct.Struct("=I")
assert _Metric.value.offset == _Metric.nvmlReturn.offset + 4
_ANSWER_AT = _Metric.nvmlReturn.offset
_METRIC_ANSWER = struct.Struct("=Id")  # nvmlReturn, value
