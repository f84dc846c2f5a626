"""The end-of-run summary ``gpuflow run`` prints: top kernels, transfers, drops, CUPTI status.

Constraints: built from the final published Snapshot only (the one contract); written to stderr
so it never mixes with the traced program's own stdout.
"""

from __future__ import annotations

from typing import TextIO

from gpuflow.core.snapshot import Snapshot, TracedProcess

TOP_KERNELS = 10


def _ms(ns: int | None) -> str:
    return "—" if ns is None else f"{ns / 1e6:.3f} ms"


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


def _process_block(t: TracedProcess, out: TextIO) -> None:
    status = "running" if t.state == "running" else f"exited {t.exit_status if t.exit_status is not None else '?'}"
    out.write(f"  pid {t.pid} ({t.name or '?'}), {status}, CUPTI {t.cupti_status}"
              + (f": {t.cupti_detail}" if t.cupti_detail else "") + "\n")
    if t.truncated:
        out.write("    TRUNCATED: the process ended without its exit flush; the last records may be missing\n")
    if t.dropped_ring or t.dropped_cupti:
        out.write(f"    DROPPED: {t.dropped_ring} records (ring full), {t.dropped_cupti} (inside CUPTI): "
                  "aggregates below are incomplete\n")
    if t.kernels:
        launches = sum(k.count for k in t.kernels)
        out.write(f"    {launches} kernel launches, {len(t.kernels)} distinct kernels; top by total time:\n")
        out.write(f"      {'count':>10}  {'total':>12}  {'mean':>12}  kernel\n")
        for k in t.kernels[:TOP_KERNELS]:
            mean = k.total_ns // k.count if k.count else None
            out.write(f"      {k.count:>10}  {_ms(k.total_ns):>12}  {_ms(mean):>12}  {k.name}\n")
    for tr in t.transfers:
        out.write(f"    {tr.direction:>6}: {tr.count} transfers, {_bytes(tr.bytes)}, {_ms(tr.total_ns)}\n")


def write_summary(snapshot: Snapshot | None, out: TextIO) -> None:
    out.write("gpuflow: end-of-run summary\n")
    traced = snapshot.traced if snapshot is not None else ()
    if not traced:
        out.write("  no CUDA activity was seen: the program (and its children) never initialised CUDA\n")
        return
    for t in traced:
        _process_block(t, out)
