"""The injected library's CPU cost per CUPTI record against the minimal CUPTI collector's, without
a GPU: builds bench/inject_cost.c with libgpuflow_inject.so's own sources (activity.c,
buffer_pool.c, ring_producer.c, flusher.c, compiled as setup.py compiles them) and runs it.

bench/overhead.py times real programs on a GPU, where one process's speed varies by 6–15 % on
the lent machines. The work GPUFlow adds *inside* the traced process beyond the floor is per
record (translate into the ring, re-zero the pooled buffer; the floor walks, counts and frees),
and that can be timed to a few percent on any CPU. Given the GPU workload's per-launch time
(``--per-launch-us``; the launch storm on the H200 ran at 3.3–5.5 µs), it prints what that extra
work amounts to per launch — CPU time on GPUFlow's flusher thread, not on the launching thread,
so an upper bound on its share of the program's time only where the program has no spare core.

``--buffers`` is how many 1 MiB buffers complete per round: the launch storm fills about two per
50 ms flush period, written by CUPTI moments before, so they are still in cache; with many
buffers per round they are not, and the floor's walk (a memory-bound read) costs more while
GPUFlow's work (its own writes) barely moves: the extra shrinks (docs/overhead.md has the range).

Usage: python bench/inject_cost.py [--rounds 21] [--buffers 2] [--names 40] [--per-launch-us 4.0]
Last line: ``floor_ns_per_record=<f> gpuflow_ns_per_record=<g> ratio=<g/f> extra_ns_per_record=<g-f>
extra_pct_of_launch=<(g-f)/per-launch>``.

Constraints: needs a C compiler, the CUDA headers (cupti_activity.h; CUDA_HOME or the
conventional toolkit location) and /dev/shm; no GPU, no driver.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARY_SOURCES = ["cupti_src/activity.c", "cupti_src/buffer_pool.c", "cupti_src/ring_producer.c",
                   "cupti_src/flusher.c"]
# setup.py's flags for libgpuflow_inject.so, less what only a shared object needs
CFLAGS = ["-std=c11", "-O2", "-pthread", "-Wall", "-Wextra", "-Werror=implicit-function-declaration"]


def cuda_include() -> Path:
    candidates = [Path(os.environ[v]) / "include" for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    candidates += [Path("/usr/local/cuda/include"), Path("/opt/cuda/include")]
    for c in candidates:
        if (c / "cupti_activity.h").exists():
            return c
    raise SystemExit("inject_cost: cupti_activity.h not found; set CUDA_HOME to a CUDA toolkit")


def build(out_dir: Path) -> Path:
    exe = out_dir / "inject_cost"
    cmd = [os.environ.get("CC", "cc"), *CFLAGS, f"-I{ROOT / 'cupti_src'}", f"-I{cuda_include()}",
           "-o", str(exe), str(ROOT / "bench" / "inject_cost.c"),
           *(str(ROOT / s) for s in LIBRARY_SOURCES), "-lrt", "-ldl"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"inject_cost: build failed:\n{done.stderr}")
    return exe


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--buffers", type=int, default=2, help="1 MiB buffers per round (1..32)")
    ap.add_argument("--names", type=int, default=40, help="distinct kernel names (the torch loop has 40)")
    ap.add_argument("--per-launch-us", type=float, default=4.0,
                    help="the GPU workload's time per launch, for the last line's percentage")
    args = ap.parse_args(argv)
    if args.per_launch_us <= 0:
        ap.error("--per-launch-us must be positive")
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(Path(tmp))
        done = subprocess.run([str(exe), str(args.rounds), str(args.buffers), str(args.names)],
                              capture_output=True, text=True, timeout=600)
    sys.stdout.write(done.stdout)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        return done.returncode
    last = dict(re.findall(r"(\w+)=([0-9.]+)", done.stdout.strip().splitlines()[-1]))
    floor, gpuflow = float(last["floor_ns_per_record"]), float(last["gpuflow_ns_per_record"])
    extra = gpuflow - floor
    print(f"floor_ns_per_record={floor:.2f} gpuflow_ns_per_record={gpuflow:.2f} ratio={gpuflow / floor:.2f} "
          f"extra_ns_per_record={extra:.2f} extra_pct_of_launch={extra / (args.per_launch_us * 1000) * 100:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
