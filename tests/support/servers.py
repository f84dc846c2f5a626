"""Real servers and real clients for tests: gunicorn serving the fake collector, a raw SSE client,
plain HTTP GETs.

The SSE client speaks plain HTTP through ``http.client`` (which de-chunks gunicorn's responses)
and parses events itself, so the tests see exactly the bytes a browser's EventSource would.
Real gunicorn processes run the fake collector with NVML and CUPTI disabled (``FAKE_ENV``).

Constraints: every process started here is stopped by its owner (``Gunicorn.stop``); every wait
has a timeout.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FAKE_ENV = {
    "GPUFLOW_PLUGINS": "gpuflow.testing.fake_collector",
    "GPUFLOW_DISABLED_PLUGINS": "nvml,cupti",
    "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1",
}


# -- SSE over HTTP ---------------------------------------------------------------------------------
@dataclass
class Event:
    id: str | None = None
    event: str | None = None
    data: str = ""
    retry: int | None = None
    comments: list[str] = field(default_factory=list)

    @property
    def json(self) -> dict:
        return json.loads(self.data)

    @property
    def seq(self) -> int:
        return int(self.id.rsplit("-", 1)[1])


class SseClient:
    """One GET with custom headers; ``next_event()`` parses the next SSE block (comments included)."""

    def __init__(self, port: int, path: str = "/api/stream", headers: dict | None = None,
                 host: str = "127.0.0.1", timeout: float = 5.0) -> None:
        self.opened_at = time.monotonic()
        self.conn = http.client.HTTPConnection(host, port, timeout=timeout)
        self.conn.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
        hdrs = {"Host": f"{host}:{port}", "Accept": "text/event-stream"}
        hdrs.update(headers or {})
        for k, v in hdrs.items():
            if v is not None:
                self.conn.putheader(k, v)
        self.conn.endheaders()
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.headers = {k.lower(): v for k, v in self.resp.getheaders()}

    def next_event(self) -> Event | None:
        """The next block up to a blank line; None at the end of the stream."""
        ev, seen = Event(), False
        while True:
            raw = self.resp.readline()
            if not raw:
                return ev if seen else None
            line = raw.decode("utf-8").rstrip("\r\n")
            if line == "":
                if seen:
                    return ev
                continue
            seen = True
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "":
                ev.comments.append(value)
            elif name == "data":
                ev.data = value if not ev.data else ev.data + "\n" + value
            elif name == "retry":
                ev.retry = int(value)
            elif name in ("id", "event"):
                setattr(ev, name, value)

    def next_frame(self) -> Event:
        """The next event that carries data (skips pings); fails at end of stream."""
        while True:
            ev = self.next_event()
            assert ev is not None, "stream ended"
            if ev.data:
                return ev

    def close(self) -> None:
        self.conn.close()


def http_get(port: int, path: str, headers: dict | None = None, host: str = "127.0.0.1",
             timeout: float = 5.0) -> tuple[int, dict, bytes]:
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
        hdrs = {"Host": f"{host}:{port}"}
        hdrs.update(headers or {})
        for k, v in hdrs.items():
            conn.putheader(k, v)
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


# -- real gunicorn ---------------------------------------------------------------------------------
#: each test process (pytest-xdist worker) picks ports for servers it starts from a range of its
#: own, below the kernel's ephemeral ports (32768 and up): a port bind(0) handed out and let go
#: could go to another worker's server (or a connection's local end) before this one's binds it
_PORTS_PER_WORKER = 400
_worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
_PORT_BASE = 20000 + (int(_worker[2:]) if _worker[2:].isdigit() else 0) % 30 * _PORTS_PER_WORKER
_next_port = itertools.count()


def free_port() -> int:
    """A loopback port no server holds now, from this test process's own range (see above)."""
    for _ in range(_PORTS_PER_WORKER):
        port = _PORT_BASE + next(_next_port) % _PORTS_PER_WORKER
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError(f"no free port in {_PORT_BASE}..{_PORT_BASE + _PORTS_PER_WORKER - 1}")


def wait_listening(port: int, proc: subprocess.Popen, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out = proc.stdout.read() if proc.stdout else ""
            raise AssertionError(f"gunicorn exited with {proc.returncode}:\n{out}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("gunicorn did not listen in time")


class Gunicorn:
    """A real ``gunicorn 'gpuflow.transport.app:get_app()'`` fed by the fake collector."""

    def __init__(self, env: dict | None = None, threads: int = 64, conf: bool = False) -> None:
        self.port = free_port()
        full_env = dict(os.environ)
        full_env.update(FAKE_ENV)
        full_env["PYTHONPATH"] = str(ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
        full_env.update(env or {})
        cmd = [sys.executable, "-m", "gunicorn", "gpuflow.transport.app:get_app()",
               "-k", "gthread", "--workers", "1", "--threads", str(threads),
               "--graceful-timeout", "5", "--no-control-socket", "--log-level", "warning",
               "-b", f"127.0.0.1:{self.port}"]
        if conf:
            cmd[3:3] = ["-c", "python:gpuflow.transport.gunicorn_conf"]
        self.proc = subprocess.Popen(cmd, env=full_env, cwd=ROOT, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wait_listening(self.port, self.proc)

    def stop(self, timeout: float = 10.0) -> float:
        """SIGTERM, wait; the seconds it took to exit."""
        t0 = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return time.monotonic() - t0

    def output(self) -> str:
        return self.proc.stdout.read() if self.proc.stdout else ""
