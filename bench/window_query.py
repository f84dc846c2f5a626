"""Benchmark: GET /api/window for a 1 s window of 100 k spans over 16 lanes, request to parsed answer.

    python bench/window_query.py [--spans N] [--lanes L] [--answers A] [--width PX]

A ring written with 100 k executions in one second (kernels over ~200 long mangled names on 16
lanes: 2 devices x 8 streams, some copies and memsets), drained by the compiled decoder into the
flight recorder's records (a Retention, as the CUPTI collector's), named and labelled by the
collector's TracedBuilder, and answered by the CUPTI plugin's real ``query_window`` hook through
the agent, the real app and the embedded server on a loopback port; a client asks for that
second over HTTP and parses the answer. Three questions, interleaved, each ``--answers`` times:
every execution exactly (no width: 100 k spans, column by column) in the JSON form and in the
columnar form (``format=columns``: gpuflow.transport.window_columns, read by its reader into
``array('q')`` columns), side by side; and the same second at ``--width`` pixels in JSON (the
page's question: lanes denser than the width come back as buckets). The plugin's answer alone (the
hook, before any encoding) is timed too, and the client's parse (``json.loads``, or the columnar
reader) within each answer; both exact forms are checked to hold the same answer.

Last line: ``window_query_p95_ms=<x>`` for the exact second in the columnar form (goal x <= 100);
the two lines before it: ``exact_json_p95_ms=<y>`` (the same answer in JSON) and
``width_<PX>_p95_ms=<z>`` (the page's question). docs/recorder.md states the figures measured.

Constraints: the compiled decoder must be built; no GPU, no traced process (the collector's ring
handover is not what is measured: its recorder is given the decoder directly).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import random
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from gpuflow.collectors.cupti import _layout as L
from gpuflow.collectors.cupti.decoder import RetentionC, RingDecoderC
from gpuflow.collectors.cupti.plugin import SLOT, _State
from gpuflow.collectors.cupti.recorder import Recorder
from gpuflow.collectors.cupti.traced_builder import TracedBuilder
from gpuflow.core.agent import Agent
from gpuflow.core.context import AgentConfig
from gpuflow.core.plugins import get_plugin_manager
from gpuflow.transport import window_columns
from gpuflow.transport.app import AppSettings, create_app
from gpuflow.transport.server import EmbeddedServer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from recorder import COMMON, COPY, FAMILIES, KERNEL, name_records, ring  # noqa: E402

WALL0 = 1_764_000_000_000_000_000
CUPTI0 = 1_000_000_000


def one_second(spans: int, lanes: int, seed: int = 3) -> bytes:
    """``spans`` executions over ``lanes`` lanes in one second, after the names and a clock pair."""
    rng = random.Random(seed)
    out = [COMMON.pack(L.REC_CLOCK_SYNC, 0, 0, CUPTI0, WALL0, 0, 0) + bytes(32)]
    for nid in range(1, 201):
        out += name_records(nid, f"{FAMILIES[nid % 5]}{nid}v".encode())
    keys = [(d, 1, 13 + s) for d in range(2) for s in range(lanes // 2)][:lanes]
    gap = 1_000_000_000 // spans
    for i in range(spans):
        dev, ctx, stream = keys[i % lanes]
        t = CUPTI0 + i * gap
        r = rng.random()
        if r < 0.88:
            out.append(COMMON.pack(L.REC_KERNEL, 0, dev, t, t + gap * lanes // 2, ctx, stream)
                       + KERNEL.pack(7, 1 + rng.randrange(200), 128 + rng.randrange(4096), 1, 1, 256, 1, 1, 32, 0, 0))
        elif r < 0.97:
            nbytes = 4096 << rng.randrange(12)
            out.append(COMMON.pack(L.REC_MEMCPY, 0, dev, t, t + gap, ctx, stream)
                       + COPY.pack(7, rng.choice((1, 2, 8)), 0, 0, nbytes, dev, dev, 0, 0))
        else:
            out.append(COMMON.pack(L.REC_MEMSET, 0, dev, t, t + gap, ctx, stream) + COPY.pack(7, 0, 0, 3, 1 << 20, 0, 0, 0, 0))
    return b"".join(out)


class CollectorStandIn:
    """What the CUPTI plugin asks of its collector for a window, answered by a real Recorder."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def window(self, start_s: float, end_s: float, pid: int | None, width_px: int | None):
        return self.recorder.window(start_s, end_s, pid, width_px)


def timed(port: int, path: str) -> tuple[float, float, int, int, Any]:
    """Seconds from request to parsed answer, of them the client's parse, the body's size, its exact
    spans and the parsed answer."""
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}"})
    response = conn.getresponse()
    body = response.read()
    t_read = time.perf_counter()
    columnar = response.getheader("Content-Type") == window_columns.MEDIA_TYPE
    doc = window_columns.read(body) if columnar else json.loads(body)
    elapsed = time.perf_counter() - t0
    parse = time.perf_counter() - t_read
    conn.close()
    if response.status != 200:
        raise SystemExit(f"/api/window answered {response.status}: {body[:200]!r}")
    spans = sum(len(lane["spans"]["seq"]) if "spans" in lane else 0
                for proc in doc["processes"] for lane in proc["lanes"])
    return elapsed, parse, len(body), spans, doc


