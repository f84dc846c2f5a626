"""``gpuflow watch``: poll every GPU and serve the live view until Ctrl-C or SIGTERM.

Constraints: starts (and says why) even with no NVIDIA driver; exits 0 on Ctrl-C/SIGTERM after
stopping the collectors; never leaves the server thread running.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time

from gpuflow.core.hub import SnapshotHub
from gpuflow.core.snapshot import Snapshot

from gpuflow.cli.report import describe_start
from gpuflow.cli.serving import StartupError, start_serving, warn_if_benchmarking, warn_if_exposed


def wait_for_stop_signal() -> int:
    stop = threading.Event()
    received: list[int] = []

    def handler(signum: int, _frame: object) -> None:
        received.append(signum)
        stop.set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        while not stop.wait(3600):
            pass
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    return received[0]


def settled_snapshot(hub: SnapshotHub, timeout: float = 3.0) -> Snapshot | None:
    """The first snapshot that says something about GPUs (devices or problems), or the latest."""
    deadline = time.monotonic() + timeout
    snap = hub.wait_first(timeout)
    while snap is not None and not (snap.devices or snap.problems):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        snap = hub.wait_newer(snap.seq, left) or hub.latest()
    return snap


def cmd_watch(args: argparse.Namespace) -> int:
    try:
        serving = start_serving(args)
    except StartupError as exc:
        sys.stderr.write(f"gpuflow watch: error: {exc}\n")
        return 2
    warn_if_exposed(args)
    warn_if_benchmarking()
    try:
        describe_start(settled_snapshot(serving.agent.hub), serving.url, sys.stdout)
        sys.stdout.write("Press Ctrl-C to stop.\n")
        sys.stdout.flush()
        wait_for_stop_signal()
    finally:
        serving.stop()
    sys.stdout.write("gpuflow: stopped\n")
    return 0
