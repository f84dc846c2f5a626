"""Encode each snapshot once, for every client: the SSE full and delta frames and the JSON body.

The SSE frame format is docs/snapshot.md's: ``id: <boot_epoch>-<seq>``, ``event: snapshot``, one
``data:`` line holding ``{"frame": "full"|"delta", "base_seq": …, …snapshot fields…}``. A delta is
made against the previous snapshot *this encoder* encoded (``base_seq``): everything travels whole
except each lane's ``spans``, which keep only spans whose ``seq`` is greater than the largest seq
that lane had in the base frame (all of them for a lane or traced process the base did not have).
A client is sent the delta only if the last frame it received has ``seq == base_seq``; the stream
decides that, this module only encodes.

Constraints: called from every stream thread; the encoding happens under a lock by whichever
thread first sees a new snapshot, the others take the cached bytes (no per-client JSON work).
JSON is compact (``separators``), UTF-8 and never contains a raw newline, so one ``data:`` line
is enough. NaN/Infinity, which JSON cannot carry, are sent as null.
"""

from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import dataclass
from typing import Any

from gpuflow.core.hub import SnapshotHub
from gpuflow.core.snapshot import Snapshot

LaneKey = tuple[str, int, int, int, int]


@dataclass(frozen=True, slots=True)
class Frame:
    """One snapshot, encoded. ``delta`` is None when there was no base to diff against."""

    snapshot: Snapshot
    seq: int
    full: bytes  #: a complete SSE event
    delta: bytes | None  #: a complete SSE event, valid only for clients that received base_seq
    base_seq: int | None


def dumps(obj: Any) -> bytes:
    """Compact JSON as UTF-8; non-finite floats become null instead of invalid JSON."""
    try:
        text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(obj), separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def lane_key(traced: dict[str, Any], lane: dict[str, Any]) -> LaneKey:
    return (traced["session"], traced["pid"], lane["device"], lane["context"], lane["stream"])


def lane_maxima(doc: dict[str, Any]) -> dict[LaneKey, int]:
    """The largest span seq of every lane in a snapshot's JSON form (lanes with spans only)."""
    out: dict[LaneKey, int] = {}
    for t in doc["traced"]:
        for lane in t["lanes"]:
            if lane["spans"]:
                out[lane_key(t, lane)] = max(s["seq"] for s in lane["spans"])
    return out


def delta_traced(doc: dict[str, Any], base: dict[LaneKey, int]) -> list[dict[str, Any]]:
    """``doc["traced"]`` with each lane's spans cut to those newer than ``base`` (no copy of the rest)."""
    out = []
    for t in doc["traced"]:
        lanes = []
        for lane in t["lanes"]:
            last = base.get(lane_key(t, lane))
            if last is not None:
                lane = {**lane, "spans": [s for s in lane["spans"] if s["seq"] > last]}
            lanes.append(lane)
        out.append({**t, "lanes": lanes})
    return out


class FrameEncoder:
    """The latest snapshot of a hub, encoded once; ``boot_epoch`` tells agent restarts apart."""

    def __init__(self, hub: SnapshotHub, boot_epoch: int | None = None) -> None:
        self.hub = hub
        self.boot_epoch = boot_epoch if boot_epoch is not None else time.time_ns() // 1_000_000
        self._lock = threading.Lock()
        self._frame: Frame | None = None
        self._maxima: dict[LaneKey, int] = {}
        self._json: tuple[Snapshot, bytes] | None = None

    def event_id(self, seq: int) -> str:
        return f"{self.boot_epoch}-{seq}"

    def current(self) -> Frame | None:
        """The frame of the hub's latest snapshot (None before the first one)."""
        snap = self.hub.latest()
        frame = self._frame
        if snap is None or (frame is not None and frame.snapshot is snap):
            return frame if snap is not None else None
        with self._lock:
            snap = self.hub.latest()
            frame = self._frame
            if frame is None or frame.snapshot is not snap:
                frame = self._encode(snap, frame)
                self._frame = frame
            return frame

    def snapshot_json(self) -> tuple[Snapshot, bytes] | None:
        """The latest snapshot and its plain JSON body (GET /api/snapshot), encoded once."""
        snap = self.hub.latest()
        if snap is None:
            return None
        cached = self._json
        if cached is not None and cached[0] is snap:
            return cached
        with self._lock:
            cached = self._json
            if cached is None or cached[0] is not snap:
                cached = (snap, dumps(snap.to_json_dict()))
                self._json = cached
            return cached

    def _encode(self, snap: Snapshot, prev: Frame | None) -> Frame:
        doc = snap.to_json_dict()
        head = b"id: " + self.event_id(snap.seq).encode() + b"\nevent: snapshot\ndata: "
        full = head + dumps({"frame": "full", "base_seq": None, **doc}) + b"\n\n"
        delta = None
        if prev is not None:
            body = {"frame": "delta", "base_seq": prev.seq, **doc,
                    "traced": delta_traced(doc, self._maxima)}
            delta = head + dumps(body) + b"\n\n"
        self._maxima = lane_maxima(doc)
        return Frame(snapshot=snap, seq=snap.seq, full=full, delta=delta,
                     base_seq=prev.seq if prev is not None else None)
