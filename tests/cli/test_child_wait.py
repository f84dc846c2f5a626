"""How ``gpuflow run`` waits for its program (gpuflow/cli/child.py's ``_wait_exit``): the exit is
seen at once, and the wait works whatever descriptor numbers the process already holds (an agent
serving hundreds of connections)."""

from __future__ import annotations

import os
import resource
import subprocess
import time

import pytest

from gpuflow.cli.child import _wait_exit


def test_the_exit_is_seen_at_once_and_its_status_kept():
    proc = subprocess.Popen(["sh", "-c", "sleep 0.3; exit 7"])
    t0 = time.monotonic()
    assert _wait_exit(proc) == 7
    assert 0.25 < time.monotonic() - t0 < 2


def test_the_wait_works_above_select_s_1024_descriptors():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"this process may hold only {hard} descriptors")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = []
    try:
        while not held or held[-1] < 1100:   # the pidfd comes after these
            held.append(os.open(os.devnull, os.O_RDONLY))
        proc = subprocess.Popen(["sh", "-c", "sleep 0.2; exit 3"])   # still running when the wait begins
        assert _wait_exit(proc) == 3
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
