"""Per-client bandwidth of /api/stream: the stream's compact form vs the verbose one it replaced.

Two measurements in one run, each with both encodings:

* **replay** — docs/images/h200-demo_workload.sse.gz, the stream ``gpuflow run -- ./demo_workload``
  served on an H200 (4 lanes, ~18 frames/s) in the verbose form. Its snapshots are rebuilt (the
  full frame, then each delta's new spans appended and trimmed to the agent's sample) and
  encoded again by both encoders; bytes per second of recorded time, as a client that keeps up
  receives them (one full frame, then deltas).
* **live** — a real agent (``gpuflow.core.agent.Agent``) fed by ``gpuflow.testing.fake_collector``
  as a busy traced program: 16 lanes, 512 new spans per lane per tick (every lane refills its
  whole 512-span sample every frame), the 40 kernel names of a real PyTorch training loop
  (C++ templates, ~450 characters on average), 20 ticks/s. A client reads /api/stream over a
  socket for ``--duration`` seconds: bytes per second of wall time. First the compact stream alone (the budget figure: nothing else takes
  CPU from the agent), then two embedded servers on one agent, verbose and compact, one client
  each, over the same window (the ratio: both see the same snapshots). The verbose encoder is
  slow enough on a small machine to hold the frame rate down, which understates its bytes/s.

The verbose encoder (:class:`VerboseEncoder`) is the frame encoder as it was before the compact
form (schema 1: spans as objects repeating their kernel names, deltas carrying every new span),
kept here only for this comparison.

Usage: python bench/sse_bandwidth.py [--duration 10] [--lanes 16] [--spans 512] [--rate 20]
Last line: ``sse_bytes_per_s=<n> budget_bytes_per_s=1000000 ratio_vs_old=<r>`` — the live
compact stream's bytes per second (alone), the design budget, and compact / verbose side by side.
"""

from __future__ import annotations

import argparse
import gzip
import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

from gpuflow.core.board import SnapshotBoard
from gpuflow.core.snapshot import (
    Attachment, Device, HostInfo, KernelStat, Lane, Problem, Process, Snapshot, Span,
    TracedProcess, TransferStat,
)
from gpuflow.transport.frames import Frame, FrameEncoder, dumps

ROOT = Path(__file__).resolve().parents[1]
RECORDING = ROOT / "docs" / "images" / "h200-demo_workload.sse.gz"
TORCH_SUMMARY = ROOT / "measurements" / "2026-11-30-h200-1-full-check" / "summary_torch.json"
BUDGET = 1_000_000


# -- the verbose encoding, as it was ----------------------------------------------------------------
class VerboseEncoder(FrameEncoder):
    """The frame encoder before the compact form: ``to_json_dict()`` as is, deltas cut spans only."""

    def __init__(self, board: SnapshotBoard, boot_epoch: int | None = None) -> None:
        super().__init__(board, boot_epoch, span_rate=None)
        self._maxima: dict[tuple, int] = {}

    def _encode(self, snap: Snapshot, prev: Frame | None) -> Frame:
        doc = snap.to_json_dict()
        head = b"id: " + self.event_id(snap.seq).encode() + b"\nevent: snapshot\ndata: "
        full = head + dumps({"frame": "full", "base_seq": None, **doc}) + b"\n\n"
        delta = None
        if prev is not None:
            traced = []
            for t in doc["traced"]:
                lanes = []
                for lane in t["lanes"]:
                    last = self._maxima.get(_lane_key(t, lane))
                    if last is not None:
                        lane = {**lane, "spans": [s for s in lane["spans"] if s["seq"] > last]}
                    lanes.append(lane)
                traced.append({**t, "lanes": lanes})
            delta = head + dumps({"frame": "delta", "base_seq": prev.seq, **doc,
                                  "traced": traced}) + b"\n\n"
        self._maxima = {_lane_key(t, lane): max(s["seq"] for s in lane["spans"])
                        for t in doc["traced"] for lane in t["lanes"] if lane["spans"]}
        return Frame(snapshot=snap, seq=snap.seq, full=full, delta=delta,
                     base_seq=prev.seq if prev is not None else None)


def _lane_key(t: dict, lane: dict) -> tuple:
    return (t["session"], t["pid"], lane["device"], lane["context"], lane["stream"])


# -- replay: the recorded H200 stream ---------------------------------------------------------------
def recorded_frames(path: Path) -> list[dict[str, Any]]:
    """The data of every snapshot event in a gzipped SSE recording."""
    out = []
    for event in gzip.open(path, "rt", encoding="utf-8").read().split("\n\n"):
        for line in event.split("\n"):
            if line.startswith("data: "):
                out.append(json.loads(line[6:]))
    return out


def _tuple3(v: Any) -> tuple[int, int, int] | None:
    return None if v is None else tuple(v)


