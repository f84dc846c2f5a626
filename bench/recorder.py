"""Benchmark: what the flight recorder costs the drain, and what it holds, on bench/agent_rss.py's mix.

    python bench/recorder.py [--records N] [--laps L] [--warmup W] [--pass-records P]

Two rings of ``--records`` records each, laid out as gpuflow_ring.h says and written with
bench/agent_rss.py's mix (kernels on 4 named streams over ~200 long mangled names, a few hot,
each launch with its own grid x; host/device copies of 4 KiB .. 8 MiB on the null stream;
memsets; a clock sync a second), are drained lap after lap by two compiled decoders, one without
retention and one with it, side by side (alternating), as a running agent drains a busy program:
each lap the producer has written the ring round once more. A lap is drained as the collector
drains, in passes of at most ``--pass-records`` (its default ring capacity: the most it takes from
one ring in a pass), and after each pass the retaining decoder's budget compacts the chunks the
pass sealed, as the collector's after-pass step does (docs/recorder.md, "What is kept"): the
drain's pass copies each timed execution as a raw row, the compaction interns the shapes. After
``--warmup`` laps the budget (``--budget-mb``) is full, as an agent's is after its first minutes,
and every new chunk takes the place of an evicted one; from then on the best lap of each counts.
Times are the thread's CPU time (the machine may be shared).

Then the bytes its chunks count against the budget, chunk and index overhead included, are
divided by the records they hold: what a record costs, and how many seconds of a 100 k records/s
program the default budget (256 MiB) holds.

Last line: ``bytes_per_record=<b> drain_ratio=<r> export_spans_per_s=<n>``; goals b <= 24,
r <= 1.15 (the drain's passes with retention on vs off; the drain itself keeps >= 25 M records/s:
bench/decoder.py), n >= 2 M spans/s to a Perfetto file (the compiled slice writer's rate, from
bench/export.py's ``export_spans_per_s``). The third line gives the compaction's cost beside the
drain's, and the ratio of both together.

Constraints: the compiled decoder and the compiled slice writer must be built; memory for the ring
(64 B a record) and the retained columns (~20 B a record).
"""

from __future__ import annotations

import argparse
import platform
import random
import struct
import sys
import time
from pathlib import Path

from gpuflow.collectors.cupti import _layout as L
from gpuflow.collectors.cupti.decoder import RetentionC, RingDecoderC

WALL0 = 1_764_000_000_000_000_000
CUPTI0 = 1_000_000_000
#: the record layouts (gpuflow_ring.h; tests/support/ringfuzz.py mirrors them)
COMMON = struct.Struct("<HHIQQII")
KERNEL = struct.Struct("<IIIHHHHHHII")
COPY = struct.Struct("<IBBBxQIIII")
NAME = struct.Struct("<HHIII48s")
FAMILIES = (
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_",
    "_ZN7cutlass6KernelINS_4gemm6kernel4GemmINS1_11threadblock12MmaPipelinedINS1_9GemmShapeILi128ELi128ELi8EEE",
    "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_14func_wrapper_tIfZNS0_11sum_functorIfffEclERNS_14TensorIteratorEEUlffE_EEjfLi4EEEEEvT1_",
    "_Z28flash_fwd_splitkv_kernel_v2I23Flash_fwd_kernel_traitsILi128ELi64ELi128ELi4ELb0ELb0EN7cutlass10bfloat16_tEELb1ELb0ELb0ELb0ELb1ELb0ELb0EEv16Flash_fwd_params",
    "_ZN4cuda3std3__48__detail21__invoke_thrust_kernelIN6thrust20THRUST_200500_800_NS8cuda_cub4core13_kernel_agentINS7_8__reduce",
)


