"""Long-run decoder fuzzer: a million random rings through both twins, zero crashes, zero disagreements.

    PYTHONPATH=tests/support python tests/fuzz/fuzz_decoder.py [--cases 1000000] [--workers N]
        [--seed S] [--asan]
    PYTHONPATH=tests/support python tests/fuzz/fuzz_decoder.py --replay INDEX [--seed S]

(``--replay`` shows one case in full.) Each case comes from ``ringfuzz.random_case`` (the fuzz
engine in tests/support, which PYTHONPATH reaches) seeded by (seed, index), so any case can
be replayed: damaged headers and wrong versions, short mappings, torn counters at open and
mid-session, producer-shaped streams with mistakes (torn and impossible records, undefined
names, bad copy kinds, end before start, saturating totals, table-sized lane keys), name chunks
out of order / overlapping / oversized / lost / doubled / interleaved / redefined, mutations of
valid rings (bit flips, field overwrites, swaps, duplicates, deletions, zeroed slots), records
starting anywhere in the ring and near 2^64, drained in random batches while more is published.

Every case is played against the compiled twin and the Python twin. Counted:

* ``crashes``: a worker process that died (a signal: the compiled twin faulted) or an exception
  other than the documented ring errors (RingFormatError, RingNotReady, TypeError for a read-only
  buffer) from either twin;
* ``disagreements``: the twins observed anything different (a step's result, an exception's type
  or message, any aggregate, lane, span, name, counter or header field);
* ``violations``: an invariant any correct decoder keeps did not hold (ringfuzz.check_invariants).

``--asan`` compiles the decoder's generated C with AddressSanitizer and UndefinedBehaviorSanitizer
and runs the cases against that build (about 2-3x slower): an out-of-bounds read that happens not
to crash is caught too. Workers are forked processes; the dead one's case is recorded and a fresh
worker continues after it.

Last line: ``cases=<n> crashes=<c> disagreements=<d>``; the exit status is 1 unless all of
crashes, disagreements and violations are 0.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import multiprocessing as mp
import os
import platform
import random
import subprocess
import sys
import sysconfig
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

ASAN_SO_ENV = "GPUFLOW_FUZZ_ASAN_SO"
BLOCK = 500


def _load_asan_build() -> None:
    """Import the sanitizer build of the compiled twin in place of the installed one."""
    path = os.environ.get(ASAN_SO_ENV)
    if not path:
        return
    spec = importlib.util.spec_from_file_location("gpuflow.collectors.cupti._decoder_c", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)


_load_asan_build()

import ringfuzz as F  # noqa: E402

from gpuflow.collectors.cupti.decoder import RingDecoderC, RingDecoderPy  # noqa: E402


def case_rng(seed: int, index: int) -> random.Random:
    return random.Random((seed << 40) | index)


def play(index: int, seed: int, stats: dict) -> None:
    """One case through both twins; tallies into ``stats``."""
    family, case = F.random_case(case_rng(seed, index))
    stats["families"][family] += 1
    results = []
    for cls in (RingDecoderC, RingDecoderPy):
        try:
            results.append(("ok", F.run_case(cls, case)))
        except AssertionError as exc:
            results.append(("violation", f"{cls.__module__}: {exc}"))
        except Exception as exc:  # noqa: BLE001 - anything undocumented is a crash
            results.append(("crash", f"{cls.__module__}: {type(exc).__name__}: {exc}\n"
                                      f"{traceback.format_exc(limit=4)}"))
    kinds = {r[0] for r in results}
    if "crash" in kinds:
        stats["crashes"].append((index, family, next(r[1] for r in results if r[0] == "crash")[:1500]))
        return
    if "violation" in kinds:
        stats["violations"].append((index, family, next(r[1] for r in results if r[0] == "violation")[:1500]))
        return
    a, b = results[0][1], results[1][1]
    if a != b:
        stats["disagreements"].append((index, family, F.describe_difference(a, b)[:1500]))
        return
    opened = a[0]
    if opened[1] != "ok":
        stats["refused"][opened[2]] += 1
        return
    stats["opened"] += 1
    out = a[-2]
    stats["records"] += out["counters"]["records"]
    stats["invalid"].update(out["counters"]["invalid"])
    stats["drain_errors"] += sum(1 for step in a if isinstance(step, tuple) and step[0] == "drain"
                                 and step[1] == "raise")
    stats["spans"] += sum(len(lane[6]) for lane in out["lanes"])
    stats["saturated"] += out["counters"]["saturated"]
    stats["pending"] += out["counters"]["pending_names"] > 0
    stats["wrapped"] += out["tail"] // case.capacity != a[0][3] // case.capacity


def new_stats() -> dict:
    return {"families": collections.Counter(), "refused": collections.Counter(), "invalid": collections.Counter(),
            "opened": 0, "records": 0, "drain_errors": 0, "spans": 0, "done": 0, "saturated": 0, "pending": 0,
            "wrapped": 0,
            "crashes": [], "violations": [], "disagreements": []}


def merge(into: dict, part: dict) -> None:
    for key, value in part.items():
        if isinstance(value, collections.Counter):
            into[key].update(value)
        elif isinstance(value, list):
            into[key].extend(value)
        else:
            into[key] += value


def worker(wid: int, first: int, last: int, seed: int, skip: frozenset, current, queue) -> None:
    """Play cases [first, last); report every BLOCK cases as (wid, next index, stats). A case in
    ``skip`` killed an earlier worker: it is counted as a crash, not played again."""
    stats = new_stats()
    for index in range(first, last):
        current.value = index
        if index in skip:
            stats["crashes"].append((index, "?", skip_reason(index, skip)))
        else:
            play(index, seed, stats)
        stats["done"] += 1
        if stats["done"] == BLOCK or index == last - 1:
            queue.put((wid, index + 1, stats))
            stats = new_stats()


def skip_reason(index: int, skip: frozenset) -> str:
    return "a worker process died playing this case (a signal, or an error in the harness itself)"


def run(cases: int, workers: int, seed: int) -> dict:
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    total = new_stats()
    per = -(-cases // workers)
    # wid -> [process, current index, last, first index not yet reported, indices that killed a worker]
    running: dict[int, list] = {}
    wids = iter(range(1 << 30))

    def launch(first: int, last: int, skip: frozenset) -> None:
        current = ctx.RawValue("q", first)
        wid = next(wids)
        proc = ctx.Process(target=worker, args=(wid, first, last, seed, skip, current, queue), daemon=True)
        proc.start()
        running[wid] = [proc, current, last, first, skip]

    def collect(timeout: float) -> None:
        """Merge what the workers sent, waiting at most ``timeout`` seconds in all."""
        deadline = time.monotonic() + timeout
        try:
            while True:
                wid, next_index, stats = queue.get(timeout=max(0.0, deadline - time.monotonic()))
                merge(total, stats)
                if wid in running:
                    running[wid][3] = next_index
        except Exception:  # noqa: BLE001 - queue.Empty
            pass

    for w in range(workers):
        if w * per < cases:
            launch(w * per, min(cases, (w + 1) * per), frozenset())
    started = time.monotonic()
    last_report = started
    while running:
        collect(0.5)
        for wid, (proc, current, last, unreported, skip) in list(running.items()):
            if proc.exitcode is None:
                continue
            collect(0.2)  # its last block, if it managed to send it
            unreported = running.pop(wid)[3]
            if proc.exitcode != 0 and unreported < last:
                # it died in the middle of case current.value: play its unreported cases again
                # (deterministic), counting that one as a crash
                launch(unreported, last, frozenset(skip | {current.value}))
        now = time.monotonic()
        if now - last_report >= 30:
            last_report = now
            rate = total["done"] / (now - started)
            print(f"  {total['done']:>9,} cases  {rate:,.0f}/s  crashes={len(total['crashes'])} "
                  f"disagreements={len(total['disagreements'])} violations={len(total['violations'])}",
                  flush=True)
    collect(0.5)
    total["elapsed"] = time.monotonic() - started
    return total


def build_asan() -> str:
    """Compile the generated decoder C with ASan + UBSan; return the .so path."""
    src = ROOT / "gpuflow" / "collectors" / "cupti" / "_decoder_c.c"
    if not src.exists():
        sys.exit(f"{src} is missing: build the package first (pip install -e .)")
    out = Path(tempfile.mkdtemp(prefix="gpuflow-asan-")) / "_decoder_c.so"
    cmd = ["gcc", "-shared", "-fPIC", "-O1", "-g", "-fno-omit-frame-pointer",
           "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
           f"-I{sysconfig.get_paths()['include']}", f"-I{ROOT / 'cupti_src'}", str(src), "-o", str(out)]
    subprocess.run(cmd, check=True)
    return str(out)


def replay(index: int, seed: int) -> int:
    family, case = F.random_case(case_rng(seed, index))
    print(f"case {index} (seed {seed}): family {family}, capacity {case.capacity}, tail0 {case.tail0}, "
          f"{len(case.records)} records, header {case.header}, size {case.size} / delta {case.size_delta}, "
          f"lane_span_cap {case.lane_span_cap}, readonly {case.readonly}")
    print("steps:", [s if s[0] != "publish" else ("publish", f"{len(s[1])} records") for s in case.steps])
    try:
        F.compare((RingDecoderC, RingDecoderPy), case)
    except AssertionError as exc:
        print(exc)
        return 1
    a = F.run_case(RingDecoderC, case)
    for step in a:
        print(" ", step if not isinstance(step, dict) else {k: v for k, v in step.items() if k != "lanes"})
    print("the twins agree")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=20251130)
    ap.add_argument("--asan", action="store_true", help="run against an ASan+UBSan build of the compiled twin")
    ap.add_argument("--replay", type=int, default=None, metavar="INDEX")
    args = ap.parse_args()
    if RingDecoderC is None:
        sys.exit("the compiled decoder is not built; nothing to compare the Python twin with")
    if args.asan and not os.environ.get(ASAN_SO_ENV):
        so = build_asan()
        preload = ":".join(subprocess.run(["gcc", f"-print-file-name={lib}"], capture_output=True, text=True,
                                          check=True).stdout.strip() for lib in ("libasan.so", "libubsan.so"))
        env = dict(os.environ, **{ASAN_SO_ENV: so, "LD_PRELOAD": preload,
                                  "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1"})
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    if args.replay is not None:
        return replay(args.replay, args.seed)
    build = "ASan+UBSan build" if os.environ.get(ASAN_SO_ENV) else "installed build"
    print(f"fuzzing the ring decoder: {args.cases:,} cases, seed {args.seed}, {args.workers} workers, "
          f"compiled twin: {build}")
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"{platform.platform()}", flush=True)
    t = run(args.cases, args.workers, args.seed)
    print(f"done in {t['elapsed']:.0f} s ({t['done'] / t['elapsed']:,.0f} cases/s)")
    print("families:", dict(sorted(t["families"].items())))
    print(f"opened: {t['opened']:,}; refused at open: {dict(t['refused'])}")
    print(f"records decoded (per twin): {t['records']:,}; spans kept at the end: {t['spans']:,}; "
          f"drains refused mid-session: {t['drain_errors']:,}")
    print(f"cases that decoded across the ring's end: {t['wrapped']:,}; that saturated a total: {t['saturated']:,}; "
          f"that ended with a name half-received: {t['pending']:,}")
    print("invalid records by reason:", dict(t["invalid"].most_common()))
    for what in ("crashes", "disagreements", "violations"):
        for index, family, detail in t[what][:5]:
            print(f"{what[:-1] if what != 'crashes' else 'crash'}: case {index} ({family}); "
                  f"replay with --replay {index} --seed {args.seed}\n{detail}")
    print(f"violations={len(t['violations'])}")
    print(f"cases={t['done']} crashes={len(t['crashes'])} disagreements={len(t['disagreements'])}")
    return 0 if not (t["crashes"] or t["disagreements"] or t["violations"]) else 1


if __name__ == "__main__":
    sys.exit(main())
