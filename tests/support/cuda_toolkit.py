"""The CUDA toolkit's compiler for the tests that build a workload: nvcc on PATH, else under
$CUDA_HOME (default /usr/local/cuda). Without it a test skips, except under CI, which has the
toolkit: there it fails, so a missing toolkit can never pass as skipped tests."""

from __future__ import annotations

import os
import shutil

import pytest


def nvcc() -> str:
    """nvcc's path, or skip (fail under CI) the calling test."""
    path = shutil.which("nvcc")
    if path is None:
        candidate = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")
        path = candidate if os.path.exists(candidate) else None
    if not path:
        if os.environ.get("CI"):
            pytest.fail("CI is set but nvcc was not found")
        pytest.skip("nvcc not found")
    return path
