"""An export of a time range: the recorder's windows asked in pieces, written as one Perfetto trace.

Anything that answers the recorder's queries can be exported (the agent's ``query_window`` and
``query_history``, which ask every plugin). A whole retention can hold millions of spans, and a
window's answer holds them column by column (about 104 bytes a span), so the range is not asked
for at once: :meth:`WindowExport.plan` first asks for it reduced to :data:`PLAN_WIDTH` buckets
(how many executions start where: cheap for the recorder, small to hold), then cuts the range
into pieces of at most about ``piece_spans`` executions at bucket edges (a bucket denser than
that is planned again, inside itself, while its buckets stay a microsecond or wider: executions
that start within one microsecond are asked together however many they are). Each piece is then asked exactly
(``width_px=None``) and written before the next is asked, so an export holds one piece at a
time whatever the range. Consecutive pieces share their edge, and a window holds the executions
that *start* in ``[from, to)``, so every execution is asked exactly once.

The readings kept over time (``query_history``) follow as counter tracks, and the trace ends
with its end-of-trace packet only when every piece was written: a stream cut short by an error
lacks it, and ``gpuflow export`` refuses such a file.

Constraints: imports only the core and the trace format; a collector that answers with a problem
makes the export fail with that problem (an export is whole or refused); the pieces' answers are
dropped as soon as they are written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from gpuflow.core.recorded import HistoryPart, WindowPart
from gpuflow.core.snapshot import Device
from gpuflow.export.perfetto import ExportError, TraceWriter

#: the buckets a plan asks a range for
PLAN_WIDTH = 1024
#: about how many executions a piece holds (~21 MB of columns, ~20 MB of trace)
PIECE_SPANS = 200_000
#: how often a dense bucket is planned again inside itself
MAX_PLAN_DEPTH = 6

WindowQuery = Callable[[float, float, "int | None", "int | None"], "tuple[WindowPart, ...]"]
HistoryQuery = Callable[[float, float], "tuple[HistoryPart, ...]"]


@dataclass
class ProcessRange:
    """What an export holds of one traced process."""

    source: str
    pid: int
    session: str
    name: str | None
    retained_from_s: float | None = None
    retained_to_s: float | None = None
    complete: bool = True  #: False when retention had evicted part of the range for it


@dataclass
class ExportSummary:
    """What was written: slices, kernel slices per name, per process what it holds."""

    slices: int = 0
    kernel_counts: dict[str, int] = field(default_factory=dict)
    processes: dict[tuple[str, int, str], ProcessRange] = field(default_factory=dict)
    sources: set[str] = field(default_factory=set)

    @property
    def incomplete(self) -> list[ProcessRange]:
        return [p for p in self.processes.values() if not p.complete]


def _problems(parts: tuple[Any, ...], what: str) -> None:
    found = [f"[{p.source}] {p.message}" for part in parts for p in part.problems]
    if found:
        raise ExportError(f"the recorder could not answer the {what}: " + "; ".join(found))


class WindowExport:
    """One export of ``[start_s, end_s)`` (and one process, with ``pid``); plan it, then stream it."""

    def __init__(self, query_window: WindowQuery, query_history: HistoryQuery | None, start_s: float,
                 end_s: float, pid: int | None = None, piece_spans: int | None = None,
                 devices: tuple[Device, ...] = ()) -> None:
        if not end_s > start_s:
            raise ValueError("an export's end must be after its start")
        self._query_window = query_window
        self._query_history = query_history
        self.start_s, self.end_s, self.pid = start_s, end_s, pid
        self.piece_spans = max(1, PIECE_SPANS if piece_spans is None else piece_spans)
        self.devices = devices   #: the GPUs the agent shows, described in the trace (TraceWriter.devices)
        self.pieces: list[tuple[float, float]] | None = None
        self.summary = ExportSummary()

    # -- the plan ----------------------------------------------------------------------------
    def plan(self) -> list[tuple[float, float]]:
        """Cut the range into pieces; ExportError when a collector answers with a problem."""
        if self.pieces is None:
            self.pieces = self._plan(self.start_s, self.end_s, 0)
        return self.pieces

    def _plan(self, start: float, end: float, depth: int) -> list[tuple[float, float]]:
        parts = self._query_window(start, end, self.pid, PLAN_WIDTH)
        _problems(parts, "export's plan")
        step = (end - start) / PLAN_WIDTH
        edges = [start + j * step for j in range(PLAN_WIDTH)] + [end]
        bins = [0] * PLAN_WIDTH

        def bin_of(t_s: float) -> int:
            return min(PLAN_WIDTH - 1, max(0, int((t_s - start) / step)))

        for part in parts:
            for proc in part.processes:
                for lane in proc.lanes:
                    if lane.buckets is not None:
                        b = lane.buckets
                        for j, count in enumerate(b.count):
                            if count:
                                bins[bin_of((b.start_us + j * b.width_us) / 1e6)] += count
                    elif lane.spans is not None:
                        for start_us in lane.spans.start_us:
                            bins[bin_of(start_us / 1e6)] += 1
        if sum(bins) <= self.piece_spans:
            return [(start, end)]
        pieces: list[tuple[float, float]] = []
        lo, held = 0, 0
        for j, count in enumerate(bins):
            if held and held + count > self.piece_spans:
                pieces.append((edges[lo], edges[j]))
                lo, held = j, 0
            held += count
            if held > self.piece_spans:  # one bucket alone is too dense: plan inside it
                if lo < j:
                    pieces.append((edges[lo], edges[j]))
                splittable = depth < MAX_PLAN_DEPTH and edges[j + 1] - edges[j] >= PLAN_WIDTH * 1e-6
                pieces.extend(self._plan(edges[j], edges[j + 1], depth + 1) if splittable
                              else [(edges[j], edges[j + 1])])
                lo, held = j + 1, 0
        if lo < PLAN_WIDTH:
            pieces.append((edges[lo], end))
        return pieces

    # -- the trace ---------------------------------------------------------------------------
    def stream(self) -> Iterator[bytes]:
        """The trace, piece by piece (planned first if it was not); ExportError as it happens
        (what was yielded before lacks the end-of-trace packet)."""
        pieces = self.plan()
        out: list[bytes] = []
        writer = TraceWriter(out.append)
        writer.header()
        writer.devices(self.devices)
        for start, end in pieces:
            parts = self._query_window(start, end, self.pid, None)
            _problems(parts, "export")
            self._note(parts)
            writer.window(parts)
            del parts
            yield from out
            out.clear()
        if self._query_history is not None:
            history = self._query_history(self.start_s, self.end_s)
            _problems(history, "export's readings")
            if self.pid is not None:
                history = tuple(_only_pid(part, self.pid) for part in history)
            writer.history(history)
        writer.finish()
        self.summary.slices = writer.slices
        self.summary.kernel_counts = writer.kernel_counts
        yield from out

    def write(self, write: Callable[[bytes], Any]) -> ExportSummary:
        """The whole trace handed to ``write`` piece by piece; its summary."""
        for piece in self.stream():
            write(piece)
        return self.summary

    def _note(self, parts: tuple[WindowPart, ...]) -> None:
        for part in parts:
            self.summary.sources.add(part.source)
            for proc in part.processes:
                key = (part.source, proc.pid, proc.session)
                seen = self.summary.processes.setdefault(key, ProcessRange(part.source, proc.pid, proc.session,
                                                                           proc.name))
                seen.complete = seen.complete and proc.complete
                for attr, pick in (("retained_from_s", min), ("retained_to_s", max)):
                    value, held = getattr(proc, attr), getattr(seen, attr)
                    if value is not None:
                        setattr(seen, attr, value if held is None else pick(held, value))


def _only_pid(part: HistoryPart, pid: int) -> HistoryPart:
    """A history answer less the readings of processes other than ``pid`` (devices stay)."""
    from dataclasses import replace

    kept = tuple(s for s in part.series if not (s.entity[:1] == ("process",) and len(s.entity) > 1
                                                and str(s.entity[1]) != str(pid)))
    return replace(part, series=kept)
