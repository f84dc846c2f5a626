"""Soak of ``gpuflow run`` on a real GPU for scripts/gpu-check (stage ``soak``): is the agent flat?

Runs ``gpuflow run`` for SECONDS on a traced tree that keeps it busy in two ways at once: one
long-lived PyTorch training loop (a steady record stream) and a shell loop that starts a new
``demo_workload`` process again and again (a ring handed over, drained, finished and released each
time). One SSE client stays connected to /api/stream the whole time. Every SAMPLE_S seconds the
agent's RSS, open file descriptors and threads, the number of rings it has mapped and their resident
size, and the frames the client has received are written to soak.csv.

The verdict compares everything after a warm-up (WARMUP_S) with the first sample after it: RSS
within ±10 %, descriptors not growing, rings mapped only for live processes, and no private socket
directory left at the end; the RSS slope (least squares, MB per hour) is printed so a short soak can
be extrapolated honestly. Last line: ``soak_s=<x> rss_mb_start=<a> rss_mb_end=<b> rss_dev_pct=<c>
rss_slope_mb_per_h=<d> fds_start=<e> fds_max=<f> rings_max=<g> dirs_left=<h> processes=<n>
frames=<m> soak_ok=<yes|no>``.

Usage: ``python3 scripts/gpu_soak.py BIN_DIR OUT_DIR SECONDS``. Constraints: Linux, standard
library only, run from the repository root with gpuflow installed.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time

SAMPLE_S = 5.0
WARMUP_S = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_status(pid: int) -> dict[str, int]:
    values = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "Threads"):
                values[key] = int(rest.split()[0])
    values["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return values


#: how a ring's memory file shows in /proc/<pid>/smaps (memfd_create's name)
RING_MAPPING = "/memfd:gpuflow-ring (deleted)"


def agent_rings(pid: int) -> tuple[int, int]:
    """The rings the agent has mapped, and their resident bytes (/proc/<pid>/smaps)."""
    count = rss = 0
    inside = False
    try:
        with open(f"/proc/{pid}/smaps") as fh:
            for line in fh:
                first = line.split(" ", 1)[0]
                if "-" in first and ":" not in first:
                    inside = line.rstrip().endswith(RING_MAPPING)
                    count += inside
                elif inside and line.startswith("Rss:"):
                    rss += int(line.split()[1]) * 1024
    except OSError:
        pass
    return count, rss


def socket_dirs() -> set[str]:
    """The agents' private ring socket directories (gpuflow-<16 hex digits>), where gpuflow run
    makes them: $XDG_RUNTIME_DIR when it is private, else the temporary directory."""
    import re
    import tempfile
    found = set()
    for base in {os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir(), tempfile.gettempdir()}:
        try:
            found |= {os.path.join(base, e) for e in os.listdir(base) if re.fullmatch(r"gpuflow-[0-9a-f]{16}", e)}
        except OSError:
            pass
    return found


class StreamClient(threading.Thread):
    """Reads /api/stream until the server closes it, counting complete SSE events."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port, self.frames, self.reconnects = port, 0, -1

    def run(self) -> None:
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                conn.request("GET", "/api/stream", headers={"Host": f"127.0.0.1:{self.port}"})
                resp = conn.getresponse()
                self.reconnects += 1
                pending = b""
                while chunk := resp.read1(65536):
                    pending += chunk
                    *events, pending = pending.split(b"\n\n")
                    self.frames += sum(1 for e in events if b"\ndata:" in b"\n" + e)
            except OSError:
                pass
            time.sleep(0.5)


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    n = len(points)
    if n < 2:
        return 0.0
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    return 0.0 if var == 0 else sum((t - mt) * (v - mv) for t, v in points) / var * 3600


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__)
        return 2
    bin_dir, out_dir, seconds = argv[1], argv[2], float(argv[3])
    os.makedirs(out_dir, exist_ok=True)
    demo = os.path.join(bin_dir, "demo_workload")
    tree = (f"{sys.executable} bench/workloads/torch_train.py --seconds {seconds:.0f} > /dev/null & "
            f"end=$((SECONDS+{seconds:.0f})); n=0; while [ $SECONDS -lt $end ]; do "
            f"'{demo}' 300 > /dev/null || exit 1; n=$((n+1)); done; wait; echo processes=$((n+1))")
    port = free_port()
    dirs_before = socket_dirs()
    log = open(os.path.join(out_dir, "soak_gpuflow.log"), "w")
    summary_path = os.path.join(out_dir, "soak_summary.json")
    agent = subprocess.Popen([sys.executable, "-m", "gpuflow", "run", "--port", str(port), "--no-summary",
                              "--summary-json", summary_path, "--", "bash", "-c", tree], stdout=subprocess.PIPE, stderr=log, text=True)
    client = StreamClient(port)
    time.sleep(3)
    client.start()
    samples = []
    start = time.monotonic()
    with open(os.path.join(out_dir, "soak.csv"), "w") as csv:
        csv.write("t_s,rss_kb,fds,threads,rings,ring_rss_bytes,frames\n")
        while agent.poll() is None:
            try:
                st = proc_status(agent.pid)
            except OSError:
                break
            rings, ring_bytes = agent_rings(agent.pid)
            t = time.monotonic() - start
            samples.append((t, st["VmRSS"], st["fds"], st["Threads"], rings, ring_bytes, client.frames))
            csv.write(",".join(str(round(v, 1)) for v in samples[-1]) + "\n")
            csv.flush()
            time.sleep(SAMPLE_S)
    out = agent.stdout.read() if agent.stdout else ""
    status = agent.wait()
    dirs_left = len(socket_dirs() - dirs_before)
    processes = next((ln.split("=")[1] for ln in out.splitlines() if ln.startswith("processes=")), "?")
    try:
        with open(summary_path) as fh:
            summary = json.load(fh)
        seen = len(summary["traced"]) + sum(r["processes"] for r in summary["traced_retired"])
        launches = sum(k["count"] for t in summary["traced"] + summary["traced_retired"] for k in t["kernels"])
        print(f"summary: traced_kept={len(summary['traced'])} folded={seen - len(summary['traced'])} "
              f"traced_total={seen} kernel_launches={launches}")
    except (OSError, ValueError, KeyError) as exc:
        print(f"summary: unreadable ({exc})")
    after = [s for s in samples if s[0] >= min(WARMUP_S, seconds / 4)]
    if not after:
        print("soak_ok=no (no samples after warm-up)")
        return 0
    rss0 = after[0][1]
    dev = max(abs(s[1] - rss0) for s in after) / rss0 * 100
    fds0, fds_max = after[0][2], max(s[2] for s in after)
    rings_max = max(s[4] for s in samples)
    slope = slope_per_hour([(s[0], s[1] / 1024) for s in after])
    ok = status == 0 and dev <= 10 and fds_max <= fds0 + 4 and dirs_left == 0 and rings_max <= 4
    print(f"soak_s={samples[-1][0]:.0f} rss_mb_start={rss0 / 1024:.1f} rss_mb_end={after[-1][1] / 1024:.1f} "
          f"rss_dev_pct={dev:.1f} rss_slope_mb_per_h={slope:.2f} fds_start={fds0} fds_max={fds_max} "
          f"threads_max={max(s[3] for s in after)} rings_max={rings_max} dirs_left={dirs_left} processes={processes} "
          f"frames={client.frames} reconnects={client.reconnects} status={status} soak_ok={'yes' if ok else 'no'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
