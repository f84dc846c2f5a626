"""bench/cost/floor_calls.py without a GPU: the floor's exit report (FLOOR_COUNT=1) is read from the
real compiled floor, injected into a program where CUDA cannot start (so every count is a true
zero), a report in the shape the floor prints on a GPU is read exactly, and a run whose report
is missing is an error, never zero calls."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from floor_calls import parse_floor_output

ROOT = Path(__file__).resolve().parents[2]

CUDA = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
CUPTI_LIB = CUDA / "targets" / "x86_64-linux" / "lib"

GPU_SHAPED = """\
some program output
cupti_floor: kernels=500000 copies=2 memsets=1 other=3 buffers=101
cupti_floor_calls: tid=4242 main=1 thread=launch_storm clock_calls=2 sub_calls=0
cupti_floor_calls: tid=4250 main=0 thread=cuda-EvtHandlr clock_calls=17 sub_calls=1
cupti_floor_calls: uncounted=0
"""


def test_a_gpu_shaped_report_is_read_exactly():
    r = parse_floor_output(GPU_SHAPED)
    assert (r["kernels"], r["copies"], r["memsets"], r["other"], r["buffers"]) == (500000, 2, 1, 3, 101)
    assert r["records"] == 500003 and r["uncounted"] == 0
    assert r["threads"] == [
        {"tid": 4242, "main": True, "name": "launch_storm", "clock_calls": 2, "sub_calls": 0},
        {"tid": 4250, "main": False, "name": "cuda-EvtHandlr", "clock_calls": 17, "sub_calls": 1}]


@pytest.mark.parametrize("text", ["", "cupti_floor: kernels=1 copies=0 memsets=0 other=0 buffers=1\n"])
def test_a_missing_report_is_an_error(text):
    with pytest.raises(ValueError, match="FLOOR_COUNT"):
        parse_floor_output(text)


@pytest.mark.skipif(not (CUDA / "include" / "cupti.h").exists(), reason="no CUDA toolkit")
def test_the_real_floor_reports_zero_calls_where_cuda_cannot_start(tmp_path):
    lib = tmp_path / "libcupti_floor.so"
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-Wall", "-Werror", f"-I{CUDA / 'include'}", "-o", str(lib),
                    str(ROOT / "bench" / "cost" / "cupti_floor.c"), f"-L{CUPTI_LIB}", "-lcupti",
                    f"-Wl,-rpath,{CUPTI_LIB}"], check=True)
    # the program loads the floor itself (no driver here to do it) and initialises it
    program = f"{sys.executable} -c 'import ctypes, os; ctypes.CDLL(os.environ[\"CUDA_INJECTION64_PATH\"]).InitializeInjection()'"
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "cost" / "floor_calls.py"), "--floor-lib", str(lib),
                          "--workload", f"idle:{program}"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == ("floor_calls workloads=1 records=0 clock_calls=0 "
                                           "clock_calls_per_record=0.0000 sub_calls=0 uncounted=0")
    assert "idle: 0 records" in out.stdout


def test_a_malformed_workload_is_refused():
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "cost" / "floor_calls.py"), "--floor-lib", "x",
                          "--workload", "nocolon"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "expected NAME:CMD" in out.stderr
