"""Folding exited traced processes into a session's RetiredTraced roll-up, exactly.

What it is for: the CUPTI collector keeps only the most recent exited processes in the snapshot
(their lanes are what the browser draws); older ones are folded here so their complete totals stay
in the snapshot, the summary and --summary-json. Kernels merge by (name, mangled), transfers by
direction; counts, bytes and times add, minima and maxima combine.

Constraints: pure functions of frozen snapshot values; called on the collector's drain thread, once
per folded process (never per frame).
"""

from __future__ import annotations

from gpuflow.core.snapshot import (
    KernelStat, RetiredTraced, TRANSFER_DIRECTIONS, TracedProcess, TransferStat, kernel_order,
)


def _add_optional(a: int | None, b: int | None) -> int | None:
    if a is None and b is None:
        return None
    return (a or 0) + (b or 0)


def _combine(a: int | None, b: int | None, pick) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return pick(a, b)


def merge_kernels(a: tuple[KernelStat, ...], b: tuple[KernelStat, ...]) -> tuple[KernelStat, ...]:
    """The union of two kernel tables, in ``kernel_order``."""
    by_key: dict[tuple[str, str], KernelStat] = {(k.name, k.mangled): k for k in a}
    for k in b:
        known = by_key.get((k.name, k.mangled))
        if known is None:
            by_key[(k.name, k.mangled)] = k
            continue
        by_key[(k.name, k.mangled)] = KernelStat(
            name=k.name, mangled=k.mangled, count=known.count + k.count,
            total_ns=known.total_ns + k.total_ns, min_ns=_combine(known.min_ns, k.min_ns, min),
            max_ns=_combine(known.max_ns, k.max_ns, max), timed=_add_optional(known.timed, k.timed))
    return tuple(sorted(by_key.values(), key=kernel_order))


def merge_transfers(a: tuple[TransferStat, ...], b: tuple[TransferStat, ...]) -> tuple[TransferStat, ...]:
    """The union of two transfer tables, in TRANSFER_DIRECTIONS order."""
    by_dir: dict[str, TransferStat] = {t.direction: t for t in a}
    for t in b:
        known = by_dir.get(t.direction)
        by_dir[t.direction] = t if known is None else TransferStat(
            direction=t.direction, count=known.count + t.count, bytes=known.bytes + t.bytes,
            total_ns=known.total_ns + t.total_ns, timed=_add_optional(known.timed, t.timed))
    order = {d: i for i, d in enumerate(TRANSFER_DIRECTIONS)}
    return tuple(sorted(by_dir.values(), key=lambda t: (order.get(t.direction, len(order)), t.direction)))


def fold(retired: RetiredTraced | None, t: TracedProcess) -> RetiredTraced:
    """``retired`` with the exited process ``t`` folded in (a new value; neither input changes)."""
    r = retired if retired is not None else RetiredTraced(session=t.session)
    if t.session != r.session:
        raise ValueError(f"cannot fold session {t.session} into {r.session}")
    return RetiredTraced(
        session=r.session,
        processes=r.processes + 1,
        failed=r.failed + (1 if t.exit_status not in (None, 0) else 0),
        truncated=r.truncated + (1 if t.truncated else 0),
        not_traced=r.not_traced + (1 if t.cupti_status != "ok" else 0),
        records=r.records + t.records,
        dropped_ring=r.dropped_ring + t.dropped_ring,
        dropped_cupti=r.dropped_cupti + t.dropped_cupti,
        kernels=merge_kernels(r.kernels, t.kernels),
        transfers=merge_transfers(r.transfers, t.transfers),
        translate_cpu_ns=r.translate_cpu_ns + t.translate_cpu_ns,
    )
