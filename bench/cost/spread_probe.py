"""Do separate processes of one program run at the same speed, and what makes them agree?

The side-by-side overhead comparison (bench/overhead.py) is limited by how much one process of a
workload differs in speed from the next: on the lent H200 virtual machines, 6-15 % for the
launch storm and the PyTorch loop, while inside one process the speed holds to well under 1 %
(bench/cost/overhead_ab.py's controls). This runs each workload bare (no injection, no GPUFlow) N
times under each start-up configuration, interleaved run by run, and prints each
configuration's median, coefficient of variation and range:

* ``plain`` — started through the same exec shim as the others, changing nothing;
* ``noaslr`` — address-space randomisation off (personality ADDR_NO_RANDOMIZE), so every
  process has the same virtual layout: if the spread comes from where code and data land
  relative to each other (cache and TLB aliasing), it shrinks here;
* ``noaslr-hashseed`` — also PYTHONHASHSEED=0 (a Python program's dicts and sets then iterate
  alike in every process).

A configuration that cuts the spread is worth running the side-by-side comparison under
(``bench/overhead.py --no-aslr``); one that does not rules that cause out.

Usage: python bench/cost/spread_probe.py --workload NAME=METRIC:CMD... [--runs 8]
       [--configs plain,noaslr,noaslr-hashseed]
Last line: ``spread_probe <name>_<config>_cv_pct=<x> ...`` for every workload and configuration.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import statistics
import subprocess
import sys

from workload_run import shimmed

#: configuration -> (address-space randomisation off, extra environment)
CONFIGS: dict[str, tuple[bool, dict[str, str]]] = {
    "plain": (False, {}),
    "noaslr": (True, {}),
    "noaslr-hashseed": (True, {"PYTHONHASHSEED": "0"}),
}
_INJECTION = ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "GPUFLOW_RING_SOCKET", "PROGRESS_TRACE",
              "PYTHONHASHSEED")


def run_one(cmd: list[str], metric: str, config: str) -> float:
    no_aslr, extra = CONFIGS[config]
    env = {k: v for k, v in os.environ.items() if k not in _INJECTION}
    env.update(extra)
    done = subprocess.run(shimmed(cmd, no_aslr=no_aslr), env=env, capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{config} {cmd} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    found = re.findall(rf"\b{re.escape(metric)}=([0-9][0-9.eE+-]*)", done.stdout)
    if not found:
        raise RuntimeError(f"{config}: no {metric}= in output:\n{done.stdout}")
    return float(found[-1])


def spread(values: list[float]) -> dict[str, float]:
    """Median, coefficient of variation (sample standard deviation over mean, %), min, max."""
    mean = statistics.fmean(values)
    cv = statistics.stdev(values) / mean * 100 if len(values) > 1 and mean else float("nan")
    return {"median": statistics.median(values), "cv_pct": cv, "min": min(values), "max": max(values)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", action="append", required=True, metavar="NAME=METRIC:CMD")
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--configs", default="plain,noaslr,noaslr-hashseed")
    args = ap.parse_args()
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown or not configs:
        ap.error(f"--configs: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(CONFIGS)}")
    if args.runs < 2:
        ap.error("--runs: at least 2 (a spread needs two processes)")
    workloads = []
    for spec in args.workload:
        name, eq, rest = spec.partition("=")
        metric, colon, cmd = rest.partition(":")
        if not (eq and colon and name and metric and cmd.strip()):
            ap.error(f"--workload {spec!r}: expected NAME=METRIC:CMD")
        workloads.append((name, metric, shlex.split(cmd)))
    values = {(w[0], c): [] for w in workloads for c in configs}
    for r in range(args.runs):
        order = configs[r % len(configs):] + configs[:r % len(configs)]
        for name, metric, cmd in workloads:
            for config in order:
                v = run_one(cmd, metric, config)
                values[(name, config)].append(v)
                print(f"run {r + 1}/{args.runs} {name} {config} {metric}={v:.6g}", flush=True)
    print(f"{args.runs} processes per workload and configuration, interleaved")
    print(f"{'workload':<10} {'config':<16} {'median':>10} {'cv %':>6} {'min':>10} {'max':>10}")
    fields = []
    for name, metric, _ in workloads:
        for config in configs:
            s = spread(values[(name, config)])
            print(f"{name:<10} {config:<16} {s['median']:>10.4g} {s['cv_pct']:>6.2f} {s['min']:>10.4g} {s['max']:>10.4g}")
            fields.append(f"{name}_{config}_cv_pct={s['cv_pct']:.2f}")
    print("spread_probe " + " ".join(fields))
    return 0


if __name__ == "__main__":
    sys.exit(main())
