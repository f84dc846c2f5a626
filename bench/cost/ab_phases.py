"""In-process A/B: how fast a program ran while GPUFlow's per-record work was on, and while off.

On the lent H200 machines two processes of the same program differ in speed by 6–15 %, and a
process keeps its speed for its whole life (docs/overhead.md): a side-by-side comparison of
separate processes needs hundreds of rounds to resolve 1 %. Under ``GPUFLOW_AB_PERIOD_MS=P`` the
injected library cuts CLOCK_MONOTONIC into periods of P ms and, in the odd ones, steps over
kernel, copy and memset records the way the minimal CUPTI collector does (cupti_src/activity.c),
so the agent has nothing of them to drain either. A program that writes a *progress trace* — one
line ``<CLOCK_MONOTONIC ns> <units done>`` at its start and after every unit of work
(bench/workloads: launch_storm per batch of launches, torch_train per step) — is then measured
against itself: per-unit time in the even (on) periods against the odd (off) ones.

Each interval between two trace points counts for a period only if it lies wholly inside it and
starts at least ``guard`` after the period began: work queued in the previous period (the flusher
translates up to one flush period late; the agent drains 50 ms late) stays out of both sides.

Run as a script, it analyses kept traces again (``bench/cost/overhead_ab.py --keep-traces``) with other
guards, to show a figure does not hang on the guard chosen before the run:
``python bench/cost/ab_phases.py DIR --period-ms 170 --guards 0,30,60,100``. Several sources (trace
directories, or .tar.gz archives of one, as measurements/ keeps them) pool their processes:
runs with the same parameters, decided before their numbers were read.

Constraints: pure Python (runs on the GPU machine with nothing installed); a malformed trace is
an error naming the line, never a silently wrong figure.
"""

from __future__ import annotations

import argparse
import glob
import os
import random
import re
import statistics
import tarfile
from typing import Iterator, Sequence

from overhead_stats import percentile_bounds

#: fewer processes than this: no interval (a bootstrap over 2-4 values is not one)
MIN_PROCESSES = 5


