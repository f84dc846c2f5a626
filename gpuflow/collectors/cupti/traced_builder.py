"""Decoder state → the snapshot's TracedProcess, built incrementally at frame time, within a budget.

Both decoder twins hand out plain Python data (tuples of CUPTI-clock integers and name ids); this
module turns it into the contract's frozen dataclasses (gpuflow/core/snapshot.py):

* kernels: demangled for display (cached per name id), sorted by total time, descending; brought
  up to date at most every ``kernel_table_gap_s`` while the process runs (the collector's
  ``KERNEL_TABLE_GAP_S``), at once when it exits or a build is ``exact``: between, a build keeps
  the last table (the same object), so a running process's table is at most that much older than
  the rest of its entry;
* transfers: the directions seen, in TRANSFER_DIRECTIONS order;
* lanes: labelled with the stream's NVTX name, ``default`` for the context's null stream (from the
  CONTEXT record, never guessed from the number), else the stream id; spans mapped to wall-clock
  microseconds with the latest CLOCK_SYNC pair (the header's pair before any arrives);
* the window (earliest start / latest end among the spans shown) and how far behind live it is.

What one process adds to the snapshot is bounded here, in the JSON bytes ``/api/snapshot`` spends
on it (docs/decoder.md, "Caps"): ``process_bytes`` in all. The kernel table (the complete
aggregates) comes first: a kernel name is shown by name only while the kernel table's names fit
``kernel_table_bytes`` (decided once per name, when it first shows up, so a table never loses an
entry: the names beyond it count together, exactly, under ``(other kernel names)``, as do the
decoder's names beyond its ``max_names``); the lanes (a sample) have the rest, up to
``lanes_bytes``, their heads and spans together, each lane showing its newest spans within an
equal share. A name cut by the
decoder (NAME_TRUNCATED) ends in ``…``, and so does a demangled name longer than the demangler's
``MAX_CHARS``. A process's names are demangled until their demangled text reaches
``demangled_chars``; its further names are shown mangled, as they are from the first name the
demangler ran out of time on.

Constraints: runs up to 20 times a second on the collector's thread, so no Python object is made
per span: each lane's newest spans come from the decoder as columns (``lane_columns``: arrays
filled in C, at most what the share can hold), become the lane's
:class:`~gpuflow.core.recorded.SpanColumns`, and a lane whose executions, label and newest span
did not change keeps its Lane object. Spans are mapped to the wall clock with the clock pair of
the build (a new pair, once a second, can move a span already shown by a few microseconds). A JSON
cost is that of ``json.dumps`` with ASCII escapes, an upper bound of the agent's UTF-8 form,
computed once per name.
"""

from __future__ import annotations

import json
import time
from array import array
from collections import Counter
from typing import Callable

from gpuflow.collectors.cupti import _layout as L
from gpuflow.collectors.cupti import _retain_layout as RL
from gpuflow.collectors.cupti import kernel_table
from gpuflow.collectors.cupti.demangle import MAX_CHARS, demangle_in_time
from gpuflow.collectors.cupti.protocol import RingDecoder
from gpuflow.collectors.cupti.traced_activity import ActivityBuilder
from gpuflow.core.recorded import SpanColumns
from gpuflow.core.snapshot import KernelLaunch, KernelStat, Lane, TracedProcess, TransferStat

