"""The CUPTI collector's lines in ``gpuflow doctor``: injection library, libcupti, decoder, the ring
transport (sealed memory files handed over a private socket).

Constraints: never initialises CUDA (loading libcupti and asking its version does not), needs no
GPU, finishes in well under a second; each check stands alone (one failing hides no other).
"""

from __future__ import annotations

import ctypes
import fcntl
import os

from gpuflow.collectors.cupti import _layout
from gpuflow.collectors.cupti.handover import plan_private_directory
from gpuflow.collectors.cupti.injection import INJECT_LIBRARY_NAME, cupti_library_candidates, inject_library_path
from gpuflow.collectors.cupti.rings import REQUIRED_SEALS
from gpuflow.core.doctor import DoctorCheck


def injection_checks() -> list[DoctorCheck]:
    """The injection library, and the libcupti it would load."""
    inject = inject_library_path()
    checks = [DoctorCheck("injection library", inject is not None,
                          f"{inject.name} built" if inject else
                          f"{INJECT_LIBRARY_NAME} was not built (CUPTI headers missing at install time: "
                          "install the CUDA toolkit, set CUDA_HOME, reinstall GPUFlow)", "run")]
    candidates = cupti_library_candidates()
    if not candidates:
        checks.append(DoctorCheck("libcupti", False, "not found under CUDA_HOME, /usr/local/cuda, the "
                                  "nvidia-cuda-cupti wheel or the linker cache; set GPUFLOW_CUPTI_PATH or "
                                  "CUDA_HOME", "run"))
        return checks
    path = candidates[0]
    try:
        lib = ctypes.CDLL(str(path), mode=os.RTLD_LOCAL)
        version = ctypes.c_uint32(0)
        rc = lib.cuptiGetVersion(ctypes.byref(version))
        detail = (f"{path.name}, API version {version.value}" if rc == 0
                  else f"{path.name}, cuptiGetVersion failed ({rc})")
        checks.append(DoctorCheck("libcupti", rc == 0, detail, "run"))
    except OSError as exc:
        checks.append(DoctorCheck("libcupti", False, f"{path} could not be loaded: {exc}", "run"))
    return checks


def decoder_check() -> DoctorCheck:
    """Which ring decoder is in use: the compiled one, or the slower pure-Python twin."""
    try:
        from gpuflow.collectors.cupti import decoder
    except ImportError as exc:
        return DoctorCheck("ring decoder", False, f"cannot import: {exc}", "run")
    if decoder.USING_EXTENSION:
        return DoctorCheck("ring decoder", True, "compiled (Cython)", "speed")
    return DoctorCheck("ring decoder", False, "pure-Python fallback in use (slower); reinstall with Cython "
                       "and a C compiler, or unset GPUFLOW_NO_EXTENSIONS", "speed")


def ring_transport_check(ring_capacity: int) -> DoctorCheck:
    """Whether rings can be made as the injected library makes them (a sealed memory file), and
    where ``gpuflow run`` would put its private ring socket."""
    try:
        fd = os.memfd_create("gpuflow-doctor", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, REQUIRED_SEALS)
        finally:
            os.close(fd)
    except (AttributeError, OSError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        return DoctorCheck("ring transport", False, f"sealed memory files (memfd) are not available: {why}",
                           "run")
    need = ring_capacity * _layout.RECORD_SIZE + _layout.HEADER_SIZE
    return DoctorCheck("ring transport", True,
                       f"sealed memory files of {need / 2**20:.1f} MiB per traced process "
                       f"({ring_capacity} records), handed over a socket in "
                       f"{plan_private_directory(os.environ).parent}", "run")
