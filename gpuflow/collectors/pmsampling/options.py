"""The PM-sampling collector's options: on or off (``--gpu-metrics``, off by default), the sampling
interval, the samples' budget, and where the helper and the libraries it loads are.

Declared through the ``declare_options`` hook. The interval's bounds are the helper's own
(100 µs to 1 s); the budget is MiB of samples, all GPUs together. ``sampler`` (the helper's path,
``GPUFLOW_PM_SAMPLER``), ``cuda_lib`` and ``cupti_lib`` (what the helper loads instead of the
driver's libcuda and the toolkit's libcupti), ``decode_ms`` and ``ring_records`` are given in code
by tests and rarely anywhere else.

Constraints: pure; importing it loads nothing.
"""

from __future__ import annotations

from typing import Any

from gpuflow.core.options import Option, PluginOptions, boolean

KEY = "pmsampling"
DEFAULT_INTERVAL_US = 1000
INTERVAL_US_RANGE = (100, 1_000_000)
DEFAULT_RETAIN_MB = 32
RETAIN_MB_RANGE = (0, 4096)
DEFAULT_DECODE_MS = 50
DECODE_MS_RANGE = (5, 1000)
DEFAULT_RING_RECORDS = 1 << 16
RING_RECORDS_RANGE = (1024, 1 << 20)


def _whole(low: int, high: int, unit: str) -> Any:
    def convert(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ValueError(f"expected a whole number of {unit}, got {value!r}")
        try:
            number = int(value)
        except ValueError:
            raise ValueError(f"expected a whole number of {unit}, got {value!r}") from None
        if not low <= number <= high:
            raise ValueError(f"must be between {low:,} and {high:,} {unit}, got {number:,}")
        return number
    convert.__doc__ = f"A whole number of {unit} in [{low:,}, {high:,}]."
    return convert


def path(value: Any) -> str:
    """An absolute path."""
    if not isinstance(value, str) or not value.startswith("/") or "\0" in value:
        raise ValueError(f"expected an absolute path, got {value!r}")
    return value


OPTIONS = PluginOptions(KEY, (
    Option("gpu_metrics", boolean, False,
           "GPU-metric rows: SM active and warps in flight across the SMs, DRAM and PCIe, sampled by CUPTI "
           "every --gpu-metrics-interval-us (needs root or CAP_SYS_ADMIN where profiling is for admins)",
           flag="--gpu-metrics", env="GPUFLOW_GPU_METRICS", switch=True),
    Option("interval_us", _whole(*INTERVAL_US_RANGE, "microseconds"), DEFAULT_INTERVAL_US,
           f"the GPU metrics' sampling interval (default {DEFAULT_INTERVAL_US} µs)",
           flag="--gpu-metrics-interval-us", env="GPUFLOW_GPU_METRICS_INTERVAL_US", metavar="US"),
    Option("retain_mb", _whole(*RETAIN_MB_RANGE, "MiB"), DEFAULT_RETAIN_MB,
           f"MiB of GPU-metric samples kept, all GPUs together, oldest out first (default {DEFAULT_RETAIN_MB})",
           flag="--gpu-metrics-retain-mb", env="GPUFLOW_GPU_METRICS_RETAIN_MB", metavar="MB"),
    Option("sampler", path, None, "the PM sampler helper to run (default: the one built with GPUFlow)",
           env="GPUFLOW_PM_SAMPLER"),
    Option("cuda_lib", path, None, "the CUDA driver library the helper loads (default libcuda.so.1)"),
    Option("cupti_lib", path, None, "the libcupti the helper loads (default: GPUFLOW_CUPTI_PATH, else the toolkit's)"),
    Option("decode_ms", _whole(*DECODE_MS_RANGE, "milliseconds"), DEFAULT_DECODE_MS,
           "how often the helper decodes the GPU's samples"),
    Option("ring_records", _whole(*RING_RECORDS_RANGE, "records"), DEFAULT_RING_RECORDS,
           "records in each helper's sample ring"),
))
