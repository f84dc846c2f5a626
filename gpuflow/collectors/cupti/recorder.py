"""The CUPTI collector's flight recorder: which processes' retained columns it holds, and the window
answers built from them (docs/recorder.md, "What is kept" and "Window queries").

The records themselves are written by the decoders in their drain pass (``_retain.pxi`` /
``_retain_py.py``) into one :class:`Retention` budget all of them share, raw, and compacted by
:meth:`Recorder.after_pass`, on the drain thread after each pass. This module keeps, per
traced process (running, exited, folded into the session's roll-up), what a window needs beside
the columns: the decoder that holds them, the builder that names its lanes and kernels as the
snapshot does, and the clock pairs seen over time, so that a window is mapped into that process's
CUPTI clock with the pair in force at the window's start. A process stays here, after its ring is
released and after it is folded, until its last chunk is evicted; then its decoder is dropped.

Constraints: the drain thread calls :meth:`Recorder.track`, :meth:`Recorder.note_clock`,
:meth:`Recorder.after_pass`; any thread calls :meth:`Recorder.window` (the ``query_window``
hook), which reads the decoders' retained columns (thread-safe by design: pinned chunks, published
counts) and the builders' names and labels (dict reads), and never waits for the drain thread
except to look up a name defined since the last build, under ``name_lock``.
"""

from __future__ import annotations

import bisect
import logging
import math
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from gpuflow.collectors.cupti import _retain_layout as RL
from gpuflow.collectors.cupti.protocol import RingDecoder
from gpuflow.collectors.cupti.traced_builder import CUT_MARK, UNNAMED_KERNEL, TracedBuilder
from gpuflow.collectors.cupti.window_launches import LaunchBook
from gpuflow.collectors.cupti import _layout as L
from gpuflow.core.recorded import LaneWindow, ProcessWindow, SpanBuckets, SpanColumns, WindowPart
from gpuflow.core.snapshot import Problem

log = logging.getLogger(__name__)

#: clock pairs kept per process: one a second (CLOCK_SYNC) for over an hour; older ones are dropped
#: (a window older than them maps with the oldest kept)
MAX_CLOCK_PAIRS = 4096
#: exited processes whose retained executions are kept (each holds its decoder's tables, outside
#: the budget): beyond it the one that exited first is forgotten, retained or not
MAX_EXITED_KEPT = 256
_COLUMNS = ("seq", "start_us", "dur_ns", "kind", "name", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
            "block_z", "bytes", "direction")


@dataclass
class Recorded:
    """One traced process whose executions are (or were) retained."""

    pid: int
    session: str
    decoder: RingDecoder
    builder: TracedBuilder
    name: str | None = None
    running: bool = True
    #: (wall ns, CUPTI ns) of each clock pair seen, oldest first (walls never go back)
    walls: list[int] = field(default_factory=list)
    cuptis: list[int] = field(default_factory=list)
    #: names looked up for windows that the snapshot did not show by their own name
    names: dict[int, str] = field(default_factory=dict)
    #: its kernels' launch configurations and their occupancy, for the windows' exact lanes
    launches: LaunchBook = field(default_factory=LaunchBook)

    def offset_at(self, wall_ns: int) -> int | None:
        """wall - CUPTI of the clock pair in force at ``wall_ns`` (the first pair before any)."""
        i = bisect.bisect_right(self.walls, wall_ns) - 1
        if not self.walls:
            return None
        i = max(i, 0)
        return self.walls[i] - self.cuptis[i]


