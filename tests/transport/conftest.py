"""Shared helpers for the transport tests: snapshots, a raw SSE client, real server processes.

The SSE client speaks plain HTTP through ``http.client`` (which de-chunks gunicorn's responses)
and parses events itself, so the tests see exactly the bytes a browser's EventSource would.
Real gunicorn processes run the fake collector with NVML and CUPTI disabled.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gpuflow.core.board import SnapshotBoard
from gpuflow.core.snapshot import (
    Attachment, Device, HostInfo, Lane, Problem, Process, Snapshot, Span, TracedProcess,
)

ROOT = Path(__file__).resolve().parents[2]

FAKE_ENV = {
    "GPUFLOW_PLUGINS": "gpuflow.testing.fake_collector",
    "GPUFLOW_DISABLED_PLUGINS": "nvml,cupti",
    "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1",
}


# -- snapshots -------------------------------------------------------------------------------------
def span(seq: int, start_us: int = 1_000_000) -> Span:
    return Span(seq=seq, kind="kernel", start_us=start_us + seq, dur_ns=1000, name="k",
                grid=(1, 1, 1), block=(32, 1, 1))


def lane(stream: int, seqs, label: str | None = None) -> Lane:
    spans = tuple(span(s) for s in seqs)
    return Lane(device=0, context=1, stream=stream, label=label or str(stream),
                executions=len(spans) + 10, spans_elided=10, spans=spans)


def make_snapshot(seq: int = 1, lanes: tuple[Lane, ...] = (), **kw) -> Snapshot:
    devices = kw.pop("devices", (
        Device(index=0, uuid="GPU-a", name="Test GPU", pci_bus_id="00000000:19:00.0",
               utilization_gpu_pct=87.0, utilization_memory_pct=41.0,
               memory_used_bytes=21 << 30, memory_total_bytes=80 << 30, temperature_c=47.0,
               power_draw_w=412.5, power_limit_w=700.0, clock_sm_mhz=1980, clock_mem_mhz=3201,
               pcie_tx_bytes_per_s=1000, pcie_rx_bytes_per_s=None, mig_mode="disabled"),
        Device(index=1, uuid="GPU-b", name="Test GPU", temperature_c=None, lost=True),
    ))
    processes = kw.pop("processes", (
        Process(pid=4242, name="train", user="alice", cmdline="python",
                attachments=(Attachment(0, "GPU-a", "compute", 3 << 30, 34.0, None),
                             Attachment(1, "GPU-b", "compute", None, None, None))),
    ))
    traced = kw.pop("traced", (
        TracedProcess(pid=4242, session="s1", name="train", cupti_status="ok", records=99,
                      lanes=lanes),
    ) if lanes else ())
    return Snapshot(seq=seq, timestamp=kw.pop("timestamp", 1764473412.5),
                    host=HostInfo(hostname="h", driver_version="580.1"),
                    problems=kw.pop("problems", (Problem("nvml", "something", "warning"),)),
                    devices=devices, processes=processes, traced=traced,
                    sources=("nvml",), **kw)


def board_with(*snapshots: Snapshot) -> SnapshotBoard:
    board = SnapshotBoard()
    for s in snapshots:
        board.publish(s)
    return board


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
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


@pytest.fixture
def fake_env():
    """The fake collector, for in-process agents (restored afterwards)."""
    saved = {k: os.environ.get(k) for k in FAKE_ENV}
    os.environ.update(FAKE_ENV)
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
