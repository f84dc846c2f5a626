"""How often CUPTI calls GPUFlow's two set-once pieces, per thread, on a real GPU.

bench/cost/overhead_ab.py switches GPUFlow's per-record work (and, with ``--freeze-agent``, its whole
agent) on and off inside one process; what it cannot switch is what the injected library sets up
once: its CUPTI subscriber (RESOURCE context-destroy and STATE fatal-error callbacks) and its
CLOCK_MONOTONIC timestamp callback. Either can cost the program per launch only if CUPTI calls it
per launch on a thread of the program. This runs each workload once under the minimal CUPTI
collector (bench/cost/cupti_floor.c) with exactly those two pieces added and counted
(FLOOR_CLOCK=1 FLOOR_SUBSCRIBE=1 FLOOR_COUNT=1) and prints, per thread that was called, its name
and counts beside the records CUPTI delivered. Counting is not timing: the counts are exact, the
run's speed is not a figure.

Usage: python bench/cost/floor_calls.py --floor-lib libcupti_floor.so --workload NAME:CMD...
  e.g. --workload 'storm:./launch_storm 500000'
Last line: ``floor_calls workloads=<n> records=<total> clock_calls=<total>
clock_calls_per_record=<max over workloads> sub_calls=<total> uncounted=<calls from threads past
the floor's 64-thread table>``.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys

_RECORDS = re.compile(r"cupti_floor: kernels=(\d+) copies=(\d+) memsets=(\d+) other=(\d+) buffers=(\d+)")
_THREAD = re.compile(r"cupti_floor_calls: tid=(\d+) main=([01]) thread=(.*?) clock_calls=(\d+) sub_calls=(\d+)$")
_UNCOUNTED = re.compile(r"cupti_floor_calls: uncounted=(\d+)")


def parse_floor_output(stderr: str) -> dict:
    """The floor's exit report: records by kind and, per thread, the calls it received.
    Raises ValueError when the report is missing (the floor did not load, or FLOOR_COUNT was
    off), so a run that counted nothing is never read as zero calls."""
    records = _RECORDS.search(stderr)
    uncounted = _UNCOUNTED.search(stderr)
    if not records or not uncounted:
        raise ValueError("no cupti_floor report with call counts in the program's stderr "
                         "(floor not injected, or FLOOR_COUNT unset)")
    kernels, copies, memsets, other, buffers = (int(g) for g in records.groups())
    threads = []
    for line in stderr.splitlines():
        m = _THREAD.match(line.strip())
        if m:
            threads.append({"tid": int(m[1]), "main": m[2] == "1", "name": m[3],
                            "clock_calls": int(m[4]), "sub_calls": int(m[5])})
    return {"kernels": kernels, "copies": copies, "memsets": memsets, "other": other,
            "buffers": buffers, "records": kernels + copies + memsets, "threads": threads,
            "uncounted": int(uncounted[1])}


def run_counted(cmd: list[str], floor_lib: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "GPUFLOW_RING_SOCKET")}
    env.update(CUDA_INJECTION64_PATH=floor_lib, FLOOR_CLOCK="1", FLOOR_SUBSCRIBE="1", FLOOR_COUNT="1")
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{cmd} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return parse_floor_output(done.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--floor-lib", required=True)
    ap.add_argument("--workload", action="append", required=True, metavar="NAME:CMD")
    args = ap.parse_args()
    workloads = []
    for spec in args.workload:
        name, sep, cmd = spec.partition(":")
        if not sep or not name or not cmd.strip():
            ap.error(f"--workload {spec!r}: expected NAME:CMD")
        workloads.append((name, shlex.split(cmd)))
    totals = {"records": 0, "clock": 0, "sub": 0, "uncounted": 0}
    worst_per_record = 0.0
    for name, cmd in workloads:
        report = run_counted(cmd, args.floor_lib)
        clock = sum(t["clock_calls"] for t in report["threads"])
        sub = sum(t["sub_calls"] for t in report["threads"])
        per_record = clock / report["records"] if report["records"] else float("nan")
        print(f"{name}: {report['records']} records ({report['kernels']} kernels, {report['copies']} copies, "
              f"{report['memsets']} memsets) in {report['buffers']} buffers; timestamp callback "
              f"{clock} calls ({per_record:.4f} per record), subscriber callback {sub} calls; "
              f"uncounted {report['uncounted']}", flush=True)
        for t in report["threads"]:
            print(f"  thread {t['name']!r}{' (main)' if t['main'] else ''}: clock_calls={t['clock_calls']} "
                  f"sub_calls={t['sub_calls']}")
        totals["records"] += report["records"]
        totals["clock"] += clock
        totals["uncounted"] += report["uncounted"]
        totals["sub"] += sub
        if report["records"]:
            worst_per_record = max(worst_per_record, per_record)
    print(f"floor_calls workloads={len(workloads)} records={totals['records']} clock_calls={totals['clock']} "
          f"clock_calls_per_record={worst_per_record:.4f} sub_calls={totals['sub']} "
          f"uncounted={totals['uncounted']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
