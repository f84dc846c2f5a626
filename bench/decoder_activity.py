"""Benchmark: what the per-device and per-configuration aggregates cost the compiled decoder's drain.

    python bench/decoder_activity.py --baseline <a _decoder_c .so built without them> [--records N]
                                     [--rounds R] [--concurrent]

The baseline is the same decoder from before those aggregates (launch configurations per kernel
name, busy intervals and copies per device: docs/decoder.md, "Devices, configurations and busy
time"), built from that revision's ``_decoder_c.pyx`` into a shared object (the script's
``--help`` epilogue says how). Both drain the same ring of bench/decoder.py's realistic mix, one
after the other, ``--rounds`` times (best of each counts, as in bench/decoder.py); the two agree on
every figure the baseline has before anything is printed. ``--concurrent`` gives the kernels of a
device overlapping intervals on its streams (the usual busy GPU: every kernel merges into the
device's latest interval); by default many of them leave gaps, each its own interval until
settled (the costlier case). Unlike bench/decoder.py's ring, time goes on through the ring and a
kernel name keeps its block size (``make_realistic``).

Last line: ``records_per_s_now=<n> records_per_s_before=<b> ratio=<n÷b>`` (the drain's own
goal stays 25 M records/s, docs/decoder.md).

Constraints: one core, in-memory rings (no producer); loads the baseline under another module
name, so both twins' classes live side by side in one process.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import struct
import sys
import time

import decoder as bench_decoder

from gpuflow.collectors.cupti import _layout as L
from gpuflow.collectors.cupti.decoder import RingDecoderC

EPILOG = """Building the baseline: take the revision before the aggregates (git archive <rev> | tar -x -C
DIR), then in DIR: cython -3 gpuflow/collectors/cupti/_decoder_c.pyx and
gcc -shared -fPIC -O3 -fwrapv -DNDEBUG -I<python include> -Icupti_src
gpuflow/collectors/cupti/_decoder_c.c -o <out .so>."""


def load_baseline(path: str) -> type:
    loader = importlib.machinery.ExtensionFileLoader("baseline._decoder_c", path)
    spec = importlib.util.spec_from_file_location("baseline._decoder_c", path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module.RingDecoder


def make_realistic(buf: bytearray, records: int, concurrent: bool) -> None:
    """bench/decoder.py repeats one block of 65,536 records with the same times; here time goes on
    (each repetition later than the one before), each kernel name keeps one block size (a name
    launched with another block is another template instance in a real program), and with
    ``concurrent`` each timed kernel lasts 40 µs, overlapping the next kernels of its device."""
    first = None
    for i in range(records):
        off = L.HEADER_SIZE + i * L.RECORD_SIZE
        rtype, flags = struct.unpack_from("<HH", buf, off)
        if rtype not in (L.REC_KERNEL, L.REC_MEMCPY, L.REC_MEMSET, L.REC_CLOCK_SYNC):
            continue
        if first is None:
            first = i      # the repeated block starts here, after the names and lanes
        span = (i - first) // PATTERN * PATTERN * 5_000   # a block spans less (steps of 0.5-5 µs)
        start, end = struct.unpack_from("<QQ", buf, off + 8)
        if rtype == L.REC_CLOCK_SYNC or flags & L.FLAG_NO_TIMING:
            continue
        if rtype == L.REC_KERNEL:
            name_id = struct.unpack_from("<I", buf, off + 36)[0]
            struct.pack_into("<H", buf, off + 48, (128, 256, 512)[name_id % 3])
            if concurrent:
                end = start + 40_000
        struct.pack_into("<QQ", buf, off + 8, start + span, end + span)


PATTERN = 1 << 16


def best_drain(cls: type, buf: bytearray, rounds: int) -> tuple[float, object]:
    best, dec = float("inf"), None
    for _ in range(rounds):
        elapsed, dec = bench_decoder.drain_all(cls, buf)
        best = min(best, elapsed)
    return best, dec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=EPILOG)
    parser.add_argument("--baseline", required=True, help="the _decoder_c shared object before the aggregates")
    parser.add_argument("--records", type=int, default=1 << 21)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--concurrent", action="store_true", help="kernels of a device overlap")
    args = parser.parse_args(argv)
    before_cls = load_baseline(args.baseline)
    buf = bench_decoder.build_ring(args.records)
    make_realistic(buf, args.records, args.concurrent)
    now_times, before_times = [], []
    for _ in range(args.rounds):   # interleaved, so that both see the same machine
        t, now_dec = best_drain(RingDecoderC, buf, 1)
        now_times.append(t)
        t, before_dec = best_drain(before_cls, buf, 1)
        before_times.append(t)
    if bench_decoder.results(now_dec) != bench_decoder.results(before_dec):
        print("the two decoders disagree", file=sys.stderr)
        return 1
    activity = now_dec.activity()  # type: ignore[attr-defined]
    intervals_settled = sum(d.busy_ns > 0 for d in activity["devices"])
    now, before = min(now_times), min(before_times)
    print(f"records={args.records} concurrent={'yes' if args.concurrent else 'no'} rounds={args.rounds} "
          f"devices={len(activity['devices'])} devices_with_settled_busy={intervals_settled}")
    print(f"drain_s_now={now:.4f} drain_s_before={before:.4f} (best of {args.rounds}, interleaved)")
    print(f"records_per_s_now={args.records / now:.0f} records_per_s_before={args.records / before:.0f} "
          f"ratio={before / now:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
