"""What ``gpuflow run`` costs the observed program, side by side in one run, on a real GPU.

Three modes per workload, interleaved round by round (machines drift; interleaving spreads the
drift over all three): **bare** (no injection), **floor** (bench/cost/cupti_floor.c: the minimal
CUPTI collector — same activity kinds, records only counted), **gpuflow** (``gpuflow run``).
Each workload reports its own timed region (after warm-up), so CUDA/CUPTI start-up is not in the
numbers; a workload that prints no metric is timed by process wall clock (said in the table).

overhead_above_floor_pct = (median gpuflow − median floor) / median bare × 100 — GPUFlow's own cost
on top of what CUPTI itself costs. Each workload also gets a 90 % bootstrap interval over rounds
and a verdict against the 1 % budget (``met``, ``missed``, ``unresolved``:
bench/cost/overhead_stats.py); the last line reports the worst workload and the verdict over all
of them. Each run goes through bench/cost/workload_run.py, the runner the cost benchmarks share.

``--seconds S``: after ``--rounds`` rounds, keep adding rounds while some workload is
``unresolved`` and another round fits in S seconds (from the start): noisy workloads get the
rounds they need, within a device call's time.

``--pin``: the program runs on the first half of the CPUs this process may use and gpuflow's
agent on the other half; ``--pin 2,3`` gives the program CPUs 2 and 3 and the agent the rest.
In every mode the program is started through the same small exec shim that sets its affinity,
so it does not migrate across every CPU (less noise); the program's own threads, GPUFlow's
injected ones included, share its CPUs, while the agent's CPU time is left out of the figure
(say so when quoting it). Tried on the H200 with halves (the torch loop, confined to 8 CPUs,
got slower and no steadier) and with 2 CPUs (no steadier either).

An unresolved workload gets a forecast of the rounds it would need; more than one call holds
are gathered by pooling several runs' ``--json-out`` files with bench/cost/overhead_pool.py.

``--no-aslr``: the program starts (in every mode, through the same shim; gpuflow's agent is left
as it is) with address-space randomisation off, so every process of it has the same layout
(bench/cost/spread_probe.py measures whether that makes processes' speeds agree).

Usage: python bench/overhead.py --floor-lib libcupti_floor.so --workload NAME=METRIC:CMD... [--rounds 5]
       [--seconds S] [--pin [CPUS]] [--no-aslr]
  e.g. --workload 'storm=per_launch_us:./launch_storm 200000'
       --workload 'torch=timed_s:python3 bench/workloads/torch_train.py --steps 40'
       --workload 'demo=wall:./demo_workload 200'
Last line: ``overhead_above_floor_pct=<z> floor_pct=<f> workloads=<n> ci90=<lo>..<hi> verdict=<v>``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import time

# the machinery this side-by-side comparison shares with the other cost benchmarks lives in
# bench/cost/, a package of this script's own folder
from cost.overhead_stats import MODES, above_floor_pct, forecast, interval, overall, resolved
from cost.workload_run import run_once

BUDGET_PCT = 1.0


def cpu_split(spec: str) -> tuple[set[int], set[int]]:
    """(program CPUs, agent CPUs) from ``--pin``: "halves", or the program's list ("2,3", "4-7")."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("--pin needs at least two CPUs")
    if spec == "halves":
        half = len(cpus) // 2
        return set(cpus[:half]), set(cpus[half:])
    program: set[int] = set()
    try:
        for part in spec.split(","):
            lo, _, hi = part.partition("-")
            program.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise SystemExit(f"--pin {spec!r}: expected CPUs like 2,3 or 4-7") from None
    if not program <= set(cpus) or program == set(cpus):
        raise SystemExit(f"--pin {spec!r}: the program needs some of the CPUs {cpus}, not all")
    return program, set(cpus) - program


