"""Benchmark: what the per-device and per-configuration aggregates cost the compiled decoder's drain,
measured side by side with the same decoder built from other revisions.

    python bench/decoder_activity.py --build 87f1484^ --build HEAD~1 [--baseline LABEL=SO]
                                     [--records N] [--rounds R]

Each ``--build REV`` builds that revision's compiled decoder into a scratch directory
(``git archive REV gpuflow cupti_src``, cython, gcc -O3 as setup.py builds it; kept under
``$TMPDIR/gpuflow-baselines/<commit>`` for the next run); ``--baseline LABEL=SO`` takes one built
already. The decoder of this checkout (``now``) and every baseline drain the same rings, one after
the other, ``--rounds`` times (interleaved, so that all see the same machine; the best of each
counts, in the thread's CPU time). The rings, ``--records`` records each:

* ``decoder``: bench/decoder.py's ring as it is (its block repeated with the same times, a random
  block size per launch: six configurations a name);
* ``gaps``: the same records with time going on and one block size a name (``make_realistic``):
  the kernels of a device leave gaps, each its own busy interval until merged;
* ``concurrent``: as ``gaps``, each kernel lasting 40 µs (the kernels of a device overlap);
* ``recorder``: bench/recorder.py's (bench/agent_rss.py's) mix, drained in passes of 65,536 as the
  collector drains: four streams of one device, each in order, drifting apart from each other.

Before any figure is printed, every decoder's kernels, transfers, lanes, names, counters and
clock are checked to agree on each ring (the aggregates themselves are what differs between
revisions). Last line: ``records_per_s_now=<n> <label>_ratio=<now ÷ label> ...`` for the
``decoder`` ring (the drain's own goal: 25 M records/s on the H200 host, docs/decoder.md).

Constraints: one core, in-memory rings (no producer); each baseline is loaded under a module name
of its own, so that all live side by side in one process; building one needs git, Cython and a C
compiler (about 30 s).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.machinery
import importlib.util
import os
import struct
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import decoder as bench_decoder
import recorder as bench_recorder

from gpuflow.collectors.cupti import _layout as L
from gpuflow.collectors.cupti.decoder import RingDecoderC

ROOT = Path(__file__).resolve().parent.parent
PATTERN = 1 << 16
RECORDER_PASS = 1 << 16


def build_revision(rev: str) -> Path:
    """The compiled decoder of git revision ``rev``, built once into a scratch directory."""
    sha = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.strip()
    out = Path(tempfile.gettempdir()) / "gpuflow-baselines" / sha
    so = out / "decoder_c.so"
    if so.exists():
        return so
    out.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", sha, "gpuflow", "cupti_src"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    pyx = "gpuflow/collectors/cupti/_decoder_c.pyx"
    subprocess.run([sys.executable, "-m", "cython", "-3", "-X", "boundscheck=False", "-X", "wraparound=False",
                    "-X", "cdivision=True", pyx], cwd=out, check=True)
    cc = os.environ.get("CC", "gcc")
    subprocess.run([cc, "-shared", "-fPIC", "-O3", "-fwrapv", "-DNDEBUG", f"-I{sysconfig.get_paths()['include']}",
                    "-Icupti_src", pyx[:-4] + ".c", "-o", str(so)], cwd=out, check=True)
    return so


def load_baseline(path: str | Path) -> type:
    name = "baseline_" + hashlib.sha1(str(path).encode()).hexdigest()[:10] + "._decoder_c"
    loader = importlib.machinery.ExtensionFileLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, str(path), loader=loader)
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


def rings(records: int) -> dict[str, tuple[bytearray, int | None]]:
    """name -> (ring, records a pass: None for all at once)."""
    out: dict[str, tuple[bytearray, int | None]] = {"decoder": (bench_decoder.build_ring(records), None)}
    for name, concurrent in (("gaps", False), ("concurrent", True)):
        buf = bench_decoder.build_ring(records)
        make_realistic(buf, records, concurrent)
        out[name] = (buf, None)
    n = 1 << max(10, (records - 1).bit_length())
    out["recorder"] = (bench_recorder.ring(bench_recorder.agent_rss_mix(n), n), RECORDER_PASS)
    return out


def drain(cls: type, buf: bytearray, per_pass: int | None) -> tuple[float, object]:
    L.U64.pack_into(buf, L.OFF_TAIL, 0)
    dec = cls(buf)
    t0 = time.thread_time()
    while dec.drain(per_pass):
        pass
    return time.thread_time() - t0, dec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", action="append", default=[], metavar="REV", help="a git revision to compare with")
    parser.add_argument("--baseline", action="append", default=[], metavar="LABEL=SO",
                        help="a _decoder_c shared object to compare with")
    parser.add_argument("--records", type=int, default=1 << 20)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args(argv)
    if RingDecoderC is None:
        print("the compiled decoder is not built", file=sys.stderr)
        return 2
    decoders: dict[str, type] = {"now": RingDecoderC}
    for rev in args.build:
        decoders[rev] = load_baseline(build_revision(rev))
    for item in args.baseline:
        label, _, path = item.partition("=")
        decoders[label] = load_baseline(path)
    mixes = rings(args.records)
    best: dict[tuple[str, str], float] = {}
    for _ in range(args.rounds):
        for mix, (buf, per_pass) in mixes.items():
            results = {}
            for label, cls in decoders.items():
                t, dec = drain(cls, buf, per_pass)
                best[mix, label] = min(best.get((mix, label), t), t)
                results[label] = bench_decoder.results(dec)
            if any(r != results["now"] for r in results.values()):
                print(f"the decoders disagree on the {mix} ring", file=sys.stderr)
                return 1
    load = os.getloadavg()
    print(f"records={args.records} rounds={args.rounds} (best of each, interleaved; CPU time of the thread); "
          f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    labels = list(decoders)
    print(f"{'ring':12}" + "".join(f"{label:>14}" for label in labels) + "   M records/s; now ÷ each")
    for mix in mixes:
        rates = {label: args.records / best[mix, label] / 1e6 for label in labels}
        print(f"{mix:12}" + "".join(f"{rates[label]:14.1f}" for label in labels) + "   "
              + " ".join(f"{rates['now'] / rates[label]:.2f}" for label in labels[1:]))
    now = args.records / best["decoder", "now"]
    print(f"records_per_s_now={now:.0f} " + " ".join(
        f"{label}_ratio={best['decoder', label] / best['decoder', 'now']:.3f}" for label in labels[1:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
