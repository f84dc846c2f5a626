"""The end-of-run summary ``gpuflow run`` prints: top kernels, transfers, drops, CUPTI status, and
what the collectors still reported at the end (GPU metrics sampled or refused, caps reached).

Constraints: built from the final published Snapshot only (the one contract); written to stderr
so it never mixes with the traced program's own stdout. Means are over timed launches only
(``KernelStat.timed``); where nothing was timed the time is "—", never a guessed 0. Every text
that comes from the snapshot (kernel and process names, CUPTI's status and detail, directions)
goes through :func:`gpuflow.cli.printable.printable`: a traced program names its own kernels.
"""

from __future__ import annotations

from typing import TextIO

from gpuflow.cli.printable import printable
from gpuflow.core.snapshot import (
    KernelLaunch, KernelStat, RetiredTraced, Snapshot, TracedDevice, TracedProcess, TransferStat,
)

TOP_KERNELS = 10
NO_CUDA = "no CUDA activity was seen: the program (and its children) never initialised CUDA\n"


def format_duration(ns: int | None) -> str:
    if ns is None:
        return "—"
    if ns >= 1_000_000_000:
        return f"{ns / 1e9:.3f} s"
    if ns >= 1_000_000:
        return f"{ns / 1e6:.3f} ms"
    if ns >= 1_000:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns} ns"


def format_size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover - the loop always returns


def format_process(t: TracedProcess, top: int = TOP_KERNELS) -> list[str]:
    status = "running" if t.state == "running" else (
        f"exited with status {t.exit_status}" if t.exit_status is not None else "exited")
    cupti = printable(t.cupti_status + (f" ({t.cupti_detail})" if t.cupti_detail else ""))
    lines = [f"pid {t.pid} ({printable(t.name or '?')}): {status}; CUPTI {cupti}; {t.records} records"]
    if t.truncated:
        lines.append("  TRUNCATED: the process ended without its exit flush, or its ring held malformed "
                     "records; the last records may be missing")
    if t.dropped_ring or t.dropped_cupti:
        lines.append(f"  DROPPED: {t.dropped_ring} records (ring full), {t.dropped_cupti} (inside CUPTI): "
                     "the totals below are lower bounds")
    lines.extend(format_totals(t.kernels, t.transfers, top, t.kernel_launches))
    for device in t.devices:
        lines.extend(format_device(device))
    if t.translate_cpu_ns and t.records:
        lines.append(f"  GPUFlow inside the process: {format_duration(t.translate_cpu_ns)} of CPU turning "
                     f"CUPTI's records into its ring ({t.translate_cpu_ns / t.records:.0f} ns a record, "
                     "mostly on its flusher thread)")
    return lines


