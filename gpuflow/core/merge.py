"""Deterministic merge of collector parts into one Snapshot (rules documented in hookspecs.py).

Every device, process and traced process is keyed by its host as well (two hosts of a fleet may
both have pid 4242, and replayed or faked GPUs the same uuid). A part about this agent's own host
(no ``hosts`` of its own) has its items tagged with the agent's host name by :func:`tag_part`; a
part about other hosts (a hub's fleet collector) tags its items itself and lists its hosts. The
snapshot's ``hosts`` is the agent's own entry, when some part of its own host contributed, then
the other parts' hosts, by name; the own entry wins a name both give.

Constraints: runs on the frame thread up to 20 times a second; pure function of its inputs,
independent of plugin registration order.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Iterable

from gpuflow.core.identity import Identity
from gpuflow.core.snapshot import (
    Attachment, FleetHost, HostInfo, Process, Snapshot, SnapshotPart,
)

def tag_part(part: SnapshotPart, name: str) -> SnapshotPart:
    """``part`` with every item that names no host tagged with ``name``; the part itself when it
    is about other hosts (it lists ``hosts``) or nothing needs a tag."""
    if part.hosts:
        return part
    changes = {}
    for attr in ("devices", "processes", "traced", "traced_retired"):
        items = getattr(part, attr)
        if any(item.host is None for item in items):
            changes[attr] = tuple(item if item.host is not None else replace(item, host=name)
                                  for item in items)
    return replace(part, **changes) if changes else part


def _is_local(part: SnapshotPart) -> bool:
    """Whether ``part`` says something about this agent's own host."""
    return not part.hosts and (part.host is not None or bool(
        part.devices or part.processes or part.traced or part.traced_retired))


def _host_key(name: str | None) -> str:
    return name or ""


def merge_parts(parts: Iterable[SnapshotPart], seq: int, timestamp: float,
                identity: Identity | None = None, interval_s: float | None = None) -> Snapshot:
    """One snapshot of ``parts``; ``identity`` and ``interval_s`` are the agent's own (its host
    entry is made only when they are given). The items of a part ``in_merge_order`` are taken as
    they are when no other part has items (what keying and sorting them would give again)."""
    ordered = sorted(parts, key=lambda p: p.source)
    host_values: dict[str, object] = {}
    devices: dict[tuple[str, str], object] = {}
    processes: dict[tuple[str, int], Process] = {}
    traced: dict[tuple[str, str, int], object] = {}
    retired: dict[tuple[str, str], object] = {}
    hosts: dict[str, FleetHost] = {}
    problems, own_problems, local = [], [], False
    with_items = [p for p in ordered if p.devices or p.processes or p.traced or p.traced_retired]
    as_they_are = with_items[0] if len(with_items) == 1 and with_items[0].in_merge_order else None
    for part in ordered:
        if part.host is not None:
            for f in fields(HostInfo):
                value = getattr(part.host, f.name)
                if value is not None and host_values.get(f.name) is None:
                    host_values[f.name] = value
        if part is not as_they_are:
            _key_items(part, devices, processes, traced, retired)
        for h in part.hosts:
            if h.name is not None:
                hosts.setdefault(h.name, h)
        problems.extend(part.problems)
        if not part.hosts:
            own_problems.extend(part.problems)
            local = local or _is_local(part)
    if identity is not None:
        host_values.update(name=identity.name, boot_epoch=identity.boot_epoch, interval_s=interval_s)
    host = HostInfo(**host_values)  # type: ignore[arg-type]
    if identity is not None and local:
        hosts[identity.name] = FleetHost(info=host, problems=tuple(own_problems))
    if as_they_are is not None:
        items = (as_they_are.devices, as_they_are.processes, as_they_are.traced, as_they_are.traced_retired)
    else:
        items = (
            tuple(devices[k] for k in sorted(devices, key=lambda k: (
                k[0], devices[k].index, k[1]))),  # type: ignore[attr-defined]
            tuple(processes[k] for k in sorted(processes)),
            tuple(traced[k] for k in sorted(traced, key=lambda k: (k[0], k[2], k[1]))),  # type: ignore[misc]
            tuple(retired[k] for k in sorted(retired)))  # type: ignore[misc]
    return Snapshot(
        seq=seq,
        timestamp=timestamp,
        host=host,
        problems=tuple(problems),
        devices=items[0],
        processes=items[1],
        traced=items[2],
        sources=tuple(p.source for p in ordered),
        traced_retired=items[3],
        hosts=tuple(hosts[name] for name in sorted(hosts)),
    )


def _key_items(part: SnapshotPart, devices: dict, processes: dict, traced: dict, retired: dict) -> None:
    """``part``'s items into the merge's dicts by key, the first part's winning."""
    for device in part.devices:
        devices.setdefault((_host_key(device.host), device.uuid), device)
    for proc in part.processes:
        key = (_host_key(proc.host), proc.pid)
        processes[key] = _merge_process(processes.get(key), proc)
    for t in part.traced:
        traced.setdefault((_host_key(t.host), t.session, t.pid), t)
    for r in part.traced_retired:
        retired.setdefault((_host_key(r.host), r.session), r)


def _merge_process(known: Process | None, new: Process) -> Process:
    if known is None:   # the usual case: one part knows the process
        return process_in_order(new)
    by_uuid: dict[str, Attachment] = {a.device_uuid: a for a in known.attachments}
    for a in new.attachments:
        by_uuid.setdefault(a.device_uuid, a)
    return replace(
        known,
        name=known.name if known.name is not None else new.name,
        user=known.user if known.user is not None else new.user,
        cmdline=known.cmdline if known.cmdline is not None else new.cmdline,
        attachments=_sorted_attachments(by_uuid.values()),
        workload=known.workload if known.workload is not None else new.workload,
    )


def _order(a: Attachment) -> tuple[int, str]:
    return (a.device_index, a.device_uuid)


def process_in_order(p: Process) -> Process:
    """``p`` with its attachments in the snapshot's order (device index, uuid): itself if they are."""
    items = p.attachments
    if all(_order(a) <= _order(b) for a, b in zip(items, items[1:])):
        return p
    return replace(p, attachments=_sorted_attachments(items))


def _sorted_attachments(items: Iterable[Attachment]) -> tuple[Attachment, ...]:
    return tuple(sorted(items, key=_order))
