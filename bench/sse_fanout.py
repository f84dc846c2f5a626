"""SSE fan-out bench: N concurrent /api/stream clients against a real gunicorn agent.

    python bench/sse_fanout.py [--clients 200] [--rate 10] [--duration 30]

Starts ``gunicorn 'gpuflow.transport.app:get_app()'`` (gthread, one worker, clients + 8 threads)
fed by the fake collector at ``--rate`` snapshots per second (NVML and CUPTI disabled), opens
``--clients`` streams from this one process (non-blocking sockets on one selector, so the
clients cost little), waits until every client has its first frame, then measures for
``--duration`` seconds:

* per client, the frames received with a seq inside the window versus the frames the agent
  produced inside it (the seq advanced by), and the worst client's ratio;
* the agent worker's CPU from /proc/<pid>/stat (utime + stime) over the window, in cores.

Last line, exactly: ``clients=<n> min_frame_ratio=<r> agent_cpu_cores=<c>``. Goals: r >= 0.95,
c <= 1.0. Exit status 1 if a client never got a first frame or the agent died.

Constraints: Linux (/proc); no GPU; loopback only; the clients parse only the ``id:`` line of
each event (one event per HTTP chunk, so ids are found without de-chunking).
"""

from __future__ import annotations

import argparse
import os
import selectors
import socket
import subprocess
import sys
import time
from pathlib import Path

from sse_pump import (StreamConn, children, cpu_seconds, frame_ratios, free_port, pump,  # noqa: E402
                      stop_agent, stream_request)

ROOT = Path(__file__).resolve().parents[1]


def start_agent(args: argparse.Namespace, port: int) -> subprocess.Popen:
    env = dict(os.environ)
    env.update({
        "GPUFLOW_PLUGINS": "gpuflow.testing.fake_collector",
        "GPUFLOW_DISABLED_PLUGINS": "nvml,cupti",
        "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1",
        "GPUFLOW_FAKE_RATE_HZ": str(args.rate),
        "GPUFLOW_FAKE_LANES": str(args.lanes),
        "GPUFLOW_FAKE_SPANS": str(args.spans),
        "GPUFLOW_MAX_STREAMS": str(args.clients + 2),
        "PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
    })
    cmd = [sys.executable, "-m", "gunicorn", "-c", "python:gpuflow.transport.gunicorn_conf",
           "gpuflow.transport.app:get_app()", "--threads", str(args.clients + 8),
           "--no-control-socket", "--log-level", "warning", "-b", f"127.0.0.1:{port}"]
    return subprocess.Popen(cmd, env=env, cwd=ROOT, stdin=subprocess.DEVNULL)


def wait_healthy(port: int, proc: subprocess.Popen, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"gunicorn exited with status {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                if s.recv(64).startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit("agent did not become healthy")


def open_clients(n: int, port: int, sel: selectors.BaseSelector) -> list[StreamConn]:
    clients = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(stream_request(port))
        s.setblocking(False)
        c = StreamConn(s)
        sel.register(s, selectors.EVENT_READ, c)
        clients.append(c)
    return clients


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, default=200)
    p.add_argument("--rate", type=float, default=10.0, help="snapshots per second")
    p.add_argument("--duration", type=float, default=30.0, help="measured seconds")
    p.add_argument("--lanes", type=int, default=4, help="fake lanes per traced process")
    p.add_argument("--spans", type=int, default=4, help="fake new spans per lane per frame")
    args = p.parse_args(argv)

    port = free_port()
    agent = start_agent(args, port)
    sel = selectors.DefaultSelector()
    try:
        wait_healthy(port, agent)
        workers = children(agent.pid)
        if len(workers) != 1:
            raise SystemExit(f"expected one gunicorn worker, found {workers}")
        worker = workers[0]
        clients = open_clients(args.clients, port, sel)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(c.first_at is None for c in clients):
            pump(sel, time.monotonic() + 0.2)
        missing = sum(c.first_at is None for c in clients)
        if missing:
            print(f"{missing} clients got no first frame", file=sys.stderr)
            return 1
        pump(sel, time.monotonic() + 1.0)  # settle: every client past its full frame
        seq0 = max(max(c.seqs) for c in clients)
        cpu0, t0, own0 = cpu_seconds(worker), time.monotonic(), os.times()
        pump(sel, t0 + args.duration)
        cpu1, t1, own1 = cpu_seconds(worker), time.monotonic(), os.times()
        seq1 = max(max(c.seqs) for c in clients)
        pump(sel, time.monotonic() + 0.5)  # let the last frame of the window arrive everywhere
        if agent.poll() is not None:
            print("the agent died during the run", file=sys.stderr)
            return 1
    finally:
        for key in list(sel.get_map().values()):
            key.fileobj.close()
        stop_agent(agent)

    produced = seq1 - seq0
    ratios = frame_ratios(clients, seq0, seq1)
    wall = t1 - t0
    cores = (cpu1 - cpu0) / wall
    client_cores = ((own1.user + own1.system) - (own0.user + own0.system)) / wall
    mb_s = sum(c.bytes for c in clients) / len(clients) / wall / 1e6
    print(f"window={wall:.1f}s frames_produced={produced} ({produced / wall:.1f}/s) "
          f"mean_frame_ratio={sum(ratios) / len(ratios):.4f} "
          f"full_frames_after_first={sum(c.fulls - 1 for c in clients)} "
          f"per_client_MB_s={mb_s:.3f} client_process_cores={client_cores:.2f}")
    print(f"clients={len(clients)} min_frame_ratio={min(ratios):.4f} agent_cpu_cores={cores:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
