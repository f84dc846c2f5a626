"""Kernel end → visible at a browser's SSE client: p50 and p99, on a real GPU.

Runs ``gpuflow run -- pulse`` (bench/workloads/pulse.cu: one short kernel every 50 ms), connects
an SSE client to the agent before the pulses start, and for every pulse_kernel span computes
receive time − kernel end (CUPTI timestamp mapped to CLOCK_REALTIME by the ring's clock sync;
the client reads CLOCK_REALTIME on the same machine). Budget: p50 ≤ 100 ms, p99 ≤ 200 ms.

Usage: python bench/latency.py PULSE_BINARY [--count 100] [--period-ms 50]
Last line: ``latency_p50_ms=<x> latency_p99_ms=<y> spans=<n>``.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import threading

from sse_client import connect, events

from gpuflow.transport.wire import StreamReader


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pulse")
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--period-ms", type=int, default=50)
    ap.add_argument("--json-out")
    args = ap.parse_args()
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuflow", "run", "--port", str(port), "--no-summary", "--",
         args.pulse, str(args.count), str(args.period_ms), "3000"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    latencies: list[float] = []
    seen: set[int] = set()
    sock = connect("127.0.0.1", port)

    def close_when_done() -> None:
        proc.wait()
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    threading.Thread(target=close_when_done, daemon=True).start()
    reader = StreamReader()   # the stream's compact form, read back to plain spans
    try:
        for recv_ns, name, data in events(sock):
            if name != "snapshot":
                continue
            frame = reader.read(json.loads(data))
            for traced in frame.get("traced", []):
                for lane in traced.get("lanes", []):
                    for span in lane.get("spans", []):
                        if span["kind"] != "kernel" or "pulse_kernel" not in (span.get("name") or ""):
                            continue
                        key = (traced["pid"], span["seq"])
                        if key in seen:
                            continue
                        seen.add(key)
                        end_ns = span["start_us"] * 1000 + span["dur_ns"]
                        latencies.append((recv_ns - end_ns) / 1e6)
    except OSError:
        pass
    proc.wait()
    err = proc.stderr.read() if proc.stderr else ""
    if not latencies:
        print(err, file=sys.stderr)
        print("latency_p50_ms=nan latency_p99_ms=nan spans=0")
        return 1
    p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
    print(f"min={min(latencies):.1f} mean={statistics.fmean(latencies):.1f} max={max(latencies):.1f} ms "
          f"over {len(latencies)} of {args.count} pulses")
    if args.json_out:
        with open(args.json_out, "w") as fh:
            json.dump({"latencies_ms": latencies, "p50": p50, "p99": p99}, fh)
    print(f"latency_p50_ms={p50:.1f} latency_p99_ms={p99:.1f} spans={len(latencies)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
