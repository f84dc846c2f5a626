"""GPUFlow's Perfetto trace: the one definition of the file ``gpuflow export`` and ``/api/export``
write (Perfetto's native TrackEvent protobuf format, ``.perfetto-trace``).

What a trace holds (docs/recorder.md, "Export"):

* a track per traced process (Perfetto's process track: pid and name), under it a track per
  device ("GPU 0"), under that a track per stream, named by its NVTX name ("compute (stream
  13)", "default (stream 7)", or "stream 14" when unnamed);
* every retained execution as a slice on its stream's track: kernels named by their demangled
  names, copies "memcpy h2d" etc., memsets "memset"; category ``kernel``, ``memcpy`` or
  ``memset``; arguments as :mod:`gpuflow.export.slice_layout` lists (grid, block, duration,
  bytes, direction, the span's ``seq``; a kernel's theoretical occupancy, limiter, blocks per SM
  and waves, a copy's bandwidth: :mod:`gpuflow.export.launch_args`);
* readings kept over time as counter tracks: a device's under a track named by its uuid
  ("GPU-…"), a process's on a device under its process track, named "<metric> (<device uuid>)";
* the GPUs the agent showed when the trace was written: that same track per GPU, described by its
  fixed facts (:func:`device_description`: index, name, memory total, power limit), so that a
  recording opened later (``gpuflow open``) knows which GPU a stream's index is;
* last, a packet saying the trace is whole (:data:`END_OF_TRACE`, Perfetto's
  ``read_tracing_buffers_completed`` service event): a file without it was cut short.

Strings are interned (slice names, categories, argument names, the arguments' string values) on
one packet sequence, so a kernel's long name is written once. :class:`TraceWriter` writes a trace piece by piece
(``header``, then ``window`` and ``history`` as often as wanted, then ``finish``), handing each
piece of bytes to its ``write`` callable in order (a file's write, or a list a stream yields
from) without joining them, so a trace of any size is written in bounded memory and each byte is
copied once.

Constraints: imports only the core; the span columns are encoded by :mod:`gpuflow.export.slices`
(compiled or its Python twin, the same bytes); a window must hold exact spans (a lane reduced
to buckets cannot be exported exactly: ask with ``width_px=None``); every string from a traced
program or a plugin is written as data, never interpreted.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass
from typing import Any, Callable

from gpuflow.core.recorded import HistoryPart, LaneWindow, ProcessWindow, Series, WindowPart
from gpuflow.core.snapshot import Device
from gpuflow.export import protowire as w
from gpuflow.export import slice_layout as L
from gpuflow.export import slices
from gpuflow.export.launch_args import ArgPieces

#: the file name suffix Perfetto's UI recognises
SUFFIX = ".perfetto-trace"
#: the last packet of every complete trace: TracePacket{service_event{read_tracing_buffers_completed}}
END_OF_TRACE = w.packet(w.len_field(w.PACKET_SERVICE_EVENT, w.int_field(w.SERVICE_READ_BUFFERS_COMPLETED, 1)))

_SEQ_ID = w.int_field(w.PACKET_SEQUENCE_ID, L.SEQUENCE_ID)
_NEEDS_STATE = w.int_field(w.PACKET_SEQUENCE_FLAGS, w.SEQ_NEEDS_INCREMENTAL_STATE)


class ExportError(Exception):
    """A window that cannot be exported as asked (the message is one line for the user)."""


def is_whole(trace_tail: bytes) -> bool:
    """Whether a trace ending with ``trace_tail`` ended as :class:`TraceWriter` ends one."""
    return trace_tail.endswith(END_OF_TRACE)


def _interned(field: int, entries: list[tuple[int, str]]) -> bytes:
    return b"".join(w.len_field(field, w.int_field(w.INTERNED_IID, iid) + w.text_field(w.INTERNED_NAME, name))
                    for iid, name in entries)


def _descriptor(uuid: int, *, name: str | None = None, parent: int | None = None, rank: int | None = None,
                process: tuple[int, str | None] | None = None, counter_unit: str | None = None,
                explicit_order: bool = False, description: str | None = None) -> bytes:
    body = w.int_field(w.TRACK_UUID, uuid)
    if name is not None:
        body += w.text_field(w.TRACK_NAME, name)
    if description is not None:
        body += w.text_field(w.TRACK_DESCRIPTION, description)
    if process is not None:
        pid, pname = process
        body += w.len_field(w.TRACK_PROCESS, w.int_field(w.PROCESS_PID, pid)
                            + (w.text_field(w.PROCESS_NAME, pname) if pname else b""))
    if parent is not None:
        body += w.int_field(w.TRACK_PARENT_UUID, parent)
    if counter_unit is not None:
        body += w.len_field(w.TRACK_COUNTER, w.int_field(w.COUNTER_UNIT, w.UNIT_SIZE_BYTES)
                            if counter_unit == "bytes" else w.text_field(w.COUNTER_UNIT_NAME, counter_unit))
    if explicit_order:
        body += w.int_field(w.TRACK_CHILD_ORDERING, w.CHILD_ORDERING_EXPLICIT)
    if rank is not None:
        body += w.int_field(w.TRACK_SIBLING_RANK, rank)
    return w.packet(w.len_field(w.PACKET_TRACK_DESCRIPTOR, body))


#: what a GPU's description says for a fact not known, and what separates its facts
UNKNOWN, FACTS = "—", " · "


def device_description(device: Device) -> str:
    """A GPU's track description: "GPU 0 · NVIDIA H200 · 150754820096 bytes · 700 W" (its index,
    name, memory total and power limit; "—" for one not known). Read back by
    gpuflow.export.trace_tracks from the right, so a name may hold anything."""
    memory = UNKNOWN if device.memory_total_bytes is None else f"{device.memory_total_bytes} bytes"
    power = UNKNOWN if device.power_limit_w is None else f"{device.power_limit_w:.12g} W"
    return FACTS.join((f"GPU {device.index}", device.name or UNKNOWN, memory, power))


def lane_track_name(lane: LaneWindow) -> str:
    """A stream track's name: its NVTX name first, then the stream (and a context other than 1)."""
    where = f"stream {lane.stream}" + (f", context {lane.context}" if lane.context != 1 else "")
    named = lane.label and lane.label != str(lane.stream)
    return f"{lane.label} ({where})" if named else where


