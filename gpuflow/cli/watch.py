"""``gpuflow watch``: poll every GPU and serve the live view until Ctrl-C or SIGTERM.

Constraints: starts (and says why) even with no NVIDIA driver; exits 0 on Ctrl-C/SIGTERM after
stopping the collectors; never leaves the server thread running.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

from gpuflow.core.board import SnapshotBoard
from gpuflow.core.snapshot import Snapshot

from gpuflow.cli import logs
from gpuflow.cli.report import describe_start, nvml_answered
from gpuflow.cli.serving import (StartupError, build_app, describe_login, start_serving, warn_if_benchmarking,
                                 warn_if_exposed)


class StopSignals:
    """SIGINT, SIGTERM and SIGHUP, caught from the moment it is entered: a stop signal that comes
    while the server starts or the start-up summary is printed (the URL is already out) stops
    ``gpuflow watch`` as cleanly as one that comes later. The previous handlers are restored on
    exit.

    Python runs a signal's handler in the main thread, but the kernel delivers a process's signal
    to any thread that does not block it (the server's, a collector's). A main thread blocked in
    one long wait is then not interrupted, and would run the handler only when that wait ends: a
    ``kill`` ignored for an hour. So :meth:`wait` waits in slices of ``SLICE_S``. The handler takes
    no lock (it runs between any two bytecodes of the main thread, perhaps inside a lock the main
    thread holds): it sets a flag that the slices read.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    SLICE_S = 0.1

    def __init__(self) -> None:
        self._stopped = False
        self._previous: dict[int, object] = {}
        self.received: int | None = None  #: the first stop signal caught, if any

    def _handler(self, signum: int, _frame: object) -> None:
        if self.received is None:
            self.received = signum
        self._stopped = True

    def __enter__(self) -> "StopSignals":
        self._previous = {s: signal.signal(s, self._handler) for s in self.SIGNALS}
        return self

    def __exit__(self, *_exc: object) -> None:
        for s, h in self._previous.items():
            signal.signal(s, h)

    def take(self) -> int | None:
        """The stop signal caught so far, if any, forgetting it (it is being passed on)."""
        signum, self.received = self.received, None
        self._stopped = False
        return signum

    def wait(self) -> None:
        """Until a stop signal has come (at once if one already has), within ``SLICE_S`` of it
        whichever thread the kernel gave it to."""
        while not self._stopped:
            time.sleep(self.SLICE_S)


def says_what_gpus_there_are(snap: Snapshot) -> bool:
    """Whether ``snap`` tells the GPUs: it has some, or an error says why not, or NVML has answered
    (report.nvml_answered)."""
    return bool(snap.devices) or any(p.severity == "error" for p in snap.problems) or nvml_answered(snap)


def settled_snapshot(board: SnapshotBoard, timeout: float = 3.0) -> Snapshot | None:
    """The first snapshot that tells the GPUs (:func:`says_what_gpus_there_are`), else the latest
    after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    snap = board.wait_first(timeout)
    while snap is not None and not says_what_gpus_there_are(snap):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        snap = board.wait_newer(snap.seq, left) or board.latest()
    return snap


def cmd_watch(args: argparse.Namespace) -> int:
    with StopSignals() as stop:
        try:
            serving = start_serving(args, build_app(args))
        except StartupError as exc:
            sys.stderr.write(f"gpuflow watch: error: {exc}\n")
            return 2
        warn_if_exposed(args)
        warn_if_benchmarking()
        try:
            logs.install().banner_shown(
                describe_start(settled_snapshot(serving.agent.board), serving.login_url, sys.stdout))
            describe_login(args, sys.stdout)
            sys.stdout.write("Press Ctrl-C to stop.\n")
            sys.stdout.flush()
            stop.wait()
        finally:
            serving.stop()
    sys.stdout.write("gpuflow: stopped\n")
    return 0
