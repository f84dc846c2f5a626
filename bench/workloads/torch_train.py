"""A deterministic PyTorch training loop: the same kernels, in the same numbers, on every run.

Used two ways by scripts/gpu-check: traced by ``gpuflow run --summary-json`` and, in a separate run
(CUPTI allows one subscriber), under torch.profiler with ``--profile-out`` (per-kernel-name counts
from the Kineto trace, whose kernel events come from the same CUPTI activity records). The two
per-kernel-name count tables must be equal. bench/overhead.py also uses it for the training-loop
overhead figure: ``timed_s`` covers the steps after warm-up only; ``step_ms_median`` is the
median step of them, which a burst of noise in a few steps does not move.

With PROGRESS_TRACE=<file> set it also writes, after the run, one line ``<CLOCK_MONOTONIC ns>
<steps done>`` at the start of the timed region and after every step: bench/cost/overhead_ab.py reads
its speed in alternating periods from it.

Constraints: needs torch with CUDA; fixed seed, fixed shapes, a synchronize each step.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import tempfile
import time


def build(torch):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024, batch_first=True,
                                             dropout=0.0)
    model = torch.nn.Sequential(torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False),
                                torch.nn.Flatten(), torch.nn.Linear(256 * 32, 10)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(64, 32, 256, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")
    return model, opt, x, y


def train(torch, steps: int, warmup: int, seconds: float = 0.0,
          progress: list[int] | None = None) -> tuple[float, list[float]]:
    """Run warm-up + ``steps`` steps, or, with ``seconds``, steps until that much time has passed.
    Returns the time of the steps after warm-up and each of their durations; ``progress`` gets
    the CLOCK_MONOTONIC time at the start of the timed region and at the end of every step."""
    model, opt, x, y = build(torch)
    loss_fn = torch.nn.CrossEntropyLoss()
    t0 = 0.0
    step = 0
    step_s: list[float] = []
    start = time.perf_counter()
    while (time.perf_counter() - start < seconds) if seconds > 0 else (step < warmup + steps):
        step += 1
        if step - 1 == warmup:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            if progress is not None:
                progress.append(time.monotonic_ns())
        ts = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        if t0:
            step_s.append(time.perf_counter() - ts)
            if progress is not None:
                progress.append(time.monotonic_ns())
    return (time.perf_counter() - t0 if t0 else 0.0), step_s


def kernel_counts_from_trace(path: str) -> dict[str, int]:
    with open(path) as fh:
        trace = json.load(fh)
    counts: collections.Counter[str] = collections.Counter()
    for event in trace.get("traceEvents", []):
        if event.get("cat") == "kernel" and event.get("ph") == "X":
            counts[event["name"]] += 1
    return dict(counts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=0.0,
                    help="train for this long instead of --steps (the soak's long-lived process)")
    ap.add_argument("--profile-out", help="run under torch.profiler; write per-kernel counts as JSON here")
    args = ap.parse_args()
    import torch

    if not args.profile_out:
        trace_path = os.environ.get("PROGRESS_TRACE")
        progress: list[int] | None = [] if trace_path else None
        timed, step_s = train(torch, args.steps, args.warmup, args.seconds, progress)
        if trace_path:
            with open(trace_path, "w") as fh:
                fh.writelines(f"{ns} {done}\n" for done, ns in enumerate(progress or []))
        median_ms = statistics.median(step_s) * 1000 if step_s else 0.0
        print(f"timed_s={timed:.6f} steps={args.steps} step_ms_median={median_ms:.4f}")
        return 0
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        elapsed, _ = train(torch, args.steps, args.warmup)
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(trace)
        counts = kernel_counts_from_trace(trace)
    with open(args.profile_out, "w") as fh:
        json.dump({"kernels": counts, "timed_s": elapsed}, fh, indent=1, sort_keys=True)
    print(f"profiled kernels={sum(counts.values())} distinct={len(counts)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