UNNAMED_KERNEL = "(unnamed kernel)"
OTHER_KERNELS = "(other kernel names)"
#: ends a name that was cut (by the producer at NAME_MAX, by the decoder at max_name_bytes, or here)
CUT_MARK = "…"
#: the JSON bytes one traced process may add to the snapshot, its kernel table's and lanes' together
#: (docs/decoder.md, "Caps"): 4.5 MiB, 4.72 MB, within the 5 MB of the hardening issue
PROCESS_JSON_BYTES = 9 << 19
#: the most of it the kernel table takes, with each name's launch configuration (``kernel_launches``,
#: which repeats its mangled form): 3.5 MiB, so that a thousand kernel names of 2 KB demangled (with
#: their mangled forms) each keep an entry and its launch configuration
KERNEL_TABLE_BYTES = 7 << 19
#: the most the lanes take (16 busy lanes of 512 spans named in ~200 characters fit whole), and
#: the least they have (what a full kernel table leaves)
LANES_BYTES = 7 << 19
LANES_MIN_BYTES = PROCESS_JSON_BYTES - KERNEL_TABLE_BYTES
#: the longest lane label (a stream's NVTX name), in UTF-8 bytes: real ones are a few words, and the
#: heads of 256 lanes must fit the least the lanes have (256 x (160 + 6 x 256 + 8) bytes: 0.44 MB)
LABEL_MAX_BYTES = 256
#: the demangled text (characters) one traced process's names may have: hundreds of real names of
#: thousands of characters each (names of a few KB mangled print tens of thousands)
DEMANGLED_CHARS = 4 << 20
#: a running process's kernel table is brought up to date at most this often (the collector's
#: choice; its lanes, counters and devices are at every build): at ~17 builds a second every kernel
#: of a busy program moves between two builds, and making and sending its ~200 entries each time was
#: a sixth of the agent's CPU and three fifths of the stream's bytes (docs/recorder.md)
KERNEL_TABLE_GAP_S = 0.25
#: upper bounds of the compact JSON of an entry besides its names (numbers of up to 24 digits)
KERNEL_JSON_FIXED = 200
LAUNCH_JSON_FIXED = 640
LANE_JSON_FIXED = 160
SPAN_JSON_FIXED = 224
_COPY_COST = SPAN_JSON_FIXED + len("null")  # a copy's or memset's span has no name

#: SpanColumns' fields, in the order of the decoders' lane_columns
_SPAN_FIELDS = ("seq", "start_us", "dur_ns", "kind", "name", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
                "block_z", "bytes", "direction")


def span_columns(columns: tuple[array, ...], names: tuple[str, ...]) -> SpanColumns:
    """``SpanColumns(**dict(zip(_SPAN_FIELDS, columns)), names=names)``, the same object, made
    without the constructor's checks of its arrays: these are a decoder's ``lane_columns``, 13
    array('q') of one length (~7 µs of Python a lane through the frozen dataclass's ``__init__``
    and ``__post_init__``, for each of ~700 lanes a second under bench/agent_rss.py)."""
    spans = object.__new__(SpanColumns)
    fields = spans.__dict__
    fields.update(zip(_SPAN_FIELDS, columns))
    fields["names"] = names
    return spans


def lane_label(name: str | None, null_stream: int | None, stream: int) -> str:
    """The label rule of docs/snapshot.md: NVTX name, ``default`` for the null stream, else the id."""
    if name:
        return name
    if null_stream is not None and null_stream == stream:
        return "default"
    return str(stream)


def json_cost(text: str) -> int:
    """The most JSON bytes ``text`` takes as a string in the snapshot (quotes included)."""
    return len(json.dumps(text))


def _entry_cost(display: str, mangled: str) -> int:
    """The most JSON bytes a kernel shown by name takes: its kernel table entry (both forms of
    its name) and its launch configuration's (the mangled form)."""
    return KERNEL_JSON_FIXED + LAUNCH_JSON_FIXED + json_cost(display) + 2 * json_cost(mangled)


def _marked(text: str, flags: int) -> str:
    return text + CUT_MARK if flags & L.FLAG_NAME_TRUNCATED else text


def _label_text(text: str) -> str:
    """A stream name for a lane label: at most LABEL_MAX_BYTES of UTF-8, a cut one marked."""
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= LABEL_MAX_BYTES:
        return text
    return raw[:LABEL_MAX_BYTES].decode("utf-8", "ignore").rstrip(CUT_MARK) + CUT_MARK


def _display(shown: str, flags: int) -> str:
    """A kernel name for display: at most MAX_CHARS characters (the demangler's), a cut one marked."""
    if len(shown) > MAX_CHARS:
        return shown[:MAX_CHARS] + CUT_MARK
    return _marked(shown, flags)


