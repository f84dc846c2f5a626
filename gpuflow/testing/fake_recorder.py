"""What the fake collector retains: its generated spans and readings over a bounded window.

The fake collector's flight recorder (gpuflow.testing.fake_collector), so that the recorder's
routes, the exports and the page can be tested end to end without a GPU: every span the fake
scenario makes is kept, per traced process and lane, in blocks of one tick each; every device's
readings and every process's per-device readings are kept as time series. Both are bounded: at
most ``retain_s`` seconds and ``retain_spans`` spans; the oldest tick leaves first, and a window
that reaches back into what left says it is not complete.

It answers the recorder's hooks as a real collector must (docs/recorder.md): ``query_window``
with exact :class:`~gpuflow.core.recorded.SpanColumns`, or per lane :class:`SpanBuckets` when a
lane has more executions in the window than the asked pixel width; ``query_history`` with one
:class:`Series` per (entity, metric), NaN where a reading was not available.

Constraints: plain Python (a test double, not the real recorder's columnar store); thread-safe
(the fake's thread adds while a server thread asks); times are the scenario's wall clock.
"""

from __future__ import annotations

import bisect
import math
import threading
from array import array
from collections import deque
from dataclasses import dataclass, field

from gpuflow.core.recorded import (
    HistoryPart, LaneWindow, ProcessWindow, Series, SpanBuckets, SpanColumns, WindowPart,
)
from gpuflow.core.snapshot import Device, Process, Span

#: (snapshot field, unit) of the device readings kept over time
DEVICE_METRICS = (("utilization_gpu_pct", "%"), ("utilization_memory_pct", "%"), ("memory_used_bytes", "bytes"),
                  ("temperature_c", "C"), ("power_draw_w", "W"), ("clock_sm_mhz", "MHz"),
                  ("pcie_tx_bytes_per_s", "bytes/s"), ("pcie_rx_bytes_per_s", "bytes/s"))
#: (attachment field, unit) of a process's readings on a device
PROCESS_METRICS = (("memory_used_bytes", "bytes"), ("sm_util_pct", "%"), ("mem_util_pct", "%"))


@dataclass
class _Tick:
    """One tick of one traced process: each lane's new spans (oldest first)."""

    first_start_us: int
    spans: dict[tuple[int, int, int], list[Span]]
    count: int


@dataclass
class _Traced:
    pid: int
    session: str
    name: str | None
    lanes: dict[tuple[int, int, int], str] = field(default_factory=dict)  #: key -> label
    ticks: deque = field(default_factory=deque)
    last_end_us: int | None = None
    #: the latest start among evicted spans (None: nothing evicted yet)
    evicted_through_us: int | None = None


