"""Encode each snapshot once, for every client: the SSE full and delta frames and the JSON body.

The SSE frame format is docs/snapshot.md's: ``id: <boot_epoch>-<seq>``, ``event: snapshot``, one
``data:`` line holding ``{"frame": "full"|"delta", "base_seq": …, …snapshot fields…}`` in the
stream's compact form (schema 2, :mod:`gpuflow.transport.wire`): per traced process a ``names``
table, kernels and spans referring to it by id, spans as arrays. ``GET /api/snapshot`` is the
plain form, exactly ``Snapshot.to_json_dict()``.

A delta is made against the previous snapshot *this encoder* encoded (``base_seq``). Everything
travels whole except these:

* ``host``, ``sources``, ``devices``, ``processes`` and ``traced_retired`` are left out when they
  equal the base frame's (between NVML polls the agent reuses the same part, while traced
  processes change at up to 20 frames/s);
* a traced process's ``kernels`` hold only the entries that changed since the base frame (a
  busy program with hundreds of kernel names would otherwise resend them all 20 times a
  second), and are left out when none did (an exited process); the client updates its table by
  name id and restores the order with ``kernel_order`` (a total order); its ``lanes`` are left
  out when every lane is as in the base frame (same heads, no new span);
* a traced process the base frame did not have travels whole (``names``, ``kernels``, ``lanes``
  with every span of the sample), even when it has no kernels yet; so does one that *replaced*
  the process of the same (session, pid) in the base frame (pid reuse: its ``records`` went
  down, it is running where the base one had exited, or a kernel name the base had is gone),
  marked ``"reset": true`` so that the client starts it afresh instead of merging;
* each traced process's ``names`` holds only the entries added since the base frame (a table
  only grows while its process is in the stream, so ids never change meaning);
* each lane's ``spans`` holds only spans whose ``seq`` is greater than the largest seq that lane
  had in the base frame, and only the newest of them when a delta would carry too many: all
  lanes together carry at most ``span_rate × (time since the base snapshot)`` spans (time
  clamped to 50 ms–1 s; 16,000 spans per second by default), split max-min fairly (a lane that
  has fewer new spans than an equal share sends them all). The lane's ``spans_skipped`` counts
  its executions since the base frame that the delta does not carry: when it is above 0, what
  the client kept of the lane is no longer contiguous with the new spans, and the client drops
  it. ``executions`` and ``spans_elided`` stay exact; the client says "showing N of M" with N
  what it holds.

A full frame carries every name and every lane's whole sample; it is built only when a client
first asks for it (in the steady state every client takes deltas), from ids given out when the
snapshot was encoded. A client is sent the delta only if the last frame it received has
``seq == base_seq``; the stream decides that, this module only encodes.

How the text is made: a frame is the compact JSON of the frame as one dict (keys in the order
above), but it is put together from pieces. The top-level parts go through orjson
(:func:`dumps`; what orjson does not take, through :mod:`gpuflow.transport.json_pieces`, as json
writes it); by :mod:`gpuflow.transport.wire_text` (compiled; where it declines, the reference
way of wire.encode_spans, the entries' dicts and the heads' through ``json``): a traced process's
head straight from its fields, a delta's lanes (each one's head, new span rows and skipped count,
from its columns, in one buffer: ``lane_news`` and ``lane_texts``, the encoder's two passes over a
process's lanes), and a process's kernel entries (only those that changed, found by comparing with
the KernelStat the base frame sent) straight from the KernelStat objects. There
is no Python list per span row and no dict per kernel entry (under bench/agent_rss.py those were
most of the agent's CPU: docs/recorder.md, "Cost").

Constraints: called from every stream thread; the encoding happens under a lock by whichever
thread first sees a new snapshot, the others take the cached bytes (no per-client JSON work).
JSON is compact (``separators``), UTF-8 and never contains a raw newline, so one ``data:`` line
is enough. NaN/Infinity, which JSON cannot carry, are sent as null. The text reads back to the
dict-at-once encoding's values, members in the same order; orjson may write a float otherwise
than json (0.00001 for 1e-05), never its value (tests/transport/test_frame_text.py).
"""

from __future__ import annotations

import json
import math
import threading
import time
from functools import lru_cache
from typing import Any, Callable, Iterable, Sequence

import orjson

