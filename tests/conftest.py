"""Fixtures every test folder may use. Helpers that are not fixtures live in tests/support (on
pytest's ``pythonpath``), so no test module imports another folder's conftest."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def injection_built():
    """The built injection library and the libcupti it loads; fails under CI when missing (CI
    must build them), skips elsewhere."""
    from gpuflow.collectors.cupti.injection import InjectionUnavailable, find_injection_paths

    try:
        return find_injection_paths()
    except InjectionUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must build the injection library and find libcupti: {exc}")
        pytest.skip(str(exc))