def other_metrics(metric: str, printed: dict[str, list[dict[str, float]]]) -> dict[str, dict]:
    """The same estimate and verdict for every other number all runs printed and that varies
    (``launches=500000`` does not), e.g. a workload's median-of-segments beside its total."""
    runs = [r for mode in MODES for r in printed[mode]]
    # wall time is not one: gpuflow's includes its agent's start and stop
    names = set.intersection(*(set(r) for r in runs)) - {metric, "wall"} if runs else set()
    out = {}
    for other in sorted(names):
        if len({r[other] for r in runs}) < 2 or any(r[other] <= 0 for r in runs):
            continue
        values = {m: [r[other] for r in printed[m]] for m in MODES}
        ci = interval(values)
        out[other] = {"runs": values, "above_floor_pct": above_floor_pct(values), "ci90": list(ci),
                      "verdict": resolved(ci, BUDGET_PCT)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--floor-lib", required=True)
    ap.add_argument("--workload", action="append", required=True, metavar="NAME=METRIC:CMD")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json-out")
    ap.add_argument("--seconds", type=float, default=0.0,
                    help="after --rounds, add rounds while a workload is unresolved and time allows")
    ap.add_argument("--pin", nargs="?", const="halves", metavar="CPUS",
                    help="the program on these CPUs (default: half of them), gpuflow's agent on the rest")
    ap.add_argument("--no-aslr", action="store_true",
                    help="start the program (in every mode; not gpuflow's agent) with address-space "
                         "randomisation off")
    args = ap.parse_args()
    started = time.monotonic()
    pin = cpu_split(args.pin) if args.pin else None
    if pin is not None:
        print(f"pinned: program on CPUs {sorted(pin[0])}, agent on {sorted(pin[1])}", flush=True)
    if args.no_aslr:
        print("address-space randomisation off for the program in every mode", flush=True)
    workloads = []
    for spec in args.workload:
        name, rest = spec.split("=", 1)
        metric, cmd = rest.split(":", 1)
        workloads.append((name, metric, shlex.split(cmd)))
    results: dict[str, dict[str, list[float]]] = {w[0]: {m: [] for m in MODES} for w in workloads}
    #: per workload, per run in order: everything the run printed (and its wall time)
    printed: dict[str, dict[str, list[dict[str, float]]]] = {w[0]: {m: [] for m in MODES} for w in workloads}
    for name, metric, cmd in workloads:  # one untimed warm-up of each mode (disk cache, JIT caches)
        for mode in MODES:
            run_once(mode, cmd, metric, args.floor_lib, pin, no_aslr=args.no_aslr)
    def verdicts() -> dict[str, str]:
        return {name: resolved(interval(results[name]), BUDGET_PCT) for name, _, _ in workloads}

    r = 0
    longest = 0.0
    while r < args.rounds or (
            "unresolved" in verdicts().values()
            and time.monotonic() - started + longest <= args.seconds):
        t0 = time.monotonic()
        order = MODES[r % 3:] + MODES[:r % 3]
        for name, metric, cmd in workloads:
            for mode in order:
                value, everything = run_once(mode, cmd, metric, args.floor_lib, pin, no_aslr=args.no_aslr)
                results[name][mode].append(value)
                printed[name][mode].append(everything)
                # progress as it comes, so a run stopped by a time limit still leaves its numbers
                print(f"round {r + 1}/{args.rounds}+ {name} {mode} {metric}={value:.6g}", flush=True)
        longest = max(longest, time.monotonic() - t0)
        r += 1
    worst_pct, worst_floor, worst_ci = float("-inf"), 0.0, (0.0, 0.0)
    summary = {}
    print(f"{r} rounds; above floor: median-of-modes estimate, 90 % bootstrap interval over rounds, "
          f"verdict against {BUDGET_PCT:g} %")
    print(f"{'workload':<10} {'metric':<14} {'bare':>12} {'floor':>12} {'gpuflow':>12} "
          f"{'floor %':>8} {'gpuflow %':>9} {'above floor %':>13} {'90 % interval':>17} verdict")
    for name, metric, cmd in workloads:
        med = {m: statistics.median(results[name][m]) for m in MODES}
        floor_pct = (med["floor"] - med["bare"]) / med["bare"] * 100
        total_pct = (med["gpuflow"] - med["bare"]) / med["bare"] * 100
        above = above_floor_pct(results[name])
        ci = interval(results[name])
        verdict = resolved(ci, BUDGET_PCT)
        spread = {m: (min(results[name][m]), max(results[name][m])) for m in MODES}
        # the command without its directory (a temporary build folder), marked when it ran with
        # randomisation off: bench/cost/overhead_pool.py refuses to pool runs of different commands
        command = (["no-aslr:"] if args.no_aslr else []) + [os.path.basename(cmd[0]), *cmd[1:]]
        summary[name] = {"metric": metric, "command": command,
                         "median": med, "runs": results[name], "floor_pct": floor_pct,
                         "gpuflow_pct": total_pct, "above_floor_pct": above, "ci90": list(ci),
                         "verdict": verdict}
        print(f"{name:<10} {metric:<14} {med['bare']:>12.4f} {med['floor']:>12.4f} {med['gpuflow']:>12.4f} "
              f"{floor_pct:>8.1f} {total_pct:>9.1f} {above:>13.2f} {ci[0]:>8.2f}..{ci[1]:<7.2f} {verdict}")
        print(f"{'':<10} {'min..max':<14} " + " ".join(f"{lo:>5.4g}..{hi:<5.4g}" for lo, hi in spread.values()))
        need = forecast(r, above, ci, BUDGET_PCT)
        if need:   # more than one call holds: pool calls with bench/cost/overhead_pool.py
            print(f"{'':<10} {need}")
        summary[name]["other_metrics"] = other_metrics(metric, printed[name])
        for other, o in summary[name]["other_metrics"].items():
            print(f"{'':<10} also {other}: above floor {o['above_floor_pct']:.2f} % "
                  f"[{o['ci90'][0]:.2f}..{o['ci90'][1]:.2f}] {o['verdict']}")
        if above > worst_pct:
            worst_pct, worst_floor, worst_ci = above, floor_pct, ci
    if args.json_out:
        with open(args.json_out, "w") as fh:
            json.dump(summary, fh, indent=1)
    print(f"overhead_above_floor_pct={worst_pct:.2f} floor_pct={worst_floor:.1f} workloads={len(workloads)} "
          f"ci90={worst_ci[0]:.2f}..{worst_ci[1]:.2f} verdict={overall(v['verdict'] for v in summary.values())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
