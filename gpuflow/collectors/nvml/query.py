"""The one door every NVML call goes through: "not available" becomes ``None``, here and only here.

Modelled on nvitop's ``nvmlQuery``. :func:`nvml_query` calls a backend method and maps:

* ``NVMLError_NotSupported``, ``NVMLError_NoPermission``, NVML's "value not available" sentinels
  (``UINT_MAX``, ``ULLONG_MAX``, also inside returned tuples, e.g. WDDM's per-process memory),
  and any other NVML error that concerns one field → ``None`` (that field only);
* ``NVMLError_NotFound`` → the caller's ``not_found`` value (NVML says "nothing" this way, e.g.
  no process-utilization samples since the given timestamp);
* ``NVMLError_FunctionNotFound`` (a driver older than the binding) → ``None``, logged once per
  function;
* ``NVMLError_GpuIsLost`` and ``NVMLError_Unknown`` → :class:`DeviceLost`, so the collector marks
  that one device lost and carries on with the others.

The mapping of errors lives in :func:`failed_query` and that of sentinels in :data:`SENTINELS` /
:func:`scrub`; :func:`nvml_query` is the two together. The collector's tick, which makes about
ten calls per GPU, calls the backend inline (a ``try`` around each call) and uses those two
pieces directly, so a successful call costs no extra Python frame.

It also turns the errors of ``nvmlInit`` into one plain sentence for the user
(:func:`explain_init_error`).

Constraints: on the tick's hot path: no allocation on the success path beyond what the backend
returns; the log-once memory is bounded and locked because the poll and sampler threads both
call through here.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, TypeVar

import pynvml

from gpuflow.collectors.nvml.backend import UINT_MAX, ULLONG_MAX

log = logging.getLogger("gpuflow.nvml")

T = TypeVar("T")

_SENTINELS = (UINT_MAX, ULLONG_MAX)
_LOGGED_MAX = 1024
_logged: set[tuple[str, str]] = set()
_logged_lock = threading.Lock()


class DeviceLost(Exception):
    """The GPU stopped answering (NVML_ERROR_GPU_IS_LOST or NVML_ERROR_UNKNOWN)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def nvml_query(func: Callable[..., T], *args: Any, not_found: Any = None) -> T | None:
    """Call ``func(*args)`` (a backend method) and return its value, or None if not available.

    :param func: a bound :class:`~gpuflow.collectors.nvml.backend.NvmlBackend` method.
    :param args: its arguments (a device handle, ...).
    :param not_found: what to return when NVML answers NVML_ERROR_NOT_FOUND ("nothing to report").
    :returns: the value, with sentinel integers (also inside tuples and lists of tuples) replaced
        by None; or None when NVML cannot give it.
    :raises DeviceLost: NVML_ERROR_GPU_IS_LOST (the GPU fell off the bus: see dmesg for Xid 79)
        or NVML_ERROR_UNKNOWN (the driver could not reach the GPU).

    Raises nothing else for NVML errors; non-NVML exceptions (bugs) propagate.
    """
    try:
        value = func(*args)
    except pynvml.NVMLError as exc:
        return failed_query(exc, func, not_found)
    if type(value) is int:  # the common case, without a second call
        return None if (value == UINT_MAX or value == ULLONG_MAX) else value
    return scrub(value)


def failed_query(exc: BaseException, func: Callable[..., Any], not_found: Any = None) -> Any:
    """What an NVML error raised by ``func`` means for its field: the error half of :func:`nvml_query`.

    The collector's tick calls the backend inline (``try: v = b.temperature(h) except NVMLError
    as exc: v = failed_query(exc, b.temperature)``) and cleans the values with :data:`SENTINELS`;
    this function keeps the mapping in one place for both.

    :returns: None (NotSupported, NoPermission, FunctionNotFound, any other error: logged once
        per function and kind) or ``not_found`` (NotFound, and pynvml's "error 0").
    :raises DeviceLost: for GPU_IS_LOST and Unknown.
    """
    if isinstance(exc, (pynvml.NVMLError_NotSupported, pynvml.NVMLError_NoPermission)):
        return None
    if isinstance(exc, pynvml.NVMLError_NotFound):
        return not_found
    if isinstance(exc, (pynvml.NVMLError_GpuIsLost, pynvml.NVMLError_Unknown)):
        raise DeviceLost(exc) from exc
    if isinstance(exc, pynvml.NVMLError_FunctionNotFound):
        _log_once(func, "missing", "NVML function behind %s is missing from this driver's "
                  "libnvidia-ml (driver older than nvidia-ml-py); the field stays empty")
        return None
    if getattr(exc, "value", None) == pynvml.NVML_SUCCESS:
        return not_found  # a size query that found nothing, seen as "error 0" by pynvml
    _log_once(func, type(exc).__name__, f"NVML call %s failed: {exc}; the field stays empty")
    return None


