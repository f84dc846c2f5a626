"""What the agent keeps beyond "now": spans as columns, windows of them, and readings over time.

The contract of the flight recorder (docs/recorder.md), beside the snapshot's (snapshot.py):

* :class:`SpanColumns` — many spans of one lane, column by column: what a collector that retains
  records hands out without a Python object per span, and what a window query answers with;
* :class:`SpanBuckets` — a dense stretch of a lane reduced to pixel buckets, each saying how many
  executions and how much busy time it stands for (never a guessed span);
* :class:`LaneWindow`, :class:`ProcessWindow`, :class:`WindowPart` — the answer of the
  ``query_window`` hook: per traced process, what is retained and, per lane, its spans in the
  asked window, exact or reduced (exact ones with their kernels' launch configurations'
  theoretical occupancy, :class:`LaunchFigures`, where the collector has them);
* :class:`Series`, :class:`HistoryPart` — the answer of the ``query_history`` hook: readings
  (a device's utilization, a process's memory on a device, ...) over time.

Times are wall clock: microseconds since the epoch for spans (as :class:`~gpuflow.core.snapshot.Span`),
seconds since the epoch (floats) in queries and series. "Not available" is ``None`` in Python and
NaN in a float column, ``null`` in JSON, never 0.

Constraints: pure data, no I/O, no imports from collectors or transport; every class is frozen;
columns are ``array.array`` objects (any buffer a Cython layer fills can be wrapped without a
copy per span) and are never mutated after construction.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from gpuflow.core.snapshot import SPAN_KINDS, TRANSFER_DIRECTIONS, Problem, Span, _span_json

#: the typecode of every integer column (64-bit signed)
INT = "q"
#: the typecode of reading columns (64-bit float; NaN: not available)
FLOAT = "d"
#: no name / no direction / no bytes in an integer column
NONE = -1

_SPAN_COLUMNS = ("seq", "start_us", "dur_ns", "kind", "name", "grid_x", "grid_y", "grid_z",
                 "block_x", "block_y", "block_z", "bytes", "direction")


def _ints(values: Iterable[int] = ()) -> array:
    return array(INT, values)


@dataclass(frozen=True)
class SpanColumns:
    """Spans of one lane, oldest first, one ``array('q')`` per field, all the same length.

    ``kind`` indexes :data:`~gpuflow.core.snapshot.SPAN_KINDS`; ``name`` indexes ``names`` (-1: no
    name: copies and memsets); ``direction`` indexes ``TRANSFER_DIRECTIONS`` (-1: kernels);
    ``bytes`` is -1 for kernels; a kernel's grid and block are its three dimensions each, a copy's
    are -1.
    """

    seq: array = field(default_factory=_ints)
    start_us: array = field(default_factory=_ints)
    dur_ns: array = field(default_factory=_ints)
    kind: array = field(default_factory=_ints)
    name: array = field(default_factory=_ints)
    grid_x: array = field(default_factory=_ints)
    grid_y: array = field(default_factory=_ints)
    grid_z: array = field(default_factory=_ints)
    block_x: array = field(default_factory=_ints)
    block_y: array = field(default_factory=_ints)
    block_z: array = field(default_factory=_ints)
    bytes: array = field(default_factory=_ints)
    direction: array = field(default_factory=_ints)
    names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        n = len(self.seq)
        for column in _SPAN_COLUMNS:
            values = getattr(self, column)
            if not isinstance(values, array) or values.typecode != INT:
                raise TypeError(f"SpanColumns.{column} must be array('{INT}')")
            if len(values) != n:
                raise ValueError(f"SpanColumns.{column} has {len(values)} values, seq has {n}")

    def __len__(self) -> int:
        return len(self.seq)

    def span(self, i: int) -> Span:
        """Span ``i`` as the snapshot's :class:`~gpuflow.core.snapshot.Span`."""
        kind = SPAN_KINDS[self.kind[i]]
        name_id, direction, nbytes = self.name[i], self.direction[i], self.bytes[i]
        is_kernel = kind == "kernel"
        return Span(
            seq=self.seq[i], kind=kind, start_us=self.start_us[i], dur_ns=self.dur_ns[i],
            name=self.names[name_id] if name_id >= 0 else None,
            grid=(self.grid_x[i], self.grid_y[i], self.grid_z[i]) if is_kernel else None,
            block=(self.block_x[i], self.block_y[i], self.block_z[i]) if is_kernel else None,
            bytes=nbytes if nbytes >= 0 else None,
            direction=TRANSFER_DIRECTIONS[direction] if direction >= 0 else None)

    def __iter__(self) -> Iterator[Span]:
        return (self.span(i) for i in range(len(self)))

    def __getitem__(self, index: int | slice) -> Any:
        """Span ``index`` (negative: from the end), or a slice of the spans as columns (same names)."""
        if isinstance(index, slice):
            return SpanColumns(**{c: getattr(self, c)[index] for c in _SPAN_COLUMNS}, names=self.names)
        return self.span(index)

    @classmethod
    def from_spans(cls, spans: Iterable[Span]) -> SpanColumns:
        """The columns of these spans (tests, fakes: a collector that retains records fills the
        arrays itself)."""
        columns: dict[str, array] = {c: _ints() for c in _SPAN_COLUMNS}
        names: dict[str, int] = {}
        kind_code = {k: i for i, k in enumerate(SPAN_KINDS)}
        direction_code = {d: i for i, d in enumerate(TRANSFER_DIRECTIONS)}
        for s in spans:
            grid = s.grid or (NONE, NONE, NONE)
            block = s.block or (NONE, NONE, NONE)
            row = (s.seq, s.start_us, s.dur_ns, kind_code[s.kind],
                   names.setdefault(s.name, len(names)) if s.name is not None else NONE,
                   *grid, *block, s.bytes if s.bytes is not None else NONE,
                   direction_code[s.direction] if s.direction is not None else NONE)
            for column, value in zip(_SPAN_COLUMNS, row):
                columns[column].append(value)
        return cls(**columns, names=tuple(names))

    def to_json_list(self) -> list[dict[str, Any]]:
        """The plain JSON form of the spans: exactly what a tuple of Spans gives (docs/snapshot.md)."""
        return [_span_json(s) for s in self]


