"""A plain, non-editable install carries the page and serves it whole: the wheel holds index.html and
every module, and an agent run from that install (outside the source tree) serves a page whose
modules all load in Chromium and which draws, in demo mode and live.

The wheel is built from a copy of the source with the native parts disabled
(GPUFLOW_DISABLE_EXTENSIONS=1: the page does not need them), installed with ``pip install
--target`` into a folder of its own, and the agent runs with only that folder on its path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from gpuflow.transport.ui import UI_MODULES

from .conftest import FAKE, ROOT, Agent, free_port, hook, until

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SOURCE = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "gpuflow")


@pytest.fixture(scope="module")
def install(tmp_path_factory):
    """(the wheel's file names, the folder the wheel was installed into)"""
    tmp = tmp_path_factory.mktemp("install")
    src, wheels, target = tmp / "src", tmp / "wheels", tmp / "site"
    src.mkdir()
    for name in SOURCE:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.c", "*.o"))
        else:
            shutil.copy2(ROOT / name, src / name)
    env = {**os.environ, "GPUFLOW_DISABLE_EXTENSIONS": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    pip = [sys.executable, "-m", "pip", "-q"]
    subprocess.run(pip + ["wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(src)],
                   env=env, check=True, capture_output=True, timeout=300)
    (wheel,) = wheels.glob("gpuflow-*.whl")
    subprocess.run(pip + ["install", "--no-deps", "--no-index", "--target", str(target), str(wheel)],
                   env=env, check=True, capture_output=True, timeout=300)
    return zipfile.ZipFile(wheel).namelist(), target


def test_the_wheel_carries_the_page_and_every_module(install):
    names, _ = install
    assert "gpuflow/ui/index.html" in names
    assert {f"gpuflow/ui/{m}" for m in UI_MODULES} <= set(names)
    assert {n for n in names if n.startswith("gpuflow/ui/")} == \
        {"gpuflow/ui/index.html"} | {f"gpuflow/ui/{m}" for m in UI_MODULES}


def test_an_installed_agent_serves_a_page_whose_modules_all_load(install, page, tmp_path):
    _, target = install
    where = subprocess.run([sys.executable, "-c", "import gpuflow.transport.ui as u; print(u.UI_DIR)"],
                           env={**os.environ, "PYTHONPATH": str(target)}, cwd=tmp_path,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert where == str(target / "gpuflow" / "ui"), "the installed copy is not the one imported"
    # only the installed copy on the path, run from outside the source tree: nothing of the
    # checkout can stand in for a file the wheel lacks
    agent = Agent(free_port(), {**FAKE, "PYTHONPATH": str(target)}, cwd=tmp_path)
    agent.start(timeout=30)
    try:
        errors = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(agent.url + "?demo=traced")
        until(page, "window.__gpuflow.frames >= 3 && window.__gpuflow.counts.spans > 0", timeout=15000)
        # what the page itself fetched (its resource timing entries), not Playwright's response
        # events, which may still be on their way when the wait above returns; the answer reader's
        # worker script may be fetched after the first frames (a loaded CI worker's was): waited for
        until(page, "performance.getEntriesByType('resource').filter(e => e.name.endsWith('.js')).length >= "
              f"{len(UI_MODULES)}", timeout=15000)
        loaded = dict(page.evaluate("() => performance.getEntriesByType('resource')"
                                    ".filter(e => e.name.endsWith('.js'))"
                                    ".map(e => [e.name.split('/').pop(), e.responseStatus])"))
        assert loaded == {m: 200 for m in UI_MODULES}   # demo mode loads every module
        assert hook(page, "counts")["nodes"] >= 4 and hook(page, "draws") > 0
        page.goto(agent.url)
        until(page, "window.__gpuflow.connection === 'live' && window.__gpuflow.frames >= 2", timeout=15000)
        assert hook(page, "counts")["nodes"] == len(hook(page, "graph")["nodes"]) > 0
        assert not errors, errors
    finally:
        agent.stop()