#: NVML's "value not available" integers: ``None if v in SENTINELS else v`` cleans one reading
#: (``True``/``False``/``None`` are not in it; every reading it is applied to is hashable).
SENTINELS = frozenset(_SENTINELS)


def scrub(value: Any) -> Any:
    """Replace NVML sentinels by None: plain ints, NamedTuple fields, lists of NamedTuples."""
    t = type(value)
    if t is int:
        return None if (value == UINT_MAX or value == ULLONG_MAX) else value
    if t is list:
        return [scrub(v) for v in value] if value else value
    if t is str or value is None:
        return value
    # NamedTuple: test membership in C first; rebuild only when a sentinel is really there
    if isinstance(value, tuple) and (UINT_MAX in value or ULLONG_MAX in value) and hasattr(t, "_make"):
        return t._make(None if (type(v) is int and v in _SENTINELS) else v for v in value)
    return value


#: Per-entry return codes (field values, GPM metrics) that mean "this one is not offered here".
_ENTRY_UNAVAILABLE = frozenset({pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_INVALID_ARGUMENT,
                                pynvml.NVML_ERROR_NO_PERMISSION, pynvml.NVML_ERROR_NOT_FOUND,
                                getattr(pynvml, "NVML_ERROR_NO_DATA", 21)})
_ENTRY_LOST = frozenset({pynvml.NVML_ERROR_GPU_IS_LOST, pynvml.NVML_ERROR_UNKNOWN})


def entry_value(code: int, value: Any, what: str) -> Any:
    """One entry of an answer that carries a return code per entry (nvmlDeviceGetFieldValues,
    nvmlGpmMetricsGet): its value, or None when that entry is not available.

    ``code`` 0 gives the value (a sentinel gives None); NotSupported, InvalidArgument (an id this
    driver does not know: pynvml defines GPM ids beyond what driver 580 answers), NoPermission,
    NotFound and NoData give None silently; GPU_IS_LOST and Unknown raise :class:`DeviceLost`;
    any other code gives None and one log line per ``what`` and code.
    """
    if code == 0:
        return None if (type(value) is int and (value == UINT_MAX or value == ULLONG_MAX)) else value
    if code in _ENTRY_UNAVAILABLE:
        return None
    if code in _ENTRY_LOST:
        raise DeviceLost(pynvml.NVMLError(code))
    _log_once(entry_value, f"{what}:{code}", f"NVML answered code {code} for {what} (%s); "
              "that reading stays empty")
    return None


def _log_once(func: Callable[..., Any], kind: str, message: str) -> None:
    name = getattr(func, "__qualname__", None) or repr(func)
    key = (name, kind)
    with _logged_lock:
        if key in _logged:
            return
        if len(_logged) >= _LOGGED_MAX:
            _logged.clear()
        _logged.add(key)
    log.warning(message, name)


def reset_log_once() -> None:
    """Forget which failures were logged (tests)."""
    with _logged_lock:
        _logged.clear()


def explain_init_error(exc: BaseException) -> str:
    """One sentence for the user on why NVML could not start; says GPUFlow shows no GPUs."""
    tail = "GPUFlow shows no GPUs"
    if isinstance(exc, pynvml.NVMLError_LibraryNotFound):
        return f"NVIDIA driver not found (libnvidia-ml.so.1 could not be loaded): {tail}"
    if isinstance(exc, pynvml.NVMLError_DriverNotLoaded):
        return (f"NVIDIA driver is installed but not loaded (nvmlInit: Driver Not Loaded; "
                f"is the nvidia kernel module loaded?): {tail}")
    if isinstance(exc, pynvml.NVMLError_NoPermission):
        return f"no permission to open the NVIDIA devices (nvmlInit: Insufficient Permissions): {tail}"
    if isinstance(exc, pynvml.NVMLError_LibRmVersionMismatch):
        return (f"the NVIDIA driver and libnvidia-ml.so do not match (usually a driver upgrade "
                f"without a reboot): {tail}")
    if isinstance(exc, pynvml.NVMLError):
        return f"NVML could not start (nvmlInit: {exc}): {tail}"
    return f"NVML could not start ({type(exc).__name__}: {exc}): {tail}"
