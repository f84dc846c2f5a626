"""bench/cost/cupti_floor.c and bench/cost/overhead_attribution.sh without a GPU: the floor builds
against the toolkit's CUPTI with its opt-in pieces and stays harmless where CUDA cannot start;
the attribution script runs every variant end to end (a program that prints its own metric
stands in for a CUDA workload; the injected libraries stay idle in it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CUDA = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
CUPTI_LIB = CUDA / "targets" / "x86_64-linux" / "lib"

pytestmark = pytest.mark.skipif(not (CUDA / "include" / "cupti.h").exists(), reason="no CUDA toolkit")


@pytest.fixture(scope="module")
def floor_lib(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("floor") / "libcupti_floor.so"
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-Wall", "-Werror", f"-I{CUDA / 'include'}", "-o", str(out),
                    str(ROOT / "bench" / "cost" / "cupti_floor.c"), f"-L{CUPTI_LIB}", "-lcupti",
                    f"-Wl,-rpath,{CUPTI_LIB}"], check=True)
    return str(out)


@pytest.mark.parametrize("extra", [{}, {"FLOOR_CLOCK": "1", "FLOOR_SUBSCRIBE": "1"}])
def test_the_floor_initialises_without_harm_where_cuda_cannot_start(floor_lib, extra):
    code = f"import ctypes; print(ctypes.CDLL({floor_lib!r}).InitializeInjection())"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **extra},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "1", out.stderr


def test_every_attribution_variant_runs_and_reports_a_median(floor_lib):
    program = [sys.executable, "-c", "print('metric_us=4.25')"]
    out = subprocess.run(["bash", str(ROOT / "bench" / "cost" / "overhead_attribution.sh"), floor_lib, "metric_us", "1",
                          "--", *program], capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env={**os.environ, "PYTHON": sys.executable})
    assert out.returncode == 0, out.stderr
    medians = {line.split()[0]: line.split()[1] for line in out.stdout.splitlines()}
    assert list(medians) == ["bare", "floor", "floor-nvtx", "floor-clock", "floor-sub", "inject",
                             "inject-nonvtx", "run", "run-nonvml"]
    assert set(medians.values()) == {"median=4.2500"}


def test_an_unknown_variant_is_refused(floor_lib):
    out = subprocess.run(["bash", str(ROOT / "bench" / "cost" / "overhead_attribution.sh"), floor_lib, "m", "1", "--",
                          "true"], capture_output=True, text=True, timeout=60, cwd=ROOT,
                         env={**os.environ, "VARIANTS": "bare nonsense"})
    assert out.returncode == 2 and "unknown variant nonsense" in out.stderr and out.stdout == ""
