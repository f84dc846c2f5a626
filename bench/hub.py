"""What does a hub cost per agent, how far behind does it hear them, how long does it take to reach all?

    python bench/hub.py [--agents 1000] [--real 16] [--duration 20] [--traced 64] [--traced-hz 10]
                        [--extra-kernels 0] [--no-summary] [--baseline DIR [--rounds 1]] [--in-process FRAMES]

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
   frame taken times ``--traced-hz`` as above. Printed beside it (and beside the summary phase's
   figures): the hub's ``/healthz`` answer times over the window, asked every 0.1 s, a liveness
   probe's view of a busy hub. Also printed: the frames each page got a second
   and the hub's CPU in cores; a hub near one core (its Python threads share one GIL) is short of
   CPU, and sends a page fewer frames than its agent sends it (each the latest state), so its CPU
   per frame taken is then less than what a frame costs a hub that keeps up.

``--extra-kernels K`` adds K kernels to the recorded traced process's table (a program of
hundreds of kernels, as real ones are; the fake one has 4), a few of them changed in each delta.
``--baseline DIR`` (a source tree of the code before, its extensions built in place) runs each
phase with a hub of that code and one of this code alternately (``--rounds`` times), against the
same agents, and prints each hub's line (``before:``, ``after:``) and the ratios after/before;
``--no-summary`` runs the full-detail phase only, ``--traced 0`` the summary phase only (the other
figures are then nan). ``--in-process FRAMES`` first measures, in a process of each code, the CPU
a recorded frame costs the hub's network thread and a watching page (``frame_cost``: every frame
taken and encoded, which a hub short of CPU does not do).

Last line, exactly: ``agents=<n> hub_cpu_ms_per_agent_s=<c> hub_rss_mb=<m> p99_agent_to_hub_ms=<l>
reconnect_all_s=<s> traced_cpu_ms_per_agent_s=<t>``. The issue's goals: with n = 1,000 at 1 Hz,
c <= 1.0, m <= 40 + 0.1 n, l <= 100, s <= 30; t <= 10 for 64 agents at 10 Hz. The line before it
says which of them this run met (``goals: every one met`` or what it missed), where the run is
the goals' load (the defaults). First it prints this host's speed: the seconds 10 M additions
in Python take, before and after the phases. Machines of one kind differ by up to two in it (VMs
on shared hosts), and the CPU figures with it, so a figure is read beside the speed it ran at.

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

from host_speed import host_speed

HERE = Path(__file__).resolve().parent
URL_RE = re.compile(r"http://[^\s]+:(\d+)/")
TEMPLATE_NAME = "hub-bench-template-host"
#: what each frame a page gets holds once
FRAME_LINE = b"\nevent: snapshot\n"
#: the agents' kind: 8 fake GPUs, one traced process of 8 lanes
AGENT_ENV = {"GPUFLOW_NVML_FAKE": "shared8", "GPUFLOW_DISABLED_PLUGINS": "cupti", "GPUFLOW_FAKE_GPUS": "0",
             "GPUFLOW_FAKE_PROCS": "0", "GPUFLOW_FAKE_TRACED": "1", "GPUFLOW_FAKE_LANES": "8",
             "GPUFLOW_FAKE_SPANS": "20", "GPUFLOW_NVML_HISTORY": "0", "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1"}


def start(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> tuple[subprocess.Popen, int]:
    """A gpuflow command that serves; its process and port, once it printed its URL (``cwd``: where
    it runs, which ``-m`` puts first on its import path)."""
    proc = subprocess.Popen([sys.executable, "-m", "gpuflow", *argv], env={**os.environ, **env}, cwd=cwd,
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


def with_kernels(templates: dict, extra: int) -> dict:
    """``templates`` with ``extra`` more kernels in the traced process's table, as a program of
    hundreds of kernels has: all in the full frame (after the agent's own, in the table's order,
    their names after its names), and ``1 + extra // 50`` of them changed in each delta (one more
    launch each, as an agent's delta carries the entries that changed), different ones frame to
    frame. The loop of frames starts again with the full frame, so every delta follows its base."""
    if extra <= 0:
        return templates

    def doc(event: str) -> tuple[str, dict]:
        head, data = event.split("\ndata: ", 1)
        return head, json.loads(data.replace('"timestamp":@TS@', '"timestamp":"@TS@"'))

    def text(head: str, frame: dict) -> str:
        data = json.dumps(frame, separators=(",", ":")).replace('"timestamp":"@TS@"', '"timestamp":@TS@')
        return f"{head}\ndata: {data}\n\n"

    def entry(i: int, j: int, first: int) -> dict:
        return {"id": first + i, "count": 1000 + j, "total_ns": (extra - i) * 1_000_000 + j * 1000,
                "min_ns": 1000, "max_ns": 2_000_000, "timed": None}
    out = []
    firsts = {}
    for n, event in enumerate(templates["full"]):
        head, frame = doc(event)
        for t in frame["traced"]:
            key = (t["session"], t["pid"])
            if n == 0:
                firsts[key] = first = len(t["names"])
                t["names"] += [[f"extra_kernel_{i}(float*, int)", f"_Z14extra_kernel_{i}Pfi"] for i in range(extra)]
                t["kernels"] += [entry(i, 0, first) for i in range(extra)]
            elif t["names"]:
                raise SystemExit("--extra-kernels: the recorded deltas add names; record again")
            else:
                m = 1 + extra // 50
                t["kernels"] = t.get("kernels", []) + [entry((n * m + q) % extra, n, firsts[key]) for q in range(m)]
        out.append(text(head, frame))
    return {**templates, "full": out}


def frame_cost(templates_path: str, kind: str, n: int) -> dict[str, float]:
    """CPU µs a frame, in this process, of the recorded frames of ``kind`` through a hub's link
    (its SSE parser, reader, checks and lanes: the network thread's part) and then a watching
    page's host view and frame encoder (``full``; the stream threads' part): every frame taken and
    encoded, so a hub short of CPU does not look cheaper for encoding fewer. Runs the gpuflow it
    imports (``--baseline``'s, on the import path, for the code before)."""
    from gpuflow.collectors.fleet.host_table import HostTable
    from gpuflow.collectors.fleet.link import Link
    from gpuflow.collectors.fleet.sse_events import SseParser
    from gpuflow.collectors.fleet.targets import parse_url
    from gpuflow.core.board import SnapshotBoard
    from gpuflow.core.merge import merge_parts
    from gpuflow.transport.frames import FrameEncoder
    from gpuflow.transport.stream_views import HostIndex, HostViewOf

    class Hub:   # what a link asks of its hub
        credentials = None
        table = HostTable()

        def changed(self, urgent: bool) -> None:
            pass

        def watched(self, name: str) -> bool:
            return kind == "full"

    name = "replay-0001"
    frames = [e.replace("@HOST@", name).replace("@TS@", "1.0").encode()
              for e in json.loads(Path(templates_path).read_text())[kind]]
    hub, board = Hub(), SnapshotBoard()
    link = Link(parse_url("http://127.0.0.1:9"), hub)
    if hasattr(link, "new_reader"):
        reader = link.new_reader()
    else:   # the code before Link.new_reader: the reader its _follow made
        from gpuflow.collectors.fleet.lane_columns import read_rows
        from gpuflow.transport.wire import StreamReader
        reader = StreamReader(fallback_host=link.target.fallback_name, spans=read_rows)
    parser, encoder, view = SseParser(64 << 20), FrameEncoder(board), HostViewOf(name, HostIndex(), False)
    spent = {"network": 0.0, "page": 0.0}
    clock = time.process_time
    for i in range(n + 2 * len(frames)):   # the first two loops of the frames warm up
        t0 = clock()
        link._on_bytes(frames[i % len(frames)], parser, reader, kind)
        t1 = clock()
        if kind == "full":
            board.publish(view(merge_parts([hub.table.part()], seq=i + 1, timestamp=1.0)))
            frame = encoder.current()
            frame.full if frame.delta is None else frame.delta
        t2 = clock()
        if i >= 2 * len(frames):
            spent["network"] += t1 - t0
            spent["page"] += t2 - t1
    return {part: 1e6 * s / n for part, s in spent.items()}


def in_process(templates: Path, codes: list[tuple[str, dict[str, str]]], workdir: Path, n: int) -> None:
    """:func:`frame_cost` of each kind for each code, alternately, each in a process of its own."""
    costs: dict[str, list[tuple[str, dict[str, float]]]] = {"full": [], "summary": []}
    for label, code in codes:
        for kind in costs:
            out = subprocess.run([sys.executable, str(HERE / "hub.py"), "--frame-cost", str(templates), kind, str(n)],
                                 cwd=workdir, env={**os.environ, **code}, capture_output=True, text=True, check=True)
            got = json.loads(out.stdout.strip().splitlines()[-1])
            costs[kind].append((label, got))
            print(f"{label}in-process, {kind} frames: network thread {got['network']:.1f} µs a frame, page "
                  f"{got['page']:.1f} µs a frame", flush=True)
    if len(codes) > 1:
        for kind, runs in costs.items():
            ratios = [(runs[i + 1][1]["network"] + runs[i + 1][1]["page"]) / (runs[i][1]["network"] + runs[i][1]["page"])
                      for i in range(0, len(runs) - 1, 2)]
            print(f"after/before in-process {kind} frames (network + page): " + " ".join(f"{r:.3f}" for r in ratios))


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


class HealthProbe:
    """``GET /healthz`` of the hub every 0.1 s from a thread of this process while it runs (a
    liveness probe's view of a busy hub: its answer waits for the interpreter's lock behind the
    hub's own threads); each answer's time, request to the last byte, in ms."""

    def __init__(self, port: int) -> None:
        self.port, self.times, self._stop = port, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            t0 = time.perf_counter()
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
                    s.sendall(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nConnection: close\r\n\r\n".encode())
                    while s.recv(65536):
                        pass
            except OSError:
                continue
            self.times.append((time.perf_counter() - t0) * 1000)

    def stop(self) -> str:
        self._stop.set()
        self._thread.join()
        t = sorted(self.times)
        if not t:
            return "the hub's /healthz: no answer"
        return (f"the hub's /healthz meanwhile: p50 {t[len(t) // 2]:.1f} ms, p99 {p99(t):.1f} ms, "
                f"max {t[-1]:.1f} ms ({len(t)} answers)")


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


def code_env(baseline: Path | None, cwd: Path) -> dict[str, str]:
    """The environment of a hub (run in ``cwd``) of the code under test, or of ``baseline`` (a
    source tree of the code before, its extensions built in place), checked to import from it."""
    given = os.environ.get("PYTHONPATH")   # what the machine needs besides (packages put aside)
    env = {} if baseline is None else {"PYTHONPATH": str(baseline.resolve()) + (os.pathsep + given if given else "")}
    where = Path(subprocess.run([sys.executable, "-c", "import gpuflow; print(gpuflow.__file__)"], cwd=cwd,
                                env={**os.environ, **env}, capture_output=True, text=True, check=True).stdout.strip())
    if baseline is not None and not where.resolve().is_relative_to(baseline.resolve()):
        raise SystemExit(f"--baseline: gpuflow imports from {where}, not from the tree given")
    if baseline is None and where.resolve().parent.parent != HERE.parent:
        raise SystemExit(f"the hub would import gpuflow from {where}, not from this tree")
    return env


def summary_phase(code: dict[str, str], targets: Path, n: int, real: int, replay: subprocess.Popen,
                  duration: float) -> dict[str, float]:
    """A hub following every agent's summary: its CPU per agent-second, RSS, p99 lag, reconnect."""
    hub, hub_port = start(["hub", "--port", "0", "--targets", str(targets)], {**code, "GPUFLOW_HUB_MAX_HOSTS": str(n + 1)},
                          targets.parent)
    try:
        reconnect = wait_all(hub_port, n)
        time.sleep(3)
        probe = HealthProbe(hub_port)
        c, c_taken = cpu_ms_per_agent_s(hub.pid, n, duration, replay, "summary", n - real, 1.0)
        health = probe.stop()
        m = rss_mb(hub.pid)
        lags: dict[bool, list[float]] = {True: [], False: []}   # by: from a real agent
        for _ in range(5):
            for h in hosts(hub_port):
                if h["state"] == "up" and h["lag_ms"] is not None:
                    lags[h["name"].startswith("real-")].append(h["lag_ms"])
            time.sleep(0.4)
    finally:
        stop(hub)
    print(f"p99 lag: replay agents {p99(lags[False]):.1f} ms, real agents {p99(lags[True]):.1f} ms "
          f"(a real agent's frame leaves it late when it is short of CPU); {health}", flush=True)
    return {"c": c, "c_taken": c_taken, "m": m, "l99": p99(lags[True] + lags[False]), "reconnect": reconnect}


def detail_phase(code: dict[str, str], targets: Path, ports: list[int], replay: subprocess.Popen, duration: float,
                 hz: int) -> dict[str, float]:
    """A hub following ``ports``' replay agents, every one watched by a page: its CPU per
    agent-second, the frames taken and paged, its cores."""
    n = len(ports)
    targets.write_text(json.dumps([{"targets": [f"127.0.0.1:{p}" for p in ports]}]))
    hub, hub_port = start(["hub", "--port", "0", "--targets", str(targets)], {**code, "GPUFLOW_MAX_STREAMS": str(n + 8)},
                          targets.parent)
    socks: list[socket.socket] = []
    try:
        wait_all(hub_port, n)
        paged, socks = watchers(hub_port, [h["name"] for h in hosts(hub_port)])
        wait_all(hub_port, n, want="full")
        time.sleep(3)
        p0, w0, h0 = paged[0], time.monotonic(), cpu_s(hub.pid)
        probe = HealthProbe(hub_port)
        t, t_taken = cpu_ms_per_agent_s(hub.pid, n, duration, replay, "full", n, hz)
        print(f"full detail: {probe.stop()}", flush=True)
        w = time.monotonic() - w0
        t_paged, t_cores = (paged[0] - p0) / (n * w), (cpu_s(hub.pid) - h0) / w
    finally:
        for s in socks:
            s.close()
        stop(hub)
    return {"t": t, "t_taken": t_taken, "t_paged": t_paged, "t_cores": t_cores}


def report(label: str, hz: int, got: dict[str, float]) -> None:
    """What a phase's CPU figures stand on: the frames taken and paged, the hub's cores."""
    if "c" in got:
        print(f"{label}summaries: frames taken per agent-second {got['c_taken']:.2f} (the agents send 1)", flush=True)
    if "t" in got:
        short = (" (near 1, the GIL's bound: it is short of CPU, and a page then gets fewer frames than its "
                 "agent sends, each the latest state)") if got["t_cores"] >= 0.9 else ""
        print(f"{label}full detail: frames taken per agent-second {got['t_taken']:.2f} (they send {hz}), "
              f"{got['t_paged']:.2f} frames a second to each page, the hub at {got['t_cores']:.2f} cores{short}",
              flush=True)


def last_line(n: int, got: dict[str, float]) -> str:
    """The bench's line (nan for a phase not run)."""
    nan = float("nan")
    return (f"agents={n} hub_cpu_ms_per_agent_s={got.get('c', nan):.3f} hub_rss_mb={got.get('m', nan):.1f} "
            f"p99_agent_to_hub_ms={got.get('l99', nan):.1f} reconnect_all_s={got.get('reconnect', nan):.2f} "
            f"traced_cpu_ms_per_agent_s={got.get('t', nan):.3f}")


#: the issue's goals: (the figure's key, its name in the last line, its bound for n agents)
GOALS = (("c", "hub_cpu_ms_per_agent_s", lambda n: 1.0), ("m", "hub_rss_mb", lambda n: 40 + 0.1 * n),
         ("l99", "p99_agent_to_hub_ms", lambda n: 100.0), ("reconnect", "reconnect_all_s", lambda n: 30.0),
         ("t", "traced_cpu_ms_per_agent_s", lambda n: 10.0))


def verdict(n: int, got: dict[str, float]) -> str:
    """Which goals a run at the goals' load met: ``every one met``, or each one missed with its
    figure and bound (a figure the run did not measure is missed)."""
    missed = [f"{name} {got.get(key, float('nan')):.3f} > {bound(n):g}" for key, name, bound in GOALS
              if not got.get(key, float("inf")) <= bound(n)]
    return "goals: " + ("every one met" if not missed else "missed: " + ", ".join(missed))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--agents", type=int, default=1000)
    p.add_argument("--real", type=int, default=16)
    p.add_argument("--duration", type=float, default=20.0)
    p.add_argument("--traced", type=int, default=64, help="agents watched at full detail (0: no such phase)")
    p.add_argument("--traced-hz", type=int, default=10)
    p.add_argument("--extra-kernels", type=int, default=0,
                   help="kernels added to the traced process's table (the recorded one has 4)")
    p.add_argument("--no-summary", action="store_true", help="the full-detail phase only")
    p.add_argument("--baseline", type=Path, default=None,
                   help="a source tree of the code before (extensions built in place): each phase runs a hub of "
                        "it and one of this code, alternately, against the same agents")
    p.add_argument("--rounds", type=int, default=1, help="with --baseline: alternations of the two hubs")
    p.add_argument("--in-process", type=int, default=0, metavar="FRAMES",
                   help="first, the CPU a frame of each kind costs in-process (frame_cost), over FRAMES frames")
    p.add_argument("--frame-cost", nargs=3, metavar=("TEMPLATES", "KIND", "FRAMES"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.frame_cost:   # one frame_cost run, for in_process
        print(json.dumps(frame_cost(args.frame_cost[0], args.frame_cost[1], int(args.frame_cost[2]))))
        return
    n, real = args.agents, max(0, min(args.real, 16, args.agents))
    print(host_speed(), flush=True)
    procs: list[subprocess.Popen] = []
    workdir = Path(tempfile.mkdtemp(prefix="gpuflow-hub-bench-"))
    codes = [("", code_env(None, workdir))]
    if args.baseline is not None:
        codes = [(label, env) for _ in range(args.rounds)
                 for label, env in (("before: ", code_env(args.baseline, workdir)), ("after:  ", codes[0][1]))]
    results: list[tuple[str, dict[str, float]]] = []
    try:
        templates = workdir / "templates.json"
        templates.write_text(json.dumps(with_kernels(record(args.traced_hz), args.extra_kernels)))
        if args.in_process:
            in_process(templates, codes, workdir, args.in_process)
        replay_n = max(n - real, args.traced)
        replay = subprocess.Popen([sys.executable, str(HERE / "hub_replay.py"), str(templates), str(replay_n)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(replay)
        replay_ports = json.loads(replay.stdout.readline())
        real_ports = []
        for i in range(real if not args.no_summary else 0):
            proc, port = start(["watch", "--port", "0", "--interval", "1000", "--plugin", "gpuflow.testing.fake_collector"],
                               {**AGENT_ENV, "NODE_NAME": f"real-{i:02d}", "GPUFLOW_FAKE_RATE_HZ": "1"})
            procs.append(proc)
            real_ports.append(port)
        targets = workdir / "targets.json"
        for label, code in codes:
            got: dict[str, float] = {}
            if not args.no_summary:
                ports = real_ports + replay_ports[:n - real]
                targets.write_text(json.dumps([{"targets": [f"127.0.0.1:{p}" for p in ports], "labels": {"job": "gpuflow"}}]))
                got.update(summary_phase(code, targets, n, real, replay, args.duration))
            if args.traced > 0:   # full detail: a second hub, every host watched
                got.update(detail_phase(code, targets, replay_ports[:args.traced], replay, args.duration, args.traced_hz))
            results.append((label, got))
            report(label, args.traced_hz, got)
            print(label + last_line(n, got), flush=True)
    finally:
        for proc in reversed(procs):
            stop(proc)
    if args.baseline is not None:
        for key, name in (("c", "hub_cpu_ms_per_agent_s"), ("m", "hub_rss_mb"), ("t", "traced_cpu_ms_per_agent_s")):
            pairs = [(results[i][1][key], results[i + 1][1][key]) for i in range(0, len(results), 2)
                     if key in results[i][1]]
            if pairs:
                print(f"after/before {name}: " + " ".join(f"{a / b:.3f}" for b, a in pairs)
                      + f" (before {' '.join(f'{b:.3f}' for b, _ in pairs)}; after {' '.join(f'{a:.3f}' for _, a in pairs)})")
    print(host_speed(), flush=True)
    load = ("agents", "real", "traced", "traced_hz", "no_summary", "extra_kernels")   # the defaults are the goals' load
    print(verdict(n, results[-1][1]) if all(getattr(args, k) == p.get_default(k) for k in load) else
          "goals: not judged (they are stated for the defaults: " + ", ".join(f"--{k.replace('_', '-')} "
                                                                              f"{p.get_default(k)}" for k in load) + ")")
    print(last_line(n, results[-1][1]))


if __name__ == "__main__":
    main()