def rebuild_snapshots(frames: list[dict[str, Any]]) -> list[Snapshot]:
    """The agent's snapshots behind a verbose stream (a full frame, then deltas that follow)."""
    kept: dict[tuple, list[dict]] = {}
    out = []
    for f in frames:
        if f["frame"] == "delta" and out and f["base_seq"] != out[-1].seq:
            raise ValueError(f"delta {f['seq']} does not follow {out[-1].seq}")
        traced = []
        for t in f["traced"]:
            lanes = []
            for lane in t["lanes"]:
                key = _lane_key(t, lane)
                spans = (kept.get(key, []) if f["frame"] == "delta" else []) + lane["spans"]
                spans = spans[len(spans) - (lane["executions"] - lane["spans_elided"]):]
                kept[key] = spans
                lanes.append(Lane(**{**lane, "spans": tuple(
                    Span(**{**s, "grid": _tuple3(s["grid"]), "block": _tuple3(s["block"])})
                    for s in spans)}))
            plain = {k: v for k, v in t.items() if k not in ("complete", "kernels", "transfers", "lanes")}
            traced.append(TracedProcess(**plain, kernels=tuple(KernelStat(**k) for k in t["kernels"]),
                                        transfers=tuple(TransferStat(**x) for x in t["transfers"]),
                                        lanes=tuple(lanes)))
        host = {k: v for k, v in f["host"].items() if k != "problems"}
        out.append(Snapshot(
            seq=f["seq"], timestamp=f["timestamp"], host=HostInfo(**host),
            problems=tuple(Problem(**p) for p in f["host"]["problems"]),
            devices=tuple(Device(**d) for d in f["devices"]),
            processes=tuple(Process(**{**p, "attachments": tuple(Attachment(**a) for a in p["attachments"])})
                            for p in f["processes"]),
            traced=tuple(traced), sources=tuple(f["sources"])))
    return out


def replay(snapshots: list[Snapshot], encoder_class) -> dict[str, float]:
    """What a client that keeps up receives: the first frame full, then every delta."""
    board = SnapshotBoard()
    enc = encoder_class(board, boot_epoch=1)
    sizes = []
    encode_s = 0.0
    for i, snap in enumerate(snapshots):
        board.publish(snap)
        t0 = time.perf_counter()
        frame = enc.current()
        encode_s += time.perf_counter() - t0
        sizes.append(len(frame.full if i == 0 else frame.delta))
    seconds = snapshots[-1].timestamp - snapshots[0].timestamp
    # the first frame opens the window: bytes after it over the time after it
    return {"frames": len(sizes), "full_bytes": sizes[0], "delta_bytes_mean": sum(sizes[1:]) / (len(sizes) - 1),
            "bytes_per_s": sum(sizes[1:]) / seconds, "fps": (len(sizes) - 1) / seconds,
            "encode_ms": encode_s / len(sizes) * 1e3}


# -- live: a real agent, a busy fake traced program, two servers ------------------------------------
def torch_kernels() -> tuple[tuple[str, str, tuple, tuple], ...]:
    """(demangled, mangled, grid, block) of the 40 kernels a PyTorch training loop ran on the H200
    (measurements/…/summary_torch.json; demangled names average ~450 characters). The
    summary has no launch geometry: each gets one of a few common shapes."""
    shapes = (((4096, 1, 1), (128, 1, 1)), ((132, 1, 1), (384, 1, 1)), ((1024, 2, 1), (32, 16, 1)),
              ((16, 32, 8), (128, 1, 1)))
    summary = json.loads(TORCH_SUMMARY.read_text())
    names = sorted({(k["name"], k["mangled"]) for t in summary["traced"] for k in t["kernels"]})
    return tuple((n, m, *shapes[i % len(shapes)]) for i, (n, m) in enumerate(names))


