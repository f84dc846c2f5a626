"""Do idle connections keep a well-behaved client from the agent? Both servers, side by side.

For each server (the embedded one of ``gpuflow watch``, and gunicorn as docs/transport.md deploys
it: ``-k gthread --workers 1 --threads 64 -c python:gpuflow.transport.gunicorn_conf``) and each
crowd size N in ``--idle``, a fresh agent fed by the fake collector (10 snapshots/s), then:

1. a well-behaved client on 127.0.0.1 opens ``/api/stream`` and keeps reading it (with
   ``--streams N``, N - 1 more readers on one selector beside it, and the stream cap and
   gunicorn's ``--threads`` sized for them);
2. a crowd on the same address opens N connections, half of them silent, half trickling a
   request head a byte every ``--trickle`` seconds, and reopens any the server closes (after
   1 s), for the whole window (``--window``, longer than the 10 s request-head deadline, so that
   the servers drop the crowd and it comes back at least once);
3. meanwhile the client GETs ``/`` and ``/healthz`` in turn every 0.25 s (5 s timeout), and a
   sampler reads the serving process's Threads and VmRSS every 0.5 s.

Per run it prints the answer times (median and max; a failure is a non-200 or no answer
within 5 s), the stream's frames per second against the agent's, the longest gap between
frames, and the threads and memory before and at most during the crowd, then what became of
the crowd's connections. The last line::

    idle=1000 embedded_healthz_max_ms=4.1 embedded_page_max_ms=6.0 embedded_failed=0 embedded_frame_ratio=1.00 embedded_threads_max=9 embedded_rss_mb_max=41.2 gunicorn_healthz_max_ms=... gunicorn_failed=0 ...

for the largest N (with ``--streams``, also the least share of frames any other reader got).
``python bench/connections.py [--idle 0,128,1000] [--window 15] [--streams 1]
[--servers embedded,gunicorn]``; the figures are in docs/reliability.md ("Idle connections").

Constraints: standard library and the installed package only (plus this folder's sse_client.py
and conn_crowd.py); the agents are separate processes, stopped at the end whatever happens.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import selectors
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from conn_crowd import Crowd, StreamWatch, raise_fd_limit, timed_get
from sse_pump import (StreamConn, children, frame_ratios, free_port, pump, stop_agent,
                      stream_request)

ROOT = Path(__file__).resolve().parents[1]
RATE_HZ = 10.0
FAKE = {
    "GPUFLOW_PLUGINS": "gpuflow.testing.fake_collector",
    "GPUFLOW_DISABLED_PLUGINS": "nvml,cupti",
    "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1",
    "GPUFLOW_FAKE_RATE_HZ": str(RATE_HZ),
}
URL_RE = re.compile(r"http://[^\s]+:(\d+)/")


def agent_env(max_streams: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(FAKE)
    env["GPUFLOW_MAX_STREAMS"] = str(max_streams)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def start_embedded(max_streams: int) -> tuple[subprocess.Popen, int, int]:
    proc = subprocess.Popen([sys.executable, "-m", "gpuflow", "watch", "--port", "0", "--plugin",
                             "gpuflow.testing.fake_collector"], env=agent_env(max_streams), cwd=ROOT,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        m = URL_RE.search(line)
        if m:
            threading.Thread(target=proc.stdout.read, daemon=True).start()  # keep the pipe drained
            return proc, int(m.group(1)), proc.pid
    stop_agent(proc)
    raise SystemExit("gpuflow watch printed no URL")


def start_gunicorn(max_streams: int) -> tuple[subprocess.Popen, int, int]:
    port = free_port()
    threads = max(64, max_streams + 4)  # docs/transport.md: --threads >= GPUFLOW_MAX_STREAMS + 4
    proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "gpuflow.transport.app:get_app()",
                             "-k", "gthread", "--workers", "1", "--threads", str(threads),
                             "-c", "python:gpuflow.transport.gunicorn_conf", "--no-control-socket",
                             "--log-level", "warning", "-b", f"127.0.0.1:{port}"],
                            env=agent_env(max_streams), cwd=ROOT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"gunicorn exited with status {proc.returncode}")
        kids = children(proc.pid)
        if kids and timed_get(port, "/healthz", timeout=2)[0] == 200:
            return proc, port, kids[0]
        time.sleep(0.1)
    stop_agent(proc)
    raise SystemExit("gunicorn did not become healthy")


def proc_status(pid: int) -> tuple[int, float]:
    """(Threads, VmRSS in MB) of a process."""
    threads, rss = 0, 0.0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                threads = int(line.split()[1])
            elif line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
    return threads, rss


def snapshot_seq(port: int) -> int | None:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
                      .encode())
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        return int(json.loads(data.partition(b"\r\n\r\n")[2])["seq"])
    except (OSError, ValueError, KeyError):
        return None


class Sampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.samples: list[tuple[int, float]] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(0.5):
            try:
                self.samples.append(proc_status(self.pid))
            except OSError:
                return

    def stop(self) -> None:
        self._halt.set()
        self.join()


class Readers(threading.Thread):
    """``n`` more streams, read on one selector (sse_pump): the share of frames each one got."""

    def __init__(self, port: int, n: int) -> None:
        super().__init__(daemon=True)
        self.sel = selectors.DefaultSelector()
        self.conns = []
        for _ in range(n):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(stream_request(port))
            sock.setblocking(False)
            c = StreamConn(sock)
            self.sel.register(sock, selectors.EVENT_READ, c)
            self.conns.append(c)
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            pump(self.sel, time.monotonic() + 0.25)

    def stop(self) -> None:
        self._halt.set()
        self.join()
        for c in self.conns:
            c.sock.close()
        self.sel.close()


def one_run(server: str, idle: int, window: float, trickle: float, streams: int) -> dict:
    max_streams = max(60, streams + 1)
    start = start_embedded if server == "embedded" else start_gunicorn
    proc, port, pid = start(max_streams)
    readers = None
    try:
        stream = StreamWatch(port)
        stream.start()
        if streams > 1:
            readers = Readers(port, streams - 1)
            readers.start()
        time.sleep(1.5)
        threads0, rss0 = proc_status(pid)
        sampler = Sampler(pid)
        sampler.start()
        crowd = Crowd(port, silent=idle - idle // 2, trickling=idle // 2, trickle_s=trickle)
        crowd.start_and_wait(timeout=window)
        seq0, t0 = snapshot_seq(port), time.monotonic()
        times: dict[str, list[float]] = {"/": [], "/healthz": []}
        failed = 0
        while time.monotonic() - t0 < window:
            for path in times:
                status, took = timed_get(port, path, timeout=5.0)
                times[path].append(took)
                failed += status != 200
                time.sleep(0.25)
        seq1, t1 = snapshot_seq(port), time.monotonic()
        held = crowd.open_now
        crowd.stop()
        sampler.stop()
        time.sleep(0.5)  # the window's last frame reaches every reader
        frames = stream.frames_between(t0, t1)
        gap = stream.longest_gap(t0, t1)
        stream.close()
        others = (frame_ratios(readers.conns, seq0, seq1)
                  if readers is not None and seq0 is not None and seq1 is not None and seq1 > seq0
                  else [])
    finally:
        if readers is not None:
            readers.stop()
        stop_agent(proc)
    produced = (seq1 - seq0) if seq0 is not None and seq1 is not None else None
    threads_max = max([threads0] + [t for t, _ in sampler.samples])
    rss_max = max([rss0] + [r for _, r in sampler.samples])
    return {
        "server": server, "idle": idle, "held": held, "crowd": crowd.summary(),
        "page_ms": [x * 1000 for x in times["/"]], "healthz_ms": [x * 1000 for x in times["/healthz"]],
        "failed": failed, "answers": sum(len(v) for v in times.values()),
        "frames_s": frames / (t1 - t0),
        "produced_s": produced / (t1 - t0) if produced is not None else None,
        # the agent's own count where /healthz answered, else the fake's configured rate
        "frame_ratio": frames / (produced if produced else RATE_HZ * (t1 - t0)), "gap_s": gap,
        "streams": streams, "others_min_ratio": min(others) if others else None,
        "threads0": threads0, "threads_max": threads_max, "rss0": rss0, "rss_max": rss_max,
    }


def describe(r: dict) -> str:
    def ms(values: list[float]) -> str:
        return f"{statistics.median(values):.1f}/{max(values):.1f}"

    per_conn = ""
    if r["idle"]:
        per_conn = (f"; per idle connection: {(r['threads_max'] - r['threads0']) / r['idle']:.3f} "
                    f"threads, {(r['rss_max'] - r['rss0']) * 1024 / r['idle']:.1f} kB")
    produced = (f"{r['produced_s']:.1f}" if r["produced_s"] is not None
                else f"~{RATE_HZ:.0f} (/healthz unanswered)")
    others = ""
    if r["streams"] > 1:
        ratio = r["others_min_ratio"]
        others = (f", the other {r['streams'] - 1} streams at least "
                  + (f"{ratio:.2f}" if ratio is not None else "? (/healthz unanswered)")
                  + " of the frames")
    return (f"{r['server']} idle={r['idle']} (held {r['held']} at the end): "
            f"page ms median/max {ms(r['page_ms'])}, /healthz ms median/max {ms(r['healthz_ms'])}, "
            f"{r['failed']} of {r['answers']} failed; stream {r['frames_s']:.1f} frames/s of "
            f"{produced} produced, longest gap {r['gap_s']:.2f} s{others}; threads before/max "
            f"{r['threads0']}/{r['threads_max']}, RSS MB before/max {r['rss0']:.1f}/{r['rss_max']:.1f}"
            f"{per_conn}; crowd {r['crowd']}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--idle", default="0,128,1000", help="crowd sizes, comma-separated")
    p.add_argument("--window", type=float, default=15.0, help="seconds measured per run")
    p.add_argument("--trickle", type=float, default=2.0, help="seconds between a trickler's bytes")
    p.add_argument("--servers", default="embedded,gunicorn", help="embedded, gunicorn or both")
    p.add_argument("--streams", type=int, default=1,
                   help="open streams besides the crowd (the good client's and N-1 more readers)")
    args = p.parse_args(argv)
    sizes = [int(x) for x in args.idle.split(",") if x.strip()]
    servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    if (not sizes or any(n < 0 for n in sizes) or not set(servers) <= {"embedded", "gunicorn"}
            or args.streams < 1):
        p.error("--idle takes sizes >= 0; --servers embedded and/or gunicorn; --streams >= 1")
    raise_fd_limit(max(sizes) + args.streams + 512)
    results = []
    for idle in sizes:
        for server in servers:
            r = one_run(server, idle, args.window, args.trickle, args.streams)
            print(describe(r), flush=True)
            results.append(r)
    last = [r for r in results if r["idle"] == max(sizes)]
    fields = [f"idle={max(sizes)}"]
    for r in last:
        s = r["server"]
        fields += [f"{s}_healthz_max_ms={max(r['healthz_ms']):.1f}",
                   f"{s}_page_max_ms={max(r['page_ms']):.1f}", f"{s}_failed={r['failed']}",
                   f"{s}_frame_ratio={r['frame_ratio']:.2f}", f"{s}_threads_max={r['threads_max']}",
                   f"{s}_rss_mb_max={r['rss_max']:.1f}"]
        if r["streams"] > 1:
            ratio = r["others_min_ratio"]
            fields.append(f"{s}_streams={r['streams']} {s}_streams_min_ratio="
                          + (f"{ratio:.2f}" if ratio is not None else "nan"))
    print(" ".join(fields))
    return 0


if __name__ == "__main__":
    sys.exit(main())
