"""How sure an overhead figure is: the estimate bench/overhead.py reports, and its uncertainty.

The estimate is GPUFlow's cost above the minimal-CUPTI floor, from the medians of each mode's
runs: ``(median gpuflow − median floor) / median bare × 100``. On the lent H200 machines single
runs of the launch storm and the PyTorch loop spread by ±10–20 % from one process to the next,
so four runs of the same script gave that figure anywhere from −20 % to +9 % for the same
library; a point estimate alone cannot say whether 1 % was met. :func:`interval` gives a
percentile bootstrap interval over *rounds* (a round's three runs are resampled together, which
keeps the interleaving that spreads slow drift over all three modes), and :func:`resolved`
says whether that interval settles the budget either way.

Constraints: pure Python (runs on the GPU machine with nothing installed), deterministic for a
given seed, cheap enough to recompute after every round.
"""

from __future__ import annotations

import math
import random
import statistics
from typing import Mapping, Sequence

MODES = ("bare", "floor", "gpuflow")
#: below this many rounds a bootstrap interval is too narrow to trust: none is given
MIN_ROUNDS = 5


def above_floor_pct(runs: Mapping[str, Sequence[float]]) -> float:
    """GPUFlow's cost above the floor, in % of the bare median."""
    med = {m: statistics.median(runs[m]) for m in MODES}
    return (med["gpuflow"] - med["floor"]) / med["bare"] * 100


def interval(runs: Mapping[str, Sequence[float]], level: float = 0.90, resamples: int = 2000,
             seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of :func:`above_floor_pct`, resampling whole rounds
    (unbounded below :data:`MIN_ROUNDS` rounds)."""
    n = min(len(runs[m]) for m in MODES)
    if n < MIN_ROUNDS:
        return float("-inf"), float("inf")
    rng = random.Random(seed)
    stats = []
    for _ in range(resamples):
        pick = [rng.randrange(n) for _ in range(n)]
        stats.append(above_floor_pct({m: [runs[m][i] for i in pick] for m in MODES}))
    return percentile_bounds(sorted(stats), level)


def percentile_bounds(sorted_stats: Sequence[float], level: float) -> tuple[float, float]:
    """The two-sided ``level`` percentile interval of bootstrap statistics already sorted (the
    pick every interval in bench/ uses, so their figures compare)."""
    tail = (1 - level) / 2
    last = len(sorted_stats) - 1
    return sorted_stats[int(tail * last)], sorted_stats[int(round((1 - tail) * last))]


def resolved(ci: tuple[float, float], budget_pct: float) -> str:
    """``met`` when the whole interval is within the budget, ``missed`` when it is all above,
    ``unresolved`` when the budget lies inside it (more rounds, or a quieter machine, needed)."""
    lo, hi = ci
    if hi <= budget_pct:
        return "met"
    if lo > budget_pct:
        return "missed"
    return "unresolved"


def overall(verdicts) -> str:
    """The verdict over several workloads: ``missed`` if any missed, else ``unresolved`` if any
    is, else ``met``."""
    found = set(verdicts)
    return "missed" if "missed" in found else "unresolved" if "unresolved" in found else "met"


def rounds_to_resolve(rounds: int, estimate: float, ci: tuple[float, float],
                      budget_pct: float) -> int | None:
    """About how many rounds an unresolved figure needs: the interval narrows as 1/sqrt(rounds),
    so it stops containing the budget once its half-width falls below the estimate's distance
    from it. A forecast, not a promise: it assumes the estimate stays where it is. ``rounds``
    when already resolved, None when it cannot say (no interval yet, or the estimate sits on
    the budget)."""
    lo, hi = ci
    if resolved(ci, budget_pct) != "unresolved":
        return rounds
    gap = abs(estimate - budget_pct)
    if not (math.isfinite(lo) and math.isfinite(hi)) or gap == 0:
        return None
    return math.ceil(rounds * ((hi - lo) / 2 / gap) ** 2)


def forecast(rounds: int, estimate: float, ci: tuple[float, float], budget_pct: float) -> str | None:
    """The line the benches print under an unresolved figure (:func:`rounds_to_resolve`), or
    None when it is resolved or there is no forecast to give."""
    if resolved(ci, budget_pct) != "unresolved":
        return None
    need = rounds_to_resolve(rounds, estimate, ci, budget_pct)
    return f"about {need} rounds in all would resolve it at this spread, if the estimate held" if need else None