def as_lists(value: Any) -> Any:
    """A parsed answer with every column a list, as the JSON form has it."""
    if isinstance(value, dict):
        return {key: as_lists(v) for key, v in value.items()}
    if isinstance(value, list):
        return [as_lists(v) for v in value]
    return value.tolist() if hasattr(value, "tolist") else value


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, int(len(values) * 0.95 + 0.5) - 1)] * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spans", type=int, default=100_000)
    ap.add_argument("--lanes", type=int, default=16)
    ap.add_argument("--answers", type=int, default=40)
    ap.add_argument("--width", type=int, default=1920)
    args = ap.parse_args()
    if RingDecoderC is None:
        raise SystemExit("the compiled decoder is not built")
    records = one_second(args.spans, args.lanes)
    n = len(records) // L.RECORD_SIZE
    buf = ring(records, 1 << max(10, (n - 1).bit_length()))
    decoder = RingDecoderC(buf, retention=RetentionC(256 << 20))
    decoder.drain()
    builder = TracedBuilder(os.getpid(), "bench", 512)
    builder.build(decoder, name="bench", state="running", exit_status=None, truncated=False, now_ns=WALL0)
    recorder = Recorder("cupti", decoder.retention, None, threading.Lock())
    Recorder.note_clock(recorder.track(os.getpid(), "bench", "bench", decoder, builder), decoder.clock())
    pm = get_plugin_manager(environ={"GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1", "GPUFLOW_DISABLED_PLUGINS": "nvml"})
    agent = Agent(AgentConfig(), pm)
    agent.context.slots[SLOT] = _State(collector=CollectorStandIn(recorder))  # type: ignore[arg-type]
    server = EmbeddedServer(create_app(agent, settings=AppSettings(start_agent=False)), "127.0.0.1", 0)
    server.serve_in_thread()
    t0, t1 = WALL0 / 1e9, WALL0 / 1e9 + 1.0
    print(f"window_query: {args.spans:,} executions in 1 s on {args.lanes} lanes; machine {platform.machine()}, "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}", flush=True)
    try:
        hook = []
        for _ in range(args.answers):
            t = time.perf_counter()
            agent.query_window(t0, t1, None, None)
            hook.append(time.perf_counter() - t)
        window = f"/api/window?from={t0:.6f}&to={t1:.6f}"
        paths = {"json": window, "columns": f"{window}&format=columns", "reduced": f"{window}&width={args.width}"}
        got: dict[str, list[tuple[float, float, int, int]]] = {}
        answers: dict[str, Any] = {}
        for _ in range(args.answers):
            for question, path in paths.items():
                *figures, answers[question] = timed(server.port, path)
                got.setdefault(question, []).append(tuple(figures))
    finally:
        server.shutdown()
    if as_lists(answers["columns"]) != answers["json"]:
        raise SystemExit("the columnar answer differs from the JSON one")
    for question in paths:
        if len({answer[2:] for answer in got[question]}) != 1:
            raise SystemExit(f"the {question} answers differ in size or spans from one to the next")
    size, spans = got["json"][0][2:]
    if spans != args.spans or got["columns"][0][3] != args.spans:
        raise SystemExit(f"the exact answers held {spans:,} and {got['columns'][0][3]:,} spans, not {args.spans:,}")
    print(f"the plugin's answer (query_window, before encoding): p50 {statistics.median(hook) * 1e3:.1f} ms, "
          f"p95 {p95(hook):.1f} ms")
    print("request to parsed answer, interleaved:")
    size_c, size_r, spans_r = got["columns"][0][2], *got["reduced"][0][2:]
    described = {"json": f"exact, JSON ({spans:,} spans, {size / 1e6:.2f} MB; client json.loads",
                 "columns": f"exact, format=columns ({spans:,} spans, {size_c / 1e6:.2f} MB; client "
                            "window_columns.read",
                 "reduced": f"at {args.width} px, JSON ({spans_r:,} spans exact, the rest in buckets, "
                            f"{size_r / 1e3:.1f} kB; client json.loads"}
    p95s, p50s = {}, {}
    for question in paths:
        total, parse = [a[0] for a in got[question]], [a[1] for a in got[question]]
        p95s[question], p50s[question] = p95(total), statistics.median(total) * 1e3
        print(f"  {described[question]} p50 {statistics.median(parse) * 1e3:.1f} ms): p50 {p50s[question]:.1f} ms, "
              f"p95 {p95s[question]:.1f} ms")
    print(f"  the exact second, JSON / columns: p50 {p50s['json'] / p50s['columns']:.2f}x, "
          f"p95 {p95s['json'] / p95s['columns']:.2f}x")
    print(f"exact_json_p95_ms={p95s['json']:.1f}")
    print(f"width_{args.width}_p95_ms={p95s['reduced']:.1f}")
    print(f"window_query_p95_ms={p95s['columns']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
