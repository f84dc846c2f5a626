"""bench/inject_cost.py: the injected library's per-record cost beside the CUPTI floor's, built
from the library's own sources, every record accounted for (translated, published, consumed),
and bad arguments refused."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import ROOT, need_cuda_headers

BENCH = ROOT / "bench" / "inject_cost.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=300)


def test_both_modes_are_timed_on_the_same_records_and_none_is_lost():
    need_cuda_headers()
    out = run("--rounds", "3", "--buffers", "2", "--names", "5", "--per-launch-us", "5")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert [line.split()[0] for line in lines[:3]] == ["round=1", "round=2", "round=3"]
    harness = dict(re.findall(r"(\w+)=([0-9.]+)", lines[-2]))
    # every translated record and each name's chunks reached the ring, none dropped, 5 names
    assert harness["dropped"] == "0" and harness["names"] == "5"
    assert int(harness["ring_records"]) > int(harness["records"])
    last = dict(re.findall(r"(\w+)=(-?[0-9.]+)", lines[-1]))
    floor, gpuflow = float(last["floor_ns_per_record"]), float(last["gpuflow_ns_per_record"])
    assert 0 < floor and 0 < gpuflow
    assert abs(float(last["extra_ns_per_record"]) - (gpuflow - floor)) < 0.02
    assert abs(float(last["extra_pct_of_launch"]) - (gpuflow - floor) / 5000 * 100) < 0.001
    # the library's own account (its thread's CPU time, in the ring header) agrees with the
    # bench's wall-clock timing of the same completions, loosely: both median and sum are noisy
    assert 0.3 * gpuflow < float(harness["self_reported_ns_per_record"]) < 1.5 * gpuflow


def test_bad_arguments_are_refused():
    need_cuda_headers()
    out = run("--buffers", "33", "--rounds", "1")
    assert out.returncode == 2 and "usage: inject_cost" in out.stderr
    out = run("--per-launch-us", "0")
    assert out.returncode == 2 and "--per-launch-us must be positive" in out.stderr
