"""Folding exited traced processes into a session's RetiredTraced roll-up, exactly.

What it is for: the CUPTI collector keeps only the most recent exited processes in the snapshot
(their lanes are what the browser draws); older ones are folded here so their complete totals stay
in the snapshot, the summary and --summary-json. Kernels merge by (name, mangled), transfers by
direction; counts, bytes and times add, minima and maxima combine.

The roll-up's kernel table keeps to a traced process's own budget (docs/decoder.md, "Caps"): a
program that starts process after process, each with thousands of names of its own, would grow it
without bound. A name gets an entry if, when it first arrives, there is room for it (at most
``ROLL_UP_ENTRIES`` entries within ``KERNEL_TABLE_BYTES`` of JSON); entries never leave, so a
name that found no room counts, then and later, in ``(other kernel names)``, exactly.

Constraints: pure functions of frozen snapshot values; called on the collector's drain thread, once
per folded process (never per frame).
"""

from __future__ import annotations

from gpuflow.collectors.cupti._layout import DEFAULT_MAX_NAMES
from gpuflow.collectors.cupti.traced_builder import KERNEL_JSON_FIXED, KERNEL_TABLE_BYTES, OTHER_KERNELS, json_cost
from gpuflow.core.snapshot import (
    KernelStat, RetiredTraced, TRANSFER_DIRECTIONS, TracedProcess, TransferStat, kernel_order,
)

#: the most entries the roll-up's kernel table has: a process's own most (its names, the unnamed
#: kernels and the other ones)
ROLL_UP_ENTRIES = DEFAULT_MAX_NAMES + 2


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


def _cost(k: KernelStat) -> int:
    return KERNEL_JSON_FIXED + json_cost(k.name) + json_cost(k.mangled)


def _sum(known: KernelStat, k: KernelStat) -> KernelStat:
    return KernelStat(name=known.name, mangled=known.mangled, count=known.count + k.count,
                      total_ns=known.total_ns + k.total_ns, min_ns=_combine(known.min_ns, k.min_ns, min),
                      max_ns=_combine(known.max_ns, k.max_ns, max), timed=_add_optional(known.timed, k.timed))


def merge_kernels(a: tuple[KernelStat, ...], b: tuple[KernelStat, ...]) -> tuple[KernelStat, ...]:
    """The union of a roll-up's kernel table ``a`` and a process's ``b``, in ``kernel_order``; the
    names of ``b`` with no entry in ``a`` and no room left (module docstring) count in the other one."""
    other_key = (OTHER_KERNELS, "")
    by_key: dict[tuple[str, str], KernelStat] = {(k.name, k.mangled): k for k in a}
    spent = sum(_cost(k) for k in a)
    for k in b:  # the busiest first: they get the room there is
        key = (k.name, k.mangled)
        known = by_key.get(key)
        if known is None and key != other_key:
            cost = _cost(k)
            if len(by_key) < ROLL_UP_ENTRIES - (other_key not in by_key) and spent + cost <= KERNEL_TABLE_BYTES:
                by_key[key] = k
                spent += cost
                continue
            key = other_key
            known = by_key.get(key)
            k = KernelStat(name=OTHER_KERNELS, mangled="", count=k.count, total_ns=k.total_ns, min_ns=k.min_ns,
                           max_ns=k.max_ns, timed=k.timed)
        by_key[key] = k if known is None else _sum(known, k)
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
