"""Everything ``gpuflow run`` needs to inject the CUPTI collector into a child process.

Finds libgpuflow_inject.so (built into the package) and libcupti (from CUDA_HOME, the
conventional toolkit location, the nvidia-cuda-cupti wheel, or the dynamic linker's cache), and
builds the child's environment: CUDA_INJECTION64_PATH, NVTX_INJECTION64_PATH pointing at the SAME
libcupti the collector loads (two CUPTI copies in one process is a failure mode), the agent's ring
socket, ring capacity and flush period. Every descendant inherits it, so each CUDA process of the
tree makes its own ring and hands it to the agent. A GPUFLOW_CUPTI_PATH that is not a regular file
(a directory, a FIFO, a device) is refused here, before any program starts.

Constraints: no CUDA import, no GPU needed; only filesystem probing, so ``doctor`` can use it too.
"""

from __future__ import annotations

import ctypes.util
import os
import stat
from dataclasses import dataclass
from pathlib import Path

INJECT_LIBRARY_NAME = "libgpuflow_inject.so"
CUPTI_SONAMES = ("libcupti.so.13", "libcupti.so.12", "libcupti.so")


class InjectionUnavailable(Exception):
    """``gpuflow run`` cannot trace: the message says what is missing and how to get it."""


@dataclass(frozen=True)
class InjectionPaths:
    inject_library: Path
    cupti_library: Path


def inject_library_path() -> Path | None:
    import gpuflow.collectors.cupti as cupti_pkg

    for base in map(Path, cupti_pkg.__path__):
        candidate = base / INJECT_LIBRARY_NAME
        if candidate.is_file():
            return candidate.resolve()
    return None


def chosen_cupti_library(path: str) -> Path:
    """The libcupti GPUFLOW_CUPTI_PATH names, when it is a regular file (a link to one counts);
    InjectionUnavailable otherwise. Checked with ``stat``, which never opens it: a FIFO cannot
    block, a device is never read."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise InjectionUnavailable(f"GPUFLOW_CUPTI_PATH={path}: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise InjectionUnavailable(f"GPUFLOW_CUPTI_PATH={path} is not a regular file (a libcupti), "
                                   f"but a {_file_kind(mode)}")
    return Path(path)


def _file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "special file"


def cupti_library_candidates(environ: dict[str, str] | None = None) -> list[Path]:
    env = os.environ if environ is None else environ
    dirs: list[Path] = []
    if env.get("GPUFLOW_CUPTI_PATH"):
        return [Path(env["GPUFLOW_CUPTI_PATH"])]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(var):
            root = Path(env[var])
            dirs += [root / "targets" / "x86_64-linux" / "lib", root / "targets" / "sbsa-linux" / "lib",
                     root / "extras" / "CUPTI" / "lib64", root / "lib64"]
    for root in (Path("/usr/local/cuda"), Path("/opt/cuda")):
        dirs += [root / "targets" / "x86_64-linux" / "lib", root / "targets" / "sbsa-linux" / "lib",
                 root / "extras" / "CUPTI" / "lib64", root / "lib64"]
    try:
        import nvidia  # type: ignore[import-not-found]

        for root in map(Path, nvidia.__path__):
            dirs += [root / "cu13" / "lib", root / "cuda_cupti" / "lib"]
    except ImportError:
        pass
    found = [d / name for d in dirs for name in CUPTI_SONAMES if (d / name).is_file()]
    linker = ctypes.util.find_library("cupti")
    if linker:
        for d in (Path("/usr/lib/x86_64-linux-gnu"), Path("/usr/lib64"), Path("/usr/lib")):
            if (d / linker).is_file():
                found.append(d / linker)
    return list(dict.fromkeys(p.resolve() for p in found))


def find_injection_paths(environ: dict[str, str] | None = None) -> InjectionPaths:
    inject = inject_library_path()
    if inject is None:
        raise InjectionUnavailable(
            f"{INJECT_LIBRARY_NAME} was not built: the CUDA toolkit's CUPTI headers were not found when "
            "GPUFlow was installed. Install the CUDA toolkit (or pip install nvidia-cuda-cupti "
            "nvidia-cuda-runtime), set CUDA_HOME, and reinstall GPUFlow. `gpuflow watch` works without it."
        )
    env = os.environ if environ is None else environ
    if env.get("GPUFLOW_CUPTI_PATH"):
        return InjectionPaths(inject_library=inject, cupti_library=chosen_cupti_library(env["GPUFLOW_CUPTI_PATH"]))
    candidates = cupti_library_candidates(environ)
    if not candidates:
        raise InjectionUnavailable(
            "libcupti was not found: set CUDA_HOME to your CUDA toolkit, or GPUFLOW_CUPTI_PATH to "
            "libcupti.so.13, or pip install nvidia-cuda-cupti. `gpuflow doctor` shows what was searched."
        )
    return InjectionPaths(inject_library=inject, cupti_library=candidates[0])


def child_environment(
    paths: InjectionPaths,
    ring_socket: Path,
    ring_capacity: int,
    flush_ms: int,
    base: dict[str, str] | None = None,
) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env.update({
        "CUDA_INJECTION64_PATH": str(paths.inject_library),
        "NVTX_INJECTION64_PATH": str(paths.cupti_library),
        "GPUFLOW_CUPTI_PATH": str(paths.cupti_library),
        "GPUFLOW_RING_SOCKET": str(ring_socket),
        "GPUFLOW_RING_CAPACITY": str(ring_capacity),
        "GPUFLOW_FLUSH_MS": str(flush_ms),
    })
    return env
