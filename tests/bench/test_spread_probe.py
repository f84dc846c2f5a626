"""bench/cost/spread_probe.py and bench/overhead.py's ``--no-aslr`` without a GPU: the exec shim
really turns address-space randomisation off for the program (every process then places its
first mapping at the same address, in every mode, ``gpuflow run`` included), the plain
configuration really leaves it on, and bad arguments are refused before anything runs."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from spread_probe import spread
from workload_run import run_once

ROOT = Path(__file__).resolve().parents[2]

#: prints where an anonymous mapping lands (randomised per process unless ASLR is off), and a metric
WHERE = [sys.executable, "-c",
         "import mmap, ctypes; m = mmap.mmap(-1, 4096); "
         "print('where=%d' % ctypes.addressof(ctypes.c_char.from_buffer(m)), 'metric=1.0')"]


def _where(mode: str, no_aslr: bool) -> float:
    _, printed = run_once(mode, WHERE, "metric", floor_lib="/nonexistent/libfloor.so", no_aslr=no_aslr)
    return printed["where"]


@pytest.mark.parametrize("mode", ["bare", "floor", "gpuflow"])
def test_no_aslr_gives_every_process_the_same_layout_in_every_mode(mode):
    assert len({_where(mode, True) for _ in range(3)}) == 1


def test_without_no_aslr_layouts_differ():
    assert len({_where("bare", False) for _ in range(3)}) > 1


def test_the_probe_reads_the_spread_of_each_configuration():
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "cost" / "spread_probe.py"), "--runs", "3",
                          "--configs", "plain,noaslr", "--workload", "where=where:" + shlex.join(WHERE)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    last = dict(f.split("=") for f in out.stdout.splitlines()[-1].split()[1:])
    assert float(last["where_noaslr_cv_pct"]) == 0.0
    assert float(last["where_plain_cv_pct"]) > 0.0


def test_spread_statistics():
    s = spread([1.0, 2.0, 3.0])
    assert s == {"median": 2.0, "cv_pct": pytest.approx(50.0), "min": 1.0, "max": 3.0}


@pytest.mark.parametrize("args, message", [
    (["--configs", "plain,fast"], "unknown fast"),
    (["--configs", ","], "(none given)"),
    (["--runs", "1"], "at least 2"),
    (["--workload", "nometric"], "expected NAME=METRIC:CMD"),
])
def test_bad_arguments_are_refused(args, message):
    argv = [sys.executable, str(ROOT / "bench" / "cost" / "spread_probe.py")]
    if "--workload" not in args:
        argv += ["--workload", "x=m:true"]
    out = subprocess.run(argv + args, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and message in out.stderr and out.stdout == ""


def test_overhead_runs_with_and_without_no_aslr_are_never_pooled(tmp_path):
    def bench(*extra: str) -> Path:
        out = tmp_path / f"run{len(list(tmp_path.iterdir()))}.json"
        done = subprocess.run([sys.executable, str(ROOT / "bench" / "overhead.py"), "--floor-lib", "/nonexistent.so",
                               "--rounds", "1", "--workload", "w=metric:" + shlex.join(WHERE), "--json-out", str(out),
                               *extra], capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        return out

    plain, randomisation_off = bench(), bench("--no-aslr")
    import json
    assert json.loads(randomisation_off.read_text())["w"]["command"][0] == "no-aslr:"
    pooled = subprocess.run([sys.executable, str(ROOT / "bench" / "cost" / "overhead_pool.py"), str(plain),
                             str(randomisation_off)], capture_output=True, text=True, timeout=60)
    assert pooled.returncode != 0 and "ran different commands" in pooled.stderr
