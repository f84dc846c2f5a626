"""Benchmark: drain one ring with the compiled decoder and with the pure-Python twin.

    python bench/decoder.py [--records N] [--repeat R]

Fills an in-memory buffer laid out exactly like a ring (gpuflow_ring.h: 4096-byte header, 64-byte
records) with a realistic mix: ~200 interned kernel names defined up front by NAME_CHUNK records,
16 lanes (2 devices x 8 streams, four of them NVTX-named, one the null stream), then mostly kernels
with some copies (h2d / d2h / d2d / p2p) and memsets, a clock sync now and then, and ~0.5 % of
kernels without timing. Both decoders drain the same bytes (decode + aggregate + span sampling,
default lane_span_cap, one core); the compiled one runs ``--repeat`` times on fresh decoders and
its best time counts. The results of the two are compared before any number is printed.

Then, for the frame-time side, it times building the snapshot's TracedProcess (traced_builder.py)
after 5,000 and 20,000 new records, and with nothing new: each lane's newest spans come from the
decoder as columns (no Span object per span since issue 17).

Last line: ``records_per_s=<n> ratio_vs_python=<r>``; goals n >= 25,000,000 and r >= 50
(docs/decoder.md states them and the figures measured).

Constraints: the pure-Python twin is slow (about a microsecond or more per record), so the default
ring is 1 Mi records (64 MiB).
"""

from __future__ import annotations

import argparse
import platform
import random
import struct
import sys
import time

from gpuflow.collectors.cupti import _layout as L
from gpuflow.collectors.cupti.traced_builder import TracedBuilder
from gpuflow.collectors.cupti.decoder import RingDecoderC, RingDecoderPy

KERNEL = struct.Struct("<HHIQQIIIIIHHHHHHII")
COPY = struct.Struct("<HHIQQIIIBBBxQIIII")
NAME = struct.Struct("<HHIII48s")

N_NAMES = 200
DEVICES = 2
STREAMS_PER_DEVICE = 8
NULL_STREAM = 7


def kernel_names(rng: random.Random, n: int) -> list[bytes]:
    """Mangled-looking names of realistic lengths (30 to ~300 bytes)."""
    out = []
    for i in range(n):
        stem = f"kernel_{i}_" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz_") for _ in range(rng.randint(8, 40)))
        tmpl = "".join(rng.choice(["ILi4E", "NS_6native", "IfE", "St5arrayIPcLm1EE", "EEvT_"])
                       for _ in range(rng.randint(0, 40)))
        out.append(f"_Z{len(stem)}{stem}{tmpl}PKfPfi".encode())
    return out


