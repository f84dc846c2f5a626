"""Benchmark: GET /api/window for a 1 s window of 100 k spans over 16 lanes, request to parsed answer.

    python bench/window_query.py [--spans N] [--lanes L] [--answers A] [--width PX]

A ring written with 100 k executions in one second (kernels over ~200 long mangled names on 16
lanes: 2 devices x 8 streams, some copies and memsets), drained by the compiled decoder into the
flight recorder's columns (a Retention, as the CUPTI collector's), named and labelled by the
collector's TracedBuilder, and answered by the CUPTI plugin's real ``query_window`` hook through
the agent, the real app and the embedded server on a loopback port; a client asks for that
second over HTTP and parses the JSON. Two questions, each ``--answers`` times: every execution
exactly (no width: 100 k spans, column by column), and the same second at ``--width`` pixels (the
page's question: lanes denser than the width come back as buckets). The plugin's answer alone (the
hook, before any JSON) is timed too, and the client's ``json.loads`` within each answer. Each
question is also asked, interleaved, of the body encoded as before the columns were written from
their arrays (``dumps(window_json(...))``: every integer a Python int through ``json``), and the
ratios printed side by side.

Last line: ``window_query_p95_ms=<x>`` for the page's question (the second at ``--width``
pixels), then ``exact_p95_ms=<y>`` on the line before it; goal x <= 100 (docs/recorder.md states
it and the figures measured).

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
import struct
import sys
import threading
import time
from pathlib import Path

from gpuflow.collectors.cupti import _layout as L
from gpuflow.collectors.cupti.decoder import RetentionC, RingDecoderC
from gpuflow.collectors.cupti.plugin import SLOT, _State
from gpuflow.collectors.cupti.recorder import Recorder
from gpuflow.collectors.cupti.traced_builder import TracedBuilder
from gpuflow.core.agent import Agent
from gpuflow.core.context import AgentConfig
from gpuflow.core.plugins import get_plugin_manager
from gpuflow.transport import recorded_api
from gpuflow.transport.app import AppSettings, create_app
from gpuflow.transport.frames import dumps
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


def timed(port: int, path: str) -> tuple[float, float, int, int]:
    """Seconds from request to parsed answer, of them the client's ``json.loads``, the body's size
    and its exact spans."""
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}"})
    response = conn.getresponse()
    body = response.read()
    t_read = time.perf_counter()
    doc = json.loads(body)
    elapsed = time.perf_counter() - t0
    parse = time.perf_counter() - t_read
    conn.close()
    if response.status != 200:
        raise SystemExit(f"/api/window answered {response.status}: {body[:200]!r}")
    spans = sum(len(lane["spans"]["seq"]) if "spans" in lane else 0
                for proc in doc["processes"] for lane in proc["lanes"])
    return elapsed, parse, len(body), spans


def whole_dict_body(parts, start, end, pid, width) -> bytes:
    """The window's body as encoded before recorded_api.window_body: the documented dict, whole."""
    return dumps(recorded_api.window_json(parts, start, end, pid, width))


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
        spliced = recorded_api.window_body
        paths = {"exact": f"/api/window?from={t0:.6f}&to={t1:.6f}",
                 "reduced": f"/api/window?from={t0:.6f}&to={t1:.6f}&width={args.width}"}
        got: dict[tuple[str, bool], list[tuple[float, float, int, int]]] = {}
        for _ in range(args.answers):
            for question, path in paths.items():
                for before in (False, True):
                    recorded_api.window_body = whole_dict_body if before else spliced
                    try:
                        got.setdefault((question, before), []).append(timed(server.port, path))
                    finally:
                        recorded_api.window_body = spliced
    finally:
        server.shutdown()
    for question in paths:
        if {answer[2:] for key in ((question, False), (question, True)) for answer in got[key]} != \
                {got[question, False][0][2:]}:
            raise SystemExit(f"the {question} answers differ in size or spans, encoded as before or now")
    size, spans = got["exact", False][0][2:]
    if spans != args.spans:
        raise SystemExit(f"the exact answer held {spans:,} spans, not {args.spans:,}")
    print(f"the plugin's answer (query_window, before JSON): p50 {statistics.median(hook) * 1e3:.1f} ms, "
          f"p95 {p95(hook):.1f} ms")
    print("request to parsed answer, the columns written from their arrays (now) and the whole dict "
          "through json (before), interleaved:")
    size_r, spans_r = got["reduced", False][0][2:]
    described = {"exact": f"exact ({spans:,} spans, {size / 1e6:.2f} MB)",
                 "reduced": f"at {args.width} px ({spans_r:,} spans exact, the rest in buckets, "
                            f"{size_r / 1e3:.1f} kB)"}
    p95s = {}
    for question in paths:
        now, before = ([a[0] for a in got[question, b]] for b in (False, True))
        parse = [a[1] for a in got[question, False]]
        p95s[question] = p95(now)
        print(f"  {described[question]}: now p50 {statistics.median(now) * 1e3:.1f} ms, p95 {p95(now):.1f} ms "
              f"(client json.loads p50 {statistics.median(parse) * 1e3:.1f} ms); before p50 "
              f"{statistics.median(before) * 1e3:.1f} ms, p95 {p95(before):.1f} ms; before/now p50 "
              f"{statistics.median(before) / statistics.median(now):.2f}x, p95 {p95(before) / p95(now):.2f}x")
    print(f"exact_p95_ms={p95s['exact']:.1f}")
    print(f"window_query_p95_ms={p95s['reduced']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
