"""scripts/gpu_verify.py's checks for the ``frameworks`` stage of scripts/gpu-check, without a
GPU: ``named`` (a framework's own kernel counted exactly by name, its other kernels allowed),
``linear`` (JAX's unnamed kernels growing by whole multiples of the extra steps) and
``same_output`` (the checksum bare and traced). Each reads yes on agreeing inputs and no, saying
why, when one launch, one drop, one CUPTI status or one digit is off. The printed block comes
from bench/workloads/frameworks.py's own printer, so the format the verifier reads is the one
the workload writes."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

import frameworks

ROOT = Path(__file__).resolve().parents[2]


def printed(counts: dict[str, int], checksum: str = "1234.5") -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        frameworks.print_counts(counts)
    return out.getvalue() + f"checksum {checksum}\n"


def summary(kernels: dict[str, int], exit_status: int = 0, dropped: int = 0, cupti: str = "ok") -> dict:
    return {"exit_status": exit_status, "traced": [{
        "pid": 7, "kernels": [{"name": n, "mangled": n, "count": c} for n, c in kernels.items()],
        "transfers": [], "lanes": [], "dropped_ring": dropped, "dropped_cupti": 0,
        "cupti_status": cupti, "cupti_detail": "detail"}]}


def verify(*args: str) -> str:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_verify.py"), *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def named(tmp_path: Path, expected: dict[str, int], got: dict) -> str:
    (tmp_path / "out.txt").write_text(printed(expected))
    (tmp_path / "summary.json").write_text(json.dumps(got))
    return verify("named", "cupy", str(tmp_path / "out.txt"), str(tmp_path / "summary.json"))


def test_the_named_kernel_counted_exactly_reads_yes_with_other_kernels_around(tmp_path):
    out = named(tmp_path, {"gf_cupy_scale": 500},
                summary({"gf_cupy_scale": 500, "cupy_sum": 1, "cupy_arange": 1}))
    assert "cupy_named_exact=yes" in out


@pytest.mark.parametrize("got, says", [
    (summary({"gf_cupy_scale": 499}), "gf_cupy_scale: expected 500, gpuflow 499"),
    (summary({"other": 500}), "gf_cupy_scale: expected 500, gpuflow 0"),
    (summary({"gf_cupy_scale": 500}, dropped=3), "3 records dropped"),
    (summary({"gf_cupy_scale": 500}, exit_status=1), "exit status 1"),
    (summary({"gf_cupy_scale": 500}, cupti="stolen"), "CUPTI stolen"),
    (summary({}), "no traced process with kernels"),
])
def test_one_thing_off_reads_no_and_says_which(tmp_path, got, says):
    out = named(tmp_path, {"gf_cupy_scale": 500}, got)
    assert "cupy_named_exact=no" in out and says in out


def test_no_block_printed_reads_no(tmp_path):
    (tmp_path / "out.txt").write_text("checksum 1.0\n")
    (tmp_path / "summary.json").write_text(json.dumps(summary({"k": 1})))
    out = verify("named", "triton", str(tmp_path / "out.txt"), str(tmp_path / "summary.json"))
    assert "triton_named_exact=no" in out and "no named-counts block" in out


def linear(tmp_path: Path, a: dict, steps_a: int, b: dict, steps_b: int) -> str:
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    return verify("linear", "jax", str(tmp_path / "a.json"), str(steps_a), str(tmp_path / "b.json"), str(steps_b))


def test_counts_growing_by_whole_multiples_of_the_extra_steps_read_yes(tmp_path):
    # compile-time kernels (once), one gemm and two fusions a step
    a = summary({"setup": 3, "gemm": 20, "fusion_1": 40})
    b = summary({"setup": 3, "gemm": 40, "fusion_1": 80})
    out = linear(tmp_path, a, 20, b, 40)
    assert "jax_linear=yes" in out and "3 launches a step" in out


@pytest.mark.parametrize("b, says", [
    ({"setup": 3, "gemm": 39, "fusion_1": 80}, "gemm: 20 at 20 steps, 39 at 40"),     # one missed
    ({"setup": 3, "gemm": 40, "fusion_1": 80, "new": 1}, "new: 0 at 20 steps, 1 at 40"),
    ({"setup": 3, "gemm": 20, "fusion_1": 40}, "no kernel's count grew"),
])
def test_a_count_off_the_steps_reads_no(tmp_path, b, says):
    out = linear(tmp_path, summary({"setup": 3, "gemm": 20, "fusion_1": 40}), 20, summary(b), 40)
    assert "jax_linear=no" in out and says in out


def test_linear_refuses_a_second_run_with_no_more_steps(tmp_path):
    out = linear(tmp_path, summary({"gemm": 20}), 20, summary({"gemm": 20}), 20)
    assert "jax_linear=no" in out and "must have more steps" in out


@pytest.mark.parametrize("traced, same", [("1234.5", "yes"), ("1234.50001", "no")])
def test_same_output_compares_the_checksums(tmp_path, traced, same):
    (tmp_path / "bare.txt").write_text(printed({"k": 1}, "1234.5"))
    (tmp_path / "traced.txt").write_text("gpuflow: chatter on stderr\n" + printed({"k": 1}, traced))
    out = verify("same_output", "cupy", str(tmp_path / "bare.txt"), str(tmp_path / "traced.txt"))
    assert f"cupy_output_same={same}" in out


def test_same_output_with_no_checksum_reads_no(tmp_path):
    (tmp_path / "bare.txt").write_text("Traceback: it failed\n")
    (tmp_path / "traced.txt").write_text("Traceback: it failed\n")
    assert "jax_output_same=no" in verify("same_output", "jax", str(tmp_path / "bare.txt"),
                                          str(tmp_path / "traced.txt"))


def test_the_workload_skips_a_missing_framework_and_refuses_bad_arguments():
    script = str(ROOT / "bench" / "workloads" / "frameworks.py")
    for bad in (["cupy"], ["cupy", "0"], ["nope", "5"], ["jax", "x"]):
        done = subprocess.run([sys.executable, script, *bad], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and "usage" in done.stderr
    missing = [m for m in ("cupy", "triton", "jax") if frameworks.importlib.util.find_spec(m) is None]
    for mode in missing:
        done = subprocess.run([sys.executable, script, mode, "3"], capture_output=True, text=True, timeout=60)
        assert done.returncode == frameworks.NOT_INSTALLED and "not installed" in done.stdout
