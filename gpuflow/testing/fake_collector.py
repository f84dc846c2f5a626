"""A scripted fake collector: synthetic GPUs, processes and traced processes at a set frame rate.

Used by the transport tests, the SSE fan-out bench and the browser UI tests, anywhere a real GPU
is absent. It is an ordinary collector plugin (module-level ``@hookimpl`` functions, state in
``context.slots``), loaded with ``--plugin gpuflow.testing.fake_collector`` or
``GPUFLOW_PLUGINS=gpuflow.testing.fake_collector``.

Every tick (``rate_hz`` per second) it builds one new :class:`SnapshotPart` and calls
``context.notify()``; between ticks ``produce_snapshot`` returns the *same* object, so the agent
publishes exactly one snapshot per tick. Traced processes carry lanes whose spans have strictly
increasing ``seq`` (per traced process), capped per lane with an exact ``spans_elided``.

It also retains what it made, as a collector with a flight recorder does: every span and every
reading of the last ``retain_s`` seconds (at most ``retain_spans`` spans), answered through the
``query_window`` and ``query_history`` hooks (gpuflow.testing.fake_recorder). Like the CUPTI
collector after its final drain, it keeps answering them after ``stop_collecting``.

Options (declared through ``declare_options`` under the key ``fake``), each from
``AgentConfig.options["fake"][<name>]``, else the environment (``GPUFLOW_FAKE_<NAME>``), else the
default:

=========== ======= ===================================================================
name        default meaning
=========== ======= ===================================================================
rate_hz     10      new parts per second; 0 = one part at start, then nothing changes
gpus        2       devices
procs       3       processes; the first holds every GPU, the others one each
traced      1       traced processes
lanes       4       lanes per traced process (lane 0 is the null stream, ``default``)
spans       4       new spans per lane per tick
span_cap    64      spans kept per lane
retain_s    60      seconds of spans and readings retained for the recorder's queries
retain_spans 2000000 spans retained at most (the oldest tick leaves first)
seed        0       seeds the jitter, so runs are reproducible
lost_gpu    (none)  index of a GPU reported lost (readings null)
problem     (none)  text of a warning Problem to report
stop_file   (none)  path written with "stopped" by ``stop_collecting`` (tests check shutdown)
=========== ======= ===================================================================

Constraints: no GPU, no I/O except the optional stop file; deterministic given the seed and the
clock; one background thread per agent, stopped by ``stop_collecting`` within a tick.
"""

from __future__ import annotations

import math
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from gpuflow import hookimpl
from gpuflow.core.options import Option, PluginOptions
from gpuflow.core.recorded import HistoryPart, SpanColumns, WindowPart
from gpuflow.core.snapshot import (
    Attachment,
    Device,
    HostInfo,
    KernelStat,
    Lane,
    Problem,
    Process,
    SnapshotPart,
    Span,
    TracedProcess,
    TransferStat,
    TRANSFER_DIRECTIONS,
)

from gpuflow.testing.fake_recorder import FakeRecorder

SOURCE = "fake"
SLOT = __name__
RECORDER_SLOT = __name__ + ".recorder"  #: outlives stop_collecting: the retained window stays
SESSION = "fakesession0001"

GIB = 1 << 30

#: (demangled, mangled, grid, block) of the kernels the fake program "launches".
KERNELS = (
    ("gemm_kernel<float, 128>(float const*, float const*, float*, int)",
     "_Z11gemm_kernelIfLi128EEvPKT_S2_PS0_i", (256, 4, 1), (128, 1, 1)),
    ("attention_fwd(float const*, float*, int)", "_Z13attention_fwdPKfPfi", (512, 1, 1), (256, 1, 1)),
    ("layer_norm(float*, int)", "_Z10layer_normPfi", (64, 1, 1), (1024, 1, 1)),
    ("reduce_sum<512>(float const*, float*)", "_Z10reduce_sumILi512EEvPKfPf", (120, 1, 1), (512, 1, 1)),
)
NVTX_LABELS = ("compute", "copy-engine", "prefetch")


def _number(kind: type) -> Callable[[Any], Any]:
    """A converter to ``kind`` (int or float) that refuses negative values."""
    def convert(value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"expected {kind.__name__}, got {value!r}")
        try:
            number = kind(value)
        except (TypeError, ValueError):
            raise ValueError(f"expected {kind.__name__}, got {value!r}") from None
        if number != number or number < 0:
            raise ValueError(f"must be >= 0, got {value!r}")
        return number
    return convert


def _text(value: Any) -> str:
    return str(value)


