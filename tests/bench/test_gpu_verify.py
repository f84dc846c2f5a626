"""scripts/gpu_verify.py's exact-count check (stages demo and patterns of scripts/gpu-check)
without a GPU: a workload's printed counts against a ``--summary-json`` in the shape gpuflow
writes — equal counts, bytes and lanes read yes; one launch, one byte or one lane off reads no,
and says which."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PRINTED = """\
launch_patterns: 2 graph launches, 4 threads x 8 launches, 2 allocations, 1 pageable round trips
==== gpuflow-demo-counts ====
kernel _Z11graph_scalePfif 2 graph_scale(float*, int, float)
kernel _Z9graph_addPfPKfi 4 graph_add(float*, float const*, int)
copy h2d 3 786432
copy d2h 1 262144
copy d2d 2 524288
copy memset 0 0
lane graph
lane worker0
lane worker1
lane worker2
lane worker3
lane alloc
lane default
total kernels 6
==== end ====
"""
LANES = ["graph", "worker0", "worker1", "worker2", "worker3", "alloc", "default"]


def summary(scale: int = 2, h2d_bytes: int = 786432, lanes: list[str] = LANES) -> dict:
    return {"exit_status": 0, "traced": [{
        "kernels": [{"mangled": "_Z11graph_scalePfif", "name": "graph_scale(float*, int, float)", "count": scale},
                    {"mangled": "_Z9graph_addPfPKfi", "name": "graph_add(float*, float const*, int)", "count": 4}],
        "transfers": [{"direction": "h2d", "count": 3, "bytes": h2d_bytes},
                      {"direction": "d2h", "count": 1, "bytes": 262144},
                      {"direction": "d2d", "count": 2, "bytes": 524288}],
        "lanes": [{"label": label} for label in lanes],
        "dropped_ring": 0, "dropped_cupti": 0}]}


def verify(tmp_path: Path, got: dict) -> subprocess.CompletedProcess:
    (tmp_path / "stdout.txt").write_text(PRINTED)
    (tmp_path / "summary.json").write_text(json.dumps(got))
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_verify.py"), "patterns",
                           str(tmp_path / "stdout.txt"), str(tmp_path / "summary.json")],
                          capture_output=True, text=True, timeout=60)


def test_equal_counts_bytes_and_lanes_read_yes(tmp_path):
    done = verify(tmp_path, summary())
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "patterns_counts_exact=yes"


@pytest.mark.parametrize("got, says", [
    (summary(scale=3), "_Z11graph_scalePfif: expected 2, gpuflow 3"),
    (summary(h2d_bytes=786433), "copies h2d: expected (3, 786432), gpuflow (3, 786433)"),
    (summary(lanes=LANES[:-1]), "no lane labelled 'default'"),
])
def test_one_thing_off_reads_no_and_says_which(tmp_path, got, says):
    done = verify(tmp_path, got)
    assert done.returncode == 0, done.stderr
    assert says in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "patterns_counts_exact=no"
