"""A GPUFlow Perfetto trace read back: the windows and readings it was written from.

The reading side of :mod:`gpuflow.export.perfetto` (what a trace holds is defined there and in
docs/recorder.md, "Export"), for ``gpuflow open``: a trace written by ``gpuflow run --trace-out``,
``gpuflow export`` or the page's save is read into the recorder's own columnar types
(gpuflow.core.recorded), with no Python object per execution:

* per traced process (its process track) a :class:`~gpuflow.core.recorded.ProcessWindow`, and
  per lane (its stream track and the sub-tracks under it) a
  :class:`~gpuflow.core.recorded.LaneWindow` holding every execution as
  :class:`~gpuflow.core.recorded.SpanColumns`, in the order they were written (the recorder's
  order): start (the slice's begin, to the microsecond), ``seq`` and ``dur_ns`` (exact, from the
  slice's arguments), kind (its category), kernel name, grid and block, bytes, direction;
* per counter track a :class:`~gpuflow.core.recorded.Series`: ``("device", uuid)`` for a track
  under a device's, ``("process", pid, uuid)`` for "<metric> (<uuid>)" under a process's;
* per GPU the trace describes, its index and fixed facts (name, memory total, power limit).

Only the few fields GPUFlow writes are read, by protowire's numbers (one definition for both
sides); the tracks' layout is read back by :mod:`gpuflow.export.trace_tracks`. The fixed tables
(categories, argument names, the names of slices that are not kernels) must be the ones
slice_layout defines, in the trace's first packet, or the file is not a GPUFlow trace.

What a trace does not keep cannot be read back: a series' resolution (taken as the median
spacing of its points, to the microsecond), a roll-up's least and greatest, readings that were
not available (left out of counters), a process's session (each process is given
``recorded-<n>``, its place in the file), a context of 1 (implied by a stream track's name
without one).

The bytes are untrusted: besides protoread's checks (lengths, varints, wire types), a trace
must begin with GPUFlow's header and end with its end-of-trace packet (nothing after it), every
event must be on a track described before it, every interned id must be defined, and what it can
make the reader hold is capped (:class:`Limits`: tracks, lanes, processes, counters, names, a
name's bytes); unknown fields are skipped. Anything else raises :class:`TraceReadError` with one
line saying what and where. Memory follows the file: the columns take about what the slices took
in it (104 bytes an execution against GPUFlow's ~98), and the caps bound everything else.

Constraints: imports only the core and the export's format modules; never interprets a string
(names are data); one pass over the bytes.
"""

from __future__ import annotations

import math
import struct
from array import array
from dataclasses import dataclass, field

from gpuflow.core.recorded import FLOAT, NONE, LaneWindow, ProcessWindow, Series, SpanColumns
from gpuflow.core.snapshot import SPAN_KINDS, TRANSFER_DIRECTIONS
from gpuflow.export import protowire as w
from gpuflow.export import slice_layout as L
from gpuflow.export.protoread import LEN, VARINT, WireError, fields, length, skip, varint
from gpuflow.export.trace_tracks import COLUMNS, CounterTrack, GpuFacts, LaneTrack, Limits, TraceReadError, Tracks

__all__ = ["GpuFacts", "Limits", "TraceContents", "TraceReadError", "read_trace"]

#: a slice argument's column, by its name in slice_layout.ARG_NAMES (seq and dur_ns are required);
#: the arguments that are no column (a kernel's occupancy, a copy's bandwidth) are read past
_ARG_COLUMN = {name: COLUMNS.index(name) for name in L.ARG_NAMES if name in COLUMNS}
#: the column of an argument name the header defines that is no column
_NO_COLUMN = -1
_DIRECTION_CODE = {d: i for i, d in enumerate(TRANSFER_DIRECTIONS)}
_KIND_CODE = {k: i for i, k in enumerate(SPAN_KINDS)}
_DOUBLE = struct.Struct("<d")
#: Trace.packet's key (field 1, LEN)
_PACKET_KEY = w.TRACE_PACKET << 3 | LEN
# the keys (field << 3 | wire type) of the fields read on the hot path, compared whole
_K_TIMESTAMP, _K_SEQUENCE, _K_FLAGS = (n << 3 | VARINT for n in (w.PACKET_TIMESTAMP, w.PACKET_SEQUENCE_ID,
                                                                 w.PACKET_SEQUENCE_FLAGS))
_K_TYPE, _K_TRACK, _K_NAME, _K_CATEGORY = (n << 3 | VARINT for n in (w.EVENT_TYPE, w.EVENT_TRACK_UUID, w.EVENT_NAME_IID,
                                                                      w.EVENT_CATEGORY_IIDS))