class _Pieces:
    """Small packets gathered into one piece; a large one (a lane's slices) passed on as it is."""

    LARGE = 1 << 16

    def __init__(self, write: Callable[[bytes], Any]) -> None:
        self._write = write
        self._small: list[bytes] = []
        self._held = 0

    def append(self, piece: bytes) -> None:
        if len(piece) >= self.LARGE:
            self.flush()
            self._write(piece)
            return
        self._small.append(piece)
        self._held += len(piece)
        if self._held >= self.LARGE:
            self.flush()

    def flush(self) -> None:
        if self._small:
            self._write(b"".join(self._small))
            self._small, self._held = [], 0


@dataclass
class _Process:
    uuid: int
    devices: dict[int, int]  #: device index -> its track's uuid


class TraceWriter:
    """Writes one trace in pieces, each handed to ``write`` in order."""

    def __init__(self, write: Callable[[bytes], Any]) -> None:
        self._write = write
        self._next_uuid = 0
        self._processes: dict[tuple[str, int, str], _Process] = {}
        self._pid_tracks: dict[int, _Process] = {}
        self._lanes: dict[tuple, slices.LaneSlices] = {}
        self._lane_order: list[slices.LaneSlices] = []
        self._names: dict[str, int] = {}
        self._strings: dict[str, int] = {}   #: argument values interned (debug_annotation_string_values)
        self._fresh_strings: list[tuple[int, str]] = []   #: interned, not written yet
        self._pieces = ArgPieces(self._intern_string)
        self._entity_tracks: dict[tuple[str, ...], int] = {}
        self._counters: dict[tuple[tuple[str, ...], str], int] = {}
        #: exported slices per kernel name (what the window held: the tests' and the CLI's check)
        self.kernel_counts: dict[str, int] = {}
        self.slices = 0

    def _uuid(self) -> int:
        self._next_uuid += 1
        return self._next_uuid

    def _intern_string(self, text: str) -> int:
        iid = self._strings.get(text)
        if iid is None:
            iid = self._strings[text] = len(self._strings) + 1
            self._fresh_strings.append((iid, text))
        return iid

    # -- the pieces ------------------------------------------------------------------------
    def header(self) -> None:
        """The first packet: clears the sequence's state and interns the fixed tables."""
        interned = (_interned(w.INTERNED_EVENT_CATEGORIES, list(enumerate(L.CATEGORIES, 1)))
                    + _interned(w.INTERNED_EVENT_NAMES, list(enumerate(L.FIXED_EVENT_NAMES, 1)))
                    + _interned(w.INTERNED_ANNOTATION_NAMES, list(enumerate(L.ARG_NAMES, 1))))
        self._write(w.packet(_SEQ_ID + w.int_field(w.PACKET_SEQUENCE_FLAGS, w.SEQ_INCREMENTAL_STATE_CLEARED
                                              | w.SEQ_NEEDS_INCREMENTAL_STATE)
                        + w.int_field(w.PACKET_FIRST_ON_SEQUENCE, 1) + w.int_field(w.PACKET_PREVIOUS_DROPPED, 1)
                        + w.len_field(w.PACKET_INTERNED_DATA, interned)))

    def devices(self, devices: tuple[Device, ...]) -> None:
        """The GPUs the trace is of: each one's track (named by its uuid, where its readings' counters
        go), described by its fixed facts (:func:`device_description`)."""
        out = _Pieces(self._write)
        for device in devices:
            entity = ("device", device.uuid)
            if entity not in self._entity_tracks:
                uuid = self._entity_tracks[entity] = self._uuid()
                out.append(_descriptor(uuid, name=device.uuid, description=device_description(device)))
        out.flush()

    def window(self, parts: tuple[WindowPart, ...]) -> None:
        """Every span of these window answers (a piece of the export's range) as slices."""
        out = _Pieces(self._write)
        for part in parts:
            for proc in part.processes:
                process = self._process(part.source, proc, out)
                for lane in proc.lanes:
                    if lane.spans is None:
                        raise ExportError(f"collector {part.source!r} answered pid {proc.pid} reduced to "
                                          "pixel buckets; an export needs every span (asked with no width)")
                    if len(lane.spans):
                        self._lane_spans(process, (part.source, proc.pid, proc.session), lane, out)
        out.flush()

    def history(self, parts: tuple[HistoryPart, ...]) -> None:
        """Every reading of these history answers as counter tracks (NaN, "not available", is
        left out: a counter has no "unknown" value, and 0 would be a lie)."""
        out = _Pieces(self._write)
        for part in parts:
            for series in part.series:
                self._series(series, out)
        out.flush()

    def finish(self) -> None:
        """The slices still open, then :data:`END_OF_TRACE`."""
        out = _Pieces(self._write)
        for lane in self._lane_order:
            out.append(slices.finish(lane))
        out.append(END_OF_TRACE)
        out.flush()

    # -- tracks ----------------------------------------------------------------------------
    def _process(self, source: str, proc: ProcessWindow, out: _Pieces) -> _Process:
        key = (source, proc.pid, proc.session)
        found = self._processes.get(key)
        if found is None:
            found = _Process(self._uuid(), {})
            out.append(_descriptor(found.uuid, process=(proc.pid, proc.name), explicit_order=True))
            self._processes[key] = found
            self._pid_tracks.setdefault(proc.pid, found)
        return found

    def _device(self, process: _Process, device: int, out: _Pieces) -> int:
        uuid = process.devices.get(device)
        if uuid is None:
            uuid = process.devices[device] = self._uuid()
            out.append(_descriptor(uuid, name=f"GPU {device}", parent=process.uuid, rank=device,
                                   explicit_order=True))
        return uuid

    def _lane_spans(self, process: _Process, proc_key: tuple, lane: LaneWindow, out: _Pieces) -> None:
        key = (proc_key, lane.device, lane.context, lane.stream)
        state = self._lanes.get(key)
        if state is None:
            parent = self._device(process, lane.device, out)
            uuid = self._uuid()
            name = lane_track_name(lane)
            out.append(_descriptor(uuid, name=name, parent=parent, rank=len(self._lane_order)))

            def new_subtrack(k: int, parent: int = uuid, name: str = name) -> tuple[int, bytes]:
                sub = self._uuid()
                return sub, _descriptor(sub, name=f"{name} (overlapping {k})", parent=parent, rank=k)

            state = self._lanes[key] = slices.LaneSlices(uuid, new_subtrack)
            self._lane_order.append(state)
        columns = lane.spans
        assert columns is not None
        fresh = [(iid, name) for iid, name in ((self._names.setdefault(n, len(self._names) + L.FIRST_KERNEL_NAME_IID), n)
                                               for n in columns.names if n not in self._names)]
        args = self._pieces.lane(lane)
        strings, self._fresh_strings = self._fresh_strings, []
        if fresh or strings:
            out.append(w.packet(_SEQ_ID + _NEEDS_STATE + w.len_field(
                w.PACKET_INTERNED_DATA, _interned(w.INTERNED_EVENT_NAMES, fresh)
                + _interned(w.INTERNED_ANNOTATION_STRING_VALUES, strings))))
        name_iids = array("q", (self._names[n] for n in columns.names))
        counts = array("q", bytes(8 * (len(columns.names) + 1)))
        out.append(slices.encode_spans(state, columns, name_iids, counts, args))
        self.slices += len(columns)
        for i, n in enumerate(counts):
            if n:
                name = columns.names[i] if i < len(columns.names) else L.FIXED_EVENT_NAMES[L.NAME_UNNAMED_KERNEL - 1]
                self.kernel_counts[name] = self.kernel_counts.get(name, 0) + n

    # -- counters --------------------------------------------------------------------------
    def _entity_track(self, entity: tuple[str, ...], out: _Pieces) -> int:
        if entity and entity[0] == "process" and len(entity) >= 2 and str(entity[1]).isdigit():
            pid = int(entity[1])
            process = self._pid_tracks.get(pid)
            if process is None:
                process = self._pid_tracks[pid] = _Process(self._uuid(), {})
                out.append(_descriptor(process.uuid, process=(pid, None), explicit_order=True))
            return process.uuid
        uuid = self._entity_tracks.get(entity)
        if uuid is None:
            uuid = self._entity_tracks[entity] = self._uuid()
            name = str(entity[1]) if len(entity) == 2 and entity[0] == "device" else " ".join(map(str, entity))
            out.append(_descriptor(uuid, name=name))
        return uuid

    def _series(self, series: Series, out: _Pieces) -> None:
        key = (series.entity, series.metric)
        uuid = self._counters.get(key)
        if uuid is None:
            parent = self._entity_track(series.entity, out)
            uuid = self._counters[key] = self._uuid()
            on = f" ({series.entity[2]})" if series.entity[:1] == ("process",) and len(series.entity) > 2 else ""
            out.append(_descriptor(uuid, name=series.metric + on, parent=parent, counter_unit=series.unit))
        track = w.int_field(w.EVENT_TRACK_UUID, uuid)
        head = w.int_field(w.EVENT_TYPE, w.TYPE_COUNTER) + track
        for t, value in zip(series.t_s, series.value):
            if not (math.isfinite(value) and math.isfinite(t)) or t < 0:
                continue
            event = head + w.double_field(w.EVENT_DOUBLE_COUNTER_VALUE, value)
            ts = min(round(t * 1e9), L.MAX_START_US * 1000)
            out.append(w.packet(w.int_field(w.PACKET_TIMESTAMP, ts)
                                + w.len_field(w.PACKET_TRACK_EVENT, event) + _SEQ_ID))
