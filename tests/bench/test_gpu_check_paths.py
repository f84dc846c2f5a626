"""scripts/gpu-check without a GPU: it parses (``bash -n``), and every file of the repository it
names (under bench/, tests/, scripts/, examples/) exists, so no stage fails on the device, after
minutes of building, on a script that moved."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GPU_CHECK = ROOT / "scripts" / "gpu-check"
NAMED = re.compile(r"\b(?:bench|tests|scripts|examples)/[\w./-]*\w")


def test_gpu_check_parses():
    done = subprocess.run(["bash", "-n", str(GPU_CHECK)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_every_path_gpu_check_names_exists():
    named = sorted(set(NAMED.findall(GPU_CHECK.read_text())))
    assert any(p.startswith("bench/cost/") for p in named) and "bench/overhead.py" in named
    missing = [p for p in named if not (ROOT / p).exists()]
    assert not missing, f"scripts/gpu-check names {missing}"
