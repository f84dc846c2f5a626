"""The ``nccl`` stage of scripts/gpu-check without a GPU: scripts/gpu_verify.py ``profiled``
(torch.profiler's per-kernel counts, summed over a job's ranks, against gpuflow's, with the
number of traced processes that ran kernels) reads yes on agreeing inputs and no, saying why, on
one launch or one rank off; ``same_output`` does not care in which order ranks printed their
checksums; bench/workloads/nccl_allreduce.py refuses bad arguments and, where it cannot run
(no torch here), says so with exit status 3 so the stage can skip."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NCCL_KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def verify(*args: str) -> str:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_verify.py"), *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def rank(pid: int, kernels: dict[str, int]) -> dict:
    return {"pid": pid, "kernels": [{"name": n, "mangled": n, "count": c} for n, c in kernels.items()],
            "transfers": [], "lanes": [], "dropped_ring": 0, "dropped_cupti": 0}


def profiled(tmp_path: Path, expected: dict[str, int], ranks: list[dict], *processes: str) -> str:
    (tmp_path / "profile.json").write_text(json.dumps({"kernels": expected}))
    (tmp_path / "summary.json").write_text(json.dumps({"exit_status": 0, "traced": ranks, "traced_retired": []}))
    return verify("profiled", "nccl", str(tmp_path / "profile.json"), str(tmp_path / "summary.json"), *processes)


def test_counts_summed_over_the_ranks_read_yes(tmp_path):
    out = profiled(tmp_path, {NCCL_KERNEL: 400, "fill": 2},
                   [rank(11, {NCCL_KERNEL: 200, "fill": 1}), rank(12, {NCCL_KERNEL: 200, "fill": 1})], "2")
    assert "nccl_counts_exact=yes" in out and "over 2 traced processes" in out


@pytest.mark.parametrize("ranks, processes, says", [
    ([rank(11, {NCCL_KERNEL: 200}), rank(12, {NCCL_KERNEL: 199})], "2", "expected 400, gpuflow 399"),
    ([rank(11, {NCCL_KERNEL: 400})], "2", "1 traced processes with kernels, expected 2"),
    ([rank(11, {NCCL_KERNEL: 200}), rank(12, {NCCL_KERNEL: 200}), rank(13, {})], "3",
     "2 traced processes with kernels, expected 3"),
])
def test_a_launch_or_a_rank_off_reads_no_and_says_which(tmp_path, ranks, processes, says):
    out = profiled(tmp_path, {NCCL_KERNEL: 400}, ranks, processes)
    assert "nccl_counts_exact=no" in out and says in out


def test_the_torch_check_is_the_same_comparison_under_its_own_name(tmp_path):
    (tmp_path / "profile.json").write_text(json.dumps({"kernels": {"k": 3}}))
    (tmp_path / "summary.json").write_text(json.dumps({"exit_status": 0, "traced": [rank(1, {"k": 3})]}))
    assert "torch_counts_exact=yes" in verify("torch", str(tmp_path / "profile.json"), str(tmp_path / "summary.json"))


def test_ranks_may_print_their_checksums_in_either_order(tmp_path):
    (tmp_path / "bare.txt").write_text("checksum rank0 1.5\nchecksum rank1 1.5\n")
    (tmp_path / "traced.txt").write_text("gpuflow: tracing\nchecksum rank1 1.5\nchecksum rank0 1.5\n")
    assert "nccl_output_same=yes" in verify("same_output", "nccl", str(tmp_path / "bare.txt"),
                                            str(tmp_path / "traced.txt"))
    (tmp_path / "traced.txt").write_text("checksum rank1 1.5\nchecksum rank0 1.25\n")
    assert "nccl_output_same=no" in verify("same_output", "nccl", str(tmp_path / "bare.txt"),
                                           str(tmp_path / "traced.txt"))


def test_the_workload_refuses_bad_arguments_and_skips_where_it_cannot_run():
    script = str(ROOT / "bench" / "workloads" / "nccl_allreduce.py")
    for bad in ([], ["0"], ["x"], ["5", "--nope"]):
        done = subprocess.run([sys.executable, script, *bad], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and "usage" in done.stderr
    if importlib.util.find_spec("torch") is None:
        done = subprocess.run([sys.executable, script, "3"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 3 and "torch is not installed here: skipped" in done.stdout
