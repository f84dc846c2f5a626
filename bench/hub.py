"""What does a hub cost per agent, how far behind does it hear them, how long does it take to reach all?

    python bench/hub.py [--agents 1000] [--real 16] [--duration 20] [--traced 64] [--traced-hz 10]

Real agents (``gpuflow watch``, the fake NVML backend's 8-GPU scenario ``shared8`` and the fake
traced collector) on loopback ports, ``--real`` of them (at most 16: each is a Python process);
beyond that, replay agents (bench/hub_replay.py: one process serving, on one port per agent, the
frames recorded first from a real agent of the same kind, each under its own host name and
timestamped when sent). Then:

1. **Summary.** ``gpuflow hub --targets FILE`` (a Prometheus file_sd file listing every agent)
   starts; ``reconnect_all_s`` is the time from its URL being printed (it serves) to every host
   heard from (a frame taken) in its overview (``/api/stream?detail=hosts``, looked at every
   0.2 s), as a restarted hub reconnecting its fleet (64 dialling at once). After 3 s the hub
   process's CPU (utime + stime, /proc) over ``--duration`` seconds gives ``hub_cpu_ms_per_agent_s``
   (CPU ms per agent per second: agents' frames at 1 Hz, summaries), with no page connected: the
   hub's CPU per frame the replay agents wrote to it meanwhile, times the agents' rate, so that a
   hub short of CPU (it reads less, and the agents, held back by their sockets, send less) is not
   credited with the frames it did not take (the frames taken per agent-second are printed);
   ``hub_rss_mb`` is its resident memory then; ``p99_agent_to_hub_ms`` the 99th percentile of every
   host's ``lag_ms`` (the age of its latest frame when the hub took it; one clock here) over five
   looks at the hub's overview after the window.
2. **Full detail.** A second hub follows ``--traced`` replay agents streaming full detail (their
   traced process's 8 lanes, recorded at ``--traced-hz``): a page watches every one of them
   (one ``/api/stream?host=`` each, read and thrown away by this process), so the hub takes their
   lanes; ``traced_cpu_ms_per_agent_s`` is the hub's CPU per agent-second over ``--duration``, per
   frame taken times ``--traced-hz`` as above. Printed beside it: the frames each page got a second
   and the hub's CPU in cores; a hub near one core (its Python threads share one GIL) is short of
   CPU, and sends a page fewer frames than its agent sends it (each the latest state), so its CPU
   per frame taken is then less than what a frame costs a hub that keeps up.

Last line, exactly: ``agents=<n> hub_cpu_ms_per_agent_s=<c> hub_rss_mb=<m> p99_agent_to_hub_ms=<l>
reconnect_all_s=<s> traced_cpu_ms_per_agent_s=<t>``. The issue's goals: with n = 1,000 at 1 Hz,
c <= 1.0, m <= 40 + 0.1 n, l <= 100, s <= 30; t <= 10 for 64 agents at 10 Hz.

Constraints: Linux (/proc), loopback only, no GPU; every process it starts is stopped at the end
(also on an error); it needs about 4 file descriptors per agent.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import selectors
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
URL_RE = re.compile(r"http://[^\s]+:(\d+)/")
TEMPLATE_NAME = "hub-bench-template-host"
#: what each frame a page gets holds once
FRAME_LINE = b"\nevent: snapshot\n"
#: the agents' kind: 8 fake GPUs, one traced process of 8 lanes
AGENT_ENV = {"GPUFLOW_NVML_FAKE": "shared8", "GPUFLOW_DISABLED_PLUGINS": "cupti", "GPUFLOW_FAKE_GPUS": "0",
             "GPUFLOW_FAKE_PROCS": "0", "GPUFLOW_FAKE_TRACED": "1", "GPUFLOW_FAKE_LANES": "8",
             "GPUFLOW_FAKE_SPANS": "20", "GPUFLOW_NVML_HISTORY": "0", "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1"}


def start(argv: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, int]:
    """A gpuflow command that serves; its process and port, once it printed its URL."""
    proc = subprocess.Popen([sys.executable, "-m", "gpuflow", *argv], env={**os.environ, **env},
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = []
    for line in proc.stdout:
        seen.append(line)
        m = URL_RE.search(line)
        if m:
            out = proc.stdout
            threading.Thread(target=lambda: [None for _ in out], daemon=True).start()
            return proc, int(m.group(1))
    raise SystemExit("gpuflow did not start:\n" + "".join(seen))


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def events(port: int, path: str, count: int, timeout: float = 30) -> list[str]:
    """The first ``count`` data events of a stream, as the SSE text the agent sent."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.sendall(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    f = sock.makefile("rb")
    while f.readline() not in (b"\r\n", b"\n", b""):
        pass
    out, block = [], []
    while len(out) < count:
        line = f.readline()
        if not line:
            break
        if line == b"\n":
            text = b"".join(block).decode()
            if "\ndata: " in "\n" + text:
                out.append(text + "\n")
            block = []
        else:
            block.append(line)
    sock.close()
    return out