@dataclass(frozen=True)
class SpanBuckets:
    """A lane's executions over ``[start_us, start_us + width_us * len(count))`` in equal buckets.

    Bucket ``i`` covers ``[start_us + i * width_us, start_us + (i + 1) * width_us)``; an execution
    counts in the bucket where it starts; ``busy_ns`` is the time the lane's executions spent
    inside the bucket (an execution spanning buckets is split between them), so it never exceeds
    the bucket's width.
    """

    start_us: float
    width_us: float
    count: array = field(default_factory=_ints)
    busy_ns: array = field(default_factory=_ints)

    def __post_init__(self) -> None:
        if not self.width_us > 0 or not math.isfinite(self.width_us):
            raise ValueError(f"SpanBuckets.width_us must be a positive number, got {self.width_us}")
        if len(self.count) != len(self.busy_ns):
            raise ValueError("SpanBuckets.count and busy_ns differ in length")

    def __len__(self) -> int:
        return len(self.count)


@dataclass(frozen=True, slots=True)
class LaunchFigures:
    """The theoretical occupancy of one launch configuration a kernel ran with, as the collector
    that retains its lane computed it (docs/occupancy.md): what an export writes on each of its
    executions. Found by the kernel's name, ``launch_id`` and ``block``; None: not available."""

    launch_id: int  #: its launch configuration, as the lane's ``launch_ids`` give it (0: none recorded)
    block: tuple[int, int, int]
    occupancy_pct: float | None = None  #: active warps an SM allows against its most, 0-100
    blocks_per_sm: int | None = None
    limiters: str | None = None  #: what holds the blocks down, "+"-joined ("registers", "warps+blocks")
    #: the blocks one full wave holds (blocks per SM x SMs): an execution's waves are its grid's
    #: blocks over this; None: no waves (``waves_unavailable`` says why)
    wave_blocks: int | None = None
    waves_unavailable: str | None = None
    unavailable: str | None = None  #: why there is no occupancy (then nothing above is given)