def name_chunks(name_id: int, text: bytes, flags: int = 0) -> list[bytes]:
    chunks = []
    n = max(1, -(-len(text) // L.NAME_CHUNK_TEXT))
    for i in range(n):
        off = i * L.NAME_CHUNK_TEXT
        last = L.FLAG_NAME_LAST if i == n - 1 else 0
        chunks.append(NAME.pack(L.REC_NAME_CHUNK, flags | last, name_id, off, len(text),
                                text[off:off + L.NAME_CHUNK_TEXT]))
    return chunks


def build_ring(records: int, seed: int = 1) -> bytearray:
    """A ring buffer holding exactly ``records`` published, unconsumed records."""
    capacity = 1 << max(10, (records - 1).bit_length())
    rng = random.Random(seed)
    preface: list[bytes] = []
    names = kernel_names(rng, N_NAMES)
    for i, text in enumerate(names, start=1):
        preface += name_chunks(i, text)
    next_id = N_NAMES + 1
    for dev in range(DEVICES):
        preface += name_chunks(next_id, b"NVIDIA H200")
        preface.append(KERNEL.pack(L.REC_DEVICE, 0, dev, 0, 0, 0, 0, 0, next_id, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        next_id += 1
        preface.append(KERNEL.pack(L.REC_CONTEXT, 0, dev, 0, 0, 1 + dev, NULL_STREAM, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        for j, label in enumerate((b"compute", b"prefetch", b"offload", b"comm")):
            preface += name_chunks(next_id, label, L.FLAG_NAME_STREAM)
            preface.append(KERNEL.pack(L.REC_STREAM_NAME, 0, dev, 0, 0, 1 + dev, 13 + j, 0, next_id,
                                       0, 0, 0, 0, 0, 0, 0, 0, 0))
            next_id += 1
    streams = [NULL_STREAM] + [13 + j for j in range(STREAMS_PER_DEVICE - 1)]
    # popular kernels launch far more often than rare ones (Zipf-like weights)
    weights = [1.0 / (k + 1) for k in range(N_NAMES)]
    pattern_len = 1 << 16
    pattern: list[bytes] = []
    t = 1_000_000_000
    for i in range(pattern_len):
        dev = rng.randrange(DEVICES)
        stream = rng.choice(streams)
        start = t
        dur = rng.randint(2_000, 400_000)
        t += rng.randint(500, 5_000)
        roll = rng.random()
        if roll < 0.88:
            name_id = rng.choices(range(1, N_NAMES + 1), weights)[0]
            flags = L.FLAG_NO_TIMING if rng.random() < 0.005 else 0
            s, e = (0, 0) if flags else (start, start + dur)
            pattern.append(KERNEL.pack(L.REC_KERNEL, flags, dev, s, e, 1 + dev, stream, i, name_id,
                                       rng.choice((1, 80, 132, 1024)), 1, 1, rng.choice((128, 256, 512)),
                                       1, 1, 32, 0, 0))
        elif roll < 0.97:
            kind = rng.choice((1, 1, 2, 8, 10))
            nbytes = rng.choice((4096, 1 << 20, 64 << 20))
            pattern.append(COPY.pack(L.REC_MEMCPY, L.FLAG_ASYNC, dev, start, start + dur, 1 + dev,
                                     stream, i, kind, 2, 3, nbytes, dev, (dev + 1) % DEVICES, 0, 0))
        elif roll < 0.999:
            pattern.append(COPY.pack(L.REC_MEMSET, 0, dev, start, start + dur // 10, 1 + dev, stream,
                                     i, 0, 0, 3, 1 << 16, dev, dev, 0, 0))
        else:
            pattern.append(KERNEL.pack(L.REC_CLOCK_SYNC, 0, 0, start, 1_764_000_000_000_000_000 + start,
                                       0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    body = b"".join(preface)
    block = b"".join(pattern)
    remaining = records - len(preface)
    if remaining < 0:
        raise SystemExit("--records is too small for the preface")
    whole, part = divmod(remaining, pattern_len)
    body += block * whole + block[: part * L.RECORD_SIZE]
    buf = bytearray(L.HEADER_SIZE + capacity * L.RECORD_SIZE)
    L.HEADER_STRUCT.pack_into(buf, 0, L.MAGIC, L.VERSION, L.HEADER_SIZE, L.RECORD_SIZE, capacity, 4242, 1,
                              b"bench", 0, 0, 130001, 50, time.time_ns(), b"")
    buf[L.HEADER_SIZE:L.HEADER_SIZE + len(body)] = body
    L.U64.pack_into(buf, L.OFF_HEAD, records)
    return buf


def drain_all(cls: type, buf: bytearray) -> tuple[float, object]:
    L.U64.pack_into(buf, L.OFF_TAIL, 0)
    decoder = cls(buf)
    t0 = time.perf_counter()
    n = decoder.drain()
    elapsed = time.perf_counter() - t0
    assert n == L.U64.unpack_from(buf, L.OFF_HEAD)[0], n
    return elapsed, decoder


def results(decoder: object) -> tuple[object, ...]:
    d = decoder  # type: ignore[assignment]
    return (d.kernels(), d.transfers(), d.lanes(), d.names(), d.counters(), d.clock())  # type: ignore[attr-defined]


def build_costs(buf: bytearray) -> list[tuple[int, float, int]]:
    """(new records per build, median build seconds, spans shown) with the compiled decoder."""
    head = L.U64.unpack_from(buf, L.OFF_HEAD)[0]
    L.U64.pack_into(buf, L.OFF_TAIL, 0)
    pos = 2_000
    L.U64.pack_into(buf, L.OFF_HEAD, pos)  # publish the ring gradually, as a live producer would
    decoder = RingDecoderC(buf)
    builder = TracedBuilder(1, "bench", decoder.lane_span_cap)

    def build() -> tuple[float, int]:
        t0 = time.perf_counter()
        traced = builder.build(decoder, name="bench", state="running", exit_status=None,
                               truncated=False, now_ns=time.time_ns())
        return time.perf_counter() - t0, sum(len(lane.spans) for lane in traced.lanes)

    decoder.drain()
    build()
    out = []
    for per_build in (5_000, 20_000):
        times, spans = [], 0
        for _ in range(9):
            pos = min(head, pos + per_build)
            L.U64.pack_into(buf, L.OFF_HEAD, pos)
            decoder.drain()
            elapsed, spans = build()
            times.append(elapsed)
        out.append((per_build, sorted(times)[len(times) // 2], spans))
    out.append((0, min(build()[0] for _ in range(9)), spans))
    L.U64.pack_into(buf, L.OFF_HEAD, head)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1 << 20)
    parser.add_argument("--repeat", type=int, default=7, help="compiled runs (best counts)")
    args = parser.parse_args(argv)
    if RingDecoderC is None:
        print("the compiled decoder is not built; install with GPUFLOW_REQUIRE_EXTENSIONS=1", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    buf = build_ring(args.records)
    print(f"built a {args.records}-record ring ({len(buf) >> 20} MiB) in {time.perf_counter() - t0:.1f} s; "
          f"{platform.processor() or platform.machine()}, Python {platform.python_version()}")
    best = float("inf")
    compiled = None
    for _ in range(args.repeat):
        elapsed, compiled = drain_all(RingDecoderC, buf)
        best = min(best, elapsed)
    py_elapsed, python = drain_all(RingDecoderPy, buf)
    if results(compiled) != results(python):
        print("ERROR: the compiled decoder and the Python twin disagree on the same ring", file=sys.stderr)
        return 1
    counters = compiled.counters()  # type: ignore[union-attr]
    if counters["invalid_records"]:
        print(f"ERROR: the bench ring has invalid records: {counters}", file=sys.stderr)
        return 1
    c_rate = args.records / best
    py_rate = args.records / py_elapsed
    print(f"compiled: {best * 1e3:.1f} ms best of {args.repeat} -> {c_rate / 1e6:.1f} M records/s")
    print(f"python:   {py_elapsed:.2f} s -> {py_rate / 1e6:.3f} M records/s (results identical)")
    for per_build, seconds, spans in build_costs(buf):
        print(f"snapshot build after {per_build:>6} new records: {seconds * 1e3:6.2f} ms "
              f"({spans} spans shown on 16 lanes)")
    print(f"records_per_s={int(c_rate)} ratio_vs_python={c_rate / py_rate:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
