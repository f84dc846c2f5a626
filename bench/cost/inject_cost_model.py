"""What a change to the injected library costs per record, counted instead of timed: the harness of
bench/cost/inject_cost.py built from this checkout and from another version's sources, each run
once under valgrind's callgrind with its cache simulation.

Why: timing two libraries side by side (``inject_cost.py --baseline-src``) needs a quiet machine;
on a shared, loaded one two identical libraries come out up to ~10 % apart from run to run, which
hides the few percent a record format change costs. Instructions and cache misses are the same
every run. This counts them over GPUFlow's rounds of the harness (``gpuflow_round``, inclusive:
translating, interning, publishing, recycling), and weighs them as cachegrind's own rough model
does (an L1 miss 10 cycles, a last-level miss 100), which is not a time but moves with one.

Usage: python bench/cost/inject_cost_model.py --baseline-src DIR [--rounds 3] [--buffers 2] [--names 40]
Last line: ``instructions_vs_baseline=<r> misses_vs_baseline=<r> model_vs_baseline=<r>``.

Constraints: needs valgrind (callgrind, callgrind_annotate), a C compiler and the CUDA headers, as
inject_cost.py does; no GPU. Both runs do the same work (the same records, the same warm-up).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from inject_cost import LIBRARY_SOURCES, ROOT, build

EVENTS = ("Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")


def counted(exe: Path, out: Path, args: argparse.Namespace) -> dict[str, int]:
    """The events of GPUFlow's rounds (inclusive) in one callgrind run of a harness."""
    run = subprocess.run(["valgrind", "--tool=callgrind", "--cache-sim=yes", f"--callgrind-out-file={out}",
                          str(exe), str(args.rounds), str(args.buffers), str(args.names)],
                         capture_output=True, text=True, timeout=1800)
    if run.returncode != 0:
        raise SystemExit(f"inject_cost_model: {exe.name} failed under valgrind:\n{run.stderr[-2000:]}")
    table = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--show-percs=no", str(out)],
                           capture_output=True, text=True, check=True).stdout
    for line in table.splitlines():
        if re.search(r":gpuflow_round \[", line):
            return dict(zip(EVENTS, (int(x.replace(",", "")) for x in line.split()[:len(EVENTS)])))
    raise SystemExit("inject_cost_model: no gpuflow_round in the profile")


def model(e: dict[str, int]) -> int:
    return e["Ir"] + 10 * (e["I1mr"] + e["D1mr"] + e["D1mw"]) + 100 * (e["ILmr"] + e["DLmr"] + e["DLmw"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline-src", type=Path, metavar="DIR", required=True,
                    help="another version's checkout (its cupti_src/)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--buffers", type=int, default=2, help="1 MiB buffers per round (1..32)")
    ap.add_argument("--names", type=int, default=40, help="distinct kernel names (the torch loop has 40)")
    args = ap.parse_args(argv)
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        ap.error("needs valgrind (apt-get install valgrind)")
    missing = [s for s in LIBRARY_SOURCES if not (args.baseline_src / s).is_file()]
    if missing:
        ap.error(f"--baseline-src {args.baseline_src}: no {', '.join(missing)} there")
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        got = {label: counted(build(tmpdir, root, f"inject_cost_{label}"), tmpdir / f"{label}.out", args)
               for label, root in (("baseline", args.baseline_src), ("current", ROOT))}
    for label, e in got.items():
        print(f"{label}: instructions={e['Ir']:,} l1_misses={e['I1mr'] + e['D1mr'] + e['D1mw']:,} "
              f"ll_misses={e['ILmr'] + e['DLmr'] + e['DLmw']:,} model_cycles={model(e):,}")
    b, c = got["baseline"], got["current"]
    misses = lambda e: e["D1mr"] + e["D1mw"] + e["DLmr"] + e["DLmw"]  # noqa: E731
    print(f"instructions_vs_baseline={c['Ir'] / b['Ir']:.3f} misses_vs_baseline={misses(c) / misses(b):.3f} "
          f"model_vs_baseline={model(c) / model(b):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
