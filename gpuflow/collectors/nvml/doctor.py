"""The NVML collector's lines in ``gpuflow doctor``: does NVML start, which driver, which GPUs.

Always the real NVML (never the fake backend): doctor describes this machine. Every call goes
through the NVML boundary (:mod:`gpuflow.collectors.nvml.query`), so a field NVML cannot give is
"not available" here as everywhere else.

Constraints: initialises NVML once and shuts it down before returning; needs no GPU (no driver is
a failed check, not an exception); well under a second.
"""

from __future__ import annotations

import pynvml

from gpuflow.collectors.nvml.backend import NvmlBackend
from gpuflow.collectors.nvml.collector import cuda_version_text
from gpuflow.collectors.nvml.query import DeviceLost, explain_init_error, nvml_query
from gpuflow.core.doctor import DoctorCheck


def nvml_checks(backend: NvmlBackend) -> list[DoctorCheck]:
    """``NVML`` (started, driver and CUDA versions) and ``GPUs`` (each one's index and name)."""
    try:
        backend.init()
    except pynvml.NVMLError as exc:
        return [DoctorCheck("NVML", False, explain_init_error(exc), "gpus")]  # the Problem's words
    try:
        driver = nvml_query(backend.driver_version) or "version not available"
        cuda = cuda_version_text(nvml_query(backend.cuda_driver_version))
        count = nvml_query(backend.device_count) or 0
        names = [_device_line(backend, i) for i in range(count)]
    finally:
        try:
            backend.shutdown()
        except pynvml.NVMLError:
            pass
    return [DoctorCheck("NVML", True, f"driver {driver}" + (f", CUDA {cuda}" if cuda else ""), "gpus"),
            DoctorCheck("GPUs", count > 0, ", ".join(names) if names else "NVML sees no GPU", "gpus")]


def _device_line(backend: NvmlBackend, index: int) -> str:
    try:
        handle = backend.handle_by_index(index)
        name = nvml_query(backend.name, handle)
    except (pynvml.NVMLError, DeviceLost) as exc:
        return f"[{index}] unreadable ({exc})"
    return f"[{index}] {name or 'name not available'}"
