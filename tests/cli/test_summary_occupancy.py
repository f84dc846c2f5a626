"""The end-of-run summary's occupancy and bandwidth lines (gpuflow/cli/summary.py): each kernel's
theoretical occupancy, limiter and waves from its KernelLaunch, a line for several configurations
or an unavailable figure, and per device the process's GPU busy share and copy bandwidth split by
host memory; "—" where a figure is not known.
"""

from __future__ import annotations

from gpuflow.cli.summary import format_summary
from gpuflow.core.snapshot import CopyRate, KernelLaunch, KernelStat, TracedDevice, TracedProcess

GEMM = KernelStat("gemm(float*)", "_Z4gemmPf", 400, 81_234_000, 1, 2, timed=400)
ADD = KernelStat("add(float*)", "_Z3addPf", 10, 1000, 100, 100, timed=10)


def process(**kw) -> TracedProcess:
    return TracedProcess(pid=7, session="s", name="train", cupti_status="ok", kernels=(GEMM, ADD), **kw)


def row(text: str, kernel: str) -> str:
    (line,) = [l for l in text.splitlines() if l.rstrip().endswith(kernel) and "launches" not in l]
    return line


def test_each_kernel_row_has_its_occupancy_limiter_and_waves():
    launches = (KernelLaunch("_Z4gemmPf", 2, 5, 0, 256, 64, 49152, 50.0, 4, "registers+shared_memory",
                             1.2, 3.1, 25.0, 50.0),
                KernelLaunch("_Z3addPf", 1, unavailable="no launch configuration was recorded"))
    text = format_summary((process(kernel_launches=launches),))
    assert "occupancy" in text and "limited by" in text and "waves" in text
    gemm = row(text, "gemm(float*)").split()
    assert gemm[5:9] == ["50.0", "%", "registers+shared", "mem"] and gemm[9] == "1.20-3.10"
    assert "(2 launch configurations and 5 launches in further ones; occupancy 25.0-50.0 % over them" in text
    assert row(text, "add(float*)").split()[5:8] == ["—", "—", "—"]
    assert "(occupancy not available: no launch configuration was recorded)" in text


def test_each_device_has_the_busy_share_and_the_copy_bandwidth_by_host_memory():
    d = TracedDevice(0, uuid="GPU-1", name="NVIDIA H200", compute_capability=(9, 0), sm_count=132, busy_pct=99.1,
                     busy_window_ms=1012.5, busy_ns=4_877_000_000, kernel_span_ns=5_012_000_000, busy_late=3,
                     copies=(CopyRate("h2d", "pinned", 120, 24 << 30, 451_000_000, 57.1e9),
                             CopyRate("d2h", "pageable", 12, 1 << 30, 200_000_000, None)))
    text = format_summary((process(devices=(d,)),))
    assert ("device 0 (NVIDIA H200, sm_90, 132 SMs, GPU-1): GPU busy 97.3 % of the 5.012 s from its first kernel "
            "to its last (the union of its kernels: 4.877 s); 99.1 % over its last 1.012 s; 3 kernels arrived after "
            "their time was counted: lower bounds") in text
    assert "h2d pinned  : 120 timed copies, 24.0 GiB in 451.000 ms: 57.10 GB/s" in text
    assert "d2h pageable: 12 timed copies, 1.0 GiB in 200.000 ms: —" in text
    quiet = format_summary((process(devices=(TracedDevice(1),)),))
    assert "device 1: no timed kernels" in quiet
