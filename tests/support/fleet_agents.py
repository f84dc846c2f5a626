"""Real agents for the fleet tests: ``gpuflow watch`` with the fake NVML backend and the fake traced
collector, each named by ``NODE_NAME``, on a loopback port of its own.

An :class:`Agent` is a child process the test owns: it can be read (``snapshot()``), frozen
(``freeze()``: SIGSTOP, as a hung host or a partition looks to a hub), thawed, killed (SIGKILL, a
crash) or stopped (SIGTERM), and restarted on the same port. A :class:`Hub` is ``gpuflow hub``
following such agents, read through its own ``/api/snapshot``. Every wait has a timeout.

Constraints: the machine running the tests may have two cores shared with other work, so the
agents are light: one fake GPU, one traced process of two lanes, a few frames per second.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

from cli_process import gpuflow_env

URL_RE = re.compile(r"http://[^\s]+:(\d+)/")

#: the fake NVML backend (one GPU, one process) and the fake traced collector (one traced
#: process, no devices or processes of its own), CUPTI off
AGENT_ENV = {
    "GPUFLOW_NVML_FAKE": "single",
    "GPUFLOW_DISABLED_PLUGINS": "cupti",
    "GPUFLOW_FAKE_GPUS": "0",
    "GPUFLOW_FAKE_PROCS": "0",
    "GPUFLOW_FAKE_TRACED": "1",
    "GPUFLOW_FAKE_LANES": "2",
    "GPUFLOW_FAKE_SPANS": "3",
    "GPUFLOW_FAKE_RATE_HZ": "5",
    "GPUFLOW_NVML_HISTORY": "0",
}


class Agent:
    """``gpuflow watch`` named ``name``, every ``interval_ms``; ``port`` 0 picks a free one; bound
    to ``address`` (a loopback one by default), its command run after ``prefix`` (``ip netns exec
    NS``: the agent is that process itself, so its signals reach the agent)."""

    def __init__(self, name: str | None, interval_ms: int = 100, port: int = 0,
                 args: tuple[str, ...] = (), env: dict[str, str] | None = None,
                 address: str = "127.0.0.1", prefix: tuple[str, ...] = ()) -> None:
        self.name, self.interval_ms, self.args = name, interval_ms, args
        self.address, self.prefix = address, prefix
        self.env = gpuflow_env(**AGENT_ENV)
        self.env.pop("NODE_NAME", None)
        if name is not None:
            self.env["NODE_NAME"] = name
        self.env.update(env or {})
        self.proc: subprocess.Popen | None = None
        self.port = port
        self.start()

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}"

    def start(self) -> None:
        """Start it (again, on the port it had, when it had one); returns once it serves."""
        self.proc = subprocess.Popen(
            [*self.prefix, sys.executable, "-m", "gpuflow", "watch", "--port", str(self.port),
             *(("--bind", self.address) if self.address != "127.0.0.1" else ()),
             "--interval", str(self.interval_ms), "--plugin", "gpuflow.testing.fake_collector",
             *self.args],
            env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        deadline, seen = time.monotonic() + 30, []
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            m = URL_RE.search(line)
            if m:
                self.port = int(m.group(1))
                self._drain()
                return
        self.proc.kill()
        raise AssertionError("the agent printed no URL:\n" + "".join(seen))

    def _drain(self) -> None:
        """Read its output in the background, so that a full pipe never blocks it."""
        out = self.proc.stdout
        threading.Thread(target=lambda: [None for _ in out], daemon=True).start()

    def snapshot(self, path: str = "/api/snapshot", headers: dict | None = None) -> dict:
        request = urllib.request.Request(self.url + path, headers=headers or {})
        with urllib.request.urlopen(request, timeout=5) as resp:
            return json.load(resp)

    def freeze(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL: the agent vanishes at once, as in a crash (its sockets close)."""
        self.proc.send_signal(signal.SIGCONT)
        self.proc.kill()
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGCONT)
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def wait_for(predicate, timeout: float, interval: float = 0.02, what: str = "condition"):
    """The first true value of ``predicate()`` within ``timeout`` seconds, else AssertionError."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


class Hub:
    """``gpuflow hub`` following ``targets`` (URLs) and/or a targets file, with ``args`` and ``env``."""

    def __init__(self, *targets: str, args: tuple[str, ...] = (), env: dict[str, str] | None = None,
                 interval_ms: int = 200) -> None:
        self.env = gpuflow_env(**(env or {}))
        command = [sys.executable, "-m", "gpuflow", "hub", "--port", "0", "--interval", str(interval_ms)]
        for t in targets:
            command += ["--target", t]
        self.proc = subprocess.Popen(command + list(args), env=self.env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline, self.printed = time.monotonic() + 30, []
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.printed.append(line)
            m = URL_RE.search(line)
            if m:
                self.port = int(m.group(1))
                out = self.proc.stdout
                threading.Thread(target=lambda: [self.printed.append(l) for l in out], daemon=True).start()
                return
        self.proc.kill()
        raise AssertionError("the hub printed no URL:\n" + "".join(self.printed))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def snapshot(self, headers: dict | None = None) -> dict:
        request = urllib.request.Request(self.url + "/api/snapshot", headers=headers or {})
        with urllib.request.urlopen(request, timeout=5) as resp:
            return json.load(resp)

    def hosts(self) -> dict[str, dict]:
        return {h["name"]: h for h in self.snapshot()["hosts"]}

    def wait_host(self, name: str, state: str, timeout: float) -> tuple[dict, float]:
        """The host ``name`` once it is in ``state``, and how long that took."""
        t0 = time.monotonic()
        host = wait_for(lambda: (self.hosts().get(name) or {}).get("state") == state and self.hosts()[name],
                        timeout, what=f"{name} {state}")
        return host, time.monotonic() - t0

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return "".join(self.printed)
