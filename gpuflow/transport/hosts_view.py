"""``GET /api/stream?detail=hosts``: the fleet's overview, a tile per host, for a page of 1,000 hosts.

A hub's summary of a thousand 8-GPU hosts is megabytes a frame (every device's every reading),
and a delta resends all the devices when any changed; the page's overview draws far less. This
view sends, per host of the snapshot's ``hosts``, its entry (docs/snapshot.md, FleetHost) plus:

* ``gpus``: ``[index, utilization_gpu_pct, memory_used_bytes, memory_total_bytes, lost]`` per
  device, by index (null where not available, as everywhere);
* ``process_count``: processes holding its GPUs; ``traced_running``: its traced processes running.

A full frame lists every host; a delta only the hosts whose tile changed since its base frame
(``hosts``) and the names of those gone (``hosts_gone``); ``host`` (the serving agent's own)
travels in full frames and when it changed. Frames are SSE events like the snapshot's
(``id: <boot_epoch>-<seq>``, ``event: snapshot``), marked ``"detail": "hosts"``, encoded once
per snapshot for all the view's streams; :class:`HostsReader` reads them back into
``{name: tile}``, as the page's fleet overview does (gpuflow/ui/fleet_stream.js).

Constraints: O(devices + hosts) per snapshot, under a lock, by the first stream thread to see it;
the same Frame interface as gpuflow.transport.frames, so the same event loop serves it.
"""

from __future__ import annotations

import threading
from dataclasses import fields
from typing import Any

from gpuflow.core.snapshot import Snapshot, fleet_host_json
from gpuflow.transport.frames import Frame, dumps
from gpuflow.transport.wire import DELTA, FULL, WIRE_SCHEMA

HOSTS = "hosts"


def tiles(snap: Snapshot) -> dict[str, dict[str, Any]]:
    """Every host's tile of ``snap``, by name."""
    gpus: dict[str | None, list[list[Any]]] = {}
    for d in snap.devices:
        gpus.setdefault(d.host, []).append([d.index, d.utilization_gpu_pct, d.memory_used_bytes,
                                            d.memory_total_bytes, d.lost])
    processes: dict[str | None, int] = {}
    for p in snap.processes:
        processes[p.host] = processes.get(p.host, 0) + 1
    running: dict[str | None, int] = {}
    for t in snap.traced:
        if t.state == "running":
            running[t.host] = running.get(t.host, 0) + 1
    out = {}
    for h in snap.hosts:
        tile = fleet_host_json(h)
        tile["gpus"] = sorted(gpus.get(h.name, []), key=lambda g: g[0])
        tile["process_count"] = processes.get(h.name, 0)
        tile["traced_running"] = running.get(h.name, 0)
        out[h.name] = tile
    return out


class HostsFrames:
    """The overview frames of a board's latest snapshot, encoded once for every stream of the view."""

    def __init__(self, board: Any, boot_epoch: int) -> None:
        self.board = board
        self.boot_epoch = boot_epoch
        self._lock = threading.Lock()
        self._frame: Frame | None = None
        self._base: dict[str, dict[str, Any]] = {}
        self._base_host: dict[str, Any] | None = None

    def current(self) -> Frame | None:
        snap = self.board.latest()
        frame = self._frame
        if snap is None or (frame is not None and frame.snapshot is snap):
            return frame if snap is not None else None
        with self._lock:
            snap = self.board.latest()
            if self._frame is None or self._frame.snapshot is not snap:
                self._frame = self._encode(snap, self._frame)
            return self._frame

    def _encode(self, snap: Snapshot, prev: Frame | None) -> Frame:
        now = tiles(snap)
        host = _host_json(snap)
        head = {"schema": WIRE_SCHEMA, "detail": HOSTS, "seq": snap.seq, "timestamp": snap.timestamp}
        event = b"id: %d-%d\nevent: snapshot\ndata: " % (self.boot_epoch, snap.seq)
        full = event + dumps({"frame": FULL, "base_seq": None, **head, "host": host,
                              "hosts": list(now.values())}) + b"\n\n"
        delta = None
        if prev is not None:
            body = {"frame": DELTA, "base_seq": prev.seq, **head,
                    "hosts": [t for name, t in now.items() if self._base.get(name) != t],
                    "hosts_gone": [name for name in self._base if name not in now]}
            if host != self._base_host:
                body["host"] = host
            delta = event + dumps(body) + b"\n\n"
        self._base, self._base_host = now, host
        return Frame(snapshot=snap, seq=snap.seq, full=full, delta=delta,
                     base_seq=prev.seq if prev is not None else None)


def _host_json(snap: Snapshot) -> dict[str, Any]:
    """The serving agent's ``host`` object, as the snapshot's plain form writes it (its facts are
    scalars, then its problems)."""
    host = {f.name: getattr(snap.host, f.name) for f in fields(snap.host)}
    host["problems"] = [{"source": p.source, "message": p.message, "severity": p.severity}
                        for p in snap.problems]
    return host


class HostsReader:
    """Follows one overview stream: ``read(frame)`` gives every host's tile, by name."""

    def __init__(self) -> None:
        self.seq: int | None = None
        self.host: dict[str, Any] | None = None
        self.tiles: dict[str, dict[str, Any]] = {}

    def read(self, frame: dict[str, Any]) -> dict[str, dict[str, Any]]:
        if frame.get("detail") != HOSTS:
            raise ValueError("not a frame of the hosts view")
        if frame["frame"] == DELTA:
            if frame.get("base_seq") != self.seq:
                raise ValueError(f"delta on base {frame.get('base_seq')}, last frame read {self.seq}")
            tiles_now = dict(self.tiles)
            for name in frame.get("hosts_gone", []):
                tiles_now.pop(name, None)
        else:
            tiles_now = {}
        for tile in frame["hosts"]:
            tiles_now[tile["name"]] = tile
        self.host = frame.get("host", self.host)
        self.seq, self.tiles = frame["seq"], tiles_now
        return tiles_now
