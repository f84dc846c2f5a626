"""``--ui`` (and ``GPUFLOW_UI``) naming something that is not a page: refused at start, with one line
and exit status 2, instead of a start that hangs on a FIFO or a page that never ends.

The gunicorn side (``GPUFLOW_UI`` stopping the worker) is in tests/hardening/test_public_gunicorn.py.
"""

from __future__ import annotations

import os

import pytest

from cli_process import gpuflow, gpuflow_env

ENV = gpuflow_env(GPUFLOW_DISABLED_PLUGINS="nvml,cupti")


def refused(*args: str, env: dict[str, str] = ENV) -> str:
    result = gpuflow(*args, env=env, timeout=30)
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "page.html"
    os.mkfifo(path)
    return str(path)


@pytest.fixture
def huge(tmp_path):
    path = tmp_path / "huge.html"
    with open(path, "wb") as f:
        f.truncate(5 << 30)   # sparse: 5 GiB that take no disk
    return str(path)


def test_a_fifo_is_refused_without_hanging(fifo):
    assert refused("watch", "--port", "0", "--ui", fifo) == f"gpuflow watch: error: --ui {fifo}: not a regular file"


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null", "/dev/urandom"])
def test_a_device_is_refused(device):
    assert "not a regular file" in refused("watch", "--port", "0", "--ui", device)


def test_a_huge_file_is_refused(huge):
    line = refused("watch", "--port", "0", "--ui", huge)
    assert f"--ui {huge}: {5 << 30} bytes, more than the 4 MiB a page may have" in line


def test_the_variable_is_checked_the_same_way(fifo):
    line = refused("watch", "--port", "0", env={**ENV, "GPUFLOW_UI": fifo})
    assert line == f"gpuflow watch: error: GPUFLOW_UI {fifo}: not a regular file"


def test_gpuflow_run_refuses_before_the_program_starts(tmp_path):
    marker = tmp_path / "ran"
    line = refused("run", "--port", "0", "--ui", "/dev/zero", "--", "touch", str(marker))
    assert "--ui /dev/zero: not a regular file" in line
    assert not marker.exists()
