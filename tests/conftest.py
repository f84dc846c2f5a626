"""Fixtures every test folder may use. Helpers that are not fixtures live in tests/support (on
pytest's ``pythonpath``), so no test module imports another folder's conftest."""

from __future__ import annotations

import os

import pytest
from chromium import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, missing


@pytest.fixture
def injection_built():
    """The built injection library and the libcupti it loads; fails under CI when missing (CI
    must build them), skips elsewhere."""
    from gpuflow.collectors.cupti.injection import (
        InjectionUnavailable,
        find_injection_paths,
    )

    try:
        return find_injection_paths()
    except InjectionUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must build the injection library and find libcupti: {exc}")
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium through Playwright, one per test process (tests/support/chromium.py).
    Under CI=true a missing browser or playwright is a failure, not a skip (CI installs chromium
    with apt-get); elsewhere the tests skip and say why."""
    why = missing()
    if why:
        msg = "browser tests cannot run: " + "; ".join(why)
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()