class Recorder:
    """The retained processes of one CUPTI collector, and their window answers."""

    def __init__(self, source: str, retention: Any, retain_s: float | None,
                 name_lock: threading.Lock | threading.RLock) -> None:
        self.source = source
        self.retention = retention
        self.retain_s = retain_s
        self._name_lock = name_lock
        self._recorded: list[Recorded] = []

    # -- the drain thread -------------------------------------------------------------------
    def track(self, pid: int, session: str, name: str | None, decoder: RingDecoder,
              builder: TracedBuilder) -> Recorded:
        entry = Recorded(pid, session, decoder, builder, name)
        self._recorded = [*self._recorded, entry]   # readers iterate the list they took
        return entry

    @staticmethod
    def note_clock(entry: Recorded, clock: tuple[int, int] | None) -> None:
        """The decoder's latest clock pair after a drain: kept when new (and placeable in time)."""
        if clock is None:
            return
        cupti, wall = clock
        if not (0 <= cupti <= RL.TIME_LIMIT and 0 <= wall <= RL.TIME_LIMIT):
            return
        if entry.walls and (entry.walls[-1], entry.cuptis[-1]) == (wall, cupti):
            return
        if entry.walls and wall < entry.walls[-1]:
            return   # a wall clock stepped back: the pairs stay ordered by wall time
        if len(entry.walls) >= MAX_CLOCK_PAIRS:
            del entry.walls[0], entry.cuptis[0]
        entry.walls.append(wall)
        entry.cuptis.append(cupti)

    def after_pass(self, now_ns: int) -> None:
        """Compact the chunks the pass sealed; evict what --retain-s lets go; bring each process's
        launch configurations up to date (its decoder is idle here; once more after it stopped
        running); forget finished processes with nothing retained."""
        try:
            self.retention.compact()
        except MemoryError:   # that chunk stays raw: whole, readable, counted at its raw size
            log.warning("the flight recorder could not compact a chunk (out of memory); it stays raw")
        if self.retain_s is not None:
            self.retention.evict_older_than(now_ns - int(self.retain_s * 1e9))
        for entry in self._recorded:
            if not entry.launches.final:
                try:
                    entry.launches.update(entry.decoder, now_ns)
                except RuntimeError:   # a drain running elsewhere (not this thread's): the next pass asks again
                    continue
                entry.launches.final = not entry.running
        kept = []
        exited = sum(not entry.running for entry in self._recorded)
        for entry in self._recorded:   # oldest first
            figures = entry.decoder.retained()
            if entry.running or (figures is not None and figures["chunks"] and exited <= MAX_EXITED_KEPT):
                kept.append(entry)
            else:
                exited -= not entry.running
                entry.decoder.drop_retained()
        if len(kept) != len(self._recorded):
            self._recorded = kept

    def stop(self) -> None:
        """The collector stopped: what is retained stays answerable (gpuflow run --trace-out)."""
        for entry in self._recorded:
            entry.running = False

    # -- any thread -----------------------------------------------------------------------------
    def window(self, start_s: float, end_s: float, pid: int | None, width_px: int | None) -> WindowPart:
        lo_us, hi_us = math.ceil(start_s * 1e6), math.ceil(end_s * 1e6)
        processes = []
        problems = []
        for entry in sorted(self._recorded, key=lambda e: (e.pid, e.session, id(e))):
            if pid is not None and entry.pid != pid:
                continue
            try:
                processes.append(self._process(entry, lo_us, hi_us, width_px))
            except (ValueError, MemoryError) as exc:
                problems.append(Problem(source=self.source, message=f"pid {entry.pid}: its window could "
                                        f"not be answered ({exc})", severity="warning"))
        return WindowPart(source=self.source, processes=tuple(processes), problems=tuple(problems))

    def _process(self, entry: Recorded, lo_us: int, hi_us: int, width_px: int | None) -> ProcessWindow:
        decoder = entry.decoder
        offset = entry.offset_at(lo_us * 1000)
        if offset is None:   # none noted yet: the decoder's own, else CUPTI's clock itself
            clock = decoder.clock()
            offset = 0 if clock is None else clock[1] - clock[0]
        figures = decoder.retained() or {}
        lanes: list[LaneWindow] = []
        if hi_us > lo_us and 0 <= lo_us and hi_us <= RL.TIME_LIMIT // 1000:
            for device, context, stream, executions, columns, name_ids, buckets in decoder.window(
                    lo_us, hi_us, offset, width_px):
                label = entry.builder.label((device, context, stream)) or str(stream)
                if columns is not None:
                    spans = SpanColumns(**dict(zip(_COLUMNS, columns)),
                                        names=tuple(self._name(entry, nid) for nid in name_ids))
                    lanes.append(LaneWindow(device, context, stream, label, executions, spans=spans,
                                            launch_ids=columns[13],
                                            launches=entry.launches.lane(device, tuple(name_ids))))
                else:
                    assert width_px is not None and buckets is not None
                    count, busy = buckets
                    lanes.append(LaneWindow(device, context, stream, label, executions, buckets=SpanBuckets(
                        start_us=float(lo_us), width_us=(hi_us - lo_us) / width_px, count=count, busy_ns=busy)))
        through = figures.get("evicted_through_ns")
        complete = through is None or through + offset < lo_us * 1000
        latest = entry.offset_at(RL.TIME_LIMIT)
        latest = offset if latest is None else latest
        first, last = figures.get("from_ns"), figures.get("to_ns")
        return ProcessWindow(
            pid=entry.pid, session=entry.session, name=entry.name,
            retained_from_s=(first + latest) / 1e9 if first is not None else None,
            retained_to_s=(last + latest) / 1e9 if last is not None else None,
            lanes=tuple(lanes), complete=complete)

    def _name(self, entry: Recorded, name_id: int) -> str:
        """A kernel name as the snapshot shows it; one it does not show by its own name (over the
        snapshot's budget, or newer than the last build) is given in its mangled form."""
        shown = entry.builder.shown_name(name_id)
        if shown is not None:
            return shown
        known = entry.names.get(name_id)
        if known is not None:
            return known
        entry_name = self._lookup(entry.decoder, name_id)
        text = UNNAMED_KERNEL if entry_name is None else (
            entry_name[0] + CUT_MARK if entry_name[1] & L.FLAG_NAME_TRUNCATED else entry_name[0])
        entry.names[name_id] = text
        return text

    def _lookup(self, decoder: RingDecoder, name_id: int) -> tuple[str, int] | None:
        try:
            return decoder.name(name_id)
        except RuntimeError:   # the compiled decoder is draining: ask between two passes
            with self._name_lock:
                return decoder.name(name_id)


def retention_for(decoder_class: type, budget_bytes: int, factory: Callable[..., Any] | None = None) -> Any:
    """The Retention of a decoder class's twin (its compiled or its Python one)."""
    from gpuflow.collectors.cupti import decoder as decoder_mod

    cls = factory or (decoder_mod.RetentionC if getattr(decoder_class, "is_compiled", False)
                      else decoder_mod.RetentionPy)
    return cls(budget_bytes)