class FakeRecorder:
    """Retains what the fake scenario makes and answers the recorder's queries from it."""

    def __init__(self, source: str, retain_s: float, retain_spans: int, resolution_s: float) -> None:
        self.source = source
        self.retain_s = retain_s
        self.retain_spans = retain_spans
        self.resolution_s = resolution_s
        self._lock = threading.Lock()
        self._traced: dict[int, _Traced] = {}
        self._held = 0
        self._series: dict[tuple[tuple[str, ...], str], tuple[str, array, array]] = {}

    # -- what the scenario adds --------------------------------------------------------------
    def add_spans(self, pid: int, session: str, name: str | None,
                  lanes: dict[tuple[int, int, int], tuple[str, list[Span]]], now_s: float) -> None:
        """One tick's new spans of a traced process: lane key (device, context, stream) ->
        (label, spans)."""
        spans = {key: list(s) for key, (_, s) in lanes.items() if s}
        if not spans:
            return
        with self._lock:
            t = self._traced.setdefault(pid, _Traced(pid, session, name))
            for key, (label, _) in lanes.items():
                t.lanes[key] = label
            count = sum(len(s) for s in spans.values())
            t.ticks.append(_Tick(min(s[0].start_us for s in spans.values()), spans, count))
            ends = [sp.start_us + sp.dur_ns // 1000 for s in spans.values() for sp in s]
            t.last_end_us = max(ends + ([t.last_end_us] if t.last_end_us is not None else []))
            self._held += count
            self._evict(now_s)

    def add_readings(self, now_s: float, devices: tuple[Device, ...], processes: tuple[Process, ...]) -> None:
        with self._lock:
            for d in devices:
                for metric, unit in DEVICE_METRICS:
                    self._point(("device", d.uuid), metric, unit, now_s, getattr(d, metric))
            for p in processes:
                for a in p.attachments:
                    for metric, unit in PROCESS_METRICS:
                        self._point(("process", str(p.pid), a.device_uuid), metric, unit, now_s, getattr(a, metric))
            oldest = now_s - self.retain_s
            for _, t_s, value in self._series.values():
                drop = bisect.bisect_left(t_s, oldest)
                if drop:
                    del t_s[:drop]
                    del value[:drop]

    def _point(self, entity: tuple[str, ...], metric: str, unit: str, t_s: float, value: float | None) -> None:
        _, times, values = self._series.setdefault((entity, metric), (unit, array("d"), array("d")))
        times.append(t_s)
        values.append(math.nan if value is None else float(value))

    def _evict(self, now_s: float) -> None:
        oldest_us = (now_s - self.retain_s) * 1e6
        while True:
            candidates = [t for t in self._traced.values() if t.ticks]
            if not candidates:
                return
            t = min(candidates, key=lambda c: c.ticks[0].first_start_us)
            tick = t.ticks[0]
            if self._held <= self.retain_spans and tick.first_start_us >= oldest_us:
                return
            t.ticks.popleft()
            self._held -= tick.count
            latest = max(sp.start_us for s in tick.spans.values() for sp in s)
            t.evicted_through_us = latest if t.evicted_through_us is None else max(t.evicted_through_us, latest)

    # -- the hooks' answers ------------------------------------------------------------------
    def window(self, start_s: float, end_s: float, pid: int | None, width_px: int | None) -> WindowPart:
        lo_us, hi_us = start_s * 1e6, end_s * 1e6
        with self._lock:
            processes = []
            for t in sorted(self._traced.values(), key=lambda t: t.pid):
                if pid is not None and t.pid != pid:
                    continue
                first = t.ticks[0].first_start_us if t.ticks else None
                per_lane: dict[tuple[int, int, int], list[Span]] = {key: [] for key in t.lanes}
                for tick in t.ticks:
                    for key, spans in tick.spans.items():
                        starts = [s.start_us for s in spans]
                        per_lane[key].extend(spans[bisect.bisect_left(starts, lo_us):bisect.bisect_left(starts, hi_us)])
                lanes = tuple(self._lane(key, t.lanes[key], spans, lo_us, hi_us, width_px)
                              for key, spans in sorted(per_lane.items()) if spans)
                complete = t.evicted_through_us is None or t.evicted_through_us < lo_us
                processes.append(ProcessWindow(
                    pid=t.pid, session=t.session, name=t.name,
                    retained_from_s=first / 1e6 if first is not None else None,
                    retained_to_s=t.last_end_us / 1e6 if first is not None and t.last_end_us is not None else None,
                    lanes=lanes, complete=complete))
        return WindowPart(source=self.source, processes=tuple(processes))

    @staticmethod
    def _lane(key: tuple[int, int, int], label: str, spans: list[Span], lo_us: float, hi_us: float,
              width_px: int | None) -> LaneWindow:
        device, context, stream = key
        if width_px is None or len(spans) <= width_px:
            return LaneWindow(device=device, context=context, stream=stream, label=label, executions=len(spans),
                              spans=SpanColumns.from_spans(spans))
        width_us = (hi_us - lo_us) / width_px
        count, busy = [0] * width_px, [0.0] * width_px
        for s in spans:
            count[min(width_px - 1, int((s.start_us - lo_us) / width_us))] += 1
            begin, end = float(s.start_us), s.start_us + s.dur_ns / 1000
            j = min(width_px - 1, int((begin - lo_us) / width_us))
            while j < width_px and begin < end:
                edge = lo_us + (j + 1) * width_us
                busy[j] += (min(end, edge) - begin) * 1000
                begin, j = edge, j + 1
        busy_ns = array("q", (min(int(b), int(width_us * 1000)) for b in busy))
        return LaneWindow(device=device, context=context, stream=stream, label=label, executions=len(spans),
                          buckets=SpanBuckets(start_us=lo_us, width_us=width_us, count=array("q", count),
                                              busy_ns=busy_ns))

    def history(self, start_s: float, end_s: float) -> HistoryPart:
        with self._lock:
            series = []
            froms, tos = [], []
            for (entity, metric), (unit, t_s, value) in sorted(self._series.items()):
                if len(t_s):
                    froms.append(t_s[0])
                    tos.append(t_s[-1])
                a, b = bisect.bisect_left(t_s, start_s), bisect.bisect_left(t_s, end_s)
                series.append(Series(entity=entity, metric=metric, unit=unit, resolution_s=self.resolution_s,
                                     t_s=t_s[a:b], value=value[a:b]))
        return HistoryPart(source=self.source, retained_from_s=min(froms) if froms else None,
                           retained_to_s=max(tos) if tos else None,
                           series=tuple(s for s in series if len(s.t_s)))