class Reader(threading.Thread):
    """One SSE client: counts the bytes and frames it receives, from ``start()`` until closed."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.sendall(f"GET /api/stream HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                          "Accept: text/event-stream\r\n\r\n".encode())
        self.lock = threading.Lock()
        self.bytes = self.frames = self.full = 0
        self.first = threading.Event()

    def run(self) -> None:
        tail = b""
        while True:
            try:
                data = self.sock.recv(1 << 20)
            except OSError:
                return
            if not data:
                return
            seen = tail + data
            with self.lock:
                self.bytes += len(data)
                self.frames += seen.count(b"\nevent: snapshot\n") - tail.count(b"\nevent: snapshot\n")
                self.full += seen.count(b'"frame":"full"') - tail.count(b'"frame":"full"')
            tail = seen[-32:]
            if self.frames:
                self.first.set()

    def counts(self) -> tuple[int, int, int]:
        with self.lock:
            return self.bytes, self.frames, self.full

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def live(args, encodings: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """One agent, one embedded server and one client per encoding, measured over the same window."""
    from gpuflow.core.agent import Agent
    from gpuflow.core.context import AgentConfig
    from gpuflow.core.plugins import get_plugin_manager
    from gpuflow.testing import fake_collector
    from gpuflow.transport.app import AppSettings, create_app
    from gpuflow.transport.server import EmbeddedServer

    fake_collector.KERNELS = torch_kernels()   # the busy program's long C++ names
    env = {"GPUFLOW_DISABLED_PLUGINS": "nvml,cupti", "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1"}
    options = {"fake": {"rate_hz": args.rate, "gpus": 8, "procs": 9, "traced": 1,
                        "lanes": args.lanes, "spans": args.spans, "span_cap": 512}}
    agent = Agent(AgentConfig(options=options), get_plugin_manager([fake_collector.__name__], environ=env))
    agent.start()
    apps = {k: create_app(agent, settings=AppSettings(poll_s=0.1)) for k in encodings}
    if "verbose" in apps:
        apps["verbose"].state.frames = VerboseEncoder(agent.board)
    servers = {k: EmbeddedServer(app, "127.0.0.1", 0) for k, app in apps.items()}
    for s in servers.values():
        s.serve_in_thread()
    readers = {k: Reader(s.port) for k, s in servers.items()}
    try:
        for r in readers.values():
            r.start()
        for r in readers.values():
            if not r.first.wait(30):
                raise SystemExit("no first frame within 30 s")
        time.sleep(1.0)   # past the full frame, into the steady state
        seq0, t0 = agent.board.latest().seq, time.monotonic()
        before = {k: r.counts() for k, r in readers.items()}
        time.sleep(args.duration)
        after = {k: r.counts() for k, r in readers.items()}
        seconds, seq1 = time.monotonic() - t0, agent.board.latest().seq
    finally:
        for r in readers.values():
            r.close()
        for s in servers.values():
            s.shutdown()
        for app in apps.values():
            app.close()
        agent.stop()
    out = {}
    for k in readers:
        nbytes, frames, full = (a - b for a, b in zip(after[k], before[k]))
        out[k] = {"bytes_per_s": nbytes / seconds, "fps": frames / seconds, "full_frames": full,
                  "bytes_per_frame": nbytes / max(1, frames), "agent_fps": (seq1 - seq0) / seconds}
    return out


def print_live(label: str, res: dict[str, dict[str, float]]) -> None:
    for k, r in res.items():
        print(f"  {label:13s} {k:8s} {r['bytes_per_s'] / 1e6:7.3f} MB/s  {r['fps']:5.1f} frames/s "
              f"(agent {r['agent_fps']:4.1f})  {r['bytes_per_frame'] / 1e3:7.1f} kB/frame  "
              f"full frames after the first: {r['full_frames']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=10.0, help="live measuring window, seconds")
    ap.add_argument("--lanes", type=int, default=16, help="lanes of the fake traced program")
    ap.add_argument("--spans", type=int, default=512, help="new spans per lane per fake tick")
    ap.add_argument("--rate", type=float, default=20.0, help="fake ticks (snapshots) per second")
    args = ap.parse_args()

    snaps = rebuild_snapshots(recorded_frames(RECORDING))
    print(f"replay: {RECORDING.name}, {len(snaps)} snapshots over "
          f"{snaps[-1].timestamp - snaps[0].timestamp:.2f} s, "
          f"{len(snaps[0].traced[0].lanes)} lanes (H200, gpuflow run -- ./demo_workload)")
    rows = [("verbose (before)", VerboseEncoder),
            ("compact, every new span", lambda board, boot_epoch: FrameEncoder(board, boot_epoch, span_rate=None)),
            ("compact (after)", FrameEncoder)]
    res = {}
    for label, cls in rows:
        r = res[label] = replay(snaps, cls)
        print(f"  {label:26s} {r['bytes_per_s'] / 1e6:6.3f} MB/s  {r['fps']:5.1f} frames/s  "
              f"full {r['full_bytes'] / 1e3:6.1f} kB  delta {r['delta_bytes_mean'] / 1e3:6.1f} kB  "
              f"encode {r['encode_ms']:5.1f} ms/snapshot")
    replay_ratio = res["compact (after)"]["bytes_per_s"] / res["verbose (before)"]["bytes_per_s"]
    print(f"  replay_ratio_vs_old={replay_ratio:.3f}")

    print(f"live: fake busy traced program, {args.lanes} lanes x {args.spans} new spans per tick, "
          f"{args.rate:g} ticks/s, {len(torch_kernels())} PyTorch kernel names, {args.duration:g} s each")
    alone = live(args, ("compact",))
    print_live("alone", alone)
    both = live(args, ("verbose", "compact"))
    print_live("side by side", both)
    ratio = both["compact"]["bytes_per_s"] / both["verbose"]["bytes_per_s"]
    print(f"sse_bytes_per_s={alone['compact']['bytes_per_s']:.0f} budget_bytes_per_s={BUDGET} "
          f"ratio_vs_old={ratio:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