_K_ANNOTATION = w.EVENT_DEBUG_ANNOTATIONS << 3 | LEN
_K_COUNTER_VALUE = w.EVENT_DOUBLE_COUNTER_VALUE << 3 | w.FIXED64
#: an argument's first bytes as GPUFlow writes it: its name id's key, then (after a one-byte id) its int value's key
_K_ARG_NAME, _K_ARG_INT = w.ANNOTATION_NAME_IID << 3 | VARINT, w.ANNOTATION_INT_VALUE << 3 | VARINT


@dataclass
class TraceContents:
    """What a trace holds: its traced processes' executions and its readings over time."""

    processes: tuple[ProcessWindow, ...]
    series: tuple[Series, ...]
    executions: int  #: slices read into the lanes
    other_kinds: int = 0  #: slices of a kind GPUFlow's columns cannot hold ("(unknown kind)"), left out
    other_events: int = 0  #: track events of a type GPUFlow does not write, left out
    #: by uuid, the GPUs the trace describes (written since GPUFlow describes them; none before)
    gpus: dict[str, GpuFacts] = field(default_factory=dict)


class _Reader:
    def __init__(self, buf: bytes, limits: Limits) -> None:
        self.buf = buf
        self.limits = limits
        self.tracks = Tracks(buf, limits, self.text)
        self.event_names: dict[int, str] = {}
        self.categories: dict[int, int] = {}  #: iid -> kind code (-1: a kind the columns cannot hold)
        self.arg_columns: dict[int, int] = {}  #: iid -> column index
        self.interned = 0
        self.executions = 0
        self.other_kinds = 0
        self.other_events = 0
        self.ended = False

    # -- strings ---------------------------------------------------------------------------------
    def text(self, a: int, b: int, what: str) -> str:
        if b - a > self.limits.name_bytes:
            raise TraceReadError(f"{what} at byte {a} is {b - a} bytes long (at most {self.limits.name_bytes})")
        return self.buf[a:b].decode("utf-8", "replace")

    # -- the packets -----------------------------------------------------------------------------
    def read(self) -> TraceContents:
        buf = self.buf
        end = len(buf)
        pos = 0
        first = True
        while pos < end:   # Trace: its packets (field 1); anything else is skipped
            at = pos
            key = buf[pos]
            pos += 1
            if key >= 0x80:
                key, pos = varint(buf, at, end)
            if key != _PACKET_KEY:
                pos = skip(buf, pos, end, key, at)
                continue
            if pos < end and buf[pos] < 0x80:
                size, pos = buf[pos], pos + 1
            else:
                size, pos = varint(buf, pos, end)
            if size > end - pos:
                raise TraceReadError(f"the trace was cut short: its packet at byte {at} has {end - pos} of its "
                                     f"{size} bytes (a copy or download that did not finish?)")
            if self.ended:
                raise TraceReadError(f"a packet at byte {at} follows the end-of-trace packet")
            self.packet(pos, pos + size, first)
            pos += size
            first = False
        if first:
            raise TraceReadError("it holds no trace packet: not a Perfetto trace")
        if not self.ended:
            raise TraceReadError("it lacks the end-of-trace packet GPUFlow writes last: the trace was cut short "
                                 "(a copy or download that did not finish?)")
        return self.contents()

    def packet(self, a: int, b: int, first: bool) -> None:
        buf = self.buf
        ts = seq = flags = None
        event = interned = descriptor = service = None
        pos = a
        while pos < b:   # read inline: most packets are a slice's, and this is its hot path
            at = pos
            key = buf[pos]
            pos += 1
            if key >= 0x80:
                key, pos = varint(buf, at, b)
            wire_type = key & 7
            if wire_type == VARINT:
                if pos >= b:
                    raise WireError(f"the field at byte {at} is cut short")
                v = buf[pos]
                pos += 1
                if v >= 0x80:
                    v, pos = varint(buf, pos - 1, b)
                if key == _K_TIMESTAMP:
                    ts = v
                elif key == _K_SEQUENCE:
                    seq = v
                elif key == _K_FLAGS:
                    flags = v
            elif wire_type == LEN:
                size, pos = length(buf, pos, b, at)
                number = key >> 3
                if number == w.PACKET_TRACK_EVENT:
                    event = (pos, pos + size)
                elif number == w.PACKET_INTERNED_DATA:
                    interned = (pos, pos + size)
                elif number == w.PACKET_TRACK_DESCRIPTOR:
                    descriptor = (pos, pos + size)
                elif number == w.PACKET_SERVICE_EVENT:
                    service = (pos, pos + size)
                pos += size
            else:
                pos = skip(buf, pos, b, key, at)
        if first:
            self.header(a, seq, flags, interned)
            return
        if flags is not None and flags & w.SEQ_INCREMENTAL_STATE_CLEARED:
            raise TraceReadError(f"the packet at byte {a} clears the interned names again, which GPUFlow never does")
        if (event is not None or interned is not None) and seq != L.SEQUENCE_ID:
            raise TraceReadError(f"the packet at byte {a} is on packet sequence {seq}, not GPUFlow's "
                                 f"{L.SEQUENCE_ID}")
        if interned is not None:
            self.interned_names(*interned)
        if descriptor is not None:
            self.tracks.describe(*descriptor)
        if event is not None:
            if ts is None:
                raise TraceReadError(f"the event at byte {event[0]} has no timestamp")
            self.event(ts, *event)
        if service is not None:
            for number, wire_type, v, _ in fields(buf, *service):
                if number == w.SERVICE_READ_BUFFERS_COMPLETED and wire_type == VARINT and v:
                    self.ended = True

    def header(self, at: int, seq: int | None, flags: int | None, interned: tuple[int, int] | None) -> None:
        """The first packet: GPUFlow's fixed tables, on its one sequence, clearing its state."""
        not_ours = ("not a GPUFlow trace: its first packet is not the header GPUFlow writes (a Perfetto trace "
                    "from another tool?)")
        if seq != L.SEQUENCE_ID or flags is None or not flags & w.SEQ_INCREMENTAL_STATE_CLEARED or interned is None:
            raise TraceReadError(not_ours)
        tables: dict[int, dict[int, str]] = {w.INTERNED_EVENT_CATEGORIES: {}, w.INTERNED_EVENT_NAMES: {},
                                             w.INTERNED_ANNOTATION_NAMES: {}}
        for number, wire_type, a, b in fields(self.buf, *interned):
            if wire_type == LEN and number in tables:
                iid, name = self.entry(a, b)
                tables[number][iid] = name
        expected = {w.INTERNED_EVENT_CATEGORIES: L.CATEGORIES, w.INTERNED_EVENT_NAMES: L.FIXED_EVENT_NAMES,
                    w.INTERNED_ANNOTATION_NAMES: L.ARG_NAMES}
        for number, names in expected.items():   # the argument names after the base ones are optional
            optional = L.BASE_ARG_NAMES if number == w.INTERNED_ANNOTATION_NAMES else len(names)
            if any(tables[number].get(iid) != name and (iid <= optional or iid in tables[number])
                   for iid, name in enumerate(names, 1)):
                raise TraceReadError(not_ours)
        self.event_names = dict(tables[w.INTERNED_EVENT_NAMES])
        self.categories = {iid: _KIND_CODE.get(name, -1) for iid, name in tables[w.INTERNED_EVENT_CATEGORIES].items()}
        self.arg_columns = {iid: _ARG_COLUMN.get(name, _NO_COLUMN)
                            for iid, name in tables[w.INTERNED_ANNOTATION_NAMES].items() if name in L.ARG_NAMES}
        self.interned = sum(len(t) for t in tables.values())

    def entry(self, a: int, b: int) -> tuple[int, str]:
        """An interned entry: (iid, name)."""
        iid, name = None, ""
        for number, wire_type, v, e in fields(self.buf, a, b):
            if number == w.INTERNED_IID and wire_type == VARINT:
                iid = v
            elif number == w.INTERNED_NAME and wire_type == LEN:
                name = self.text(v, e, "an interned name")
        if iid is None:
            raise TraceReadError(f"an interned entry at byte {a} has no id")
        self.interned += 1
        if self.interned > self.limits.names:
            raise TraceReadError(f"it interns more than {self.limits.names} names")
        return iid, name

    def interned_names(self, a: int, b: int) -> None:
        """Names interned after the header: kernel names (GPUFlow adds no other kind later)."""
        for number, wire_type, v, e in fields(self.buf, a, b):
            if wire_type != LEN:
                continue
            if number == w.INTERNED_EVENT_NAMES:
                iid, name = self.entry(v, e)
                if iid in self.event_names:
                    raise TraceReadError(f"the name id {iid} is interned twice (byte {v})")
                self.event_names[iid] = name
            elif number in (w.INTERNED_EVENT_CATEGORIES, w.INTERNED_ANNOTATION_NAMES):
                raise TraceReadError(f"categories or argument names are interned after the header (byte {v}), "
                                     "which GPUFlow never does")

    # -- events ----------------------------------------------------------------------------------
    def event(self, ts: int, a: int, b: int) -> None:
        buf = self.buf
        kind = track = name_iid = counter_value = None
        category: int | None = None
        row = [NONE] * 13
        have_seq = have_dur = False
        arg_columns = self.arg_columns
        pos = a
        while pos < b:   # inline, as packet(): a slice's fields and its arguments
            at = pos
            key = buf[pos]
            pos += 1
            if key >= 0x80:
                key, pos = varint(buf, at, b)
            wire_type = key & 7
            if wire_type == VARINT:
                if pos >= b:
                    raise WireError(f"the field at byte {at} is cut short")
                v = buf[pos]
                pos += 1
                if v >= 0x80:
                    v, pos = varint(buf, pos - 1, b)
                if key == _K_TYPE:
                    kind = v
                elif key == _K_TRACK:
                    track = v
                elif key == _K_NAME:
                    name_iid = v
                elif key == _K_CATEGORY:
                    if category is not None:
                        raise TraceReadError(f"the slice at byte {a} has two categories")
                    category = v
            elif wire_type == LEN:
                size, pos = length(buf, pos, b, at)
                end = pos + size
                if key == _K_ANNOTATION:
                    column = None
                    if size >= 4 and buf[pos] == _K_ARG_NAME and buf[pos + 1] < 0x80 and buf[pos + 2] == _K_ARG_INT:
                        # as GPUFlow writes an int argument: a one-byte name id, then the value, then nothing
                        column = arg_columns.get(buf[pos + 1])
                        v = buf[pos + 3]
                        after = pos + 4
                        if v >= 0x80:
                            v, after = varint(buf, pos + 3, end)
                        value = v - (1 << 64) if v >= 1 << 63 else v
                        if after != end:
                            column = None
                    if column is None:   # any other form, or a name id the header lacks: read it whole
                        column, value = self.argument(pos, end, arg_columns)
                    if column == 0:
                        have_seq = True
                    elif column == 2:
                        have_dur = True
                    if column != _NO_COLUMN:
                        row[column] = value
                pos = end
            elif key == _K_COUNTER_VALUE:
                if b - pos < 8:
                    raise WireError(f"the field at byte {at} is cut short")
                counter_value = _DOUBLE.unpack_from(buf, pos)[0]
                pos += 8
            else:
                pos = skip(buf, pos, b, key, at)
        if track is None:
            raise TraceReadError(f"the event at byte {a} names no track")
        on = self.tracks.tracks.get(track)
        if on is None:
            raise TraceReadError(f"the event at byte {a} is on track {track}, which is not described before it")
        if kind == w.TYPE_SLICE_BEGIN:
            if on[0] != "lane":
                raise TraceReadError(f"the slice at byte {a} is on a {on[0]} track, not a stream's")
            code = self.categories.get(category, None) if category is not None else None
            if code is None:
                raise TraceReadError(f"the slice at byte {a} has no category GPUFlow defines")
            if not (have_seq and have_dur):
                raise TraceReadError(f"the slice at byte {a} lacks its seq or dur_ns argument")
            if code < 0:
                self.other_kinds += 1
                return
            self.slice(on[1], ts, code, name_iid, row, a)
        elif kind == w.TYPE_COUNTER:
            if on[0] != "counter":
                raise TraceReadError(f"the counter value at byte {a} is on a {on[0]} track, not a counter's")
            if counter_value is None:
                raise TraceReadError(f"the counter event at byte {a} has no value")
            found: CounterTrack = on[1]
            found.t.append(ts / 1e9)
            found.v.append(counter_value if math.isfinite(counter_value) else math.nan)
        elif kind != w.TYPE_SLICE_END:
            self.other_events += 1

    def argument(self, a: int, b: int, arg_columns: dict[int, int]) -> tuple[int, int]:
        """A slice's argument: (its column, its value); an argument that is no column (whatever its
        value's form: a double, an interned string) is (_NO_COLUMN, NONE)."""
        buf = self.buf
        column = value = None
        pos = a
        while pos < b:
            at = pos
            key = buf[pos]
            pos += 1
            if key >= 0x80:
                key, pos = varint(buf, at, b)
            number, wire_type = key >> 3, key & 7
            if wire_type == VARINT:
                if pos >= b:
                    raise WireError(f"field {number} at byte {at} is cut short")
                v = buf[pos]
                pos += 1
                if v >= 0x80:
                    v, pos = varint(buf, pos - 1, b)
                if number == w.ANNOTATION_NAME_IID:
                    column = arg_columns.get(v)
                    if column is None:
                        raise TraceReadError(f"the argument at byte {a} has a name id the header does not define")
                elif number == w.ANNOTATION_INT_VALUE:
                    value = v - (1 << 64) if v >= 1 << 63 else v
            elif wire_type == LEN:
                size, pos = length(buf, pos, b, at)
                if number == w.ANNOTATION_STRING_VALUE:
                    value = _DIRECTION_CODE.get(self.text(pos, pos + size, "an argument"), NONE)
                pos += size
            else:
                pos = skip(buf, pos, b, key, at)
        if column is None or (value is None and column != _NO_COLUMN):
            raise TraceReadError(f"the argument at byte {a} lacks its name or value")
        return column, NONE if value is None else value

    def slice(self, lane: LaneTrack, ts: int, code: int, name_iid: int | None, row: list[int], at: int) -> None:
        row[1] = ts // 1000
        row[3] = code
        if code == L.KIND_KERNEL:
            if name_iid is None:
                raise TraceReadError(f"the kernel at byte {at} has no name")
            if name_iid != L.NAME_UNNAMED_KERNEL:
                text = self.event_names.get(name_iid)
                if text is None:
                    raise TraceReadError(f"the kernel at byte {at} has a name id never interned")
                local = lane.names.get(text)
                if local is None:
                    local = lane.names[text] = len(lane.names)
                row[4] = local
            row[11] = row[12] = NONE   # a kernel moves no bytes in no direction, whatever its arguments say
        else:
            for i in range(5, 11):   # nor has a copy a grid or a block
                row[i] = NONE
            if not 0 <= row[12] < len(TRANSFER_DIRECTIONS):
                row[12] = NONE
        for column, value in zip(lane.columns, row):
            column.append(value)
        self.executions += 1

    # -- the result ------------------------------------------------------------------------------
    def contents(self) -> TraceContents:
        processes = []
        for proc in self.tracks.processes:
            lanes = []
            first = last = None
            for lane in sorted(proc.lanes, key=lambda x: (x.device, x.context, x.stream)):
                c = lane.columns
                if not len(c[0]):
                    continue
                starts, durs = c[1], c[2]
                lo = min(starts) * 1000
                hi = max(s * 1000 + d for s, d in zip(starts, durs))
                first = lo if first is None else min(first, lo)
                last = hi if last is None else max(last, hi)
                spans = SpanColumns(**dict(zip(COLUMNS, c)), names=tuple(lane.names))
                lanes.append(LaneWindow(lane.device, lane.context, lane.stream, lane.label, len(spans), spans=spans))
            if not lanes:
                continue   # a process track only for readings: no traced process
            processes.append(ProcessWindow(
                pid=proc.pid, session=f"recorded-{proc.ordinal}", name=proc.name,
                retained_from_s=first / 1e9 if first is not None else None,
                retained_to_s=last / 1e9 if last is not None else None, lanes=tuple(lanes)))
        series = tuple(_series(c) for c in self.tracks.counters if len(c.t))
        return TraceContents(tuple(processes), series, self.executions, self.other_kinds, self.other_events,
                             dict(self.tracks.gpus))


def _series(c: CounterTrack) -> Series:
    t, v = c.t, c.v
    if any(t[i] > t[i + 1] for i in range(len(t) - 1)):   # time order, as a query bisects it
        order = sorted(range(len(t)), key=t.__getitem__)
        t, v = array(FLOAT, (t[i] for i in order)), array(FLOAT, (v[i] for i in order))
    gaps = sorted(t[i + 1] - t[i] for i in range(len(t) - 1))
    positive = [g for g in gaps if g > 0]
    # to the microsecond: a point's time came back through nanoseconds in a double, off by up to ~0.3 µs
    resolution = max(round(positive[len(positive) // 2], 6), 1e-6) if positive else 1.0
    return Series(entity=c.entity, metric=c.metric, unit=c.unit, resolution_s=resolution, t_s=t, value=v)


def read_trace(data: bytes, limits: Limits = Limits()) -> TraceContents:
    """Everything a GPUFlow trace holds; :class:`TraceReadError` (one line) for anything else."""
    try:
        return _Reader(bytes(data), limits).read()
    except WireError as exc:
        raise TraceReadError(f"not a well-formed trace: {exc}") from None