from gpuflow.core.board import SnapshotBoard
from gpuflow.core.recorded import SpanColumns
from gpuflow.core.snapshot import KernelStat, Lane, Snapshot, Span, TracedProcess
from gpuflow.transport import json_pieces, wire_text
from gpuflow.transport.plain_parts import PlainParts
from gpuflow.transport.wire import (
    DELTA, FULL, KERNEL_FIELDS, OMITTABLE, WIRE_SCHEMA, LaunchEntries, NameTable, encode_spans, lane_head,
    TracedKey, traced_head, traced_head_text, traced_key,
)

#: new spans per second that delta frames may carry, over all lanes together (docs/transport.md)
DELTA_SPAN_RATE = 16_000
#: the time a delta's span allowance is computed over is clamped to this range (seconds)
MIN_DELTA_S, MAX_DELTA_S = 0.050, 1.0

_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


class Frame:
    """One snapshot, encoded. ``delta`` is None when there was no base to diff against.

    ``full`` may be given as a function: it is then built the first time a client needs it (a
    new connection, a client that fell behind) rather than for every snapshot, since in the
    steady state every client takes the delta.
    """

    __slots__ = ("snapshot", "seq", "delta", "base_seq", "_full", "_build", "_lock")

    def __init__(self, snapshot: Snapshot, seq: int, full: bytes | Callable[[], bytes],
                 delta: bytes | None, base_seq: int | None) -> None:
        self.snapshot = snapshot
        self.seq = seq
        self.delta = delta  #: a complete SSE event, valid only for clients that received base_seq
        self.base_seq = base_seq
        self._full, self._build = (full, None) if isinstance(full, bytes) else (None, full)
        self._lock = threading.Lock()

    @property
    def full(self) -> bytes:
        """A complete SSE event holding the whole snapshot (built once, on first use)."""
        if self._full is None:
            with self._lock:
                if self._full is None:
                    self._full = self._build()
                    self._build = None
        return self._full

    def after(self, last_seq: int | None) -> bytes:
        """The event for a client whose last frame was ``last_seq``: the shared delta when that is
        the delta's base, else the full frame."""
        return self.delta if self.delta is not None and self.base_seq == last_seq else self.full


#: what orjson leaves to json (it raises TypeError): dataclasses, dates and subclasses of str, int,
#: dict and list, which json writes in its own way or refuses
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS


