"""The real ``gpuflow`` command in a subprocess: its environment, one run to completion, a server
run started and stopped by a signal.

Constraints: ``python -m gpuflow`` of the interpreter running the tests (the installed package);
entry-point plugins off unless a test turns them on; every wait has a timeout.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

URL_RE = re.compile(r"http://[^\s]+:(\d+)/")


def gpuflow_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


def gpuflow(*args: str, env: dict[str, str] | None = None, timeout: float = 60,
            **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuflow", *args], env=env or gpuflow_env(),
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, **kwargs)


def stop_gpuflow(proc: subprocess.Popen, sig: int, timeout: float = 15) -> str:
    """Signal a process from :func:`start_gpuflow`, wait, and return everything it printed.

    ``communicate(timeout=...)`` would read the raw pipe and lose what the text wrapper already
    buffered, so read through the wrapper after the process has exited.
    """
    proc.send_signal(sig)
    proc.wait(timeout=timeout)
    return proc.printed + proc.stdout.read()  # type: ignore[attr-defined]


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
