"""A trace file read once into a :class:`Recording`, which answers the recorder's queries.

The file is untrusted: it must be a regular file when opened (a FIFO or device swapped in after
the options' check is refused, never waited on: it is opened non-blocking), read only up to
``max_bytes`` (one more byte says it is larger), and decoded by
:func:`gpuflow.export.trace_read.read_trace`, which checks every length and bounds what it can
make the collector hold. Any failure is a :class:`RecordingError` whose message is one line
naming the file.

A :class:`Recording` holds each traced process's whole recorded window (its lanes indexed by
:class:`~gpuflow.collectors.recording.lanes.LaneIndex`) and its readings
(:class:`~gpuflow.collectors.recording.readings.Readings`), and answers ``query_window`` for any
range as the collector that recorded it would have: per process what is recorded at all
(``retained_from``/``retained_to``, also for a window outside it), and per lane the executions
starting in the window. ``complete`` is always true: what the trace holds is all the recording
has, and whether the recorder had let part of the run go before it was written is not in the
file.

Constraints: reads the file once; the answers share the columns (slices, never copies of the
whole); no Python object per execution.
"""

from __future__ import annotations

import math
import os
import stat
from dataclasses import dataclass, replace

from gpuflow.collectors.recording.lanes import LaneIndex
from gpuflow.collectors.recording.readings import Readings
from gpuflow.core.recorded import ProcessWindow, WindowPart
from gpuflow.export.trace_read import TraceContents, TraceReadError, read_trace

_CHUNK = 1 << 20


class RecordingError(ValueError):
    """The file cannot be shown (one line, naming it)."""


@dataclass(frozen=True)
class RecordedProcess:
    """One traced process of the recording: its whole window, and its lanes indexed."""

    window: ProcessWindow
    lanes: tuple[LaneIndex, ...]


@dataclass(frozen=True)
class Recording:
    path: str
    size_bytes: int
    contents: TraceContents
    processes: tuple[RecordedProcess, ...]
    readings: Readings
    start_s: float | None  #: the earliest execution's start or reading
    end_s: float | None  #: the latest execution's end or reading

    def window(self, start_s: float, end_s: float, pid: int | None, width_px: int | None,
               source: str) -> WindowPart:
        """The recorded executions starting in ``[start_s, end_s)`` (docs/recorder.md, "Window queries")."""
        lo_us, hi_us = math.ceil(start_s * 1e6), math.ceil(end_s * 1e6)
        found = []
        for p in self.processes:
            if pid is not None and p.window.pid != pid:
                continue
            lanes = () if hi_us <= lo_us else tuple(
                answer for answer in (lane.window(lo_us, hi_us, width_px) for lane in p.lanes) if answer is not None)
            found.append(replace(p.window, lanes=lanes))
        return WindowPart(source=source, processes=tuple(found))


def read_file(path: str, max_bytes: int) -> bytes:
    """The file's bytes, at most ``max_bytes`` of them; RecordingError otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise RecordingError(f"{path}: {exc.strerror}") from None
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise RecordingError(f"{path} is not a regular file")
        if found.st_size > max_bytes:
            raise RecordingError(f"{path} is {found.st_size / 2**20:.1f} MiB, more than the {max_bytes // 2**20} MiB "
                                 "a recording may have: raise --max-mb (GPUFLOW_RECORDING_MAX_MB) to open it, "
                                 "with about as much memory to spare")
        pieces, held = [], 0
        while True:
            piece = os.read(fd, min(_CHUNK, max_bytes + 1 - held))
            if not piece:
                break
            pieces.append(piece)
            held += len(piece)
            if held > max_bytes:
                raise RecordingError(f"{path} grew past the {max_bytes // 2**20} MiB a recording may have while it "
                                     "was read")
        return b"".join(pieces)
    except OSError as exc:
        raise RecordingError(f"{path}: {exc.strerror}") from None
    finally:
        os.close(fd)


def load(path: str, max_bytes: int) -> Recording:
    """The recording in the trace file at ``path`` (at most ``max_bytes``); RecordingError otherwise."""
    data = read_file(path, max_bytes)
    if not data:
        raise RecordingError(f"{path} is empty")
    size = len(data)
    try:
        contents = read_trace(data)
        del data
        processes = tuple(RecordedProcess(p, tuple(LaneIndex(lane) for lane in p.lanes))
                          for p in sorted(contents.processes, key=lambda p: (p.pid, p.session)))
    except TraceReadError as exc:
        raise RecordingError(f"{path}: {exc}") from None
    except MemoryError:
        raise RecordingError(f"{path}: not enough memory to read it (open it on a machine with more, or with "
                             "less open)") from None
    readings = Readings(contents.series)
    starts = [p.retained_from_s for p in contents.processes if p.retained_from_s is not None]
    ends = [p.retained_to_s for p in contents.processes if p.retained_to_s is not None]
    if readings.first_s is not None:
        starts.append(readings.first_s)
        ends.append(readings.last_s)   # type: ignore[arg-type]
    return Recording(path=path, size_bytes=size, contents=contents, processes=processes,
                     readings=readings, start_s=min(starts, default=None), end_s=max(ends, default=None))
