"""Checks for scripts/gpu-check's export stage: a ``gpuflow run --trace-out`` file against the same
run's ``--summary-json``.

    PYTHONPATH=tests/support python scripts/gpu_export_verify.py LABEL TRACE SUMMARY_JSON

The trace is decoded with Perfetto's own schema (tests/support/perfetto_read.py: the ``perfetto``
package's generated classes and ``protobuf``), which also checks what a trace processor needs
(descriptors before use, interned ids defined, slices nesting per track, the end-of-trace
packet). Then: the kernel slices per name, over every traced process, must equal the summary's
complete aggregates (``traced`` and ``traced_retired``, by demangled name), the copies and
memsets per direction the transfer totals, and every slice sits on a process → GPU → stream
track. Prints details and ``<LABEL>_export_exact=yes|no``; exit 0 either way unless an input is
unreadable.

Constraints: runs on the GPU machine's Python with the perfetto and protobuf wheels (gpu-check
installs ./.whl); a summary that says records were dropped cannot be compared and is a "no".
"""

from __future__ import annotations

import collections
import json
import sys

from perfetto_read import read


def main(label: str, trace_path: str, summary_path: str) -> int:
    with open(trace_path, "rb") as fh:
        trace = read(fh.read())
    with open(summary_path) as fh:
        summary = json.load(fh)
    processes = summary["traced"] + summary.get("traced_retired", [])
    kernels: collections.Counter = collections.Counter()
    transfers: collections.Counter = collections.Counter()
    dropped = 0
    for p in processes:
        for k in p.get("kernels", []):
            kernels[k["name"]] += k["count"]
        for t in p.get("transfers", []):
            transfers[t["direction"]] += t["count"]
        dropped += p.get("dropped_ring", 0) + p.get("dropped_cupti", 0)
    exported = trace.kernel_counts()
    moved = collections.Counter(s.args.get("direction", "?") for s in trace.slices if s.category != "kernel")
    shapes = collections.Counter(len(trace.path(s.track)) for s in trace.slices)
    print(f"{label}: {len(trace.slices)} slices on {len(trace.tracks)} tracks; {sum(exported.values())} kernels "
          f"of {len(exported)} names exported, {sum(kernels.values())} of {len(kernels)} in the summary; "
          f"transfers {dict(moved)} vs {dict(transfers)}; track depths {dict(shapes)}; dropped {dropped}")
    for name in sorted(set(exported) | set(kernels)):
        if exported[name] != kernels[name]:
            print(f"  differs: {name[:120]}: exported {exported[name]}, summary {kernels[name]}")
    exact = (trace.whole and bool(kernels) and exported == kernels and moved == transfers and dropped == 0
             and set(shapes) <= {3, 4})  # pid / GPU / stream (/ an overlapping sub-track)
    print(f"{label}_export_exact={'yes' if exact else 'no'}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__.split("\n\n")[1].strip())
    sys.exit(main(*sys.argv[1:]))
