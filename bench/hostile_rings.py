"""Benchmark: the agent's memory and answer times while hostile traced programs write their rings.

    python bench/hostile_rings.py [--seconds 15] [--rate 200000] [--scenarios NAME,...]

The agent is the real ``gpuflow watch`` (NVML off: the rings are the question), taking rings on a
socket of its own (``GPUFLOW_RING_SOCKET``, in a private directory) as under a gunicorn deployment.
Each hostile traced program is a separate process (tests/support/hostile.py, run, not imported:
this script imports only its own folder and the installed package) that hands the agent a real
ring made by the compiled test producer (the injected library's own ring code) and writes one
attack into it, ``--rate`` records a second (0: as fast as the agent drains; 200,000, the default,
is the launch storm's rate on an H200, and leaves a small machine's other core to the agent):
a million distinct kernel names, 4,096 names of
4 KiB, 10,000 lanes, 200,000 names announced and never finished, timestamps of 0 and 2^64-1 and
ends before starts, 4,096 names that each demangle to 106,432 characters, all of them in one ring
(``together``), a header whose head, tail or capacity lies, and a ring 64 times the agent's own size filled as fast as the producer can. Scenarios run
one at a time, each against a fresh agent, first ``benign`` (a busy real program's records, as
fast: the point of comparison on a shared machine), then every producer at once (``all_at_once``:
its snapshot holds all of them, each within its own bound).

Sampled throughout, from another thread each: the agent's resident size (VmRSS of its process,
and of its demangling helper, a child process of its own), ``GET /api/snapshot`` (bytes and
answer time, the whole body read) and ``GET /healthz`` (answer time), every 0.2 s, and the agent's
CPU time over the scenario. Idle is the agent's median resident size over 2 s after it answered
its first snapshot, before any producer, with the answer times of those 2 s.

Last line: ``rss_above_idle_mb=<max> snapshot_max_bytes=<max> snapshot_max_ms=<max>
healthz_max_ms=<max>``, the maxima over the hostile scenarios (the snapshot's size over those of
one hostile ring: ``all_at_once`` holds several); goals 150 MB plus the flight recorder's budget
(``--retain-mb``, 256 by default as the agent's: records it retains are held by design), 5,000,000
bytes, 200 ms, 50 ms
(docs/reliability.md states them and the figures measured).

Constraints: Linux, gcc (the test producer is built here), no GPU; the producers are Python
(ctypes) and take a core each, so on a small machine the answer times are the machine's as much as
the agent's: compare them with ``benign``'s.
"""

from __future__ import annotations

import argparse
import http.client
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUPPORT = ROOT / "tests" / "support"
#: run, not imported (see the module docstring)
PRODUCER_BUILDER = SUPPORT / "ringproducer.py"
HOSTILE = SUPPORT / "hostile.py"
SCENARIOS = ("distinct_names", "long_names", "many_lanes", "unfinished_names", "extreme_times", "demangled_names",
             "together", "head_lies", "tail_lies", "capacity_lies", "huge_ring")
#: benign first (the comparison), every attack at once last
ORDER = ("benign", *SCENARIOS, "all_at_once")


