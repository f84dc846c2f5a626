"""bench/nvml_tick.py runs against the fake backend, with and without --gpm, and ends with the line
the GPU check parses; with --gpm the collector and the floor both take a GPM pair every tick, with
GRAPHICS_UTIL at the same cadence (at most every 10 s), and a line times ticks that evaluate it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAST = re.compile(r"^tick_ms=(\d+\.\d{4}) floor_ms=(\d+\.\d{4}) ratio=(\d+\.\d{3})$")


@pytest.mark.parametrize("gpm", [False, True])
def test_the_benchmark_runs_on_the_fake_and_ends_with_its_line(gpm):
    args = [sys.executable, str(ROOT / "bench" / "nvml_tick.py"), "--fake", "shared8", "--reps", "20",
            "--sweeps", "2"] + (["--gpm"] if gpm else [])
    out = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    m = LAST.match(lines[-1])
    assert m and float(m.group(1)) > 0 and float(m.group(2)) > 0, lines[-1]
    gpm_line = next(line for line in lines if line.startswith("GPM: "))
    if gpm:
        assert gpm_line == "GPM: a pair every tick; 7 of 8 GPU(s) support it (+3 MIG instances)"
        # GRAPHICS_UTIL at the collector's cadence on both sides, and a line timing it in every pair
        cadence = next(line for line in lines if line.startswith("GPM GRAPHICS_UTIL at most every 10 s: "))
        m = re.search(r"evaluated (\d+) times by the ticks and (\d+) by the floor", cadence)
        assert m and abs(int(m.group(1)) - int(m.group(2))) <= 10, cadence  # 10 trackers each side
        assert any(re.match(r"a tick that evaluates GRAPHICS_UTIL: tick_ms=\d+\.\d{4} floor_ms=\d+\.\d{4} "
                            r"ratio=\d+\.\d{3}; at a 1 s interval it adds -?\d+\.\d{4} ms", line)
                   for line in lines), lines
    else:
        assert gpm_line.startswith("GPM: off (no pairs); 7 of 8")