def parse_trace(text: str, source: str = "trace") -> list[tuple[int, float]]:
    """(ns, units done) points; times strictly increasing, units never decreasing."""
    points: list[tuple[int, float]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split()
        try:
            if len(fields) != 2:
                raise ValueError
            ns, units = int(fields[0]), float(fields[1])
        except ValueError:
            raise ValueError(f"{source}:{number}: expected '<ns> <units>', got {line!r}") from None
        if points and (ns <= points[-1][0] or units < points[-1][1]):
            raise ValueError(f"{source}:{number}: time must increase and units must not decrease")
        points.append((ns, units))
    if len(points) < 2:
        raise ValueError(f"{source}: fewer than two progress points")
    return points


def phase_totals(points: Sequence[tuple[int, float]], period_ns: int,
                 guard_ns: int) -> dict[str, tuple[float, float, int]]:
    """Per side (``on``: even periods, ``off``: odd): (seconds, units, intervals) counted."""
    if period_ns <= 0 or not 0 <= guard_ns < period_ns:
        raise ValueError("need period > 0 and 0 <= guard < period")
    totals = {"on": [0.0, 0.0, 0], "off": [0.0, 0.0, 0]}
    for (t0, u0), (t1, u1) in zip(points, points[1:]):
        period = t0 // period_ns
        if t1 // period_ns != period or t0 - period * period_ns < guard_ns:
            continue
        side = totals["off" if period % 2 else "on"]
        side[0] += (t1 - t0) / 1e9
        side[1] += u1 - u0
        side[2] += 1
    return {k: (v[0], v[1], v[2]) for k, v in totals.items()}


def on_vs_off_pct(totals: dict[str, tuple[float, float, int]]) -> float:
    """Time per unit of work in the on periods above the off ones, in % of the off periods."""
    (on_s, on_units, _), (off_s, off_units, _) = totals["on"], totals["off"]
    if on_units <= 0 or off_units <= 0:
        raise ValueError("the run left no whole interval in an on or an off period: run it longer "
                         "than a few periods, or with a longer period")
    return ((on_s / on_units) / (off_s / off_units) - 1) * 100


def mean_interval(values: Sequence[float], level: float = 0.90, resamples: int = 2000,
                  seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean over processes (unbounded below
    :data:`MIN_PROCESSES`)."""
    n = len(values)
    if n < MIN_PROCESSES:
        return float("-inf"), float("inf")
    rng = random.Random(seed)
    return percentile_bounds(sorted(statistics.fmean(rng.choices(values, k=n)) for _ in range(resamples)),
                             level)


_TRACE_NAME = re.compile(r"^(.+)-([a-z]+)-(\d+)\.txt$")


def kept_traces(source: str) -> Iterator[tuple[str, str, int, str, str]]:
    """(workload, arm, round, where, text) for every NAME-ARM-ROUND.txt trace in a directory or
    in a .tar.gz archive of one, in file-name order."""
    if os.path.isfile(source) and source.endswith((".tar.gz", ".tgz")):
        with tarfile.open(source) as archive:
            for member in sorted(archive.getmembers(), key=lambda m: m.name):
                match = _TRACE_NAME.match(os.path.basename(member.name))
                if member.isfile() and match:
                    text = archive.extractfile(member).read().decode()
                    yield match[1], match[2], int(match[3]), f"{source}:{member.name}", text
        return
    for path in sorted(glob.glob(os.path.join(source, "*-*-*.txt"))):
        match = _TRACE_NAME.match(os.path.basename(path))
        if match:
            with open(path) as fh:
                yield match[1], match[2], int(match[3]), path, fh.read()


def kept_points(where: str, text: str) -> list[tuple[int, float]]:
    """:func:`parse_trace` for a command line: a malformed trace ends it, naming the trace and line."""
    try:
        return parse_trace(text, source=where)
    except ValueError as error:
        raise SystemExit(str(error)) from None


def kept_pct(where: str, points: list[tuple[int, float]], period_ms: int, guard_ms: int) -> float:
    """One process's on-vs-off % for a command line: a trace too short for the period and guard
    ends it, naming the trace."""
    try:
        return on_vs_off_pct(phase_totals(points, period_ms * 1_000_000, guard_ms * 1_000_000))
    except ValueError as error:
        raise SystemExit(f"{where}: {error}") from None


def main() -> int:
    ap = argparse.ArgumentParser(description="analyse kept progress traces (NAME-ARM-ROUND.txt) again")
    ap.add_argument("sources", nargs="+", metavar="DIR_OR_TAR_GZ",
                    help="trace directories or .tar.gz archives of one; several pool their processes")
    ap.add_argument("--period-ms", type=int, required=True, help="the period the runs used")
    ap.add_argument("--guards", default="0,30,60,100", help="guards to try, in ms")
    ap.add_argument("--only", help="this workload's traces only")
    args = ap.parse_args()
    groups: dict[tuple[str, str], list[tuple[str, list[tuple[int, float]]]]] = {}
    for source in args.sources:
        for name, arm, _, where, text in kept_traces(source):
            if args.only is None or name == args.only:
                groups.setdefault((name, arm), []).append((where, kept_points(where, text)))
    if not groups:
        raise SystemExit(f"no NAME-ARM-ROUND.txt traces{' of ' + args.only if args.only else ''} in "
                         f"{', '.join(args.sources)}")
    guards = [int(g) for g in args.guards.split(",")]
    print(f"period {args.period_ms} ms; mean on-vs-off % over processes [90 % interval], per guard")
    for (name, arm), traces in sorted(groups.items()):
        cells = []
        for guard in guards:
            if guard >= args.period_ms:
                continue
            values = [kept_pct(where, points, args.period_ms, guard) for where, points in traces]
            lo, hi = mean_interval(values)
            cells.append(f"guard {guard} ms: {statistics.fmean(values):+.2f} [{lo:+.2f}..{hi:+.2f}]")
        print(f"{name:<8} {arm} ({len(traces)} processes)  " + "   ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
