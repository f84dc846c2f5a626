"""Deterministic merge of collector parts into one Snapshot (rules documented in hookspecs.py).

Constraints: runs on the frame thread up to 20 times a second; pure function of its inputs,
independent of plugin registration order.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Iterable

from gpuflow.core.snapshot import Attachment, HostInfo, Process, Snapshot, SnapshotPart


def merge_parts(parts: Iterable[SnapshotPart], seq: int, timestamp: float) -> Snapshot:
    ordered = sorted(parts, key=lambda p: p.source)
    host_values: dict[str, object] = {}
    devices: dict[str, object] = {}
    processes: dict[int, Process] = {}
    traced: dict[tuple[str, int], object] = {}
    retired: dict[str, object] = {}
    problems = []
    for part in ordered:
        if part.host is not None:
            for f in fields(HostInfo):
                value = getattr(part.host, f.name)
                if value is not None and host_values.get(f.name) is None:
                    host_values[f.name] = value
        for device in part.devices:
            devices.setdefault(device.uuid, device)
        for proc in part.processes:
            processes[proc.pid] = _merge_process(processes.get(proc.pid), proc)
        for t in part.traced:
            traced.setdefault((t.session, t.pid), t)
        for r in part.traced_retired:
            retired.setdefault(r.session, r)
        problems.extend(part.problems)
    return Snapshot(
        seq=seq,
        timestamp=timestamp,
        host=HostInfo(**host_values),  # type: ignore[arg-type]
        problems=tuple(problems),
        devices=tuple(sorted(devices.values(), key=lambda d: (d.index, d.uuid))),  # type: ignore[attr-defined]
        processes=tuple(processes[pid] for pid in sorted(processes)),
        traced=tuple(traced[k] for k in sorted(traced, key=lambda k: (k[1], k[0]))),  # type: ignore[misc]
        sources=tuple(p.source for p in ordered),
        traced_retired=tuple(retired[k] for k in sorted(retired)),  # type: ignore[misc]
    )


def _merge_process(known: Process | None, new: Process) -> Process:
    if known is None:
        return replace(new, attachments=_sorted_attachments(new.attachments))
    by_uuid: dict[str, Attachment] = {a.device_uuid: a for a in known.attachments}
    for a in new.attachments:
        by_uuid.setdefault(a.device_uuid, a)
    return replace(
        known,
        name=known.name if known.name is not None else new.name,
        user=known.user if known.user is not None else new.user,
        cmdline=known.cmdline if known.cmdline is not None else new.cmdline,
        attachments=_sorted_attachments(by_uuid.values()),
    )


def _sorted_attachments(items: Iterable[Attachment]) -> tuple[Attachment, ...]:
    return tuple(sorted(items, key=lambda a: (a.device_index, a.device_uuid)))