@dataclass(frozen=True, slots=True)
class LaneWindow:
    """One lane of a traced process inside a window: exact spans or reduced buckets, never both."""

    device: int
    context: int
    stream: int
    label: str
    executions: int  #: executions starting inside the window (exact)
    spans: SpanColumns | None = None  #: every one of them, when the window is exact
    buckets: SpanBuckets | None = None  #: when reduced to the asked pixel width
    #: per span of ``spans``, its kernel's launch configuration id (0: none recorded; -1: not a
    #: kernel); None: the collector gives none
    launch_ids: array | None = None
    #: per name of ``spans.names``, in order, the figures of the launch configurations that kernel
    #: ran with (with ``launch_ids``; empty: none known)
    launches: tuple[tuple[LaunchFigures, ...], ...] = ()

    def __post_init__(self) -> None:
        if (self.spans is None) == (self.buckets is None):
            raise ValueError("a LaneWindow holds either spans or buckets")
        if self.launch_ids is not None and (
                self.spans is None or not isinstance(self.launch_ids, array) or self.launch_ids.typecode != INT
                or len(self.launch_ids) != len(self.spans)):
            raise ValueError(f"LaneWindow.launch_ids must be array('{INT}'), one per span")
        if self.launches and (self.spans is None or len(self.launches) != len(self.spans.names)):
            raise ValueError("LaneWindow.launches must hold one entry per name of its spans")


@dataclass(frozen=True, slots=True)
class ProcessWindow:
    """One traced process inside a window, and what of it is retained at all."""

    pid: int
    session: str
    name: str | None
    retained_from_s: float | None  #: the oldest moment still retained (None: nothing retained)
    retained_to_s: float | None  #: the newest
    lanes: tuple[LaneWindow, ...] = ()
    #: False when retention already evicted part of the window for this process
    complete: bool = True


@dataclass(frozen=True, slots=True)
class WindowPart:
    """What one collector answers to a window query (``query_window`` hook)."""

    source: str
    processes: tuple[ProcessWindow, ...] = ()
    problems: tuple[Problem, ...] = ()  #: what the collector could not answer, and why


@dataclass(frozen=True)
class Series:
    """One reading over time: ``t_s[i]`` (seconds since the epoch) and ``value[i]`` (NaN: not
    available), oldest first, sampled every ``resolution_s`` (a roll-up's value is its mean;
    ``min_value`` and ``max_value``, when given, the least and greatest sample it stands for)."""

    entity: tuple[str, ...]  #: what is read: ("device", uuid) or ("process", pid, device uuid)
    metric: str  #: the snapshot field it comes from, e.g. "utilization_gpu_pct"
    unit: str  #: "%", "bytes", "W", "C", "MHz", "bytes/s"
    resolution_s: float
    t_s: array = field(default_factory=lambda: array(FLOAT))
    value: array = field(default_factory=lambda: array(FLOAT))
    min_value: array | None = None  #: a roll-up's minimum per point (None: samples, not roll-ups)
    max_value: array | None = None  #: its maximum

    def __post_init__(self) -> None:
        if len(self.t_s) != len(self.value):
            raise ValueError("Series.t_s and value differ in length")
        for extreme in (self.min_value, self.max_value):
            if extreme is not None and len(extreme) != len(self.value):
                raise ValueError("Series.min_value and max_value must have value's length")


@dataclass(frozen=True, slots=True)
class HistoryPart:
    """What one collector answers to a history query (``query_history`` hook)."""

    source: str
    retained_from_s: float | None = None
    retained_to_s: float | None = None
    series: tuple[Series, ...] = ()
    problems: tuple[Problem, ...] = ()  #: what the collector could not answer, and why