def dumps(obj: Any) -> bytes:
    """Compact JSON as UTF-8; non-finite floats become null instead of invalid JSON.

    orjson writes it in one call (a 4.3 MB document of 4,000 kernels: 4 ms on the development VM,
    against 27 ms through json_pieces; so the GIL is held no longer than json_pieces' pieces were
    meant to bound it). What orjson does not take (an int beyond 64 bits, a key that is not text,
    text that UTF-8 cannot hold, a type above) goes through gpuflow.transport.json_pieces as
    before, with json's own answer for it."""
    try:
        return orjson.dumps(obj, option=_ORJSON_OPTIONS)
    except TypeError:   # orjson.JSONEncodeError is one
        pass
    try:
        text = json_pieces.encode(obj)   # in pieces: no one call holds the GIL for a whole snapshot
    except ValueError:
        text = json_pieces.encode(_finite(obj))
    return text.encode("utf-8")


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def fair_shares(demands: Sequence[int], total: int | None) -> list[int]:
    """Split ``total`` among lanes wanting ``demands``: max-min fair (water-filling).

    A lane wanting less than an equal share of what is left gets all it wants; the others split
    the rest equally. ``total`` None: everyone gets all. Deterministic.
    """
    if total is None or sum(demands) <= total:
        return list(demands)
    out = [0] * len(demands)
    left, remaining = total, len(demands)
    for i in sorted(range(len(demands)), key=lambda i: (demands[i], i)):
        out[i] = min(demands[i], left // remaining)
        left -= out[i]
        remaining -= 1
    return out


class FrameEncoder:
    """The latest snapshot of a board, encoded once; ``boot_epoch`` tells agent restarts apart.

    ``span_rate``: new spans per second a delta may carry over all lanes (None: all of them).
    """

    def __init__(self, board: SnapshotBoard, boot_epoch: int | None = None,
                 span_rate: float | None = DELTA_SPAN_RATE) -> None:
        self.board = board
        self.boot_epoch = boot_epoch if boot_epoch is not None else time.time_ns() // 1_000_000
        self.span_rate = span_rate
        self._lock = threading.Lock()
        self._frame: Frame | None = None
        self._json: tuple[Snapshot, bytes] | None = None
        #: per traced process (host, session, pid): its names table, while it is in the stream
        self._tables: dict[TracedKey, NameTable] = {}
        #: of the last encoded frame: per lane (host, session, pid, device, context, stream) its
        #: (largest span seq, executions); per traced process its number of names
        self._base_lanes: dict[tuple, tuple[int | None, int]] = {}
        self._base_names: dict[TracedKey, int] = {}
        #: per traced process, its kernels' ids and KernelStats in the last encoded frame
        self._base_kernels: dict[TracedKey, tuple[list[int], Sequence[KernelStat]]] = {}
        #: per traced process, its kernel launch entries in the last encoded frame
        self._base_launches: dict[TracedKey, LaunchEntries] = {}
        #: per traced process, its lanes' heads (device, context, stream, label, executions,
        #: spans_elided) in the last encoded frame
        self._base_heads: dict[TracedKey, list[tuple]] = {}
        #: per traced process, (records, state) in the last encoded frame: tells pid reuse
        self._base_progress: dict[TracedKey, tuple[int, str]] = {}
        self._base_parts: dict[str, Any] = {}
        #: each device's, process's, host entry's and roll-up's plain form, made once per object
        self._plain = PlainParts()

    def event_id(self, seq: int) -> str:
        return f"{self.boot_epoch}-{seq}"

    def current(self) -> Frame | None:
        """The frame of the board's latest snapshot (None before the first one)."""
        snap = self.board.latest()
        frame = self._frame
        if snap is None or (frame is not None and frame.snapshot is snap):
            return frame if snap is not None else None
        with self._lock:
            snap = self.board.latest()
            frame = self._frame
            if frame is None or frame.snapshot is not snap:
                frame = self._encode(snap, frame)
                self._frame = frame
            return frame

    def snapshot_json(self) -> tuple[Snapshot, bytes] | None:
        """The latest snapshot and its plain JSON body (GET /api/snapshot), encoded once."""
        snap = self.board.latest()
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

    def allowance(self, snap: Snapshot, base: Snapshot) -> int | None:
        """The most new spans, over all lanes, a delta from ``base`` to ``snap`` carries."""
        if self.span_rate is None:
            return None
        dt = min(max(snap.timestamp - base.timestamp, MIN_DELTA_S), MAX_DELTA_S)
        return max(1, round(self.span_rate * dt))

    def _replaced(self, t: TracedProcess, whole: bool) -> bool:
        """Whether ``t`` is a new process under the (session, pid) of one in the base frame;
        ``whole``: every kernel name the one in the base frame had is among ``t``'s."""
        progress = self._base_progress.get(traced_key(t))
        if progress is None:
            return False
        records, state = progress
        return t.records < records or (state == "exited" and t.state == "running") or not whole

    def _encode(self, snap: Snapshot, prev: Frame | None) -> Frame:
        doc = self._plain.of(snap)   # replace(snap, traced=()).to_json_dict(), an item made plain once
        doc["schema"] = WIRE_SCHEMA
        # each known process's kernels against the base frame's, in one compiled pass: their ids,
        # whether a name is gone, the entries that changed; a process that replaced its namesake
        # of the base frame starts afresh: no table, no base
        known: dict[TracedKey, tuple[list[int | None], str | None]] = {}
        reset = set()
        for t in snap.traced:
            key = traced_key(t)
            table = self._tables.get(key)
            if table is not None:
                base_ids, base_kernels = self._base_kernels.get(key, ((), ()))
                ids, whole, changed = wire_text.kernel_delta(t.kernels, table.pairs, base_ids, base_kernels,
                                                             KERNEL_FIELDS)
                known[key] = (ids, changed)
                if prev is not None and self._replaced(t, whole):
                    reset.add(key)
        for key in reset:
            del known[key]
            self._tables.pop(key, None)
            self._base_names.pop(key, None)
            self._base_kernels.pop(key, None)
            self._base_heads.pop(key, None)
            self._base_lanes = {k: v for k, v in self._base_lanes.items() if k[:3] != key}
        # the delta's spans first: which are new, then how many of them each lane may carry
        news: list[tuple[Sequence[Span] | SpanColumns, int]] | None = None   # per lane: spans, the first new one
        shares: list[int] | None = None
        if prev is not None:
            news, demands = [], []
            for t in snap.traced:
                wire_text.lane_news(t.lanes, traced_key(t), self._base_lanes, news, demands)
            shares = fair_shares(demands, self.allowance(snap, prev.snapshot))
        tables: dict[TracedKey, NameTable] = {}
        kernels_now: dict[TracedKey, tuple[list[int], Sequence[KernelStat]]] = {}
        heads_now: dict[TracedKey, list[tuple]] = {}
        launches_now: dict[TracedKey, LaunchEntries] = {}
        lanes_now: dict[tuple, tuple[int | None, int]] = {}
        parts, delta_traced = [], []
        at = 0
        for t in snap.traced:
            key = traced_key(t)
            table = tables[key] = self._tables.get(key) or NameTable()
            ids, changed = known.get(key, (None, None))
            if ids is None or None in ids:   # a newcomer, one reset, or names new to its table
                ids, changed = table.kernel_ids(t.kernels, ids), None
            head = head_text(t)
            # the lanes: their names' ids, heads, the delta's text of them (wire_text's opening)
            lane_ids, heads, lanes_text, lanes_new = wire_text.lane_texts(
                t.lanes, key, table, news, shares, at, self._base_lanes, lanes_now, span_rows, lane_head_text)
            at += len(t.lanes)
            # changing rarely: a delta has only those that changed, found by the objects' identity first
            launches = launches_now[key] = LaunchEntries.of(t.kernel_launches, table, self._base_launches.get(key))
            parts.append((head, table, len(table), t.kernels, ids, t.lanes, lane_ids, launches))
            kernels_now[key] = (ids, t.kernels)
            heads_now[key] = heads
            if prev is not None:
                members = ',"names":' + compact(table.entries[self._base_names.get(key, 0):])
                if key in reset:
                    members += ',"reset":true'
                known_before = key in self._base_heads   # in the base frame; a newcomer is sent whole
                if changed is None:
                    changed = kernel_entries(t.kernels, ids, table, self._base_kernels.get(key, ((), ())))
                if changed != "[]" or not known_before:  # only the kernels that changed; none: left out
                    members += ',"kernels":' + changed
                new_launches = launches.changed_since(self._base_launches.get(key) if known_before else None)
                if new_launches or not known_before:
                    members += ',"kernel_launches":' + compact(new_launches)
                # lanes that are all as in the base frame (same heads, nothing new) are left out
                if not known_before or self._base_heads[key] != heads or lanes_new:
                    members += ',"lanes":' + lanes_text
                delta_traced.append(with_members(head, members))
        head_bytes = b"id: " + self.event_id(snap.seq).encode() + b"\nevent: snapshot\ndata: "

        def full() -> bytes:
            traced = (with_members(head, ',"names":' + compact(table.entries[:count]) + ',"kernels":'
                                   + kernel_entries(kernels, ids, table, None)
                                   + ',"kernel_launches":' + launches.text(compact) + ',"lanes":[' + ",".join(
                                       lane_head_text(lane) + ',"spans":' + span_rows(lane.spans, 0, table, names)
                                       + "}" for lane, names in zip(lanes, lane_ids)) + "]")
                      for head, table, count, kernels, ids, lanes, lane_ids, launches in parts)
            return head_bytes + frame_text({"frame": FULL, "base_seq": None, **doc}, traced) + b"\n\n"

        delta = None
        if prev is not None:
            same = {k for k in OMITTABLE if self._base_parts.get(k) == doc[k]}
            delta = head_bytes + frame_text({"frame": DELTA, "base_seq": prev.seq,
                                             **{k: v for k, v in doc.items() if k not in same}},
                                            delta_traced) + b"\n\n"
        self._base_parts = {k: doc[k] for k in OMITTABLE}
        self._tables = tables
        self._base_kernels = kernels_now
        self._base_launches = launches_now
        self._base_heads = heads_now
        self._base_progress = {traced_key(t): (t.records, t.state) for t in snap.traced}
        self._base_lanes = lanes_now
        self._base_names = {key: len(table) for key, table in tables.items()}
        return Frame(snapshot=snap, seq=snap.seq, full=full, delta=delta,
                     base_seq=prev.seq if prev is not None else None)


# -- the frame's text, in pieces -----------------------------------------------------------------
def compact(obj: Any) -> str:
    """A small part's compact JSON in one call (a head, a names table); non-finite floats as null."""
    try:
        return _ENCODE(obj)
    except ValueError:
        return _ENCODE(_finite(obj))


def head_text(t: TracedProcess) -> str:
    """A traced process's head (wire.traced_head) as compact JSON: written straight from ``t``
    by wire_text (its ~20 fields and its devices' dozens, for every process of every frame), or
    through ``json`` where a value is not one that writer takes."""
    text = traced_head_text(t)
    return text if text is not None else compact(traced_head(t))


def with_members(obj_text: str, members: str) -> str:
    """The JSON object ``obj_text`` with ``members`` (``,"key":value…``, keys it does not have)
    added at its end."""
    if obj_text == "{}":
        return "{" + members[1:] + "}"
    return obj_text[:-1] + members + "}"


#: a lane's head with exact ints, its label already JSON: what ``compact(lane_head(lane))`` gives
_LANE_HEAD = '{"device":%d,"context":%d,"stream":%d,"label":%s,"executions":%d,"spans_elided":%d'


@lru_cache(maxsize=4096)
def _label_json(label: str) -> str:
    return _ENCODE(label)


def lane_head_text(lane: Lane) -> str:
    """A lane's head (wire.lane_head: its fields but spans) as JSON text without its closing
    brace, its other members to follow: formatted straight when its numbers are ints and its
    label text (each label's JSON kept, up to 4,096 of them), else through json."""
    device, context, stream, executions, elided = (lane.device, lane.context, lane.stream, lane.executions,
                                                   lane.spans_elided)
    if (type(device) is int and type(context) is int and type(stream) is int and type(executions) is int
            and type(elided) is int and type(lane.label) is str):
        return _LANE_HEAD % (device, context, stream, _label_json(lane.label), executions, elided)
    return compact(lane_head(lane))[:-1]


def frame_text(doc: dict[str, Any], traced: Iterable[str]) -> bytes:
    """``doc`` (a frame's parts, in order, with ``traced``'s place in it) with ``traced`` (each
    traced process's text) in that place, as UTF-8: the rest is encoded by json_pieces."""
    keys = list(doc)
    at = keys.index("traced")
    before = dumps({k: doc[k] for k in keys[:at]})
    after = dumps({k: doc[k] for k in keys[at + 1:]})
    return (before[:-1] + b',"traced":[' + ",".join(traced).encode("utf-8") + b"]"
            + (b"," + after[1:] if after != b"{}" else b"}"))


def span_rows(spans: Sequence[Span] | SpanColumns, first: int, table: NameTable,
              ids: list[int] | None) -> str:
    """A lane's spans from ``first`` on as the stream's rows, JSON text: from the columns by the
    compiled writer (gpuflow.transport.wire_text, ``ids``: the table's id of each of the columns'
    names), else, and for spans outside the columns' shapes, through wire.encode_spans."""
    if isinstance(spans, SpanColumns) and ids is not None:
        text = wire_text.span_rows(spans, first, len(spans), ids)
        if text is not None:
            return text
        spans = spans[first:]
    elif first:
        spans = spans[first:]
    return compact(encode_spans(spans, table))


def kernel_entries(kernels: Sequence[KernelStat], ids: list[int], table: NameTable,
                   base: tuple[Sequence[int], Sequence[KernelStat]] | None) -> str:
    """The stream's entries of the kernels that differ from their entry in ``base`` (the ids and
    KernelStats the base frame sent; None: every kernel), in order, JSON text: by the compiled
    writer, else (a value it does not write, an id twice) as the dicts of wire.encode_kernels."""
    text = wire_text.kernel_delta(kernels, table.pairs, *(base or (None, None)), KERNEL_FIELDS)[2]
    if text is not None:
        return text
    def entry(i: int, k: KernelStat) -> dict[str, Any]:
        return {"id": i, **{f: getattr(k, f) for f in KERNEL_FIELDS}}
    if base is None:
        return compact([entry(i, k) for i, k in zip(ids, kernels)])
    by_id = {i: entry(i, k) for i, k in zip(ids, kernels)}
    before = {i: entry(i, k) for i, k in zip(*base)}
    return compact([e for i, e in by_id.items() if before.get(i) != e])
