"""The injected library's CPU cost per CUPTI record against the minimal CUPTI collector's, without
a GPU: builds bench/cost/inject_cost.c with libgpuflow_inject.so's own sources (activity.c,
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

``--baseline-src DIR`` (a checkout, or any directory holding another version's ``cupti_src/``)
builds the same harness a second time from that version's library sources and runs the two
alternately, ``--pairs`` times each, so a change to the library is measured side by side on one
machine: it prints each pair, then ``baseline_ns_per_record=<b> gpuflow_ns_per_record=<g>
vs_baseline=<g/b>`` (medians over the pairs) and ``vs_baseline_per_floor=<r>`` (the median over
the pairs of each version's time divided by its own run's floor: the floor is the same code in
both harnesses and alternates with GPUFlow's rounds in the same process, so it takes out how fast
the machine happened to be during each run; on a shared, loaded host this is the figure to read)
before the last line, which is then the current version's median pair.

Usage: python bench/cost/inject_cost.py [--rounds 21] [--buffers 2] [--names 40] [--per-launch-us 4.0]
                                   [--baseline-src DIR [--pairs 5]]
Last line: ``floor_ns_per_record=<f> gpuflow_ns_per_record=<g> ratio=<g/f> extra_ns_per_record=<g-f>
extra_pct_of_launch=<(g-f)/per-launch>``.

Constraints: needs a C compiler and the CUDA headers (cupti_activity.h; CUDA_HOME or the
conventional toolkit location); no GPU, no driver. A baseline from before the ring handover
(named /dev/shm segments) needs /dev/shm as well.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HARNESS_C = Path(__file__).resolve().with_name("inject_cost.c")
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


def build(out_dir: Path, library_root: Path = ROOT, label: str = "inject_cost") -> Path:
    """The harness (this checkout's bench/cost/inject_cost.c) linked with library_root's cupti_src/."""
    exe = out_dir / label
    cmd = [os.environ.get("CC", "cc"), *CFLAGS, f"-I{library_root / 'cupti_src'}", f"-I{cuda_include()}",
           "-o", str(exe), str(HARNESS_C),
           *(str(library_root / s) for s in LIBRARY_SOURCES), "-lrt", "-ldl"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"inject_cost: build of {library_root / 'cupti_src'} failed:\n{done.stderr}")
    return exe


def run_harness(exe: Path, args: argparse.Namespace) -> tuple[str, dict[str, float]]:
    """One run of a harness: its output, and its last line's numbers."""
    done = subprocess.run([str(exe), str(args.rounds), str(args.buffers), str(args.names)],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        sys.stdout.write(done.stdout)
        sys.stderr.write(done.stderr)
        raise SystemExit(done.returncode)
    last = dict(re.findall(r"(\w+)=([0-9.]+)", done.stdout.strip().splitlines()[-1]))
    return done.stdout, {k: float(v) for k, v in last.items()}


def side_by_side(args: argparse.Namespace, tmp: Path) -> dict[str, float]:
    """The current library and the baseline's, alternately; the current run with the median
    per-record time is the one the last line reports."""
    current, baseline = build(tmp), build(tmp, args.baseline_src, "inject_cost_baseline")
    runs: list[dict[str, float]] = []
    base_ns: list[float] = []
    per_floor: list[float] = []
    for pair in range(1, args.pairs + 1):
        order = [(current, "current"), (baseline, "baseline")]
        if pair % 2 == 0:
            order.reverse()  # neither always goes first
        got = {}
        for exe, label in order:
            got[label] = run_harness(exe, args)[1]
        runs.append(got["current"])
        base_ns.append(got["baseline"]["gpuflow_ns_per_record"])
        per_floor.append((got["current"]["gpuflow_ns_per_record"] / got["current"]["floor_ns_per_record"])
                         / (got["baseline"]["gpuflow_ns_per_record"] / got["baseline"]["floor_ns_per_record"]))
        print(f"pair={pair} current_ns={got['current']['gpuflow_ns_per_record']:.2f} "
              f"baseline_ns={got['baseline']['gpuflow_ns_per_record']:.2f} "
              f"floor_ns={got['current']['floor_ns_per_record']:.2f}/{got['baseline']['floor_ns_per_record']:.2f}")
    cur = statistics.median(r["gpuflow_ns_per_record"] for r in runs)
    base = statistics.median(base_ns)
    print(f"baseline_ns_per_record={base:.2f} gpuflow_ns_per_record={cur:.2f} vs_baseline={cur / base:.3f} "
          f"vs_baseline_per_floor={statistics.median(per_floor):.3f} pairs={args.pairs}")
    return min(runs, key=lambda r: abs(r["gpuflow_ns_per_record"] - cur))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--buffers", type=int, default=2, help="1 MiB buffers per round (1..32)")
    ap.add_argument("--names", type=int, default=40, help="distinct kernel names (the torch loop has 40)")
    ap.add_argument("--per-launch-us", type=float, default=4.0,
                    help="the GPU workload's time per launch, for the last line's percentage")
    ap.add_argument("--baseline-src", type=Path, metavar="DIR",
                    help="another version's checkout (its cupti_src/), timed alternately with this one")
    ap.add_argument("--pairs", type=int, default=5, help="with --baseline-src: runs of each (default 5)")
    args = ap.parse_args(argv)
    if args.per_launch_us <= 0:
        ap.error("--per-launch-us must be positive")
    if args.pairs < 1:
        ap.error("--pairs must be at least 1")
    if args.baseline_src is not None:
        missing = [s for s in LIBRARY_SOURCES if not (args.baseline_src / s).is_file()]
        if missing:
            ap.error(f"--baseline-src {args.baseline_src}: no {', '.join(missing)} there")
    with tempfile.TemporaryDirectory() as tmp:
        if args.baseline_src is not None:
            last = side_by_side(args, Path(tmp))
        else:
            output, last = run_harness(build(Path(tmp)), args)
            sys.stdout.write(output)
    floor, gpuflow = last["floor_ns_per_record"], last["gpuflow_ns_per_record"]
    extra = gpuflow - floor
    print(f"floor_ns_per_record={floor:.2f} gpuflow_ns_per_record={gpuflow:.2f} ratio={gpuflow / floor:.2f} "
          f"extra_ns_per_record={extra:.2f} extra_pct_of_launch={extra / (args.per_launch_us * 1000) * 100:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
