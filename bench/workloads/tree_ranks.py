"""Process trees a traced job is made of, for scripts/gpu-check's ``tree`` stage.

``python tree_ranks.py spawn 2`` starts two ranks with torch.multiprocessing's ``spawn`` (a fresh
interpreter each, as torchrun and DDP launchers do); ``fork 2`` forks two workers *before* the
parent touches CUDA, each of which then uses CUDA itself. Every rank runs the same small matmul
loop (20 matmuls and norms) and prints ``rank <i> steps=20``. Under ``gpuflow run`` each rank must be its own TRACED process with its kernels;
the parent, which never touches CUDA, must not be one.

Constraints: needs torch with CUDA; the parent never initialises CUDA (a fork after that is not
supported by CUDA, and GPUFlow's library then leaves the child out on purpose).
"""

from __future__ import annotations

import os
import sys

STEPS = 20


def rank_main(rank: int) -> None:
    import torch
    x = torch.randn(512, 512, device="cuda")
    for _ in range(STEPS):
        x = x @ x
        x = x / x.norm()
    torch.cuda.synchronize()
    print(f"rank {rank} steps={STEPS}", flush=True)


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in ("spawn", "fork"):
        print("usage: tree_ranks.py spawn|fork N", file=sys.stderr)
        return 2
    n = int(argv[2])
    if argv[1] == "spawn":
        import torch.multiprocessing as mp
        mp.spawn(rank_main, nprocs=n, join=True)
        return 0
    pids = []
    for rank in range(n):
        pid = os.fork()
        if pid == 0:   # the worker: never returns into the parent's loop, whatever happens
            code = 1
            try:
                rank_main(rank)
                code = 0
            finally:
                os._exit(code)
        pids.append(pid)
    status = 0
    for pid in pids:
        _, raw = os.waitpid(pid, 0)
        status = status or os.waitstatus_to_exitcode(raw)
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
