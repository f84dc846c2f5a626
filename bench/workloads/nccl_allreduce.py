"""Two ranks all-reducing over NCCL, for scripts/gpu-check's ``nccl`` stage: does ``gpuflow run``
count NCCL's own kernels exactly in every rank of a multi-GPU job?

    python nccl_allreduce.py N                      # bare, or under gpuflow run
    python nccl_allreduce.py N --profile-out FILE   # under torch.profiler, in each rank

Spawns one rank per GPU (two; torch.multiprocessing ``spawn``, as torchrun-style launchers do),
each of which joins an NCCL process group, all-reduces a 4 MiB tensor N times (scaling it in
between so the numbers stay finite) and prints a ``checksum rank<r> <value>`` line. With
``--profile-out`` every rank runs the same work under torch.profiler and the parent writes the
ranks' per-kernel-name counts, summed, as ``{"kernels": {...}}`` — the ground truth that
scripts/gpu_verify.py ``profiled`` compares with ``gpuflow run --summary-json`` (separate runs:
CUPTI takes one subscriber). The profiled region covers everything a rank does on the GPU, the
process group's set-up and tear-down included, so both runs launch the same kernels.

Exit status 3 (and a line saying so) without torch, without NCCL or with fewer than two GPUs.
The parent counts GPUs through NVML and never touches CUDA itself. Constraints: NVLink multicast stays off (NCCL_NVLS_ENABLE=0 and its PyTorch and NVSHMEM
counterparts are set here, whatever the environment says): on shared hosts a program that uses
it can take every GPU of the host out of service.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import socket
import sys
import tempfile
from pathlib import Path

NOT_RUNNABLE = 3
RANKS = 2
ELEMENTS = 1 << 20   # float32: 4 MiB
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                 "NVSHMEM_DISABLE_NVLS": "1"}


def rank_work(torch, dist, rank: int, steps: int, port: int) -> float:
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=RANKS)
    x = torch.full((ELEMENTS,), float(rank + 1), device="cuda")
    for _ in range(steps):
        dist.all_reduce(x)
        x.mul_(1.0 / RANKS)
    torch.cuda.synchronize()
    checksum = float(x[:1024].double().sum())
    dist.barrier()
    dist.destroy_process_group()
    torch.cuda.synchronize()
    return checksum


def rank_main(rank: int, steps: int, port: int, profile_dir: str | None) -> None:
    import torch
    import torch.distributed as dist

    if profile_dir is None:
        checksum = rank_work(torch, dist, rank, steps, port)
    else:
        from torch.profiler import ProfilerActivity, profile
        from torch_train import kernel_counts_from_trace

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            checksum = rank_work(torch, dist, rank, steps, port)
        trace = os.path.join(profile_dir, f"trace-rank{rank}.json")
        prof.export_chrome_trace(trace)
        with open(os.path.join(profile_dir, f"rank{rank}.json"), "w") as fh:
            json.dump(kernel_counts_from_trace(trace), fh)
    print(f"checksum rank{rank} {checksum!r}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def why_not_runnable() -> str | None:
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed here"
    # count GPUs through NVML, so that the parent never initialises CUDA (under gpuflow run it
    # would become a traced process itself; only the ranks use the GPU)
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    import torch
    import torch.distributed as dist

    if not torch.cuda.is_available() or torch.cuda.device_count() < RANKS:
        return f"needs {RANKS} GPUs, this machine has {torch.cuda.device_count() if torch.cuda.is_available() else 0}"
    if not dist.is_available() or not dist.is_nccl_available():
        return "this torch has no NCCL"
    return None


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("steps", type=int, help="all-reduces per rank (>= 1)")
    ap.add_argument("--profile-out", type=Path, help="run each rank under torch.profiler; write the summed "
                                                     "per-kernel counts as JSON here")
    args = ap.parse_args(argv[1:])
    if args.steps < 1:
        ap.error("steps must be at least 1")
    os.environ.update(MULTICAST_OFF)   # before anything can start NCCL; the ranks inherit it
    reason = why_not_runnable()
    if reason:
        print(f"nccl_allreduce: {reason}: skipped", flush=True)
        return NOT_RUNNABLE
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as profile_dir:
        mp.spawn(rank_main, args=(args.steps, free_port(), profile_dir if args.profile_out else None),
                 nprocs=RANKS, join=True)
        if args.profile_out:
            total: collections.Counter[str] = collections.Counter()
            for rank in range(RANKS):
                total.update(json.loads(Path(profile_dir, f"rank{rank}.json").read_text()))
            args.profile_out.write_text(json.dumps({"kernels": dict(total)}, indent=1, sort_keys=True))
            print(f"profiled kernels={sum(total.values())} distinct={len(total)} ranks={RANKS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
