"""The real ``gpuflow`` command in a subprocess: its environment, one run to completion, a server
run started and stopped by a signal.

Constraints: ``python -m gpuflow`` of the interpreter running the tests (the installed package);
entry-point plugins off unless a test turns them on; every wait has a timeout. A process that
outlives its wait is made to print every thread's stack (Python's faulthandler, on SIGABRT)
before it is killed, so the failure says where it stood.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from typing import Callable

URL_RE = re.compile(r"http://[^\s]+:(\d+)/")


def gpuflow_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"})
    env.update(extra)
    return env


def gpuflow(*args: str, env: dict[str, str] | None = None, timeout: float = 60,
            **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuflow", *args], env=env or gpuflow_env(),
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, **kwargs)


def stop_gpuflow(proc: subprocess.Popen, sig: int, timeout: float = 15,
                 send: Callable[[int, int], object] = os.kill) -> str:
    """Signal a process from :func:`start_gpuflow`, wait, and return everything it printed.

    ``communicate(timeout=...)`` would read the raw pipe and lose what the text wrapper already
    buffered, so read through the wrapper after the process has exited. ``send(pid, sig)`` sends
    it (:func:`signal_another_thread` gives it to a thread other than the main one).
    """
    send(proc.pid, sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"gpuflow still ran {timeout} s after signal {sig}; where it stood:\n"
                             + stacks_and_kill(proc)) from None
    return proc.printed + proc.stdout.read()  # type: ignore[attr-defined]


def stacks_and_kill(proc: subprocess.Popen) -> str:
    """The end of what a hung process printed, with every thread's stack (SIGABRT reaches
    faulthandler, which :func:`gpuflow_env` turns on); the process is gone afterwards."""
    proc.send_signal(signal.SIGABRT)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    return (getattr(proc, "printed", "") + proc.stdout.read())[-12000:]


def start_gpuflow(*args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, int]:
    """Start gpuflow in the background; returns the process and the port from the printed URL."""
    proc = subprocess.Popen([sys.executable, "-m", "gpuflow", *args], env=env or gpuflow_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    seen = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        m = URL_RE.search(line)
        if m:
            proc.printed = "".join(seen)  # type: ignore[attr-defined]
            return proc, int(m.group(1))
    proc.kill()
    raise AssertionError("gpuflow printed no URL:\n" + "".join(seen))


#: tgkill(2)'s system call number, by machine (Python has no wrapper for it)
_SYS_TGKILL = {"x86_64": 234, "aarch64": 131}


def signal_another_thread(pid: int, sig: int) -> int:
    """Send ``sig`` to one of process ``pid``'s threads other than its main one, as the kernel
    may do with any signal sent to a process: the thread's id."""
    import ctypes
    import platform

    tids = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid)
    assert tids, f"process {pid} has no thread besides its main one"
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(_SYS_TGKILL[platform.machine()], pid, tids[0], sig) != 0:
        raise OSError(ctypes.get_errno(), f"tgkill({pid}, {tids[0]}, {sig})")
    return tids[0]
