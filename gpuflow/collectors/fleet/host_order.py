"""One host's items put in the snapshot's merge order, each key once, as the hub takes a frame.

The agent's merge (gpuflow.core.merge) orders a snapshot's items and keeps one per key: devices
by (host, index, uuid), processes by (host, pid) with their attachments by (device index, uuid),
traced processes by (host, pid, session), roll-ups by (host, session). An agent's own frames come
so, but an agent is untrusted: the hub puts each host's items in that order once, when it takes
the frame, and refuses a frame that lists a key twice (no agent's merge makes one). The hub's
part can then say it is in merge order (``SnapshotPart.in_merge_order``: its hosts follow each
other by name, host_table.py), and the frame thread takes its items as they are instead of
merging thousands of them again at every snapshot.

Constraints: runs on the hub's network thread for every frame; O(n log n) in one host's items,
and O(n) when they come in order, as an agent sends them.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from gpuflow.collectors.fleet.parse import FrameRefused
from gpuflow.core.merge import process_in_order
from gpuflow.core.snapshot import Device, Process, RetiredTraced, TracedProcess


def _in_order(items: Sequence[Any], key: Callable[[Any], Any], part: str) -> tuple:
    keys = [key(x) for x in items]
    if any(a >= b for a, b in zip(keys, keys[1:])):
        order = sorted(range(len(items)), key=keys.__getitem__)
        if any(keys[a] == keys[b] for a, b in zip(order, order[1:])):
            raise FrameRefused(f"{part}: an entry listed twice")
        items = [items[i] for i in order]
    return tuple(items)


def devices(items: Sequence[Device]) -> tuple[Device, ...]:
    """By (index, uuid); a uuid twice is refused (the merge keys devices by uuid)."""
    if len({d.uuid for d in items}) != len(items):
        raise FrameRefused("devices: an entry listed twice")
    return _in_order(items, lambda d: (d.index, d.uuid), "devices")


def processes(items: Sequence[Process]) -> tuple[Process, ...]:
    """By pid, each one's attachments by (device index, uuid)."""
    return tuple(map(process_in_order, _in_order(items, lambda p: p.pid, "processes")))


def traced(items: Sequence[TracedProcess]) -> tuple[TracedProcess, ...]:
    """By (pid, session)."""
    return _in_order(items, lambda t: (t.pid, t.session), "traced")


def retired(items: Sequence[RetiredTraced]) -> tuple[RetiredTraced, ...]:
    """By session."""
    return _in_order(items, lambda r: r.session, "traced_retired")