#: (name, converter, default, help): each also read from ``GPUFLOW_FAKE_<NAME>``
_SETTINGS: tuple[tuple[str, Callable[[Any], Any], Any, str], ...] = (
    ("rate_hz", _number(float), 10.0, "new parts per second; 0 = one part at start"),
    ("gpus", _number(int), 2, "devices"),
    ("procs", _number(int), 3, "processes; the first holds every GPU, the others one each"),
    ("traced", _number(int), 1, "traced processes"),
    ("lanes", _number(int), 4, "lanes per traced process"),
    ("spans", _number(int), 4, "new spans per lane per tick"),
    ("span_cap", _number(int), 64, "spans kept per lane"),
    ("retain_s", _number(float), 60.0, "seconds of spans and readings retained"),
    ("retain_spans", _number(int), 2_000_000, "spans retained at most"),
    ("seed", _number(int), 0, "seeds the jitter"),
    ("lost_gpu", _number(int), None, "index of a GPU reported lost"),
    ("problem", _text, None, "text of a warning Problem to report"),
    ("stop_file", _text, None, "path written with 'stopped' by stop_collecting"),
)
OPTIONS = PluginOptions("fake", tuple(
    Option(name, convert, default, help, env=f"GPUFLOW_FAKE_{name.upper()}")
    for name, convert, default, help in _SETTINGS))


@dataclass(frozen=True)
class FakeOptions:
    rate_hz: float = 10.0
    gpus: int = 2
    procs: int = 3
    traced: int = 1
    lanes: int = 4
    spans: int = 4
    span_cap: int = 64
    retain_s: float = 60.0
    retain_spans: int = 2_000_000
    seed: int = 0
    lost_gpu: int | None = None
    problem: str | None = None
    stop_file: str | None = None


