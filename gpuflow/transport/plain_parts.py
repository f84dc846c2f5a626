"""A snapshot's plain form without its traced processes, each item made plain once, not once a frame.

The frame encoder (gpuflow.transport.frames) starts every frame from the snapshot's plain form
without its traced processes, which it diffs against the base frame's and sends where it changed.
It used to make it with ``replace(snap, traced=()).to_json_dict()``: every device (its NVLinks,
GPM and health readings: some 150 objects a GPU), process, host entry and retired roll-up made
plain again for every frame, though they change at the NVML interval while frames come at up to
20 a second for traced processes. On a hub that was most of a watched host's cost: a page watching
a host of eight GPUs had them made plain ten times a second.

:class:`PlainParts` keeps the plain form of each of those items of the snapshot before, by the
item (they are frozen: the same object has the same plain form), and of the snapshot's own host
entry (its HostInfo and problems: a hub's page of one host made it again at every one of that
host's frames, some 30 µs of the page's 240), which a host view's one entry in ``hosts`` shares
(the hub makes that entry anew at each of the host's frames, with the same HostInfo and problems); a frame makes plain only the items that are new
objects (a collector reuses its part while nothing changed, a hub the objects of a host whose
frame did not change them). Its answer is exactly ``replace(snap, traced=()).to_json_dict()``,
members in that order (tests/transport/test_plain_parts.py).

Constraints: called under the frame encoder's lock, once a snapshot; the plain forms are shared
between frames (the encoder keeps the base frame's parts anyway) and never changed; it holds
those of the last snapshot's items only.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from gpuflow.core.snapshot import (
    FleetHost, HostInfo, Problem, RetiredTraced, Snapshot, fleet_host_json, host_json, json_value, snapshot_json,
)


def _retired_json(r: RetiredTraced) -> dict[str, Any]:
    """A retired roll-up as ``Snapshot.to_json_dict`` writes it: its fields, then ``complete``."""
    d = json_value(r)
    d["complete"] = r.complete
    return d


class PlainParts:
    def __init__(self) -> None:
        #: id(item) -> (item, its plain form), of the last snapshot (the item held: its id stays its own)
        self._known: dict[int, tuple[Any, Any]] = {}
        #: the last snapshot's host and problems (the objects) and their plain form
        self._host: tuple[HostInfo, tuple[Problem, ...], dict[str, Any]] | None = None

    def of(self, snap: Snapshot) -> dict[str, Any]:
        """``replace(snap, traced=()).to_json_dict()``, from the plain forms already made."""
        known, now = self._known, {}
        host = self._host
        if host is None or host[0] is not snap.host or host[1] is not snap.problems:
            host = self._host = (snap.host, snap.problems, host_json(snap.host, snap.problems))
        head = host[2]

        def entry_json(h: FleetHost) -> dict[str, Any]:
            # a host view's entry has the snapshot's own host and problems: made plain once
            same = h.info is snap.host and h.problems is snap.problems
            return fleet_host_json(h, head if same else None)
        doc = snapshot_json(snap, head, _items(snap.hosts, entry_json, known, now),
                            _items(snap.devices, json_value, known, now),
                            _items(snap.processes, json_value, known, now), [],
                            _items(snap.traced_retired, _retired_json, known, now))
        self._known = now
        return doc


def _items(items: Iterable[Any], plain: Callable[[Any], Any], known: dict[int, tuple[Any, Any]],
           now: dict[int, tuple[Any, Any]]) -> list[Any]:
    out = []
    for item in items:
        key = id(item)
        made = known.get(key)
        if made is None or made[0] is not item:
            made = (item, plain(item))
        now[key] = made
        out.append(made[1])
    return out
