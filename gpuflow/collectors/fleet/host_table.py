"""Every followed agent's latest state, shared by the hub's network thread and the frame thread.

The network thread (one :class:`~gpuflow.collectors.fleet.link.Link` per target) publishes a
:class:`HostView` per target whenever something changed, replacing the one before: a view is
immutable, so the frame thread builds its part from views without a lock held for long. The table
hands out host names (:meth:`HostTable.claim`): two targets never show under one name, and a name
an agent gives that another target holds already is refused (that target keeps showing under its
address).

:meth:`HostTable.part` is ``produce_snapshot``'s answer: the same part object while nothing
changed, else a new one of every view (hosts by name, their items) and the hub's own problems,
in the snapshot's merge order (``in_merge_order``: each view's items are, host_order.py), so that
the frame thread does not merge a fleet's items again at every snapshot.

Constraints: every method is thread-safe and O(1) but ``part`` (O(hosts + items) when something
changed); nothing here does I/O.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass

from gpuflow.collectors.fleet.targets import Target
from gpuflow.core.snapshot import (
    Device, FleetHost, Problem, Process, RetiredTraced, SnapshotPart, TracedProcess,
)

SOURCE = "fleet"


@dataclass(frozen=True)
class HostView:
    """One target's host as the hub last knew it."""

    host: FleetHost
    devices: tuple[Device, ...] = ()
    processes: tuple[Process, ...] = ()
    traced: tuple[TracedProcess, ...] = ()
    traced_retired: tuple[RetiredTraced, ...] = ()


class HostTable:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._views: dict[Target, HostView] = {}
        self._names: dict[str, Target] = {}
        self._name_of: dict[Target, str] = {}
        self._problems: tuple[Problem, ...] = ()
        self._version = 0
        self._part: tuple[int, SnapshotPart] | None = None

    # -- the network thread ------------------------------------------------------------------
    def claim(self, target: Target, name: str) -> bool:
        """Whether ``target`` may show as ``name`` (it then holds it, and lets go of any other)."""
        with self._lock:
            holder = self._names.get(name)
            if holder is not None and holder != target:
                return False
            before = self._name_of.get(target)
            if before is not None and before != name:
                del self._names[before]
            self._names[name], self._name_of[target] = target, name
            return True

    def publish(self, target: Target, view: HostView) -> None:
        with self._lock:
            self._views[target] = view
            self._version += 1

    def forget(self, target: Target) -> None:
        """A target no longer followed: its view and its name go."""
        with self._lock:
            self._views.pop(target, None)
            name = self._name_of.pop(target, None)
            if name is not None:
                del self._names[name]
            self._version += 1

    def set_problems(self, problems: tuple[Problem, ...]) -> None:
        """The hub's own problems (its targets file, its bounds), replacing the ones before."""
        with self._lock:
            if problems != self._problems:
                self._problems = problems
                self._version += 1

    # -- the frame thread --------------------------------------------------------------------
    def target_of(self, name: str) -> Target | None:
        with self._lock:
            return self._names.get(name)

    def views(self) -> list[HostView]:
        with self._lock:
            return list(self._views.values())

    def part(self) -> SnapshotPart:
        with self._lock:
            cached = self._part
            if cached is not None and cached[0] == self._version:
                return cached[1]
            version, views, problems = self._version, list(self._views.values()), self._problems
        views.sort(key=lambda v: v.host.info.name or "")
        names = [v.host.info.name or "" for v in views]
        chain = itertools.chain.from_iterable
        part = SnapshotPart(
            source=SOURCE, problems=problems, hosts=tuple(v.host for v in views),
            devices=tuple(chain(v.devices for v in views)),
            processes=tuple(chain(v.processes for v in views)),
            traced=tuple(chain(v.traced for v in views)),
            traced_retired=tuple(chain(v.traced_retired for v in views)),
            # each view's items are in merge order (host_order.py, tagged with its name); the
            # views follow each other by name, each name once (claim), so the whole part is too
            in_merge_order=all(a < b for a, b in zip(names, names[1:])))
        with self._lock:
            if self._part is None or self._part[0] < version:
                self._part = (version, part)
        return part
