"""A watched host's lanes, kept as its agent keeps them, from frames that carry only new spans.

A full frame carries each lane's whole sample; a delta only the spans newer than its base
frame's, with ``spans_skipped`` saying how many executions it left out (docs/snapshot.md, "Delta
frames"). The hub keeps, per lane, the spans of the frames before plus the new ones, trimmed to the
agent's sample size (``executions - spans_elided``), and starts a lane afresh where the new spans
do not join up with the kept ones (``spans_skipped`` above 0), for a process that replaced its
namesake (``reset``), and on every full frame: the same rule the page follows, so the hub's lanes
are the most recent executions of each lane, contiguous, as many as the agent shows.

A lane's spans stay columns (:class:`~gpuflow.core.recorded.SpanColumns`, as the hub's row reader
makes them) from frame to frame: the kept ones and the new ones joined, array by array
(lane_columns.joined), with no object per span.

Constraints: pure; on the hub's network thread, for watched hosts only; holds no more spans per
lane than the agent's sample.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from gpuflow.collectors.fleet.lane_columns import joined
from gpuflow.core.frozen import positional_constructor
from gpuflow.core.recorded import SpanColumns
from gpuflow.core.snapshot import Lane, Span, TracedProcess

LaneKey = tuple[str, int, int, int, int]
LaneSpans = SpanColumns | tuple[Span, ...]
_LANE = positional_constructor(Lane)
if tuple(f.name for f in fields(Lane)) != ("device", "context", "stream", "label", "executions", "spans_elided",
                                           "spans"):   # apply() passes them in this order
    raise ImportError("Lane's fields are not device, context, stream, label, executions, spans_elided, spans")
_TRACED = positional_constructor(TracedProcess)
_TRACED_FIELDS = tuple(f.name for f in fields(TracedProcess))


def _with_lanes(t: TracedProcess, lanes: tuple[Lane, ...]) -> TracedProcess:
    """``replace(t, lanes=lanes)``, without replace's keyword call (a frame of a watched host
    makes one per traced process)."""
    return _TRACED(*[lanes if f == "lanes" else getattr(t, f) for f in _TRACED_FIELDS])


def skipped_and_resets(plain: dict[str, Any]) -> tuple[dict[LaneKey, int], set[tuple[str, int]]]:
    """Each lane's ``spans_skipped`` and the (session, pid) marked ``reset``, from a plain frame
    already checked by parse.py (the values are the frame's, read only where they are ints)."""
    skipped: dict[LaneKey, int] = {}
    resets: set[tuple[str, int]] = set()
    for t in plain.get("traced", []):
        key = (t["session"], t["pid"])
        if t.get("reset") is True:
            resets.add(key)
        for lane in t.get("lanes", []):
            n = lane.get("spans_skipped", 0)
            if type(n) is int and n > 0:
                skipped[key + (lane["device"], lane["context"], lane["stream"])] = n
    return skipped, resets


class LaneKeeper:
    def __init__(self) -> None:
        self._lanes: dict[LaneKey, LaneSpans] = {}

    def clear(self) -> None:
        self._lanes = {}

    def apply(self, traced: tuple[TracedProcess, ...], full: bool, plain: dict[str, Any]) -> tuple[TracedProcess, ...]:
        """``traced`` (as parsed: each lane holds the frame's spans) with each lane's kept sample."""
        skipped, resets = skipped_and_resets(plain) if not full else ({}, set())
        kept_before = {} if full else self._lanes
        now: dict[LaneKey, LaneSpans] = {}
        out = []
        for t in traced:
            process = (t.session, t.pid)
            fresh = process in resets
            lanes = []
            for lane in t.lanes:
                device, context, stream, executions, elided = (lane.device, lane.context, lane.stream,
                                                               lane.executions, lane.spans_elided)
                key = process + (device, context, stream)
                kept = () if fresh or skipped.get(key) else kept_before.get(key, ())
                new = lane.spans
                spans = now[key] = joined(kept, new, executions - elided if executions > elided else 0)
                lanes.append(lane if spans is new else
                             _LANE(device, context, stream, lane.label, executions, elided, spans))
            out.append(_with_lanes(t, tuple(lanes)) if lanes else t)
        self._lanes = now
        return tuple(out)