def status_kib(pid: int, field: str = "VmRSS") -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid: int) -> list[int]:
    """The child processes of every thread of ``pid`` (the demangling helper is a collector thread's)."""
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def percentile(values: list[float], p: float) -> float:
    """Nearest rank: the smallest value at or above ``p`` percent of them."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, -(-len(ordered) * p // 100) - 1))] if ordered else float("nan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port: int, path: str, timeout: float = 30.0) -> tuple[int, int, float]:
    """(status, body bytes, seconds until the whole body was read)."""
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}"})
        r = conn.getresponse()
        body = r.read()
        return r.status, len(body), time.perf_counter() - t0
    finally:
        conn.close()


class Sampler(threading.Thread):
    """Samples one thing every ``period`` seconds into ``samples`` until stopped."""

    def __init__(self, sample, period: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.sample, self.period = sample, period
        self.samples: list = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.period):
            try:
                self.samples.append(self.sample())
            except OSError as exc:
                self.samples.append(exc)


#: the agent's flight recorder budget by default (--retain-mb): the memory bound is 150 MB above
#: idle plus it
RETAIN_MB = 256


def start_agent(workdir: Path, port: int, retain_mb: int) -> tuple[subprocess.Popen, str]:
    private = Path(tempfile.mkdtemp(prefix="rings-", dir=workdir))  # 0700
    sock = str(private / "agent.sock")
    env = dict(os.environ, GPUFLOW_RING_SOCKET=sock, GPUFLOW_DISABLED_PLUGINS="nvml",
               GPUFLOW_DISABLE_PLUGIN_AUTOLOAD="1", GPUFLOW_RETAIN_MB=str(retain_mb))
    agent = subprocess.Popen([sys.executable, "-m", "gpuflow", "watch", "--port", str(port)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if agent.poll() is not None:
            raise SystemExit(f"the agent exited: {agent.stderr.read() if agent.stderr else ''}")
        try:
            if get(port, "/healthz", 2)[0] == 200 and get(port, "/api/snapshot", 5)[0] == 200:
                return agent, sock
        except OSError:
            pass
        time.sleep(0.1)
    agent.kill()
    raise SystemExit("the agent did not answer within 60 s")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` (every thread), in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def idle_figures(agent: subprocess.Popen, port: int) -> tuple[int, list[float], list[float]]:
    """The agent before any producer: median RSS (KiB), /api/snapshot and /healthz times (ms)."""
    rss, snap, health = [], [], []
    for _ in range(10):
        snap.append(get(port, "/api/snapshot")[2] * 1e3)
        health.append(get(port, "/healthz")[2] * 1e3)
        rss.append(status_kib(agent.pid))
        time.sleep(0.2)
    return int(statistics.median(rss)), snap, health


def stop_agent(agent: subprocess.Popen) -> None:
    agent.terminate()
    try:
        agent.wait(timeout=20)
    except subprocess.TimeoutExpired:
        agent.kill()
        agent.wait()


def run_scenario(name: str, attacks: list[str], lib: str, workdir: Path, seconds: float, rate: float,
                 retain_mb: int) -> dict:
    """A fresh agent, its idle size, then ``attacks`` (one producer each) sampled throughout."""
    port = free_port()
    agent, sock = start_agent(workdir, port, retain_mb)
    try:
        idle_kib, idle_snapshot_ms, idle_healthz_ms = idle_figures(agent, port)
        cpu0, t0 = cpu_seconds(agent.pid), time.monotonic()
        result = _sampled(name, attacks, lib, sock, agent, port, seconds, rate, idle_kib)
        result["agent_cores"] = (cpu_seconds(agent.pid) - cpu0) / (time.monotonic() - t0)
        result["idle_mb"] = idle_kib / 1024
        result["idle_snapshot_ms"], result["idle_healthz_ms"] = idle_snapshot_ms, idle_healthz_ms
        result["agent_alive"] = agent.poll() is None
        return result
    finally:
        stop_agent(agent)


def _sampled(name: str, attacks: list[str], lib: str, sock: str, agent: subprocess.Popen, port: int,
             seconds: float, rate: float, idle_kib: int) -> dict:
    rss = Sampler(lambda: (status_kib(agent.pid), sum(status_kib(c) for c in children(agent.pid))))
    snap = Sampler(lambda: get(port, "/api/snapshot"))
    health = Sampler(lambda: get(port, "/healthz"))
    for s in (rss, snap, health):
        s.start()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (str(SUPPORT), os.environ.get("PYTHONPATH")))))
    producers = [subprocess.Popen([sys.executable, str(HOSTILE), "produce", lib, sock, attack, str(seconds), str(rate)],
                                  env=env, stderr=subprocess.PIPE, text=True) for attack in attacks]
    for p in producers:
        p.wait(timeout=seconds + 120)
    time.sleep(1.0)  # the agent's final drains of the rings that ended
    for s in (rss, snap, health):
        s.stop.set()
        s.join()
    errors = [p.stderr.read().strip().splitlines()[-1] for p in producers if p.returncode and p.stderr]
    snaps = [x for x in snap.samples if not isinstance(x, OSError)]
    healths = [x for x in health.samples if not isinstance(x, OSError)]
    return {
        "scenario": name,
        "rss_above_idle_mb": (max(r[0] for r in rss.samples) - idle_kib) / 1024,
        "helper_mb": max(r[1] for r in rss.samples) / 1024,
        "snapshot_max_bytes": max(s[1] for s in snaps),
        "snapshot_ms": [s[2] * 1e3 for s in snaps],
        "snapshot_statuses": sorted({s[0] for s in snaps}),
        "healthz_ms": [h[2] * 1e3 for h in healths],
        "healthz_statuses": sorted({h[0] for h in healths}),
        "failed_samples": sum(isinstance(x, OSError) for x in snap.samples + health.samples),
        "producer_errors": errors,
    }


def describe(r: dict) -> str:
    sm, hm = r["snapshot_ms"], r["healthz_ms"]
    return (f"{r['scenario']:>16}: RSS +{r['rss_above_idle_mb']:6.1f} MB over {r['idle_mb']:.1f} (helper "
            f"{r['helper_mb']:5.1f} MB), agent {r['agent_cores']:.2f} cores; idle before: /api/snapshot max "
            f"{max(r['idle_snapshot_ms']):.1f} ms, /healthz max {max(r['idle_healthz_ms']):.1f} ms; "
            f"/api/snapshot <= {r['snapshot_max_bytes']:>9,} B, p50 {percentile(sm, 50):6.1f} / p99 "
            f"{percentile(sm, 99):6.1f} / max {max(sm):6.1f} ms ({len(sm)} samples, status "
            f"{r['snapshot_statuses']}); /healthz p50 {percentile(hm, 50):5.1f} / p99 {percentile(hm, 99):5.1f} / "
            f"max {max(hm):5.1f} ms (status {r['healthz_statuses']})"
            + (f"; {r['failed_samples']} requests failed" if r["failed_samples"] else "")
            + (f"; producer errors: {r['producer_errors']}" if r["producer_errors"] else "")
            + ("" if r["agent_alive"] else "; THE AGENT DIED"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=15.0, help="how long each hostile producer writes")
    ap.add_argument("--rate", type=float, default=200_000.0, help="records a second per producer (0: unpaced)")
    ap.add_argument("--scenarios", default=",".join(ORDER))
    ap.add_argument("--retain-mb", type=int, default=RETAIN_MB,
                    help="the agent's flight recorder budget (default 256, the agent's; 0: none)")
    args = ap.parse_args()
    chosen = args.scenarios.split(",")
    unknown = set(chosen) - set(ORDER)
    if unknown:
        ap.error(f"unknown scenarios {sorted(unknown)}; known: {', '.join(ORDER)}")
    pace = f"{args.rate:,.0f} records/s each" if args.rate else "unpaced"
    print(f"hostile_rings: gpuflow watch, a fresh one per scenario; {args.seconds:.0f} s per producer, {pace}")
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}, "
          f"Python {platform.python_version()}; load average {os.getloadavg()[0]:.1f}", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="gpuflow-hostile-") as tmp:
        workdir = Path(tmp)
        lib = subprocess.run([sys.executable, str(PRODUCER_BUILDER), str(workdir)], check=True,
                             capture_output=True, text=True).stdout.strip()
        for name in chosen:
            attacks = list(SCENARIOS) if name == "all_at_once" else [name]
            results.append(run_scenario(name, attacks, lib, workdir, args.seconds, args.rate,
                                        args.retain_mb))
            print(describe(results[-1]), flush=True)
    hostile = [r for r in results if r["scenario"] != "benign"] or results
    one_ring = [r for r in hostile if r["scenario"] != "all_at_once"] or hostile
    print(f"rss_above_idle_mb={max(r['rss_above_idle_mb'] for r in hostile):.1f} "
          f"snapshot_max_bytes={max(r['snapshot_max_bytes'] for r in one_ring)} "
          f"snapshot_max_ms={max(max(r['snapshot_ms']) for r in hostile):.1f} "
          f"healthz_max_ms={max(max(r['healthz_ms']) for r in hostile):.1f}")
    failed = [r["scenario"] for r in results if r["producer_errors"]]
    if failed:   # their attacks never ran: the figures above measured an idle agent
        print(f"hostile_rings: producers failed in {', '.join(failed)}; those figures do not measure "
              "their attacks", file=sys.stderr)
    return 0 if all(r["agent_alive"] for r in results) and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