def templated(event: str) -> str:
    event = event.replace(TEMPLATE_NAME, "@HOST@")
    return re.sub(r'"timestamp":[-0-9.e+]+', '"timestamp":@TS@', event, count=1)


def record(duration_hz: int) -> dict:
    """Frames of a real agent of the bench's kind, as replay templates."""
    proc, port = start(["watch", "--port", "0", "--interval", "1000", "--plugin", "gpuflow.testing.fake_collector"],
                       {**AGENT_ENV, "NODE_NAME": TEMPLATE_NAME, "GPUFLOW_FAKE_RATE_HZ": str(duration_hz)})
    try:
        time.sleep(2)
        summary = []
        for _ in range(8):   # full frames, a second apart
            summary += events(port, "/api/stream?detail=summary", 1)
            time.sleep(1)
        full = events(port, "/api/stream", 4 * duration_hz)
    finally:
        stop(proc)
    return {"summary": [templated(e) for e in summary], "full": [templated(e) for e in full], "full_hz": duration_hz}


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) / 1024


def hosts(port: int) -> list[dict]:
    """Every host's tile, from the first frame of the hub's overview (``detail=hosts``), which
    costs the hub far less than its snapshot of every device."""
    return json.loads(events(port, "/api/stream?detail=hosts", 1)[0].split("\ndata: ", 1)[1])["hosts"]


