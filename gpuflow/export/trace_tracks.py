"""The tracks of a GPUFlow trace read back: what each track descriptor says a track is.

The reading side of the tracks :mod:`gpuflow.export.perfetto` writes: a process track (its pid
and name) is a traced process, or a process's readings; under it "GPU <n>" is a device, under
that a stream track ("compute (stream 13)", "stream 14", "…, context 2") is a lane
(:func:`~gpuflow.export.perfetto.lane_track_name` read backwards), and its sub-tracks
("… (overlapping k)") hold more of that lane's executions; a counter track under a process is
that process's reading on a GPU ("<metric> (<uuid>)"), one under a track named by a GPU's uuid a
device's reading; that GPU track's description, where the trace has one, is the GPU's fixed facts
(:func:`~gpuflow.export.perfetto.device_description`, read back by :func:`gpu_facts`). Anything
else is not GPUFlow's layout and refused.

Also the reader's :class:`TraceReadError` (one line, what and where) and its :class:`Limits`:
what one trace may make it hold (tracks, processes, lanes, counters, names and a name's bytes),
so that a hostile file's memory follows its executions and nothing else.

Constraints: parents are described before their children (as the writer does and Perfetto
requires); every count is checked against its limit before anything is made.
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass, field
from typing import Callable

from gpuflow.core.recorded import FLOAT, INT
from gpuflow.export import protowire as w
from gpuflow.export.perfetto import FACTS, UNKNOWN
from gpuflow.export.protoread import LEN, VARINT, fields, int64

#: the span columns a lane holds, in SpanColumns' order
COLUMNS = ("seq", "start_us", "dur_ns", "kind", "name", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
           "block_z", "bytes", "direction")
_DEVICE_TRACK = re.compile(r"GPU (\d{1,9})")
_LANE_TRACK = re.compile(r"(?:(.*) \()?stream (-?\d{1,19})(?:, context (\d{1,19}))?(?(1)\))", re.S)
_COUNTER_ON = re.compile(r"(.+) \(([^()]+)\)", re.S)
_BYTES = re.compile(r"(\d{1,20}) bytes")
_WATTS = re.compile(r"(\d{1,12}(?:\.\d{1,12})?) W")
_INT64_MAX = (1 << 63) - 1


class TraceReadError(ValueError):
    """The file is not a whole GPUFlow trace, or holds more than the reader takes (one line)."""


@dataclass(frozen=True)
class Limits:
    """What one trace may make the reader hold beyond its executions' columns."""

    tracks: int = 100_000
    processes: int = 4096
    lanes: int = 4096
    counters: int = 65_536
    names: int = 1 << 18  #: interned strings of any kind
    name_bytes: int = 64 << 10  #: one string's


@dataclass
class LaneTrack:
    device: int
    context: int
    stream: int
    label: str
    columns: tuple[array, ...] = field(default_factory=lambda: tuple(array(INT) for _ in COLUMNS))
    names: dict[str, int] = field(default_factory=dict)


@dataclass
class ProcessTrack:
    pid: int
    name: str | None
    ordinal: int
    lanes: list[LaneTrack] = field(default_factory=list)


@dataclass
class CounterTrack:
    entity: tuple[str, ...]
    metric: str
    unit: str
    t: array = field(default_factory=lambda: array(FLOAT))
    v: array = field(default_factory=lambda: array(FLOAT))


#: a track, by what it is: ("process", ProcessTrack) | ("device", ProcessTrack, index) | ("lane", LaneTrack)
#: | ("counter", CounterTrack) | ("entity", name)
Track = tuple


@dataclass(frozen=True)
class GpuFacts:
    """What a GPU's track description says: its index and the facts that never change."""

    index: int
    name: str | None
    memory_total_bytes: int | None
    power_limit_w: float | None


def gpu_facts(description: str) -> GpuFacts | None:
    """The facts of a description written by ``device_description``, or None if it is not one."""
    head, sep, rest = description.partition(FACTS)
    m = _DEVICE_TRACK.fullmatch(head)
    parts = rest.rsplit(FACTS, 2)
    if m is None or not sep or len(parts) != 3:
        return None
    name, memory, power = parts
    m_memory, m_power = _BYTES.fullmatch(memory), _WATTS.fullmatch(power)
    if (m_memory is None and memory != UNKNOWN) or (m_power is None and power != UNKNOWN):
        return None
    watts = float(m_power.group(1)) if m_power else None
    return GpuFacts(int(m.group(1)), None if name == UNKNOWN else name,
                    int(m_memory.group(1)) if m_memory else None,
                    watts if watts is not None and watts < 1e9 else None)


