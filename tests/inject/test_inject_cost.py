"""bench/cost/inject_cost.py: the injected library's per-record cost beside the CUPTI floor's, built
from the library's own sources, every record accounted for (translated, published, consumed),
and bad arguments refused."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from inject_lib import ROOT

pytestmark = pytest.mark.serial   # times a run: alone, after the parallel pass

BENCH = ROOT / "bench" / "cost" / "inject_cost.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=300)


def test_both_modes_are_timed_on_the_same_records_and_none_is_lost(cuda_headers):
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


def test_bad_arguments_are_refused(cuda_headers):
    out = run("--buffers", "33", "--rounds", "1")
    assert out.returncode == 2 and "usage: inject_cost" in out.stderr
    out = run("--per-launch-us", "0")
    assert out.returncode == 2 and "--per-launch-us must be positive" in out.stderr
    out = run("--baseline-src", str(ROOT / "nonexistent"))
    assert out.returncode == 2 and "no cupti_src/activity.c" in out.stderr
    out = run("--baseline-src", str(ROOT), "--pairs", "0")
    assert out.returncode == 2 and "--pairs must be at least 1" in out.stderr


def test_a_baseline_is_built_from_its_own_sources_and_timed_alternately(tmp_path, cuda_headers):
    """The baseline is another copy of the library's sources; one that does more work per
    record (here: a thousand-step busy loop after each record) reads slower, so the comparison
    times the sources it was given and not this checkout's twice."""
    import shutil
    shutil.copytree(ROOT / "cupti_src", tmp_path / "cupti_src")
    slow = tmp_path / "cupti_src" / "activity.c"
    text = slow.read_text()
    marker = "translate(g_gf.ring, rec);"
    assert marker in text
    slow.write_text(text.replace(marker, "{ " + marker + " for (volatile int spin = 0; spin < 1000; spin++) ; }"))
    out = run("--rounds", "3", "--names", "5", "--baseline-src", str(tmp_path), "--pairs", "3")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert [line.split()[0] for line in lines[:3]] == ["pair=1", "pair=2", "pair=3"]
    summary = dict(re.findall(r"(\w+)=([0-9.]+)", lines[-2]))
    assert float(summary["vs_baseline"]) < 0.5 and summary["pairs"] == "3"
    assert lines[-1].startswith("floor_ns_per_record=")