def format_totals(kernels: tuple[KernelStat, ...], transfers: tuple[TransferStat, ...],
                  top: int = TOP_KERNELS, launches: tuple[KernelLaunch, ...] = ()) -> list[str]:
    """The kernel table (top ``top`` by total time, with each kernel's theoretical occupancy where
    ``launches`` has it) and the transfer lines."""
    lines: list[str] = []
    by_mangled = {x.mangled: x for x in launches}
    if kernels:
        launches = sum(k.count for k in kernels)
        lines.append(f"  {launches} kernel launches, {len(kernels)} kernels; top {min(top, len(kernels))} "
                     "by total time:")
        lines.append(f"    {'launches':>10}  {'total':>12}  {'mean':>12}  {'occupancy':>9}  {'limited by':<20}  "
                     f"{'waves':>11}  kernel")
        for k in kernels[:top]:
            timed = k.timed or 0
            total = format_duration(k.total_ns) if timed else "—"
            mean = format_duration(k.total_ns // timed) if timed else "—"
            x = by_mangled.get(k.mangled)
            occupancy = f"{x.occupancy_pct:.1f} %" if x is not None and x.occupancy_pct is not None else "—"
            limiter = ((x.limiters if x is not None else None) or "—").replace("shared_memory", "shared mem")
            lines.append(f"    {k.count:>10}  {total:>12}  {mean:>12}  {occupancy:>9}  {limiter:<20}  "
                         f"{format_waves(x):>11}  {printable(k.name)}")
            lines.extend(format_configs(x))
    else:
        lines.append("  no kernels")
    for tr in transfers:
        time = format_duration(tr.total_ns) if tr.timed else "—"
        lines.append(f"  {printable(tr.direction):>6}: {tr.count} transfers, {format_size(tr.bytes)}, {time}")
    return lines


def format_waves(x: KernelLaunch | None) -> str:
    """The main configuration's waves: one figure, or the range its grids span."""
    lo, hi = (x.waves_min, x.waves_max) if x is not None else (None, None)
    if lo is None or hi is None:
        return "—"
    return f"{lo:.2f}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}"


def format_configs(x: KernelLaunch | None) -> list[str]:
    """A line under a kernel launched with several configurations (the row shows its main one),
    or whose occupancy is not known (why)."""
    if x is None:
        return []
    if x.unavailable and x.configs <= 1:
        return [f"{'':>61}  (occupancy not available: {printable(x.unavailable)})"]
    if x.configs <= 1 and not x.configs_more:
        return []
    more = f" and {x.configs_more} launches in further ones" if x.configs_more else ""
    spread = ""
    if x.occupancy_min_pct is not None and x.occupancy_max_pct is not None:
        spread = f"; occupancy {x.occupancy_min_pct:.1f}-{x.occupancy_max_pct:.1f} % over them"
    return [f"{'':>61}  ({x.configs} launch configurations{more}{spread}; the row shows the one "
            "with the most time)"]


def format_rate(bytes_per_s: float | None) -> str:
    return "—" if bytes_per_s is None else f"{bytes_per_s / 1e9:.2f} GB/s"


def format_device(d: TracedDevice) -> list[str]:
    """One device of a traced process: what it is, the process's GPU busy share there, its copies'
    bandwidth by direction and host memory."""
    facts = [printable(d.name)] if d.name else []
    if d.compute_capability is not None:
        facts.append(f"sm_{d.compute_capability[0]}{d.compute_capability[1]}")
    if d.sm_count is not None:
        facts.append(f"{d.sm_count} SMs")
    if d.uuid:
        facts.append(printable(d.uuid))
    head = f"  device {d.device}" + (f" ({', '.join(facts)})" if facts else "")
    if d.kernel_span_ns:
        busy = (f"GPU busy {min(100.0, d.busy_ns * 100 / d.kernel_span_ns):.1f} % of the "
                f"{format_duration(d.kernel_span_ns)} from its first kernel to its last "
                f"(the union of its kernels: {format_duration(d.busy_ns)})")
        if d.busy_pct is not None:
            busy += f"; {d.busy_pct:.1f} % over its last {format_duration(round((d.busy_window_ms or 0) * 1e6))}"
        if d.busy_late:
            busy += f"; {d.busy_late} kernels arrived after their time was counted: lower bounds"
    else:
        busy = "no timed kernels"
    lines = [f"{head}: {busy}"]
    for c in d.copies:
        lines.append(f"    {printable(c.direction):>6} {printable(c.memory):<8}: {c.count} timed copies, "
                     f"{format_size(c.bytes)} in {format_duration(c.total_ns)}: {format_rate(c.bytes_per_s)}")
    return lines


def format_retired(r: RetiredTraced, top: int = TOP_KERNELS) -> list[str]:
    """The roll-up of the session's older exited processes (gpuflow.collectors.cupti.retire)."""
    lines = [f"{r.processes} earlier exited processes, folded together: {r.records} records; "
             f"{r.failed} failed, {r.truncated} truncated, {r.not_traced} not traced (CUPTI status)"]
    if r.dropped_ring or r.dropped_cupti or r.truncated:
        lines.append(f"  INCOMPLETE: {r.dropped_ring} records dropped (ring full), {r.dropped_cupti} (inside "
                     f"CUPTI), {r.truncated} processes cut short: the totals below are lower bounds")
    lines.extend(format_totals(r.kernels, r.transfers, top))
    return lines


def format_summary(traced: tuple[TracedProcess, ...], top: int = TOP_KERNELS,
                   retired: tuple[RetiredTraced, ...] = ()) -> str:
    if not traced and not retired:
        return NO_CUDA
    lines: list[str] = []
    for r in retired:
        lines.extend(format_retired(r, top))
    for t in traced:
        lines.extend(format_process(t, top))
    return "\n".join(lines) + "\n"


def untraced_reasons(snapshot: Snapshot) -> list[str]:
    """When nothing was traced: the errors the agent reports, which may be why (no driver, no GPU)."""
    errors = [p for p in snapshot.problems if p.severity == "error"]
    if not errors:
        return []
    return ["the agent reported, which may be why:"] + [
        f"  error: [{printable(p.source)}] {printable(p.message)}" for p in errors]


def agent_notes(snapshot: Snapshot, skip_errors: bool) -> list[str]:
    """What the collectors still said at the end (a GPU's metrics sampled or refused, a cap
    reached, ...), every severity; the errors left out when they were already given as reasons."""
    notes = [p for p in snapshot.problems if not (skip_errors and p.severity == "error")]
    if not notes:
        return []
    return ["the agent also reported:" if skip_errors else "the agent reported:"] + [
        f"  {p.severity}: [{printable(p.source)}] {printable(p.message)}" for p in notes]


def write_summary(snapshot: Snapshot | None, out: TextIO, live: Snapshot | None = None) -> None:
    """The summary of the final ``snapshot``; when nothing was traced, the errors of ``live`` (the
    last snapshot before the collectors stopped, which still holds their problems) may say why;
    then whatever else the collectors reported there."""
    out.write("gpuflow: end-of-run summary\n")
    body = format_summary(snapshot.traced if snapshot is not None else (),
                          retired=snapshot.traced_retired if snapshot is not None else ())
    lines = body.splitlines()
    reasons_from = live if live is not None else snapshot
    reasons: list[str] = []
    if reasons_from is not None and (snapshot is None or not (snapshot.traced or snapshot.traced_retired)):
        reasons = untraced_reasons(reasons_from)
    lines += reasons
    if reasons_from is not None:
        lines += agent_notes(reasons_from, skip_errors=bool(reasons))
    out.write("".join(f"  {line}\n" for line in lines))