def name_records(nid: int, text: bytes, flags: int = 0) -> list[bytes]:
    n = max(1, -(-len(text) // 48))
    return [NAME.pack(L.REC_NAME_CHUNK, flags | (L.FLAG_NAME_LAST if i == n - 1 else 0), nid, i * 48, len(text),
                      text[i * 48:(i + 1) * 48]) for i in range(n)]


def agent_rss_mix(n: int, seed: int = 1) -> bytes:
    """``n`` records of bench/agent_rss.py's mix (its C driver's choices, in Python), as ring bytes."""
    rng = random.Random(seed)
    out = [COMMON.pack(L.REC_CLOCK_SYNC, 0, 0, CUPTI0, WALL0, 0, 0) + bytes(32)]
    for nid in range(1, 201):
        out += name_records(nid, f"{FAMILIES[nid % 5]}{nid}v".encode())
    for s, text in enumerate((b"compute", b"comm", b"prefetch", b"aux")):
        out += name_records(300 + s, text, L.FLAG_NAME_STREAM)
        out.append(COMMON.pack(L.REC_STREAM_NAME, 0, 0, 0, 0, 1, 13 + s) + KERNEL.pack(0, 300 + s, 0, 0, 0, 0, 0, 0, 0,
                                                                                           0, 0))
    cursor = [CUPTI0] * 4
    now = CUPTI0
    next_sync = CUPTI0 + 1_000_000_000
    while len(out) < n:
        now += 10_000            # 100 k records/s
        r = rng.randrange(1000)
        if r < 850:
            s = rng.randrange(4)
            nid = 1 + (rng.randrange(200) if rng.randrange(4) == 0 else rng.randrange(12))
            dur = 2000 + rng.randrange(200_000)
            cursor[s] = max(cursor[s], now - 300_000_000) + dur + rng.randrange(3000)
            out.append(COMMON.pack(L.REC_KERNEL, 0, 0, cursor[s], cursor[s] + dur, 1, 13 + s)
                       + KERNEL.pack(7, nid, 128 + rng.randrange(4096), 1, 1, 256, 1, 1, 32, 0, 0))
        elif r < 970:
            nbytes = 4096 << rng.randrange(12)
            out.append(COMMON.pack(L.REC_MEMCPY, 0, 0, now, now + nbytes // 20, 1, 7)
                       + COPY.pack(7, rng.choice((1, 2, 8)), 0, 0, nbytes, 0, 0, 0, 0))
        else:
            out.append(COMMON.pack(L.REC_MEMSET, 0, 0, now, now + 1500, 1, 13 + rng.randrange(4))
                       + COPY.pack(7, 0, 0, 3, 1 << 20, 0, 0, 0, 0))
        if now >= next_sync:
            out.append(COMMON.pack(L.REC_CLOCK_SYNC, 0, 0, now, WALL0 + now - CUPTI0, 0, 0) + bytes(32))
            next_sync += 1_000_000_000
    return b"".join(out[:n])


def ring(records: bytes, capacity: int) -> bytearray:
    buf = bytearray(L.HEADER_SIZE + capacity * L.RECORD_SIZE)
    L.HEADER_STRUCT.pack_into(buf, 0, L.MAGIC, L.VERSION, L.HEADER_SIZE, L.RECORD_SIZE, capacity, 4242, 1,
                              b"bench", CUPTI0, WALL0, 130001, 50, WALL0, b"")
    buf[L.HEADER_SIZE:L.HEADER_SIZE + len(records)] = records
    L.U64.pack_into(buf, L.OFF_HEAD, len(records) // L.RECORD_SIZE)
    return buf


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1 << 20, help="records a lap (rounded up to a power of two)")
    ap.add_argument("--laps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--budget-mb", type=int, default=64, help="the retention budget (full after the warm-up)")
    ap.add_argument("--pass-records", type=int, default=1 << 16,
                    help="the most records a pass drains from the ring (the collector's: its ring capacity)")
    args = ap.parse_args()
    if RingDecoderC is None:
        raise SystemExit("the compiled decoder is not built")
    n = 1 << max(10, (args.records - 1).bit_length())
    print(f"recorder: laps of {n:,} records of bench/agent_rss.py's mix; machine {platform.machine()}, "
          f"Python {platform.python_version()}", flush=True)
    records = agent_rss_mix(n)
    rings = {"off": ring(records, n), "on": ring(records, n)}
    retention = RetentionC(args.budget_mb << 20)
    decoders = {"off": RingDecoderC(rings["off"]), "on": RingDecoderC(rings["on"], retention=retention)}
    times: dict[str, list[float]] = {"off": [], "on": [], "compaction": []}
    for lap in range(args.warmup + args.laps):   # side by side, alternating, the same decoders lap after lap
        for key, dec in decoders.items():
            if lap:   # the producer wrote the ring round once more: the same records, a lap later
                L.U64.pack_into(rings[key], L.OFF_HEAD, L.U64.unpack_from(rings[key], L.OFF_HEAD)[0] + n)
            drained, compacted, got = 0.0, 0.0, 0
            while got < n:
                t = time.thread_time()
                got += dec.drain(args.pass_records)
                drained += time.thread_time() - t
                if dec.retention is not None:
                    t = time.thread_time()
                    dec.retention.compact()
                    compacted += time.thread_time() - t
            if lap >= args.warmup:
                times[key].append(drained)
                if key == "on":
                    times["compaction"].append(compacted)
            assert got == n, got
    for key in ("off", "on"):
        best, median = min(times[key]), sorted(times[key])[len(times[key]) // 2]
        print(f"drain, retention {key:3}: best {best * 1e3:.1f} ms = {n / best / 1e6:.1f} M records/s "
              f"(median {median * 1e3:.1f} ms)")
    ratio = min(times["on"]) / min(times["off"])
    together = [a + b for a, b in zip(times["on"], times["compaction"])]
    best_c, median_c = min(times["compaction"]), sorted(times["compaction"])[len(times["compaction"]) // 2]
    print(f"compaction after each pass (the drain thread's, off the drain's passes): best {best_c * 1e3:.1f} ms "
          f"= {best_c / n * 1e9:.1f} ns a record (median {median_c * 1e3:.1f} ms); drain and compaction together "
          f"vs retention off: best {min(together) / min(times['off']):.3f}, median "
          f"{sorted(together)[len(together) // 2] / sorted(times['off'])[len(times['off']) // 2]:.3f}")
    figures = decoders["on"].retained()
    per_record = figures["bytes"] / figures["records"]
    seconds = (256 << 20) / per_record / 100_000
    print(f"retained: {figures['records']:,} records in {figures['chunks']} chunks (a full budget of "
          f"{args.budget_mb} MiB; {retention.figures()['evicted_chunks']} evicted), {figures['bytes']:,} bytes "
          f"(chunk and index overhead included) = {per_record:.2f} bytes/record; the default 256 MiB holds "
          f"{seconds:.0f} s of a 100 k records/s program (goal: 60 s)")
    try:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from export import export_spans_per_s

        export = f"{export_spans_per_s():.0f}"
    except (ImportError, RuntimeError) as exc:
        print(f"export: the compiled slice writer is not available ({exc})")
        export = "nan"
    print(f"bytes_per_record={per_record:.2f} drain_ratio={ratio:.3f} export_spans_per_s={export}")


if __name__ == "__main__":
    main()