class FakeScenario:
    """Builds successive parts; pure apart from its own counters (no threads, no clock reads)."""

    def __init__(self, opts: FakeOptions, show_cmdline: bool, recorder: FakeRecorder | None = None) -> None:
        self.opts = opts
        self.recorder = recorder
        self.show_cmdline = show_cmdline
        self.span_cap = opts.span_cap
        self.rng = random.Random(opts.seed)
        self.tick = 0
        self.last_now: float | None = None
        self.traced = [_TracedState(pid=5000 + t) for t in range(opts.traced)]
        self.uuids = [f"GPU-fake0000-0000-0000-0000-{i:012d}" for i in range(opts.gpus)]

    def step(self, now: float) -> SnapshotPart:
        """The part for the tick ending at wall-clock ``now`` (seconds)."""
        start = self.last_now if self.last_now is not None else now - 0.1
        self.last_now = now
        self.tick += 1
        problems = ()
        if self.opts.problem:
            problems = (Problem(SOURCE, self.opts.problem, "warning"),)
        if self.opts.lost_gpu is not None and self.opts.lost_gpu < self.opts.gpus:
            problems += (Problem(SOURCE, f"GPU {self.opts.lost_gpu} is lost (simulated)", "error"),)
        devices = tuple(self._device(i) for i in range(self.opts.gpus))
        processes = tuple(self._process(k) for k in range(self.opts.procs))
        if self.recorder is not None:
            self.recorder.add_readings(now, devices, processes)
        return SnapshotPart(
            source=SOURCE,
            host=HostInfo(hostname="fakehost", driver_version="000.00 (fake)",
                          nvml_version="00.000.00 (fake)", cuda_driver_version="13.0"),
            devices=devices,
            processes=processes,
            traced=tuple(self._traced(t, start, now) for t in self.traced),
            problems=problems,
        )

    # -- devices and processes ---------------------------------------------------------------
    def _wave(self, i: int, lo: float, hi: float) -> float:
        phase = self.tick / 10.0 + i
        return round(lo + (hi - lo) * (0.5 + 0.45 * math.sin(phase)) + self.rng.uniform(-1, 1), 1)

    def _device(self, i: int) -> Device:
        if i == self.opts.lost_gpu:
            return Device(index=i, uuid=self.uuids[i], name="GPUFlow Fake GPU", lost=True)
        total = 80 * GIB
        return Device(
            index=i, uuid=self.uuids[i], name="GPUFlow Fake GPU",
            pci_bus_id=f"00000000:{0x19 + i:02X}:00.0",
            utilization_gpu_pct=max(0.0, min(100.0, self._wave(i, 5, 100))),
            utilization_memory_pct=max(0.0, min(100.0, self._wave(i + 3, 0, 60))),
            memory_used_bytes=int(total * (0.2 + 0.1 * (i % 3))),
            memory_total_bytes=total,
            temperature_c=self._wave(i, 35, 75),
            power_draw_w=self._wave(i, 80, 650),
            power_limit_w=700.0,
            clock_sm_mhz=1980, clock_mem_mhz=3201,
            pcie_tx_bytes_per_s=int(self._wave(i, 0, 1000)) * 1_000_000,
            pcie_rx_bytes_per_s=None if i % 2 else int(self._wave(i + 1, 0, 1000)) * 1_000_000,
            mig_mode="disabled",
        )

    def _process(self, k: int) -> Process:
        gpus = self.opts.gpus
        held = range(gpus) if k == 0 else ([(k - 1) % gpus] if gpus else [])
        last = k == self.opts.procs - 1 and k > 0
        attachments = tuple(
            Attachment(device_index=i, device_uuid=self.uuids[i], kind="compute",
                       memory_used_bytes=(2 + k) * GIB,
                       sm_util_pct=max(0.0, self._wave(i + k, 0, 90)),
                       mem_util_pct=None if last else max(0.0, self._wave(i + k + 1, 0, 40)))
            for i in held
        )
        name = "trainer" if k == 0 else f"worker{k}"
        cmd = f"python {name}.py --lr 3e-4 --api-key=SECRET{k}" if self.show_cmdline else "python"
        return Process(pid=4000 + k, name=name, user=("alice", "bob")[k % 2], cmdline=cmd,
                       attachments=attachments)

    # -- traced processes ----------------------------------------------------------------------
    def _traced(self, t: _TracedState, start: float, now: float) -> TracedProcess:
        n_lanes, per_lane = self.opts.lanes, self.opts.spans
        span_s = (now - start) / max(1, per_lane)
        behind_s = 0.08
        made: dict[tuple[int, int, int], tuple[str, list[Span]]] = {}
        for lane_i in range(n_lanes):
            lane = t.lane(lane_i, max(1, self.opts.gpus))
            new = made.setdefault((lane.device, 1, lane.stream), (lane.label, []))[1]
            for j in range(per_lane):
                t0_us = int((start - behind_s + j * span_s) * 1e6)
                span = self._span(t, lane_i, j, t0_us, span_s)
                new.append(span)
                t.add(lane, span, self.span_cap)
        if self.recorder is not None:
            self.recorder.add_spans(t.pid, SESSION, "fake_workload", made, now)
        lanes = tuple(l.freeze() for l in t.lanes)
        starts = [l.spans[0].start_us for l in lanes if l.spans]
        ends = [s.start_us + s.dur_ns // 1000 for l in lanes for s in l.spans[-1:]]
        window_end = max(ends) if ends else None
        return TracedProcess(
            pid=t.pid, session=SESSION, name="fake_workload", state="running",
            cupti_status="ok", records=t.next_seq,
            kernels=tuple(sorted((KernelStat(n, m, c, tot, lo, hi)
                                  for n, (m, c, tot, lo, hi) in t.kernels.items()),
                                 key=lambda k: k.total_ns, reverse=True)),
            transfers=tuple(TransferStat(d, *t.transfers[d])
                            for d in TRANSFER_DIRECTIONS if d in t.transfers),
            lanes=lanes,
            translate_cpu_ns=t.next_seq * 30,   # about what the injected library spends a record
            window_start_us=min(starts) if starts else None,
            window_end_us=window_end,
            behind_live_ms=None if window_end is None else round(now * 1e3 - window_end / 1e3, 3),
        )

    def _span(self, t: _TracedState, lane_i: int, j: int, t0_us: int, span_s: float) -> Span:
        seq = t.next_seq
        t.next_seq += 1
        dur_ns = max(1000, int(span_s * 1e9 * self.rng.uniform(0.3, 0.8)))
        copy_lane = 2 if self.opts.lanes > 2 else self.opts.lanes - 1
        if lane_i == copy_lane and lane_i > 0 and (j % 2 == 0 or seq % 7 == 0):
            direction = ("h2d", "d2h", "d2d", "memset")[t.copies % 4]
            t.copies += 1
            nbytes = (1 << 20) * (1 + seq % 16)
            kind = "memset" if direction == "memset" else "memcpy"
            count, total_b, total_ns = t.transfers.get(direction, (0, 0, 0))
            t.transfers[direction] = (count + 1, total_b + nbytes, total_ns + dur_ns)
            return Span(seq=seq, kind=kind, start_us=t0_us, dur_ns=dur_ns, bytes=nbytes,
                        direction=direction)
        name, mangled, grid, block = KERNELS[(seq + lane_i) % len(KERNELS)]
        m, c, tot, lo, hi = t.kernels.get(name, (mangled, 0, 0, None, None))
        t.kernels[name] = (m, c + 1, tot + dur_ns, dur_ns if lo is None else min(lo, dur_ns),
                           dur_ns if hi is None else max(hi, dur_ns))
        return Span(seq=seq, kind="kernel", start_us=t0_us, dur_ns=dur_ns, name=name, grid=grid,
                    block=block)


class _LaneState:
    def __init__(self, device: int, stream: int, label: str) -> None:
        self.device, self.stream, self.label = device, stream, label
        self.executions = 0
        self.spans: list[Span] = []

    def freeze(self) -> Lane:
        spans = SpanColumns.from_spans(self.spans)   # a lane carries columns, as a real collector's
        return Lane(device=self.device, context=1, stream=self.stream, label=self.label,
                    executions=self.executions, spans_elided=self.executions - len(spans),
                    spans=spans)


class _TracedState:
    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.next_seq = 0
        self.copies = 0
        self.lanes: list[_LaneState] = []
        self.kernels: dict[str, tuple] = {}
        self.transfers: dict[str, tuple[int, int, int]] = {}

    def lane(self, i: int, gpus: int) -> _LaneState:
        while len(self.lanes) <= i:
            k = len(self.lanes)
            stream = 7 if k == 0 else 12 + k
            label = "default" if k == 0 else (NVTX_LABELS[k - 1] if k - 1 < len(NVTX_LABELS)
                                               else str(stream))
            self.lanes.append(_LaneState(device=k % gpus, stream=stream, label=label))
        return self.lanes[i]

    @staticmethod
    def add(lane: _LaneState, span: Span, cap: int) -> None:
        lane.executions += 1
        lane.spans.append(span)
        if len(lane.spans) > cap:
            del lane.spans[: len(lane.spans) - cap]


class FakeCollector:
    """Runs a scenario on its own thread at ``rate_hz``; ``part`` is the latest part built."""

    def __init__(self, opts: FakeOptions, scenario: FakeScenario, notify: Callable[[], None],
                 clock: Callable[[], float] = time.time) -> None:
        self.opts = opts
        self.scenario = scenario
        self._notify = notify
        self._clock = clock
        self._stop = threading.Event()
        self.part: SnapshotPart = scenario.step(clock())
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._notify()
        if self.opts.rate_hz > 0:
            self._thread = threading.Thread(target=self._run, name="gpuflow-fake", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        period = 1.0 / self.opts.rate_hz
        deadline = time.monotonic()
        while True:
            deadline += period
            delay = deadline - time.monotonic()
            if delay < -period:  # fell far behind (suspended?): do not burst to catch up
                deadline = time.monotonic()
                delay = 0.0
            if self._stop.wait(max(0.0, delay)):
                return
            self.part = self.scenario.step(self._clock())
            self._notify()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self.opts.stop_file:
            with open(self.opts.stop_file, "w", encoding="utf-8") as f:
                f.write("stopped\n")


@hookimpl
def declare_options() -> PluginOptions:
    return OPTIONS


@hookimpl
def start_collecting(context) -> None:
    opts = FakeOptions(**context.plugin_options(OPTIONS))
    recorder = FakeRecorder(SOURCE, opts.retain_s, opts.retain_spans,
                            resolution_s=1.0 / opts.rate_hz if opts.rate_hz else 0.0)
    context.slots[RECORDER_SLOT] = recorder
    scenario = FakeScenario(opts, context.config.show_cmdline, recorder)
    collector = FakeCollector(opts, scenario, context.notify)
    context.slots[SLOT] = collector
    collector.start()


@hookimpl
def produce_snapshot(context) -> SnapshotPart | None:
    collector = context.slots.get(SLOT)
    return collector.part if collector is not None else None


@hookimpl
def stop_collecting(context) -> None:
    collector = context.slots.pop(SLOT, None)
    if collector is not None:
        collector.stop()


@hookimpl
def query_window(context, start_s: float, end_s: float, pid: int | None, width_px: int | None) -> WindowPart | None:
    recorder = context.slots.get(RECORDER_SLOT)
    return recorder.window(start_s, end_s, pid, width_px) if recorder is not None else None


@hookimpl
def query_history(context, start_s: float, end_s: float) -> HistoryPart | None:
    recorder = context.slots.get(RECORDER_SLOT)
    return recorder.history(start_s, end_s) if recorder is not None else None
