"""``gpuflow doctor``: what works on this machine and, for what does not, why and what to do.

Checks, each independent (one failing never hides the others): NVML and the driver, the GPUs,
libcupti and its version, the injection library, the ring decoder (compiled or pure Python),
shared memory for rings, and the web stack. Exit status 0 when ``watch`` and ``run`` can both
work, 1 otherwise.

Constraints: never initialises CUDA (loading libcupti and asking its version does not), never
needs a GPU to run, finishes in about a second.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
from dataclasses import dataclass
from typing import Callable, TextIO

from gpuflow.core.context import DEFAULT_RING_CAPACITY

RING_RECORD_BYTES = 64
SHM_DIR = "/dev/shm"


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    needed_for: str  # "watch", "run" or "speed"


def check_nvml() -> list[Check]:
    try:
        import pynvml
    except ImportError:
        return [Check("NVML", False, "nvidia-ml-py is not installed (pip install nvidia-ml-py)", "watch")]
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return [Check("NVML", False, f"NVML did not start: {exc}. Is the NVIDIA driver installed "
                      "(libnvidia-ml.so.1) and is this container given the GPU?", "watch")]
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        count = pynvml.nvmlDeviceGetCount()
        names = []
        for i in range(count):
            try:
                names.append(f"[{i}] {pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))}")
            except pynvml.NVMLError as exc:
                names.append(f"[{i}] unreadable ({exc})")
        try:
            cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
            cuda_text = f", CUDA {cuda // 1000}.{cuda % 1000 // 10}"
        except pynvml.NVMLError:
            cuda_text = ""
        checks = [Check("NVML", True, f"driver {driver}{cuda_text}", "watch")]
        checks.append(Check("GPUs", count > 0, ", ".join(names) if names else "NVML sees no GPU", "watch"))
        return checks
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def check_cupti() -> list[Check]:
    from gpuflow.cli.injection import cupti_library_candidates, inject_library_path

    checks = []
    inject = inject_library_path()
    checks.append(Check("injection library", inject is not None,
                        str(inject.name) + " built" if inject else
                        "libgpuflow_inject.so was not built (CUPTI headers missing at install time: "
                        "install the CUDA toolkit, set CUDA_HOME, reinstall GPUFlow)", "run"))
    candidates = cupti_library_candidates()
    if not candidates:
        checks.append(Check("libcupti", False, "not found under CUDA_HOME, /usr/local/cuda, the nvidia-cuda-cupti "
                            "wheel or the linker cache; set GPUFLOW_CUPTI_PATH or CUDA_HOME", "run"))
        return checks
    path = candidates[0]
    try:
        lib = ctypes.CDLL(str(path), mode=os.RTLD_LOCAL)
        version = ctypes.c_uint32(0)
        rc = lib.cuptiGetVersion(ctypes.byref(version))
        detail = f"{path.name}, API version {version.value}" if rc == 0 else f"{path.name}, cuptiGetVersion failed ({rc})"
        checks.append(Check("libcupti", rc == 0, detail, "run"))
    except OSError as exc:
        checks.append(Check("libcupti", False, f"{path} could not be loaded: {exc}", "run"))
    return checks


def check_decoder() -> list[Check]:
    try:
        from gpuflow.collectors.cupti import decoder
    except ImportError as exc:
        return [Check("ring decoder", False, f"cannot import: {exc}", "run")]
    if getattr(decoder, "USING_EXTENSION", False):
        return [Check("ring decoder", True, "compiled (Cython)", "speed")]
    return [Check("ring decoder", False, "pure-Python fallback in use (slower); reinstall with Cython and a C "
                  "compiler, or unset GPUFLOW_NO_EXTENSIONS", "speed")]


def check_shm() -> list[Check]:
    try:
        st = os.statvfs(SHM_DIR)
    except OSError as exc:
        return [Check("shared memory", False, f"{SHM_DIR} unusable: {exc.strerror}", "run")]
    free = st.f_bavail * st.f_frsize
    need = DEFAULT_RING_CAPACITY * RING_RECORD_BYTES + 4096
    rings = free // need
    return [Check("shared memory", rings >= 1,
                  f"{free / 2**20:.0f} MiB free in {SHM_DIR}: room for {rings} default rings "
                  f"({need / 2**20:.1f} MiB each)", "run")]


def check_web() -> list[Check]:
    out = []
    for module in ("falcon", "gunicorn", "prometheus_client"):
        try:
            mod = __import__(module)
            out.append(Check(module, True, getattr(mod, "__version__", "installed"), "watch"))
        except ImportError:
            out.append(Check(module, False, f"not installed (pip install {module.replace('_', '-')})", "watch"))
    return out


CHECKS: tuple[Callable[[], list[Check]], ...] = (check_nvml, check_cupti, check_decoder, check_shm, check_web)


def run_checks() -> list[Check]:
    results: list[Check] = []
    for check in CHECKS:
        try:
            results.extend(check())
        except Exception as exc:  # noqa: BLE001 - a broken check must not hide the others
            results.append(Check(check.__name__.removeprefix("check_"), False, f"check failed: {exc!r}", "watch"))
    return results


def print_checks(results: list[Check], out: TextIO) -> None:
    for c in results:
        mark = " ok " if c.ok else ("warn" if c.needed_for == "speed" else "FAIL")
        out.write(f"[{mark}] {c.name:<18} {c.detail}\n")
    can_watch = all(c.ok for c in results if c.needed_for == "watch" and c.name not in ("NVML", "GPUs"))
    gpus = all(c.ok for c in results if c.name in ("NVML", "GPUs"))
    can_run = can_watch and all(c.ok for c in results if c.needed_for == "run")
    out.write(f"\ngpuflow watch: {'works' if can_watch else 'cannot start'}"
              f"{'' if gpus or not can_watch else ' (but shows no GPUs: see NVML above)'}\n")
    out.write(f"gpuflow run:   {'can trace CUDA programs' if can_run and gpus else 'cannot trace: see above'}\n")


def cmd_doctor(_args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    results = run_checks()
    print_checks(results, out)
    return 0 if all(c.ok for c in results if c.needed_for in ("watch", "run")) else 1