def wait_all(port: int, n: int, want: str = "heard", timeout: float = 300) -> float:
    """Seconds until ``n`` hosts were heard from (a frame taken: ``seen`` set), or hold ``want``
    detail."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if sum(1 for h in hosts(port) if (h["seen"] is not None if want == "heard" else h["detail"] == want)) >= n:
            return time.monotonic() - t0
        time.sleep(0.2)
    raise SystemExit(f"the hub did not have {n} hosts {want} within {timeout} s")


def p99(values: list[float]) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(0.99 * len(values)))] if values else float("nan")


def sent(replay: subprocess.Popen, kind: str) -> int:
    """Frames of ``kind`` the replay agents have written so far (hub_replay.py's ``count``)."""
    replay.stdin.write("count\n")
    replay.stdin.flush()
    return json.loads(replay.stdout.readline())[kind]


def cpu_ms_per_agent_s(pid: int, n: int, duration: float, replay: subprocess.Popen, kind: str,
                       replayed: int, rate: float) -> tuple[float, float]:
    """The hub's CPU ms per agent-second at ``rate`` frames an agent-second (its CPU per frame the
    ``replayed`` replay agents wrote, times ``rate``), and the frames taken per agent-second."""
    c0, f0, t0 = cpu_s(pid), sent(replay, kind), time.monotonic()
    time.sleep(duration)
    c, f, t = cpu_s(pid) - c0, sent(replay, kind) - f0, time.monotonic() - t0
    taken = f / (replayed * t) if replayed else rate
    return c * 1000 / (n * t) * rate / max(taken, 1e-9), taken


def watchers(port: int, names: list[str]) -> tuple[list[int], list[socket.socket]]:
    """One page per host, watching it (its stream read and thrown away by a selector thread); the
    frames the pages got so far (``event: snapshot`` lines, one a frame, counted as they arrive)."""
    sel, socks, got, tails = selectors.DefaultSelector(), [], [0], {}
    for name in names:
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(f"GET /api/stream?host={name} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        socks.append(s)

    def drain() -> None:
        while socks:
            for key, _ in sel.select(0.5):
                try:
                    data = key.fileobj.recv(1 << 20)
                except OSError:
                    continue
                if not data:
                    sel.unregister(key.fileobj)
                text = tails.get(key.fd, b"") + data
                got[0] += text.count(FRAME_LINE)
                tails[key.fd] = text[1 - len(FRAME_LINE):]   # a line cut between two reads, not a whole one
    threading.Thread(target=drain, daemon=True).start()
    return got, socks


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--agents", type=int, default=1000)
    p.add_argument("--real", type=int, default=16)
    p.add_argument("--duration", type=float, default=20.0)
    p.add_argument("--traced", type=int, default=64)
    p.add_argument("--traced-hz", type=int, default=10)
    args = p.parse_args()
    n, real = args.agents, max(0, min(args.real, 16, args.agents))
    procs: list[subprocess.Popen] = []
    workdir = Path(tempfile.mkdtemp(prefix="gpuflow-hub-bench-"))
    try:
        templates = workdir / "templates.json"
        templates.write_text(json.dumps(record(args.traced_hz)))
        replay_n = max(n - real, args.traced)
        replay = subprocess.Popen([sys.executable, str(HERE / "hub_replay.py"), str(templates), str(replay_n)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(replay)
        replay_ports = json.loads(replay.stdout.readline())
        real_ports = []
        for i in range(real):
            proc, port = start(["watch", "--port", "0", "--interval", "1000", "--plugin", "gpuflow.testing.fake_collector"],
                               {**AGENT_ENV, "NODE_NAME": f"real-{i:02d}", "GPUFLOW_FAKE_RATE_HZ": "1"})
            procs.append(proc)
            real_ports.append(port)
        ports = real_ports + replay_ports[:n - real]
        targets = workdir / "targets.json"
        targets.write_text(json.dumps([{"targets": [f"127.0.0.1:{p}" for p in ports], "labels": {"job": "gpuflow"}}]))
        hub, hub_port = start(["hub", "--port", "0", "--targets", str(targets)], {"GPUFLOW_HUB_MAX_HOSTS": str(n + 1)})
        procs.append(hub)
        reconnect = wait_all(hub_port, n)
        time.sleep(3)
        c, c_taken = cpu_ms_per_agent_s(hub.pid, n, args.duration, replay, "summary", n - real, 1.0)
        m = rss_mb(hub.pid)
        lags: dict[bool, list[float]] = {True: [], False: []}   # by: from a real agent
        for _ in range(5):
            for h in hosts(hub_port):
                if h["state"] == "up" and h["lag_ms"] is not None:
                    lags[h["name"].startswith("real-")].append(h["lag_ms"])
            time.sleep(0.4)
        l99 = p99(lags[True] + lags[False])
        print(f"p99 lag: replay agents {p99(lags[False]):.1f} ms, real agents {p99(lags[True]):.1f} ms "
              f"(a real agent's frame leaves it late when it is short of CPU)", flush=True)
        stop(hub)
        # full detail: a second hub, every host watched
        t_ports = replay_ports[:args.traced]
        targets.write_text(json.dumps([{"targets": [f"127.0.0.1:{p}" for p in t_ports]}]))
        hub2, hub2_port = start(["hub", "--port", "0", "--targets", str(targets)], {"GPUFLOW_MAX_STREAMS": str(args.traced + 8)})
        procs.append(hub2)
        wait_all(hub2_port, args.traced)
        names = [h["name"] for h in hosts(hub2_port)]
        paged, socks = watchers(hub2_port, names)
        wait_all(hub2_port, args.traced, want="full")
        time.sleep(3)
        p0, w0, h0 = paged[0], time.monotonic(), cpu_s(hub2.pid)
        t, t_taken = cpu_ms_per_agent_s(hub2.pid, args.traced, args.duration, replay, "full", args.traced,
                                        args.traced_hz)
        w = time.monotonic() - w0
        t_paged, t_cores = (paged[0] - p0) / (args.traced * w), (cpu_s(hub2.pid) - h0) / w
        for s in socks:
            s.close()
    finally:
        for proc in reversed(procs):
            stop(proc)
    print(f"frames taken per agent-second: summaries {c_taken:.2f} (the agents send 1), full detail "
          f"{t_taken:.2f} (they send {args.traced_hz}); full detail: {t_paged:.2f} frames a second to each "
          f"page, the hub at {t_cores:.2f} cores (near 1, the GIL's bound, it is short of CPU: a page then "
          f"gets fewer frames than its agent sends, each the latest state)", flush=True)
    print(f"agents={n} hub_cpu_ms_per_agent_s={c:.3f} hub_rss_mb={m:.1f} p99_agent_to_hub_ms={l99:.1f} "
          f"reconnect_all_s={reconnect:.2f} traced_cpu_ms_per_agent_s={t:.3f}")


if __name__ == "__main__":
    main()