class _Other:
    """The sum of kernel entries, exactly: counts and times added, the least minimum, the most maximum."""

    __slots__ = ("count", "timed", "total", "min", "max")

    def __init__(self) -> None:
        self.count = self.timed = self.total = 0
        self.min: int | None = None
        self.max: int | None = None

    def add(self, count: int, timed: int, total: int, mn: int | None, mx: int | None) -> None:
        self.count += count
        self.timed += timed
        self.total += total
        if mn is not None and mx is not None:
            self.min = mn if self.min is None else min(self.min, mn)
            self.max = mx if self.max is None else max(self.max, mx)


class _LaneCache:
    """One lane's last Lane object (reused while nothing changed), its label and stream name."""

    __slots__ = ("lane", "last_seq", "label", "label_cost", "name_id", "name")

    def __init__(self) -> None:
        self.lane: Lane | None = None
        self.last_seq: int | None = None  # the newest span's seq in ``lane``
        self.label: str | None = None
        self.label_cost = 0
        self.name_id = 0  # the lane's stream name: its id and text (None: none)
        self.name: str | None = None


class TracedBuilder:
    """Builds the TracedProcess of one ring from its decoder, reusing what did not change.

    :param process_bytes, kernel_table_bytes, lanes_bytes: the JSON budget of the process, the
        most of it its kernel table takes, and the most its lanes take of what the table leaves
        (module docstring).
    :param demangled_chars: the demangled text its names may have in all.
    :param kernel_table_gap_s: its kernel table is brought up to date at most this often while it
        runs (0, the default: at every build; the collector passes ``KERNEL_TABLE_GAP_S``), by
        ``clock_ns`` (monotonic).
    """

    def __init__(self, pid: int, session: str, lane_span_cap: int, *,
                 process_bytes: int = PROCESS_JSON_BYTES, kernel_table_bytes: int = KERNEL_TABLE_BYTES,
                 lanes_bytes: int = LANES_BYTES, demangled_chars: int = DEMANGLED_CHARS,
                 kernel_table_gap_s: float = 0.0, clock_ns: Callable[[], int] = time.monotonic_ns) -> None:
        self.pid = pid
        self.session = session
        self._cap = lane_span_cap
        self._process_bytes = process_bytes
        self._kernel_table_bytes = min(kernel_table_bytes, process_bytes)
        self._lanes_bytes = lanes_bytes
        #: the demangled text its names may have (characters)
        self.demangled_budget = demangled_chars
        self._lanes: dict[tuple[int, int, int], _LaneCache] = {}
        #: by name id, the kernels shown by name: their latest KernelStat (kernel_table.refresh
        #: replaces one only when its figures move)
        self._kernels: dict[int, KernelStat] = {}
        #: the kernel table of the last build that brought it up to date, when (``clock_ns``) and at
        #: how many decoded records; ``kernel_table_gap_s`` apart at most while the process runs
        self._table: tuple[KernelStat, ...] | None = None
        #: the kernels' launch entries made with that table (traced_activity.launches): they follow
        #: it, brought up to date when it is
        self._launches: tuple[KernelLaunch, ...] = ()
        self._table_at_ns = 0
        self._table_records = -1
        self._records = 0   # decoded records at the last build
        self._table_gap_ns = max(0, round(kernel_table_gap_s * 1e9))
        self._clock_ns = clock_ns
        #: its devices, GPU busy share, copy bandwidth and kernels' occupancy (traced_activity)
        self.activity = ActivityBuilder()
        self._over_budget: set[int] = set()  # name ids shown as OTHER_KERNELS
        self._display: dict[int, str] = {0: UNNAMED_KERNEL, L.OTHER_NAME_ID: OTHER_KERNELS}
        #: name id -> the most JSON bytes a kernel span with that name takes (SPAN_JSON_FIXED + its name's)
        self._span_cost: dict[int, int] = {0: SPAN_JSON_FIXED + json_cost(UNNAMED_KERNEL),
                                           L.OTHER_NAME_ID: SPAN_JSON_FIXED + json_cost(OTHER_KERNELS)}
        #: the most any span of this process costs (its costliest name's, or a copy's)
        self._max_span_cost = max(_COPY_COST, *self._span_cost.values())
        self._kernel_bytes = 0
        self._other: KernelStat | None = None
        #: kernel names shown as "(other kernel names)" because the kernel table's budget was spent
        self.names_over_budget = 0
        #: the most spans the lanes' budget took out of one build (their executions stay counted)
        self.spans_over_budget = 0
        #: the JSON bytes the lanes had at the last build (what the kernel table leaves of the
        #: process's, up to ``lanes_bytes``)
        self.lanes_bytes = min(lanes_bytes, process_bytes)
        #: the JSON bytes each lane's spans had at the last build
        self.lane_share_bytes = self.lanes_bytes
        #: False once the demangler ran out of time on one of this process's names: the rest are
        #: shown mangled (docs/decoder.md, "Caps")
        self.demangling = True
        #: the demangled text this process's names have (characters), within ``demangled_chars``
        self.demangled_chars = 0
        #: C++ names shown mangled because the demangled text reached ``demangled_chars``
        self.names_past_demangled_budget = 0

    # -- what the flight recorder's answers borrow (any thread: plain dict reads) -------------
    def shown_name(self, name_id: int) -> str | None:
        """A kernel name as the snapshot shows it, if it is shown by its own name (None: not built
        yet, or counted among the other kernel names)."""
        shown = self._display.get(name_id)
        return None if shown is None or (shown == OTHER_KERNELS and name_id != L.OTHER_NAME_ID) else shown

    def label(self, key: tuple[int, int, int]) -> str | None:
        """A lane's label as the last build gave it (None: not built yet)."""
        cache = self._lanes.get(key)
        return None if cache is None else cache.label

    @staticmethod
    def _name(decoder: RingDecoder, name_id: int) -> tuple[str, int] | None:
        """One name from the decoder (never all of them: 4,096 names of 4 KiB are 16 MiB of text)."""
        return None if name_id == 0 else decoder.name(name_id)

    def _admit(self, decoder: RingDecoder, name_id: int) -> bool:
        """Decide once whether a kernel name is shown by name (its entry fits the table's budget)."""
        entry = self._name(decoder, name_id)
        mangled, flags = entry if entry is not None else ("", 0)
        marked = _marked(mangled, flags)
        room = self._kernel_table_bytes - self._kernel_bytes
        if name_id != 0 and _entry_cost("", marked) > room:
            display = ""   # no room even for its mangled form: not worth demangling
        else:
            display = _display(self._demangled(mangled, flags), flags) if mangled else UNNAMED_KERNEL
        mangled = marked
        cost = _entry_cost(display, mangled)
        if name_id != 0 and cost > room:
            self._over_budget.add(name_id)
            self._display[name_id] = OTHER_KERNELS
            self._span_cost[name_id] = self._span_cost[L.OTHER_NAME_ID]
            self.names_over_budget += 1
            return False
        self._kernel_bytes += cost
        self._display[name_id] = display
        self._span_cost[name_id] = SPAN_JSON_FIXED + json_cost(display)
        self._max_span_cost = max(self._max_span_cost, self._span_cost[name_id])
        self._kernels[name_id] = KernelStat(name=display, mangled=mangled, count=0, total_ns=0, min_ns=None,
                                            max_ns=None, timed=0)
        return True

    def _demangled(self, mangled: str, flags: int) -> str:
        """Demangled when it can be: an uncut name, while the demangler keeps to its time and the
        process's demangled text to its budget."""
        if not self.demangling or flags & L.FLAG_NAME_TRUNCATED:
            return mangled
        if self.names_past_demangled_budget:
            self.names_past_demangled_budget += mangled.startswith("_Z")
            return mangled
        text = demangle_in_time(mangled)
        if text is None:
            self.demangling = False
            return mangled
        if text is mangled or text == mangled:
            return mangled
        shown = min(len(text), MAX_CHARS)
        if self.demangled_chars + shown > self.demangled_budget:
            self.names_past_demangled_budget = 1
            return mangled
        self.demangled_chars += shown
        return text

    def _kernel_stats(self, decoder: RingDecoder) -> tuple[KernelStat, ...]:
        """The complete kernel table, in kernel order. Only a kernel whose figures moved gets a new
        KernelStat (kernel_table.refresh, compiled: 200 busy names refreshed and sorted in ~0.1 ms
        on the development VM); a name seen for the first time is admitted by name or counted
        among the others."""
        stats, ids, unknown = kernel_table.refresh(decoder.kernel_rows(), self._kernels)
        other = _Other()  # the kernels not shown by name
        for row in unknown:
            name_id, count, timed, total, mn, mx = row
            if name_id == L.OTHER_NAME_ID or name_id in self._over_budget or not self._admit(decoder, name_id):
                other.add(count, timed, total, mn, mx)
                continue
            admitted, admitted_ids, _ = kernel_table.refresh([row], self._kernels)
            stats += admitted
            ids += admitted_ids
        if other.count:
            kept = self._other
            if (kept is None or kept.count != other.count or kept.total_ns != other.total
                    or kept.timed != other.timed or kept.min_ns != other.min or kept.max_ns != other.max):
                kept = self._other = KernelStat(name=OTHER_KERNELS, mangled="", count=other.count,
                                                total_ns=other.total, min_ns=other.min, max_ns=other.max,
                                                timed=other.timed)
            stats.append(kept)
            ids.append(L.OTHER_NAME_ID)
        return kernel_table.ordered(stats, ids)   # kernel_order, ties by name id as the rows come

    @staticmethod
    def _fitting(names: array, costs: list[int], share: int) -> int:
        """How many of a lane's newest spans fit ``share`` JSON bytes: a kernel span costs what its
        name's does (``costs``, by the name column's local index), a copy or memset ``_COPY_COST``.
        Counting is done by ``Counter`` over the column (C speed); spans are looked at one by one
        only when some must be left out, oldest first."""
        counts = Counter(names)
        total = counts.pop(-1, 0) * _COPY_COST + sum(costs[local] * n for local, n in counts.items())
        start = 0
        while total > share and start < len(names):
            local = names[start]
            total -= _COPY_COST if local < 0 else costs[local]
            start += 1
        return len(names) - start

    def _label(self, decoder: RingDecoder, cache: _LaneCache, name_id: int, null_stream: int | None,
               stream: int) -> str:
        if name_id != cache.name_id:  # a defined name never changes: looked up when the lane's changes
            entry = self._name(decoder, name_id)
            cache.name_id, cache.name = name_id, None if entry is None else _label_text(_marked(*entry))
        return lane_label(cache.name, null_stream, stream)

    def kernels_due(self, exact: bool = False) -> bool:
        """Whether the last build's kernel table is behind its records, and has been brought up to
        date ``kernel_table_gap_s`` ago or more (``exact``: at all): the collector then builds, even
        if nothing else changed, so that a process gone quiet has its exact table that much later."""
        return self._records != self._table_records and (
            exact or self._clock_ns() - self._table_at_ns >= self._table_gap_ns)

    def _kernel_table(self, decoder: RingDecoder, records: int, exact: bool) -> tuple[tuple[KernelStat, ...], bool]:
        """The kernel table, and whether it is the last one kept: brought up to date if ``exact``,
        if none was made yet, or if records came since and ``kernel_table_gap_s`` has passed; else
        the last one (the same object)."""
        now = self._clock_ns()
        if (self._table is None or exact
                or (records != self._table_records and now - self._table_at_ns >= self._table_gap_ns)):
            self._table, self._table_at_ns, self._table_records = self._kernel_stats(decoder), now, records
            return self._table, False
        return self._table, records != self._table_records

    def build(self, decoder: RingDecoder, *, name: str | None, state: str, exit_status: int | None,
              truncated: bool, now_ns: int, exact: bool = False) -> TracedProcess:
        """The process as the decoder sees it now (``now_ns``: wall clock, for behind-live).
        ``exact``: its kernel table too, whatever ``kernel_table_gap_s`` (an exited process's always is)."""
        header = decoder.header()
        counters = decoder.counters()
        self._records = records = counters["records"]
        clock = decoder.clock()
        offset = 0 if clock is None else clock[1] - clock[0]
        if not -RL.TIME_LIMIT < offset < RL.TIME_LIMIT:   # a pair no real clock gives: CUPTI's own
            offset = 0
        nulls = decoder.null_streams()
        devices = self.activity.devices(decoder, offset_ns=None if clock is None else offset, now_ns=now_ns,
                                        exited=state == "exited", flush_ms=header["flush_ms"])
        table = self._table
        kernels, table_kept = self._kernel_table(decoder, records, exact or state == "exited")
        if kernels is not table:   # brought up to date (or made first): so are its launch entries
            self._launches = self.activity.launches(decoder, self._kernels, now_ns)
        launches = self._launches
        transfers = tuple(TransferStat(direction=d, count=c, bytes=b, total_ns=t, timed=timed)
                          for d, c, timed, b, t in decoder.transfers() if c)
        # the lanes' heads first (labels, no spans): they decide each lane's share of the budget
        heads = decoder.lanes(newest=0)
        labels = {}
        head_bytes = 0
        for dev, ctx, stream, _executions, _kept, name_id, _none in heads:
            cache = self._lanes.get((dev, ctx, stream))
            if cache is None:
                cache = self._lanes[(dev, ctx, stream)] = _LaneCache()
            label = self._label(decoder, cache, name_id, nulls.get((dev, ctx)), stream)
            if label != cache.label:
                cache.label, cache.label_cost = label, json_cost(label)
            labels[(dev, ctx, stream)] = label
            head_bytes += LANE_JSON_FIXED + cache.label_cost
        self.lanes_bytes = min(self._lanes_bytes, self._process_bytes - self._kernel_bytes)
        share = self.lane_share_bytes = max(0, self.lanes_bytes - head_bytes) // max(1, len(heads))
        newest = min(self._cap, share // SPAN_JSON_FIXED)
        lanes = []
        window_start = window_end = None
        display, span_cost = self._display, self._span_cost
        over = 0
        for dev, ctx, stream, executions, kept, _name_id, columns, name_ids in decoder.lane_columns(offset, newest):
            if table_kept and not all(map(display.__contains__, name_ids)):
                # names first seen since the kernel table was last brought up to date: admitted
                # now, by the rule the table's update follows, so that their spans have their name
                for name_id in name_ids:
                    if name_id not in display:
                        self._admit(decoder, name_id)
            key = (dev, ctx, stream)
            cache = self._lanes[key]
            n = len(columns[0])
            if n * self._max_span_cost <= share:   # even at the costliest span they all fit
                shown = n
            else:
                shown = self._fitting(columns[4], list(map(span_cost.__getitem__, name_ids)), share)
            over = max(over, min(kept, self._cap) - shown)   # what the budget kept out of this build
            if shown < n:
                columns = tuple(column[n - shown:] for column in columns)
            label = labels[key]
            lane = cache.lane
            last_seq = columns[0][-1] if shown else None
            if (lane is None or lane.executions != executions or lane.label != label
                    or len(lane.spans) != shown or cache.last_seq != last_seq):
                spans = span_columns(columns, tuple(map(display.__getitem__, name_ids)))
                lane = cache.lane = Lane(device=dev, context=ctx, stream=stream, label=label,
                                         executions=executions, spans_elided=executions - shown, spans=spans)
                cache.last_seq = last_seq
            lanes.append(lane)
            if shown:
                # spans of one stream run one after another: the first starts earliest, the last ends latest
                starts, durations = columns[1], columns[2]
                end_us = starts[-1] + durations[-1] // 1000
                window_start = starts[0] if window_start is None else min(window_start, starts[0])
                window_end = end_us if window_end is None else max(window_end, end_us)
        self.spans_over_budget = max(self.spans_over_budget, over)
        behind = None
        if window_end is not None and clock is not None:
            behind = round((now_ns - window_end * 1000) / 1e6, 1)
        invalid = counters["invalid_records"] > 0
        return TracedProcess(
            pid=self.pid,
            session=self.session,
            name=name,
            state=state,
            exit_status=exit_status,
            truncated=truncated or invalid,
            cupti_status=header["status_name"],
            cupti_detail=header["status_detail"],
            records=records,
            dropped_ring=header["dropped_ring"],
            dropped_cupti=header["dropped_cupti"],
            kernels=kernels,
            transfers=transfers,
            lanes=tuple(lanes),
            translate_cpu_ns=header["translate_cpu_ns"],
            window_start_us=window_start,
            window_end_us=window_end,
            behind_live_ms=behind,
            devices=devices,
            kernel_launches=launches,
        )
