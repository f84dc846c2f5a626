"""Read a fixed-rule A/B campaign: interim until it holds its processes, then its one verdict.

A campaign (docs/overhead.md, "The campaign that settles the torch loop") pools every ab process
of ``bench/cost/overhead_ab.py`` runs with the same parameters over several device calls, and is read
once, when the pool reaches a number of processes fixed before it began. This applies that rule
mechanically, so the reading does not depend on who reads it or when:

* the sources (trace directories or .tar.gz archives, in the order given; within one, by round
  number) give the workload's ab processes in the order they ran; only the first ``--target``
  count;
* fewer than ``--target``: the line says ``interim`` and gives the pool's figure, which decides
  nothing;
* at ``--target``: the mean on-vs-off % over those processes and its 90 % bootstrap interval (the
  same statistic as bench/cost/overhead_ab.py), at ``--guard-ms``; then the same scaled to the bare run
  time by ``--floor-over-bare`` (the A/B compares against the off periods, which run at the
  floor's speed; the issue's figure is a share of the bare time); the verdict against the 1 %
  budget is read from the scaled interval.

Usage: python bench/cost/ab_campaign.py SOURCE... --workload torch --period-ms 170 --guard-ms 60
       --target 50 --floor-over-bare 1.134
Last line: ``campaign workload=<w> processes=<n>/<target> state=<interim|final>
on_vs_off_pct=<x> ci90=<lo>..<hi> overhead_above_floor_pct=<x> bare_ci90=<lo>..<hi>
verdict=<met|missed|unresolved|interim>``.
"""

from __future__ import annotations

import argparse
import statistics

from ab_phases import kept_pct, kept_points, kept_traces, mean_interval
from overhead_stats import resolved

BUDGET_PCT = 1.0


def campaign_reading(values: list[float], target: int, floor_over_bare: float) -> dict:
    """The rule applied to the per-process on-vs-off values, in the order run."""
    counted = values[:target]
    mean = statistics.fmean(counted) if counted else float("nan")
    lo, hi = mean_interval(counted)
    final = len(counted) >= target
    bare = (mean * floor_over_bare, lo * floor_over_bare, hi * floor_over_bare)
    return {"processes": len(counted), "target": target, "state": "final" if final else "interim",
            "on_vs_off_pct": mean, "ci90": (lo, hi), "bare_pct": bare[0], "bare_ci90": (bare[1], bare[2]),
            "verdict": resolved((bare[1], bare[2]), BUDGET_PCT) if final else "interim"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sources", nargs="+", metavar="DIR_OR_TAR_GZ")
    ap.add_argument("--workload", required=True)
    ap.add_argument("--period-ms", type=int, required=True)
    ap.add_argument("--guard-ms", type=int, required=True)
    ap.add_argument("--target", type=int, required=True, help="ab processes the rule reads at")
    ap.add_argument("--floor-over-bare", type=float, required=True,
                    help="the floor's run time over the bare one, fixed with the rule")
    args = ap.parse_args()
    if args.target < 5:
        ap.error("--target must be at least 5 (fewer give no interval)")
    if not args.floor_over_bare >= 1.0:
        ap.error("--floor-over-bare must be at least 1 (the floor is never faster than bare)")
    if not 0 <= args.guard_ms < args.period_ms:
        ap.error("--guard-ms must be below --period-ms")
    ran: list[tuple[int, int, float]] = []   # (source, round, value): the order they ran
    for index, source in enumerate(args.sources):
        for name, arm, round_number, where, text in kept_traces(source):
            if name != args.workload or arm != "ab":
                continue
            ran.append((index, round_number,
                        kept_pct(where, kept_points(where, text), args.period_ms, args.guard_ms)))
    values = [value for _, _, value in sorted(ran)]
    if not values:
        raise SystemExit(f"no {args.workload}-ab-N.txt traces in {', '.join(args.sources)}")
    r = campaign_reading(values, args.target, args.floor_over_bare)
    if len(values) > args.target:
        print(f"{len(values) - args.target} processes past the target are not counted")
    print(f"campaign workload={args.workload} processes={r['processes']}/{r['target']} state={r['state']} "
          f"on_vs_off_pct={r['on_vs_off_pct']:.3f} ci90={r['ci90'][0]:.3f}..{r['ci90'][1]:.3f} "
          f"overhead_above_floor_pct={r['bare_pct']:.3f} bare_ci90={r['bare_ci90'][0]:.3f}..{r['bare_ci90'][1]:.3f} "
          f"verdict={r['verdict']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
