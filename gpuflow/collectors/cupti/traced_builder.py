"""Decoder state → the snapshot's TracedProcess, built incrementally at frame time.

Both decoder twins hand out plain Python data (tuples of CUPTI-clock integers and name ids); this
module turns it into the contract's frozen dataclasses (gpuflow/core/snapshot.py):

* kernels: demangled for display (cached per name id), sorted by total time, descending;
* transfers: the directions seen, in TRANSFER_DIRECTIONS order;
* lanes: labelled with the stream's NVTX name, ``default`` for the context's null stream (from the
  CONTEXT record, never guessed from the number), else the stream id; spans mapped to wall-clock
  microseconds with the latest CLOCK_SYNC pair (the header's pair before any arrives);
* the window (earliest start / latest end among the spans shown) and how far behind live it is.

Constraints: runs up to 20 times a second on the collector's thread; each Span object is made once,
when its record first shows up (``lanes(after_seq=...)``), and kept per lane in a deque capped like
the decoder's own buffer, so a build costs O(new spans + lanes + kernel names). A span's wall time is
therefore mapped with the clock pair known when it was first reported.
"""

from __future__ import annotations

from collections import deque

from gpuflow.collectors.cupti.demangle import demangle
from gpuflow.collectors.cupti.protocol import RingDecoder
from gpuflow.core.frozen import positional_constructor
from gpuflow.core.snapshot import KernelStat, Lane, Span, TracedProcess, TransferStat, kernel_order

UNNAMED_KERNEL = "(unnamed kernel)"

#: A Span from its fields, positionally, without ``__init__``'s setattr calls (Span objects are
#: the dominant cost of a build): gpuflow.core.frozen.
_make_span = positional_constructor(Span)


def lane_label(name: str | None, null_stream: int | None, stream: int) -> str:
    """The label rule of docs/snapshot.md: NVTX name, ``default`` for the null stream, else the id."""
    if name:
        return name
    if null_stream is not None and null_stream == stream:
        return "default"
    return str(stream)


class _LaneCache:
    __slots__ = ("spans", "lane")

    def __init__(self, cap: int) -> None:
        self.spans: deque[Span] = deque(maxlen=cap)
        self.lane: Lane | None = None


class TracedBuilder:
    """Builds the TracedProcess of one ring from its decoder, reusing what did not change."""

    def __init__(self, pid: int, session: str, lane_span_cap: int) -> None:
        self.pid = pid
        self.session = session
        self._cap = lane_span_cap
        self._after_seq = -1
        self._lanes: dict[tuple[int, int, int], _LaneCache] = {}
        self._kernels: dict[int, tuple[int, int, KernelStat]] = {}
        self._names: dict[int, tuple[str, int]] = {}

    def _name(self, decoder: RingDecoder, name_id: int) -> str | None:
        if name_id == 0:
            return None
        entry = self._names.get(name_id)
        if entry is None:
            self._names = decoder.names()  # a new name was defined since the last build
            entry = self._names.get(name_id)
        return None if entry is None else entry[0]

    def _kernel_stats(self, decoder: RingDecoder) -> tuple[KernelStat, ...]:
        out = []
        for name_id, count, timed, total, mn, mx in decoder.kernels():
            cached = self._kernels.get(name_id)
            if cached is not None and cached[0] == count and cached[1] == total:
                out.append(cached[2])
                continue
            mangled = self._name(decoder, name_id) or ""
            display = demangle(mangled) if mangled else UNNAMED_KERNEL
            stat = KernelStat(name=display, mangled=mangled, count=count, total_ns=total,
                              min_ns=mn, max_ns=mx, timed=timed)
            self._kernels[name_id] = (count, total, stat)
            out.append(stat)
        out.sort(key=kernel_order)
        return tuple(out)

    def build(self, decoder: RingDecoder, *, name: str | None, state: str, exit_status: int | None,
              truncated: bool, now_ns: int) -> TracedProcess:
        """The process as the decoder sees it now (``now_ns``: wall clock, for behind-live)."""
        header = decoder.header()
        counters = decoder.counters()
        clock = decoder.clock()
        offset = 0 if clock is None else clock[1] - clock[0]
        nulls = decoder.null_streams()
        kernels = self._kernel_stats(decoder)
        transfers = tuple(TransferStat(direction=d, count=c, bytes=b, total_ns=t, timed=timed)
                          for d, c, timed, b, t in decoder.transfers() if c)
        lanes = []
        window_start = window_end = None
        max_seq = self._after_seq
        display = {nid: entry[2].name for nid, entry in self._kernels.items()}
        display[0] = UNNAMED_KERNEL
        make = _make_span
        for dev, ctx, stream, executions, kept, name_id, new in decoder.lanes(self._after_seq):
            key = (dev, ctx, stream)
            cache = self._lanes.get(key)
            if cache is None:
                cache = self._lanes[key] = _LaneCache(self._cap)
            if new:
                append = cache.spans.append
                for seq, kind, start, end, nid, grid, block, nbytes, direction in new:
                    append(make(seq, kind, (start + offset) // 1000, end - start,
                                display[nid] if grid is not None else None, grid, block, nbytes, direction))
                max_seq = max(max_seq, new[-1][0])
            label = lane_label(self._name(decoder, name_id), nulls.get((dev, ctx)), stream)
            lane = cache.lane
            if (new or lane is None or lane.executions != executions or lane.label != label
                    or len(lane.spans) != kept):
                spans = tuple(cache.spans)
                assert len(spans) == kept, (key, len(spans), kept)
                lane = cache.lane = Lane(device=dev, context=ctx, stream=stream, label=label,
                                         executions=executions, spans_elided=executions - kept,
                                         spans=spans)
            lanes.append(lane)
            if lane.spans:
                # spans of one stream run one after another: the first starts earliest, the last ends latest
                first, last = lane.spans[0], lane.spans[-1]
                end_us = last.start_us + last.dur_ns // 1000
                window_start = first.start_us if window_start is None else min(window_start, first.start_us)
                window_end = end_us if window_end is None else max(window_end, end_us)
        self._after_seq = max_seq
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
            records=counters["records"],
            dropped_ring=header["dropped_ring"],
            dropped_cupti=header["dropped_cupti"],
            kernels=kernels,
            transfers=transfers,
            lanes=tuple(lanes),
            translate_cpu_ns=header["translate_cpu_ns"],
            window_start_us=window_start,
            window_end_us=window_end,
            behind_live_ms=behind,
        )
