"""PyTorch under the injected collector, on a real GPU: is it traced, how soon does a finished
kernel reach the ring, and what happens when torch.profiler (Kineto) takes CUPTI mid-run.

What it is for: producer-side facts that only a real CUPTI can tell (run by gpu_smoke.sh inside
an injected process). Prints one JSON line per phase; never asserts, so every phase reports.
Needs torch with CUDA and tests/support/ringread.py on the import path (gpu_smoke.sh sets
PYTHONPATH=tests/support; ringread needs an installed GPUFlow), and an agent or a ring catcher to
hand its ring to (gpu_smoke.sh runs it under tests/support/ringcatch.py); it reads its own ring
through the descriptor the injected library keeps.
"""

from __future__ import annotations

import json
import os
import random
import time

import ringread
import torch

_ring_fd: int | None = None


def ring() -> int:
    """This process's own ring (made when CUDA initialised, so looked up on first use)."""
    global _ring_fd
    if _ring_fd is None:
        _ring_fd = ringread.own_ring_fd()
    return _ring_fd


def hdr() -> dict:
    h = ringread.header(ring())
    return {k: h[k] for k in ("status", "status_detail", "head", "dropped_ring",
                              "dropped_cupti", "buffers_completed")}


def report(phase: str, **kw) -> None:
    print(json.dumps({"phase": phase, **kw}), flush=True)


x = torch.randn(1024, 1024, device="cuda")
for _ in range(50):
    y = x @ x
torch.cuda.synchronize()
time.sleep(0.2)
report("warmup", **hdr())

namer = os.environ.get("GPUFLOW_TEST_NAMER")  # a tiny lib calling nvtxNameCudaStreamA
if namer:
    import ctypes
    lib = ctypes.CDLL(namer)
    side = torch.cuda.Stream()
    lib.name_stream(ctypes.c_void_p(side.cuda_stream), b"torch_side")
    with torch.cuda.stream(side):
        for _ in range(5):
            y = x @ x
    torch.cuda.synchronize()
    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    report("nvtx", nvtx_path=(libc.getenv(b"NVTX_INJECTION64_PATH") or b"").decode(), **hdr())

lat = []
for _ in range(40):
    time.sleep(random.uniform(0, 0.06))
    h0 = ringread.header(ring())["head"]
    x.add_(1.0)
    torch.cuda.synchronize()
    t0 = time.monotonic()
    while ringread.header(ring())["head"] == h0 and time.monotonic() - t0 < 2:
        time.sleep(0.0005)
    lat.append((time.monotonic() - t0) * 1000)
lat.sort()
report("latency_ms", p50=round(lat[len(lat) // 2], 1), p99=round(lat[-1], 1),
       min=round(lat[0], 1))

before = hdr()
try:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            y = x @ x
        torch.cuda.synchronize()
    events = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    report("profiler", ok=True, cuda_events=events, before=before, after=hdr())
except Exception as exc:  # noqa: BLE001 - report whatever happened
    report("profiler", ok=False, error=repr(exc), before=before, after=hdr())

statuses = []
for i in range(300):  # ~6 s of launches after the profiler
    y = x @ x
    time.sleep(0.02)
    if i % 50 == 0:
        torch.cuda.synchronize()
        statuses.append(hdr()["status"])
torch.cuda.synchronize()
report("after_profiler", statuses=statuses, final=hdr())
