"""GPUFlow's own cost measured inside one process: ``gpuflow run`` with its per-record work
switched on and off in alternating periods (bench/cost/ab_phases.py), on a real GPU.

Each round runs every workload twice under ``gpuflow run``, in alternating order:

* **ab** — with ``GPUFLOW_AB_PERIOD_MS`` (gpuflow/testing/ab_period.py): in every other period the
  injected library steps over kernel, copy and memset records as the minimal CUPTI collector
  does, so neither it nor the agent does any work for them, and the agent's NVML collector makes
  no NVML call; the program's progress trace gives its per-unit time in the on periods against
  the off ones. That difference is what GPUFlow's per-record work (translation into the ring on
  the flusher thread, the agent's drain, decode and span building) and its NVML polling cost the
  program, each process its own control. NVML polls then all fall in the on periods, at about
  twice their usual density there, so their share is counted up to twice over: the figure errs
  high, never low;
* **aa** — the same, without the variable: nothing alternates, so the same analysis must read
  about 0. It checks the method (a periodic disturbance locked to the periods would show here).

What it does not see: whatever GPUFlow costs the same in both periods — the CUPTI subscriber and
timestamp callback set up once, the flusher's 50 ms wake-ups and its walk over the records it
steps over (the floor walks them too), the agent's idle loop and HTTP server. bench/overhead.py's
side-by-side comparison with the floor includes those; docs/overhead.md reports both.
``--freeze-agent`` takes the whole agent into the alternation: in the ab arm the ``gpuflow run``
process (every agent thread; not the program, which is its child and never waits on it) is
stopped with SIGSTOP for each off period and continued for each on period, so all it does —
idle or not — counts on the on side. What is left outside is only what the injected library
sets up once inside the program.

The period (default 370 ms; gpu-check uses 170) is kept off multiples of the agent's 1 s NVML
poll and 50 ms drain, so neither keeps falling into the same side. Run one A/B at a time on a
machine: every run alternates on the same CLOCK_MONOTONIC grid, so two at once each see the
other's alternation (on a 2-CPU machine, three frozen-agent runs at once moved each other's
controls by up to 10 %).

``--control-every K`` runs the control in every K-th round only (rounds 1, K+1, …): for a
campaign that needs many ab processes once the control has read about 0 run after run.

Usage: python bench/cost/overhead_ab.py --workload NAME=METRIC:CMD... [--rounds 8] [--seconds S]
       [--period-ms 370] [--guard-ms 100] [--freeze-agent] [--control-every K] [--keep-traces DIR]
       [--json-out F]
  e.g. --workload 'storm=per_launch_us:./launch_storm 1000000'
Last line: ``ab_above_off_pct=<worst> ci90=<lo>..<hi> verdict=<v> aa_pct=<x> aa_ci90=<lo>..<hi>
workloads=<n> processes=<k>``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable

from ab_phases import mean_interval, on_vs_off_pct, parse_trace, phase_totals
from overhead_stats import overall, resolved
from workload_run import run_once

BUDGET_PCT = 1.0
ARMS = ("ab", "aa")


def freeze_in_off_periods(period_ms: int) -> Callable[[subprocess.Popen], None]:
    """What ``--freeze-agent`` runs beside ``gpuflow run``: SIGSTOP the agent process (not the
    program, its child) at the start of every odd period and SIGCONT it at every even one, until
    it exits; it is always left running."""
    period_ns = period_ms * 1_000_000

    def freezer(proc: subprocess.Popen) -> None:
        try:
            while proc.poll() is None:
                now = time.monotonic_ns()
                period = now // period_ns
                os.kill(proc.pid, signal.SIGSTOP if period % 2 else signal.SIGCONT)
                deadline = (period + 1) * period_ns
                while proc.poll() is None and time.monotonic_ns() < deadline:
                    time.sleep(min(0.005, max(0.0, (deadline - time.monotonic_ns()) / 1e9)))
        except ProcessLookupError:
            return
        finally:
            try:
                os.kill(proc.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    return freezer


def one_process(arm: str, cmd: list[str], metric: str, period_ms: int, guard_ms: int,
                trace: str, freeze_agent: bool = False) -> dict:
    """Run the workload once under gpuflow run, its progress trace going to ``trace``; its
    on-vs-off figure and what it printed."""
    if os.path.exists(trace):
        os.unlink(trace)
    env = {"PROGRESS_TRACE": trace}
    freezer = None
    if arm == "ab":
        env["GPUFLOW_AB_PERIOD_MS"] = str(period_ms)
        freezer = freeze_in_off_periods(period_ms) if freeze_agent else None
    value, printed = run_once("gpuflow", cmd, metric, floor_lib="", extra_env=env,
                              while_running=freezer)
    try:
        with open(trace) as fh:
            points = parse_trace(fh.read(), source=f"{arm} progress trace")
    except FileNotFoundError:
        raise RuntimeError(f"{cmd[0]} wrote no progress trace: does it honour PROGRESS_TRACE?") from None
    totals = phase_totals(points, period_ms * 1_000_000, guard_ms * 1_000_000)
    return {"pct": on_vs_off_pct(totals), metric: value, "on_intervals": totals["on"][2],
            "off_intervals": totals["off"][2]}


def summarize(values: list[float]) -> dict:
    ci = mean_interval(values)
    return {"pct": statistics.fmean(values) if values else float("nan"), "ci90": list(ci),
            "per_process": values}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", action="append", required=True, metavar="NAME=METRIC:CMD")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=0.0,
                    help="after --rounds, add rounds while a workload is unresolved and time allows")
    ap.add_argument("--period-ms", type=int, default=370)
    ap.add_argument("--guard-ms", type=int, default=100)
    ap.add_argument("--json-out")
    ap.add_argument("--freeze-agent", action="store_true",
                    help="in the ab arm, also SIGSTOP gpuflow's agent in the off periods")
    ap.add_argument("--control-every", type=int, default=1, metavar="K",
                    help="run the control (aa) arm in every K-th round only (default every round): "
                         "more ab processes per hour once the control has shown the method unbiased")
    ap.add_argument("--keep-traces", metavar="DIR",
                    help="keep every process's progress trace here (NAME-ARM-ROUND.txt), to analyse again")
    args = ap.parse_args()
    if not 10 <= args.period_ms <= 60000 or not 0 <= args.guard_ms < args.period_ms:
        ap.error("--period-ms must be 10..60000 (what the library accepts) and --guard-ms below it")
    if args.control_every < 1:
        ap.error("--control-every must be at least 1")
    workloads = []
    for spec in args.workload:
        try:
            name, rest = spec.split("=", 1)
            metric, cmd = rest.split(":", 1)
        except ValueError:
            ap.error(f"--workload {spec!r}: expected NAME=METRIC:CMD")
        workloads.append((name, metric, shlex.split(cmd)))
    started = time.monotonic()
    runs: dict[str, dict[str, list[dict]]] = {w[0]: {a: [] for a in ARMS} for w in workloads}

    def verdicts() -> dict[str, str]:
        return {n: resolved(mean_interval([r["pct"] for r in runs[n]["ab"]]), BUDGET_PCT)
                for n, _, _ in workloads}

    r, longest = 0, 0.0
    if args.keep_traces:
        os.makedirs(args.keep_traces, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gpuflow-ab-") as scratch:
        while r < args.rounds or ("unresolved" in verdicts().values()
                                  and time.monotonic() - started + longest <= args.seconds):
            t0 = time.monotonic()
            order = ARMS if r % 2 == 0 else ARMS[::-1]
            if r % args.control_every:
                order = ("ab",)
            for name, metric, cmd in workloads:
                for arm in order:
                    trace = os.path.join(args.keep_traces or scratch, f"{name}-{arm}-{r + 1}.txt")
                    try:
                        result = one_process(arm, cmd, metric, args.period_ms, args.guard_ms, trace,
                                             args.freeze_agent)
                    except (RuntimeError, ValueError, subprocess.TimeoutExpired) as exc:
                        print(f"overhead_ab: {name} ({arm}): {exc}", file=sys.stderr)
                        return 1
                    runs[name][arm].append(result)
                    print(f"round {r + 1}/{args.rounds}+ {name} {arm} on_vs_off_pct={result['pct']:.3f} "
                          f"{metric}={result[metric]:.6g} intervals={result['on_intervals']}/"
                          f"{result['off_intervals']}", flush=True)
            longest = max(longest, time.monotonic() - t0)
            r += 1
    summary = {}
    print(f"{r} rounds, period {args.period_ms} ms, guard {args.guard_ms} ms"
          f"{', agent frozen in off periods' if args.freeze_agent else ''}; per-unit time with "
          f"GPUFlow's per-record work on vs off, mean over processes, 90 % bootstrap interval")
    worst = None
    for name, metric, cmd in workloads:
        ab = summarize([x["pct"] for x in runs[name]["ab"]])
        aa = summarize([x["pct"] for x in runs[name]["aa"]])
        ab["verdict"] = resolved(tuple(ab["ci90"]), BUDGET_PCT)
        aa["covers_zero"] = aa["ci90"][0] <= 0 <= aa["ci90"][1]
        summary[name] = {"command": [os.path.basename(cmd[0]), *cmd[1:]], "metric": metric,
                         "period_ms": args.period_ms, "guard_ms": args.guard_ms,
                         "freeze_agent": args.freeze_agent, "control_every": args.control_every,
                         "ab": ab, "aa": aa,
                         "runs": runs[name]}
        print(f"{name:<8} ab {ab['pct']:+.3f} % [{ab['ci90'][0]:+.3f}..{ab['ci90'][1]:+.3f}] {ab['verdict']}   "
              f"aa (control) {aa['pct']:+.3f} % [{aa['ci90'][0]:+.3f}..{aa['ci90'][1]:+.3f}]"
              + ("" if aa["covers_zero"] else "  the control moved: this method is biased here"))
        if worst is None or ab["pct"] > summary[worst]["ab"]["pct"]:
            worst = name
    if args.json_out:
        with open(args.json_out, "w") as fh:
            json.dump(summary, fh, indent=1)
    w = summary[worst]
    print(f"ab_above_off_pct={w['ab']['pct']:.3f} ci90={w['ab']['ci90'][0]:.3f}..{w['ab']['ci90'][1]:.3f} "
          f"verdict={overall(s['ab']['verdict'] for s in summary.values())} aa_pct={w['aa']['pct']:.3f} "
          f"aa_ci90={w['aa']['ci90'][0]:.3f}..{w['aa']['ci90'][1]:.3f} workloads={len(workloads)} "
          f"processes={sum(len(s['runs']['ab']) + len(s['runs']['aa']) for s in summary.values())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
