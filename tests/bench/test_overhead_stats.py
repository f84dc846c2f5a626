"""bench/cost/overhead_stats.py and bench/overhead.py's verdict: an interval that settles the 1 %
budget only when the runs do, and a last line gpu-check can parse. The bench itself runs real
``gpuflow run`` processes (a workload that prints its own metric stands in for a CUDA program)."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from overhead_stats import MIN_ROUNDS, above_floor_pct, interval, resolved

pytestmark = pytest.mark.serial   # times a run: alone, after the parallel pass

ROOT = Path(__file__).resolve().parents[2]


def rounds(n: int, floor: float, gpuflow: float, noise: float, seed: int = 1, drift: float = 0.0):
    rng = random.Random(seed)
    runs = {"bare": [], "floor": [], "gpuflow": []}
    for r in range(n):
        shared = 1 + drift * rng.uniform(-1, 1)   # a slow machine for the whole round
        for mode, level in (("bare", 100.0), ("floor", floor), ("gpuflow", gpuflow)):
            runs[mode].append(level * shared * (1 + noise * rng.uniform(-1, 1)))
    return runs


def test_quiet_runs_at_the_floor_meet_the_budget_and_quiet_runs_above_it_miss():
    assert resolved(interval(rounds(9, 110, 110.2, 0.001)), 1.0) == "met"
    assert resolved(interval(rounds(9, 110, 113, 0.001)), 1.0) == "missed"


def test_noisy_runs_leave_it_unresolved_whatever_the_point_estimate_says():
    runs = rounds(7, 110, 110, 0.15)
    assert resolved(interval(runs), 1.0) == "unresolved"
    assert abs(above_floor_pct(runs)) < 30


def test_too_few_rounds_give_no_interval():
    lo, hi = interval(rounds(MIN_ROUNDS - 1, 110, 110, 0.0001))
    assert lo == float("-inf") and hi == float("inf")


def test_the_interval_is_reproducible_and_contains_the_estimate():
    runs = rounds(11, 110, 111, 0.02)
    assert interval(runs, seed=3) == interval(runs, seed=3)
    lo, hi = interval(runs)
    assert lo <= above_floor_pct(runs) <= hi


def test_drift_shared_by_a_round_widens_the_interval_less_than_independent_noise():
    drifted = interval(rounds(15, 110, 110, 0.002, drift=0.10))
    noisy = interval(rounds(15, 110, 110, 0.10))
    assert drifted[1] - drifted[0] < noisy[1] - noisy[0]


def run_bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "bench" / "overhead.py"), "--floor-lib", "/nonexistent.so",
                           *args], capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_the_bench_keeps_adding_rounds_while_unresolved_and_ends_with_the_verdict(tmp_path):
    # x is noisy, y (another measure of the same runs) is steady, n never changes
    noisy = ("w=x:" + sys.executable + " -c \"import random; "
             "print('x=%f y=%f n=5' % (random.uniform(1, 2), random.uniform(1, 1.0001)))\"")
    out = run_bench("--rounds", "1", "--seconds", "15", "--workload", noisy, "--json-out", str(tmp_path / "o.json"))
    assert out.returncode == 0, out.stderr
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("overhead_above_floor_pct=") and " ci90=" in last and " verdict=" in last
    rounds_run = int(out.stdout.split(" rounds;")[0].split("\n")[-1])
    # below MIN_ROUNDS there is no interval, so it is unresolved: --seconds bought those rounds
    assert rounds_run >= MIN_ROUNDS
    assert "also n:" not in out.stdout and "also wall" not in out.stdout
    assert out.stdout.split("also y: ")[1].split("\n")[0].endswith(" met")
    import json
    saved = json.loads((tmp_path / "o.json").read_text())["w"]
    assert set(saved["other_metrics"]) == {"y"} and len(saved["runs"]["gpuflow"]) == rounds_run
    # the command without its directory, so bench/cost/overhead_pool.py can refuse unlike runs
    assert saved["command"][0] == Path(sys.executable).name and saved["command"][1] == "-c"


@pytest.mark.parametrize("spec, message", [("abc", "expected CPUs"), ("0-4095", "not all")])
def test_a_bad_pin_is_a_clear_error(spec, message):
    out = run_bench("--pin", spec, "--workload", "w=wall:true")
    assert out.returncode != 0 and message in out.stderr
