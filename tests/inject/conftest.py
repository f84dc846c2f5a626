"""Fixtures for the producer-side tests: the compiled test producer, the injection library built
with the package's own flags, a fake libcupti, and a ring catcher (the agent's side of the
handover, tests/support/ringcatch.py) per test.

Constraints: no GPU. The injection library needs the CUPTI/CUDA headers; without them its tests
skip, except under CI (``CI`` set), where missing headers are a failure.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from inject_lib import (FAKE_CUPTI_C, INJECT_CFLAGS, INJECT_LDFLAGS, ROOT, cuda_include_dir,
                        inject_sources)
from ringcatch import RingCatcher
from ringproducer import build_producer


def need_cuda_headers() -> Path:
    inc = cuda_include_dir()
    if inc is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but no CUPTI/CUDA headers were found (set CUDA_HOME)")
        pytest.skip("no CUPTI/CUDA headers (set CUDA_HOME)")
    return inc


@pytest.fixture
def cuda_headers() -> Path:
    """The CUPTI/CUDA include directory; the test skips without one (fails under CI)."""
    return need_cuda_headers()


@pytest.fixture(scope="session")
def producer_lib(tmp_path_factory) -> str:
    return build_producer(tmp_path_factory.mktemp("producer"))


@pytest.fixture(scope="session")
def inject_build(tmp_path_factory) -> dict:
    """libgpuflow_inject.so compiled and linked exactly as setup.py does it."""
    inc = need_cuda_headers()
    out = tmp_path_factory.mktemp("inject") / "libgpuflow_inject.so"
    cmd = (["gcc", *INJECT_CFLAGS, f"-I{ROOT / 'cupti_src'}", f"-I{inc}", "-shared", "-o",
            str(out), *[str(ROOT / s) for s in inject_sources()],
            f"-Wl,--version-script={ROOT / 'cupti_src' / 'exports.map'}", *INJECT_LDFLAGS])
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"
    return {"path": str(out), "stderr": proc.stderr, "cmd": cmd}


@pytest.fixture(scope="session")
def inject_lib(inject_build) -> str:
    return inject_build["path"]


@pytest.fixture(scope="session")
def fake_cupti(tmp_path_factory) -> str:
    inc = need_cuda_headers()
    out = tmp_path_factory.mktemp("fakecupti") / "libcupti_fake.so"
    cmd = ["gcc", "-shared", "-fPIC", "-pthread", "-O2", "-std=c11", "-Wall", "-Wextra", f"-I{inc}",
           str(FAKE_CUPTI_C), "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return str(out)


@pytest.fixture
def catcher():
    """Takes the rings this test's injected processes hand over; closes them afterwards."""
    c = RingCatcher()
    yield c
    c.close()
