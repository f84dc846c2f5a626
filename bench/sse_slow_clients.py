"""SSE under slow clients: N reading streams, M slow clients, the stream cap, a real gunicorn agent.

    python bench/sse_slow_clients.py [--clients 200] [--slow 100] [--half 25] [--duration 60]

Starts ``gunicorn 'gpuflow.transport.app:get_app()' -k gthread --workers 1 -c
python:gpuflow.transport.gunicorn_conf`` fed by the fake collector at ``--rate`` snapshots per
second, with ``GPUFLOW_MAX_STREAMS`` = clients + never-reading clients and ``--threads`` =
that + ``--spare-threads`` (4, the minimum docs/transport.md gives). From this one process, on
one selector, it opens:

1. ``--half`` clients that send half a request head and stall (they hold a gunicorn thread
   until ``--header-timeout``, then the worker must drop them);
2. ``--slow`` minus ``--half`` clients that open /api/stream with a 4 KiB receive buffer and
   never read (the agent must drop each once a write has waited ``--send-timeout``);
3. ``--clients`` reading clients, which must keep the agent's frame rate;
4. once those are all streaming and /healthz counts every slot taken, ``--extra`` more
   streams, which the cap must answer with 503 and Retry-After.

Over the ``--duration`` window it samples the worker's ``/proc/<pid>/status`` (Threads, VmRSS)
every 0.5 s and /healthz's open stream count every 2 s; before the clients connect and after
they have all gone it samples again. Per reading client the ratio is the frames it received
with a seq inside the window over the frames the agent produced in it.

Last line, exactly: ``clients=<n> slow=<m> min_frame_ratio=<r> agent_threads_max=<t>
agent_rss_mb_max=<x>``. Exit status 1 if a goal failed: a reader without a first frame, the
agent died, a cap probe not answered 503 + Retry-After, a slow client not dropped in time (when
the window is long enough to see it), the streams not all released at the end, or
min_frame_ratio < 0.95.

Constraints: Linux (/proc); loopback only; no GPU; readers parse only the ``id:`` line of each
event (one event per HTTP chunk); the client side stays light enough for a 2-core box (one
thread, non-blocking sockets).
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from sse_pump import (StreamConn, cpu_seconds, frame_ratios, free_port, pump,  # noqa: E402
                      stop_agent, stream_request)

ROOT = Path(__file__).resolve().parents[1]
SPARE_THREADS = 4
SLOW_RCVBUF = 4096


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


def worker_pid(arbiter: int) -> int:
    with open(f"/proc/{arbiter}/task/{arbiter}/children") as f:
        kids = [int(x) for x in f.read().split()]
    if len(kids) != 1:
        raise SystemExit(f"expected one gunicorn worker, found {kids}")
    return kids[0]


def start_agent(args: argparse.Namespace, port: int, max_streams: int, threads: int):
    env = dict(os.environ)
    env.update({
        "GPUFLOW_PLUGINS": "gpuflow.testing.fake_collector",
        "GPUFLOW_DISABLED_PLUGINS": "nvml,cupti",
        "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1",
        "GPUFLOW_FAKE_RATE_HZ": str(args.rate),
        "GPUFLOW_MAX_STREAMS": str(max_streams),
        "GPUFLOW_SEND_TIMEOUT_S": str(args.send_timeout),
        "GPUFLOW_HEADER_TIMEOUT_S": str(args.header_timeout),
        "GPUFLOW_SEND_BUFFER_BYTES": str(args.send_buffer),
        "PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
    })
    cmd = [sys.executable, "-m", "gunicorn", "gpuflow.transport.app:get_app()", "-k", "gthread",
           "--workers", "1", "--threads", str(threads), "--no-control-socket",
           "-c", "python:gpuflow.transport.gunicorn_conf", "--log-level", "warning",
           "-b", f"127.0.0.1:{port}"]
    return subprocess.Popen(cmd, env=env, cwd=ROOT, stdin=subprocess.DEVNULL)


def http_get(port: int, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
                  .encode())
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def open_streams(port: int) -> int | None:
    try:
        status, body = http_get(port, "/healthz")
        return json.loads(body)["streams"] if status == 200 else None
    except (OSError, ValueError, IndexError):
        return None


def wait_healthy(port: int, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"gunicorn exited with status {proc.returncode}")
        if open_streams(port) is not None:
            return
        time.sleep(0.1)
    raise SystemExit("agent did not become healthy")


def connect(port: int, kind: str, sel: selectors.BaseSelector) -> StreamConn:
    """A stream connection of ``kind``: reader, never (never read), half (request head never
    finished) or probe (only its response head is looked at)."""
    s = socket.socket()
    if kind == "never":
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SLOW_RCVBUF)
    s.connect(("127.0.0.1", port))
    s.sendall(stream_request(port, complete=kind != "half"))
    s.setblocking(False)
    c = StreamConn(s, kind)
    if kind != "never":  # a never-reading client is never read: not even for EOF
        sel.register(s, selectors.EVENT_READ, c)
    return c


class Sampler(threading.Thread):
    """The worker's Threads and VmRSS every 0.5 s, /healthz (streams, latency) every 2 s.

    A thread of its own, so that a slow /healthz never stops the selector loop that reads the
    streams (a reader that is not read falls behind and skips frames)."""

    def __init__(self, pid: int, port: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.port = pid, port
        self.threads: list[int] = []
        self.rss: list[float] = []
        self.streams: list[tuple[float, int]] = []
        self.health_latency: list[float] = []
        self._halt = threading.Event()

    def run(self) -> None:
        next_health = 0.0
        while not self._halt.wait(0.5):
            try:
                t, r = proc_status(self.pid)
            except OSError:
                return
            self.threads.append(t)
            self.rss.append(r)
            now = time.monotonic()
            if now >= next_health:
                n = open_streams(self.port)
                done = time.monotonic()
                self.health_latency.append(done - now)
                if n is not None:
                    self.streams.append((done, n))
                next_health = now + 2.0

    def stop(self) -> None:
        self._halt.set()
        self.join()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, default=200, help="reading streams")
    p.add_argument("--slow", type=int, default=100, help="slow clients (never read, or half a request)")
    p.add_argument("--half", type=int, default=None,
                   help="how many of the slow clients send half a request (default slow/4)")
    p.add_argument("--extra", type=int, default=10, help="streams beyond the cap (must get 503)")
    p.add_argument("--spare-threads", type=int, default=SPARE_THREADS,
                   help="gunicorn --threads beyond the stream cap (docs/transport.md: at least 4)")
    p.add_argument("--duration", type=float, default=60.0, help="measured seconds")
    p.add_argument("--rate", type=float, default=10.0, help="snapshots per second")
    p.add_argument("--send-timeout", type=float, default=30.0, help="GPUFLOW_SEND_TIMEOUT_S")
    p.add_argument("--header-timeout", type=float, default=10.0, help="GPUFLOW_HEADER_TIMEOUT_S")
    p.add_argument("--send-buffer", type=int, default=262144,
                   help="GPUFLOW_SEND_BUFFER_BYTES (a stream socket's SO_SNDBUF; the kernel doubles it)")
    args = p.parse_args(argv)
    half = args.slow // 4 if args.half is None else args.half
    never = args.slow - half
    if not (0 <= half <= args.slow and args.clients > 0):
        p.error("need --clients > 0 and 0 <= --half <= --slow")
    max_streams = args.clients + never
    threads = max_streams + args.spare_threads

    port = free_port()
    agent = start_agent(args, port, max_streams, threads)
    sel = selectors.DefaultSelector()
    conns: list[StreamConn] = []
    failures: list[str] = []
    try:
        wait_healthy(port, agent)
        worker = worker_pid(agent.pid)
        time.sleep(1.0)  # let the collectors settle before the "before" sample
        threads_before, rss_before = proc_status(worker)
        sampler = Sampler(worker, port)
        sampler.start()
        t_open = time.monotonic()
        halves = [connect(port, "half", sel) for _ in range(half)]
        nevers = [connect(port, "never", sel) for _ in range(never)]
        readers = [connect(port, "reader", sel) for _ in range(args.clients)]
        conns = halves + nevers + readers
        deadline = time.monotonic() + args.header_timeout + 30
        while time.monotonic() < deadline and any(c.first_at is None for c in readers):
            pump(sel, time.monotonic() + 0.2)
        missing = sum(c.first_at is None for c in readers)
        if missing:
            failures.append(f"{missing} readers got no first frame")
        all_streaming = time.monotonic() - t_open

        # the cap: once every stream slot is taken (readers + never-readers), these get 503
        deadline = time.monotonic() + 30
        full = False
        while time.monotonic() < deadline and not full:
            pump(sel, time.monotonic() + 0.1)
            full = open_streams(port) == max_streams
        if not full:
            failures.append("the stream slots were never all taken")
        probes = [connect(port, "probe", sel) for _ in range(args.extra)]
        conns += probes
        pump(sel, time.monotonic() + 2.0)
        refused = sum(c.head.startswith(b"HTTP/1.1 503") and b"\r\nretry-after: " in c.head.lower()
                      for c in probes)
        if refused != len(probes):
            failures.append(f"only {refused} of {len(probes)} streams beyond the cap got 503")
        for c in probes:
            if c.closed_at is None:
                sel.unregister(c.sock)
            c.sock.close()

        seq0 = max(max(c.seqs) for c in readers if c.seqs)
        bytes0 = sum(c.bytes for c in readers)
        cpu0, t0 = cpu_seconds(worker), time.monotonic()
        pump(sel, t0 + args.duration)
        cpu1, t1 = cpu_seconds(worker), time.monotonic()
        cpu_cores = (cpu1 - cpu0) / (t1 - t0)
        seq1 = max(max(c.seqs) for c in readers if c.seqs)
        stream_bps = (sum(c.bytes for c in readers) - bytes0) / len(readers) / (t1 - t0)
        pump(sel, time.monotonic() + 0.5)  # the last frame of the window reaches everyone
        if agent.poll() is not None:
            raise SystemExit("the agent died during the run")
        sampler.stop()
        threads_during, rss_during = max(sampler.threads), max(sampler.rss)

        halves_dropped = [c.closed_at - c.opened_at for c in halves if c.closed_at is not None]
        if len(halves_dropped) != half:
            failures.append(f"{half - len(halves_dropped)} half-request clients not dropped")
        drop_seen = next((t - t_open for t, n in sampler.streams if n <= args.clients), None)
        # a never-reader is dropped once the server's send buffer (2 x SO_SNDBUF) and its own
        # receive buffer are full and a write has then waited send_timeout
        fill_s = (2 * args.send_buffer + 2 * SLOW_RCVBUF + 65536) / max(stream_bps, 1.0)
        drop_due = all_streaming + fill_s + args.send_timeout + 3
        if never and t1 - t_open > drop_due and drop_seen is None:
            failures.append(f"the never-reading clients still held stream slots "
                            f"{t1 - t_open:.0f} s after connecting (due by {drop_due:.0f} s)")

        for c in readers + nevers + halves:
            c.sock.close()
        sel.close()
        released = False
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not released:
            released = open_streams(port) == 0
            time.sleep(0.2)
        if not released:
            failures.append("streams not released after every client left")
        time.sleep(1.0)
        threads_after, rss_after = proc_status(worker)
    finally:
        for c in conns:
            try:
                c.sock.close()
            except OSError:
                pass
        stop_agent(agent)

    produced = seq1 - seq0
    ratios = frame_ratios(readers, seq0, seq1)
    min_ratio = min(ratios)
    if min_ratio < 0.95:
        failures.append(f"min_frame_ratio {min_ratio:.4f} < 0.95")
    wall = t1 - t0
    print(f"setup: max_streams={max_streams} threads={threads} send_timeout_s={args.send_timeout} "
          f"header_timeout_s={args.header_timeout} rate={args.rate}/s; all readers streaming "
          f"{all_streaming:.1f} s after the first connection")
    print(f"window={wall:.1f}s frames_produced={produced} ({produced / wall:.1f}/s) "
          f"mean_frame_ratio={sum(ratios) / len(ratios):.4f} per_reader_kB_s={stream_bps / 1e3:.1f} "
          f"agent_cpu_cores={cpu_cores:.3f}")
    print(f"cap: {refused}/{len(probes)} streams beyond max_streams answered 503 + Retry-After")
    print(f"half-request clients: {len(halves_dropped)}/{half} dropped, after "
          + (f"{min(halves_dropped):.1f}-{max(halves_dropped):.1f} s" if halves_dropped else "-"))
    print(f"never-reading clients: {never}; slots back to the readers' {args.clients} "
          + (f"{drop_seen:.0f} s after they connected" if drop_seen is not None else "not seen")
          + f" (buffers full after ~{fill_s:.0f} s, then send timeout {args.send_timeout:.0f} s)"
          + f"; open streams sampled: {[n for _, n in sampler.streams]}")
    print(f"/healthz latency during the run: max {max(sampler.health_latency):.2f} s, "
          f"median {sorted(sampler.health_latency)[len(sampler.health_latency) // 2]:.3f} s")
    print(f"agent worker threads before/during max/after: {threads_before}/{threads_during}/"
          f"{threads_after}; VmRSS MB before/during max/after: {rss_before:.1f}/{rss_during:.1f}/"
          f"{rss_after:.1f}")
    for f in failures:
        print(f"FAILED: {f}", file=sys.stderr)
    print(f"clients={len(readers)} slow={args.slow} min_frame_ratio={min_ratio:.4f} "
          f"agent_threads_max={threads_during} agent_rss_mb_max={rss_during:.1f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
