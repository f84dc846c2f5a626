"""Building what the PM-sampling tests run: the helper exactly as setup.py compiles it (its sources
read from setup.py), the fake driver that stands in for the GPU, the test producer, and a probe of
the format's numbers, all from the repository's sources into a temporary directory.

Constraints: needs gcc, g++ and the CUDA toolkit's headers (cuda.h, the CUPTI PM sampling
headers); :func:`need_headers` skips without them, except under CI (``CI`` set), where that is a
failure.
"""

from __future__ import annotations

import ast
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
WARN = ["-O2", "-Wall", "-Wextra", "-Werror", "-pthread"]


def need_headers() -> Path:
    candidates = [Path(os.environ[v]) / "include" for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    candidates += [Path("/usr/local/cuda/include"), Path("/opt/cuda/include")]
    for c in candidates:
        if (c / "cupti_pmsampling.h").exists() and (c / "cuda.h").exists():
            return c
    if os.environ.get("CI"):
        pytest.fail("CI is set but no CUDA headers with CUPTI PM sampling were found (set CUDA_HOME)")
    pytest.skip("no CUDA headers with CUPTI PM sampling (set CUDA_HOME)")


def setup_list(name: str) -> list[str]:
    """A list constant of setup.py (read, not imported: importing it runs setup())."""
    for node in ast.parse((ROOT / "setup.py").read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise AssertionError(f"setup.py has no {name}")


def _run_all(commands: list[list[str]]) -> None:
    procs = [(cmd, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)) for cmd in commands]
    for cmd, p in procs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0, f"{' '.join(cmd)}\n{out.decode(errors='replace')}"


def build_all(out: Path) -> dict[str, Path]:
    """The helper, the fake driver, the test producer and the layout probe, built into ``out``."""
    inc = need_headers()
    src = ROOT / "cupti_src"
    objects, compiles = [], []
    for c in setup_list("PM_SAMPLER_C"):
        objects.append(out / (Path(c).stem + ".o"))
        compiles.append(["gcc", "-std=c11", *WARN, f"-I{src}", "-c", str(ROOT / c), "-o", str(objects[-1])])
    for c in setup_list("PM_SAMPLER_CXX"):
        objects.append(out / (Path(c).stem + ".o"))
        compiles.append(["g++", "-std=c++17", *WARN, f"-I{src}", f"-I{inc}", "-c", str(ROOT / c), "-o", str(objects[-1])])
    paths = {"sampler": out / "gpuflow-pm-sampler", "fake": out / "libfakepm.so",
             "producer": out / "pm_test_producer", "layout": out / "pm_layout_probe"}
    compiles += [
        ["g++", "-std=c++17", *WARN, "-fPIC", "-shared", f"-I{inc}", "-o", str(paths["fake"]),
         str(HERE / "fake_pm_driver.cpp")],
        ["gcc", "-std=c11", *WARN, f"-I{src}", "-o", str(paths["producer"]), str(HERE / "pm_test_producer.c"),
         str(src / "pm_ring.c"), "-lm"],
        ["gcc", "-std=c11", *WARN, f"-I{src}", "-o", str(paths["layout"]), str(HERE / "pm_layout_probe.c")],
    ]
    _run_all(compiles)
    _run_all([["g++", "-o", str(paths["sampler"]), *map(str, objects), "-ldl", "-pthread", "-Wl,--as-needed"]])
    return paths
