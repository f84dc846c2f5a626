"""Pool the rounds of several bench/overhead.py runs into one estimate, interval and verdict.

One device call holds about ten rounds, and on the lent H200 machines single runs of the launch
storm and the PyTorch loop spread by ±6–15 % from one process to the next, so one call cannot
place GPUFlow's cost above the floor to within the 1 % budget. Rounds from several calls can:
each run's values are divided by its own bare median (the machines' speeds differ by up to a
third), rounds are kept whole (a round's three modes ran side by side), and the pooled rounds
get bench/cost/overhead_stats.py's estimate, 90 % bootstrap interval and verdict, plus a forecast of
the rounds an unresolved workload still needs. Say which runs were pooled and why when quoting
the result: choose them before looking at their numbers (e.g. "every unpinned run of this
library"), never by their estimates.

Usage: python bench/cost/overhead_pool.py RUN.json... [--workload NAME]...
  RUN.json: a ``bench/overhead.py --json-out`` file (``scripts/gpu-check`` leaves overhead.json).
Last line: ``pooled_overhead_above_floor_pct=<z> runs=<files> workloads=<n> ci90=<lo>..<hi>
verdict=<met|missed|unresolved>`` (the worst workload, as bench/overhead.py's last line).

Constraints: pure Python, standard library only (runs on the GPU machine or anywhere else).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from overhead_stats import MODES, above_floor_pct, forecast, interval, overall, resolved

BUDGET_PCT = 1.0


class PoolError(Exception):
    """A run file that cannot be pooled: unreadable, not overhead.py's, or inconsistent."""


def load_runs(path: str) -> dict[str, tuple]:
    """{workload: (metric, {mode: values in round order}, command or None)} from one
    overhead.py JSON file (files written before the command was recorded have none)."""
    try:
        with open(path) as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise PoolError(f"{path}: cannot read it as JSON ({exc})") from None
    if not isinstance(data, dict) or not data:
        raise PoolError(f"{path}: not a bench/overhead.py --json-out file (expected workloads)")
    out = {}
    for name, entry in data.items():
        runs = entry.get("runs") if isinstance(entry, dict) else None
        if not isinstance(runs, dict) or any(
                not isinstance(runs.get(m), list) or not runs[m] for m in MODES):
            raise PoolError(f"{path}: workload {name!r} lacks runs for {', '.join(MODES)}")
        try:
            values = {m: [float(v) for v in runs[m]] for m in MODES}
        except (TypeError, ValueError):
            raise PoolError(f"{path}: workload {name!r} has a run that is not a number") from None
        if any(v <= 0 for m in MODES for v in values[m]):
            raise PoolError(f"{path}: workload {name!r} has a run that is not a positive time")
        out[name] = (str(entry.get("metric", "?")), values, entry.get("command"))
    return out


def pool(files: list[dict[str, tuple]], workload: str) -> dict[str, list[float]]:
    """The workload's whole rounds from every file that has it, each file divided by its own
    bare median. A run cut short mid-round contributes its complete rounds only."""
    pooled: dict[str, list[float]] = {m: [] for m in MODES}
    for runs in files:
        if workload not in runs:
            continue
        values = runs[workload][1]
        complete = min(len(values[m]) for m in MODES)
        scale = statistics.median(values["bare"][:complete])
        for m in MODES:
            pooled[m] += [v / scale for v in values[m][:complete]]
    return pooled


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", metavar="RUN.json", help="bench/overhead.py --json-out files")
    ap.add_argument("--workload", action="append", help="pool only these (default: every one found)")
    args = ap.parse_args(argv)
    try:
        files = [load_runs(p) for p in args.runs]
    except PoolError as exc:
        print(f"overhead_pool: {exc}", file=sys.stderr)
        return 2
    found: list[str] = []   # in the order the runs list them
    for f in files:
        found += [w for w in f if w not in found]
    names = args.workload or found
    missing = [w for w in names if w not in found]
    if missing:
        print(f"overhead_pool: no run has workload {', '.join(missing)} (found: {', '.join(found)})",
              file=sys.stderr)
        return 2
    metrics = {w: {f[w][0] for f in files if w in f} for w in names}
    mixed = [w for w, m in metrics.items() if len(m) > 1]
    if mixed:
        print(f"overhead_pool: workload {mixed[0]} was timed by different metrics "
              f"({', '.join(sorted(metrics[mixed[0]]))}); pool like with like", file=sys.stderr)
        return 2
    commands = {w: {tuple(f[w][2]) for f in files if w in f and f[w][2]} for w in names}
    differing = [w for w, c in commands.items() if len(c) > 1]
    if differing:
        print(f"overhead_pool: workload {differing[0]} ran different commands "
              f"({'; '.join(' '.join(c) for c in sorted(commands[differing[0]]))}); pool like with like",
              file=sys.stderr)
        return 2
    print(f"{len(args.runs)} runs pooled; each divided by its own bare median; verdict against {BUDGET_PCT:g} %")
    print(f"{'workload':<10} {'metric':<14} {'runs':>4} {'rounds':>6} {'floor %':>8} {'above floor %':>13} "
          f"{'90 % interval':>17} verdict")
    worst = (float("-inf"), (0.0, 0.0))
    verdicts = set()
    for name in names:
        rounds = pool(files, name)
        n = len(rounds["bare"])
        med = {m: statistics.median(rounds[m]) for m in MODES}
        floor_pct = (med["floor"] - med["bare"]) / med["bare"] * 100
        above = above_floor_pct(rounds)
        ci = interval(rounds)
        verdict = resolved(ci, BUDGET_PCT)
        verdicts.add(verdict)
        used = sum(1 for f in files if name in f)
        print(f"{name:<10} {next(iter(metrics[name])):<14} {used:>4} {n:>6} {floor_pct:>8.1f} {above:>13.2f} "
              f"{ci[0]:>8.2f}..{ci[1]:<7.2f} {verdict}")
        if verdict == "unresolved":
            print(f"{'':<10} " + (forecast(n, above, ci, BUDGET_PCT)
                                  or "no forecast: too few rounds, or the estimate sits on the budget"))
        if above > worst[0]:
            worst = (above, ci)
    print(f"pooled_overhead_above_floor_pct={worst[0]:.2f} runs={len(args.runs)} workloads={len(names)} "
          f"ci90={worst[1][0]:.2f}..{worst[1][1]:.2f} verdict={overall(verdicts)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
