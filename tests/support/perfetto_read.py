"""Reads a Perfetto trace with the official schema, as the tests and scripts/gpu-check check exports.

The schema is Perfetto's own ``perfetto_trace.proto``, as generated classes shipped by the
``perfetto`` package (``perfetto.protos.perfetto.trace.perfetto_trace_pb2``), parsed by Google's
``protobuf`` runtime: nothing of GPUFlow's encoder is reused to read what it wrote. On top of
the parse, :func:`read` resolves what Perfetto's trace processor resolves for the features a
GPUFlow trace uses (and what it needs of them: each track's events in time order, since it sorts
by time keeping ties in order): interned names and argument string values (per packet sequence, in packet
order, cleared where a packet says so), track descriptors (parent, name, process, counter), slices from each track's
begin/end events (which must nest: an end closes the newest open slice of its track), counter
values.

Constraints: test helper; raises AssertionError with a reason on anything a trace processor
would reject or misread (an event before its track's descriptor, an interned id never defined,
an end with nothing open, a slice left open).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb


@dataclass
class Track:
    uuid: int
    name: str
    parent: int | None
    pid: int | None = None
    process_name: str | None = None
    counter_unit: str | None = None  #: the unit's name, or "bytes" for UNIT_SIZE_BYTES
    is_counter: bool = False


@dataclass
class Slice:
    track: int
    name: str
    category: str
    begin_ns: int
    end_ns: int
    args: dict[str, object]

    @property
    def dur_ns(self) -> int:
        return self.end_ns - self.begin_ns


@dataclass
class ReadTrace:
    packets: list
    tracks: dict[int, Track] = field(default_factory=dict)
    slices: list[Slice] = field(default_factory=list)
    counters: dict[int, list[tuple[int, float]]] = field(default_factory=dict)
    whole: bool = False  #: ended with the end-of-trace service event

    def path(self, uuid: int) -> list[str]:
        """Names from the root track down to ``uuid`` (a process track by its pid)."""
        out = []
        while uuid is not None:
            t = self.tracks[uuid]
            out.append(f"pid {t.pid}" if t.pid is not None else t.name)
            uuid = t.parent
        return out[::-1]

    def kernel_counts(self) -> collections.Counter:
        return collections.Counter(s.name for s in self.slices if s.category == "kernel")

    def children(self, uuid: int | None) -> list[Track]:
        return [t for t in self.tracks.values() if t.parent == uuid]


def _value(annotation, strings: dict[int, str]) -> object:
    which = annotation.WhichOneof("value")
    if which == "string_value_iid":
        assert annotation.string_value_iid in strings, f"string value {annotation.string_value_iid} never interned"
        return strings[annotation.string_value_iid]
    return getattr(annotation, which) if which else None


def read(data: bytes) -> ReadTrace:
    trace = pb.Trace()
    trace.ParseFromString(data)
    out = ReadTrace(packets=list(trace.packet))
    interned: dict[int, dict[str, dict[int, str]]] = {}
    open_slices: dict[int, list[tuple[int, str, str, dict]]] = collections.defaultdict(list)
    last_ts: dict[int, int] = {}
    for i, p in enumerate(trace.packet):
        seq = p.trusted_packet_sequence_id
        if p.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
            interned[seq] = {"names": {}, "categories": {}, "args": {}, "strings": {}}
        if p.HasField("interned_data"):
            state = interned.setdefault(seq, {"names": {}, "categories": {}, "args": {}, "strings": {}})
            for e in p.interned_data.event_names:
                state["names"][e.iid] = e.name
            for e in p.interned_data.event_categories:
                state["categories"][e.iid] = e.name
            for e in p.interned_data.debug_annotation_names:
                state["args"][e.iid] = e.name
            for e in p.interned_data.debug_annotation_string_values:
                state["strings"][e.iid] = e.str.decode("utf-8")
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            assert d.uuid not in out.tracks, f"track {d.uuid} described twice"
            assert not d.HasField("parent_uuid") or d.parent_uuid in out.tracks, \
                f"track {d.uuid}'s parent {d.parent_uuid} is not described before it"
            unit = None
            if d.HasField("counter"):
                unit = "bytes" if d.counter.unit == pb.CounterDescriptor.UNIT_SIZE_BYTES else d.counter.unit_name
            out.tracks[d.uuid] = Track(d.uuid, d.name, d.parent_uuid if d.HasField("parent_uuid") else None,
                                       d.process.pid if d.HasField("process") else None,
                                       d.process.process_name if d.HasField("process") else None,
                                       unit, d.HasField("counter"))
        if p.HasField("track_event"):
            e = p.track_event
            assert e.track_uuid in out.tracks, f"packet {i}: an event on track {e.track_uuid} before its descriptor"
            # a trace processor sorts by time (ties kept in order): a track's events must already be
            assert p.timestamp >= last_ts.get(e.track_uuid, 0), f"packet {i}: track {e.track_uuid} goes back in time"
            last_ts[e.track_uuid] = p.timestamp
            state = interned.get(seq)
            if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
                assert state is not None, f"packet {i}: interned ids on a sequence never cleared"
                assert p.sequence_flags & pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
                name = state["names"][e.name_iid]
                (cat_iid,) = e.category_iids
                args = {}
                for a in e.debug_annotations:
                    key = state["args"][a.name_iid]
                    assert key not in args, f"packet {i}: argument {key} twice"
                    args[key] = _value(a, state["strings"])
                open_slices[e.track_uuid].append((p.timestamp, name, state["categories"][cat_iid], args))
            elif e.type == pb.TrackEvent.TYPE_SLICE_END:
                stack = open_slices[e.track_uuid]
                assert stack, f"packet {i}: an end on track {e.track_uuid} with no slice open"
                begin, name, cat, args = stack.pop()
                assert p.timestamp >= begin, f"packet {i}: a slice ends before it begins"
                assert not stack, f"packet {i}: slices overlap on track {e.track_uuid} (GPUFlow never nests)"
                out.slices.append(Slice(e.track_uuid, name, cat, begin, p.timestamp, args))
            elif e.type == pb.TrackEvent.TYPE_COUNTER:
                assert out.tracks[e.track_uuid].is_counter
                out.counters.setdefault(e.track_uuid, []).append((p.timestamp, e.double_counter_value))
        if p.HasField("service_event") and p.service_event.read_tracing_buffers_completed:
            assert i == len(trace.packet) - 1, "the end-of-trace packet is not the last"
            out.whole = True
    left = {uuid: len(s) for uuid, s in open_slices.items() if s}
    assert not left, f"slices left open: {left}"
    return out
