"""bench/history.py runs end to end on the fake backend (a few ticks, a short day, two answers)
and its last line has the documented form, with figures that agree with each other."""

from __future__ import annotations

import re

import history as bench  # bench/history.py, on pytest's pythonpath

from gpuflow.collectors.nvml.history import HistoryBudget

LAST = re.compile(r"tick_on_ms=(\S+) tick_off_ms=(\S+) ratio=(\S+) extra_us_per_gpu=(\S+) "
                  r"bytes_hour=(\d+) bytes_day=(\d+) answer_hour_p50_ms=(\S+) answer_hour_p95_ms=(\S+)")


def test_the_bench_runs_and_its_last_line_parses(capsys):
    assert bench.main(["--fake", "single", "--ticks", "130", "--day-ticks", "200",
                       "--answers", "3"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith("FAKE backend")
    match = LAST.fullmatch(out[-1])
    assert match, out[-1]
    on, off, ratio = (float(match.group(i)) for i in (1, 2, 3))
    # the ratio is of the unrounded means; each mean is printed to 4 decimals, the ratio to 3
    rounding = ratio * (0.00005 / on + 0.00005 / off) + 0.0005
    assert on > 0 and off > 0 and abs(ratio - on / off) <= rounding * 1.01
    hour, day = int(match.group(5)), int(match.group(6))
    assert 0 < hour <= day <= HistoryBudget(interval_s=1.0).nbytes(8)
    assert 0 < float(match.group(7)) <= float(match.group(8))