class Tracks:
    """Every track described so far, by uuid, and the processes, lanes and counters they make."""

    def __init__(self, buf: bytes, limits: Limits, text: Callable[[int, int, str], str]) -> None:
        self.buf = buf
        self.limits = limits
        self.text = text
        self.tracks: dict[int, Track] = {}
        self.processes: list[ProcessTrack] = []
        self.lanes = 0
        self.counters: list[CounterTrack] = []
        self.gpus: dict[str, GpuFacts] = {}   #: by uuid: what the trace's GPU tracks say

    def describe(self, a: int, b: int) -> None:
        buf = self.buf
        uuid = parent = None
        name: str | None = None
        description: str | None = None
        process: tuple[int, int] | None = None
        counter: tuple[int, int] | None = None
        for number, wire_type, v, e in fields(buf, a, b):
            if wire_type == VARINT:
                if number == w.TRACK_UUID:
                    uuid = v
                elif number == w.TRACK_PARENT_UUID:
                    parent = v
            elif wire_type == LEN:
                if number == w.TRACK_NAME:
                    name = self.text(v, e, "a track's name")
                elif number == w.TRACK_DESCRIPTION:
                    description = self.text(v, e, "a track's description")
                elif number == w.TRACK_PROCESS:
                    process = (v, e)
                elif number == w.TRACK_COUNTER:
                    counter = (v, e)
        if uuid is None:
            raise TraceReadError(f"the track described at byte {a} has no uuid")
        if uuid in self.tracks:
            raise TraceReadError(f"track {uuid} is described twice (byte {a})")
        if len(self.tracks) >= self.limits.tracks:
            raise TraceReadError(f"it describes more than {self.limits.tracks} tracks")
        up = None
        if parent is not None:
            up = self.tracks.get(parent)
            if up is None:
                raise TraceReadError(f"track {uuid}'s parent {parent} is not described before it (byte {a})")
        self.tracks[uuid] = found = self.track(a, name or "", up, process, counter)
        if found[0] == "entity" and description is not None:
            facts = gpu_facts(description)
            if facts is not None:
                self.gpus[found[1]] = facts

    def track(self, at: int, name: str, up: Track | None, process: tuple[int, int] | None,
              counter: tuple[int, int] | None) -> Track:
        if process is not None:
            pid, pname = None, None
            for number, wire_type, v, e in fields(self.buf, *process):
                if number == w.PROCESS_PID and wire_type == VARINT:
                    pid = int64(v)
                elif number == w.PROCESS_NAME and wire_type == LEN:
                    pname = self.text(v, e, "a process's name")
            if pid is None or not 0 <= pid <= 2**31 - 1:
                raise TraceReadError(f"the process track at byte {at} has no process id GPUFlow could have written")
            if len(self.processes) >= self.limits.processes:
                raise TraceReadError(f"it holds more than {self.limits.processes} processes")
            proc = ProcessTrack(pid, pname, len(self.processes) + 1)
            self.processes.append(proc)
            return ("process", proc)
        if counter is not None:
            return ("counter", self.counter_track(at, name, up, counter))
        if up is None:
            return ("entity", name)
        if up[0] == "process":
            m = _DEVICE_TRACK.fullmatch(name)
            if m is None:
                raise TraceReadError(f"the track at byte {at} under a process is not a GPU's ({name[:80]!r})")
            return ("device", up[1], int(m.group(1)))
        if up[0] == "device":
            m = _LANE_TRACK.fullmatch(name)
            if m is None:
                raise TraceReadError(f"the track at byte {at} under a GPU is not a stream's ({name[:80]!r})")
            label, stream, ctx = m.group(1), int(m.group(2)), int(m.group(3) or 1)
            if not -2**63 <= stream <= _INT64_MAX or ctx > _INT64_MAX:
                raise TraceReadError(f"the stream track at byte {at} names a stream or context beyond 64 bits")
            if self.lanes >= self.limits.lanes:
                raise TraceReadError(f"it holds more than {self.limits.lanes} streams")
            self.lanes += 1
            lane = LaneTrack(up[2], ctx, stream, label if label is not None else str(stream))
            up[1].lanes.append(lane)
            return ("lane", lane)
        if up[0] == "lane":
            return up   # a sub-track of overlapping executions: its slices are its stream's
        raise TraceReadError(f"the track at byte {at} is under a {up[0]} track, where GPUFlow puts none")

    def counter_track(self, at: int, name: str, up: Track | None, counter: tuple[int, int]) -> CounterTrack:
        unit = None
        for number, wire_type, v, e in fields(self.buf, *counter):
            if number == w.COUNTER_UNIT and wire_type == VARINT and v == w.UNIT_SIZE_BYTES:
                unit = "bytes"
            elif number == w.COUNTER_UNIT_NAME and wire_type == LEN:
                unit = self.text(v, e, "a counter's unit")
        if up is not None and up[0] == "process":
            m = _COUNTER_ON.fullmatch(name)
            if m is None:
                raise TraceReadError(f"the process counter at byte {at} does not name its GPU ({name[:80]!r})")
            entity: tuple[str, ...] = ("process", str(up[1].pid), m.group(2))
            metric = m.group(1)
        elif up is not None and up[0] == "entity":
            entity, metric = ("device", up[1]), name
        else:
            raise TraceReadError(f"the counter track at byte {at} is not under a device's or a process's")
        if len(self.counters) >= self.limits.counters:
            raise TraceReadError(f"it holds more than {self.limits.counters} counters")
        found = CounterTrack(entity, metric, unit or "")
        self.counters.append(found)
        return found
