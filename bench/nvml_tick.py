"""Benchmark: one NVML collector tick against a bare-pynvml refresh of the same fields.

    python bench/nvml_tick.py                  # on a machine with NVIDIA GPUs
    python bench/nvml_tick.py --gpm            # ... with a GPM pair in every tick
    python bench/nvml_tick.py --fake shared8   # anywhere: against the fake backend
    python bench/nvml_tick.py --stand-in --gpm # anywhere: the real pynvml path, a stand-in driver

Both sides run in this one process, interleaved (tick, floor, floor, tick, ...), many times;
the medians are compared. The *tick* is ``NvmlCollector.poll_once()``: every per-tick NVML call
with its error and sentinel mapping, the process lists, /proc for each GPU process, the frozen
Snapshot objects and the change check. The *floor* makes the same NVML calls straight through
pynvml (each in a plain ``try``, no mapping, no fallbacks, no dataclasses) and the same /proc
reads, keeping the results in plain lists and tuples - the least any Python tool must do to
know the same things. Every tick reads the clock event reasons and memory through
nvmlDeviceGetMemoryInfo_v2; so does the floor. The energy counter (~3.2 ms a call on an H200) is
the sampler's, on both sides.

GPM: the collector takes a pair of GPM samples at most every 100 ms, so back-to-back ticks would
almost never include one. Without ``--gpm`` the benchmark turns GPM pairs off (neither side
makes GPM calls); with ``--gpm`` the collector takes a pair in every tick (its minimum gap set to
0) and the floor makes the same two calls per GPU (and per MIG instance): ``nvmlGpmSampleGet``
into the spare buffer and one ``nvmlGpmMetricsGet`` into a request it reuses, reading each
metric's return code and value, for the same ids at the same cadence: the 12 cheap ids every
pair, and all 13 (``GRAPHICS_UTIL``, ~1.2 ms of the driver's time on an H200) when
``gpm.GRAPHICS_EVERY_S`` has passed since its last evaluation by the monotonic clock, as the
collector does. That is the tick's cost at an interval of 100 ms or more, where every tick takes
a pair. A run lasts a few seconds, so the medians are of pairs without ``GRAPHICS_UTIL``; a line
of its own times ticks and floors that evaluate it in every pair (``GRAPHICS_EVERY_S`` set to 0
for both), and says what it adds to the mean tick at a 1 s interval.

The tick builds a frozen object only where readings changed since the last tick. Ticks made
back to back (as here) often see the same readings on a real GPU, while at a 1 s interval a busy
GPU's readings change every tick; so the ``rebuilt`` line also times ticks that build every
object anew (``forget_built()`` first: everything the last tick built is dropped), the cost of
a tick in which every reading changed.

The slow readings (PCIe throughput where GPM does not give it exactly, MIG mode, per-process
utilization, and the health and link readings) are made by the collector's background sampler,
not by the tick; they are measured the same way on a line of their own (sweep vs bare calls),
fewer times because PCIe throughput blocks ~20 ms per counter.

``--stand-in`` runs both sides' real Python - the pynvml backend, pynvml, ctypes - against a
stand-in for libnvidia-ml at the ctypes boundary (tests/support/nvml_standin.py, loaded by path):
one H200 whose every call lasts at least its median on an H200 (busy-waited; ``--stand-in
instant``: no wait). It measures GPUFlow's Python around the same driver calls where there is no
GPU, and prints a line saying whether a tick and a floor made the same calls (per function, and
the metric ids of each ``nvmlGpmMetricsGet``), counted by the stand-in over ticks and floors run
apart. Its figures are not the H200's (another CPU; a callback is dearer than a C call).

Goals (docs/nvml.md states them and what was measured): ratio ≤ 1.2 (≤ 1.3 with ``--gpm``);
tick ≤ 1 ms per GPU. The last line is exactly ``tick_ms=<x> floor_ms=<y> ratio=<x/y>``.

Constraints: runs under the GPU machine's Python with GPUFlow importable (installed, or the
repository on PYTHONPATH) and only nvidia-ml-py and pluggy of its dependencies: imports nothing
from gpuflow.transport (falcon may be missing).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import importlib.util

from gpuflow.collectors.nvml import gpm as gpm_module
from gpuflow.collectors.nvml.collector import NvmlCollector
from gpuflow.collectors.nvml.fake_backend import FakeBackend, scenario_names
from gpuflow.collectors.nvml.gpm import FAST_IDS, METRIC_IDS
from gpuflow.collectors.nvml.procinfo import read_small_file
from gpuflow.core.context import AgentConfig


def read_proc(pid: int) -> tuple[Any, ...] | None:
    """The floor's /proc work: owner uid, comm, cmdline (what the collector reads per process),
    with the same unbuffered reads as the collector (``open()`` would add ~2 µs a file)."""
    base = f"/proc/{pid}"
    try:
        uid = os.stat(base).st_uid
        comm = read_small_file(base + "/comm")
        cmdline = read_small_file(base + "/cmdline")
    except OSError:
        return None
    return uid, comm, cmdline


def _guarded(f: Callable[..., Any], *args: Any) -> Any:
    try:
        return f(*args)
    except Exception:  # noqa: BLE001 - NVMLError of any kind: the field is unknown
        return None


def floor_refresh(calls: list[Callable[[Any], Any]], lists: list[Callable[[Any], Any]],
                  handles: list[Any], read: Callable[[int], Any],
                  gpm: list[Callable[[], Any] | None] | None = None) -> Callable[[], Any]:
    """The floor: straight calls, each in its own try (free in CPython 3.11+ unless it raises:
    cheaper than one list comprehension, and a field that raises is not asked twice); a field
    that raises is None. ``calls`` take a handle; ``lists`` return (pid, memory) lists;
    ``gpm[i]``, where given, takes GPU i's GPM pair(s)."""

    def refresh() -> Any:
        out, pids = [], set()
        for i, h in enumerate(handles):
            row = []
            for f in calls:
                try:
                    row.append(f(h))
                except Exception:  # noqa: BLE001 - NVMLError of any kind: the field is unknown
                    row.append(None)
            if gpm is not None and gpm[i] is not None:
                try:
                    row.append(gpm[i]())
                except Exception:  # noqa: BLE001
                    row.append(None)
            procs = []
            for lf in lists:
                try:
                    procs.extend(lf(h))
                except Exception:  # noqa: BLE001
                    pass
            for p, _ in procs:
                pids.add(p)
            out.append((row, procs))
        return out, ({pid: read(pid) for pid in pids} if pids else {})

    return refresh


class GraphicsCadence:
    """The floor's GRAPHICS_UTIL schedule, the collector's (gpm.py): the first pair, then at most
    once every ``gpm.GRAPHICS_EVERY_S`` by the monotonic clock; counts its evaluations."""

    __slots__ = ("due", "evaluations")

    def __init__(self) -> None:
        self.due = float("-inf")
        self.evaluations = 0

    def now_due(self) -> bool:
        now = time.monotonic()
        if now < self.due:
            return False
        self.due = now + gpm_module.GRAPHICS_EVERY_S
        self.evaluations += 1
        return True


def pynvml_gpm_pair(h: Any, cadences: list[GraphicsCadence],
                    gpu_instance_id: int | None = None) -> Callable[[], Any]:
    """Bare GPM for one GPU (or MIG instance): two buffers, one request per id set reused (the 12
    cheap ids, and all 13 when GRAPHICS_UTIL is due), a pair per call."""
    import pynvml as N

    samples = [N.nvmlGpmSampleAlloc(), N.nvmlGpmSampleAlloc()]
    if gpu_instance_id is None:
        N.nvmlGpmSampleGet(h, samples[0])
    else:
        N.nvmlGpmMigSampleGet(h, gpu_instance_id, samples[0])

    def request_for(ids: tuple[int, ...]) -> Any:
        request = N.c_nvmlGpmMetricsGet_t()
        request.version = N.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(ids)
        for i, metric in enumerate(ids):
            request.metrics[i].metricId = metric
        return request

    every, fast = request_for(METRIC_IDS), request_for(FAST_IDS)
    n_every, n_fast = len(METRIC_IDS), len(FAST_IDS)
    cadence = GraphicsCadence()
    cadences.append(cadence)

    def pair() -> Any:
        previous, spare = samples
        if gpu_instance_id is None:
            N.nvmlGpmSampleGet(h, spare)
        else:
            N.nvmlGpmMigSampleGet(h, gpu_instance_id, spare)
        request, n = (every, n_every) if cadence.now_due() else (fast, n_fast)
        request.sample1, request.sample2 = previous, spare
        N.nvmlGpmMetricsGet(request)
        samples[0], samples[1] = spare, previous
        return [(m.nvmlReturn, m.value) for m in request.metrics[:n]]

    return pair


def pynvml_floor(handles: list[Any], gpm: bool, cadences: list[GraphicsCadence]) -> Callable[[], Any]:
    import pynvml as N

    def util(h):
        u = N.nvmlDeviceGetUtilizationRates(h)
        return u.gpu, u.memory

    def mem(h):
        m = N.nvmlDeviceGetMemoryInfo(h, N.nvmlMemory_v2)
        return m.used, m.total, m.free, m.reserved

    calls = [util, mem,
             lambda h: N.nvmlDeviceGetTemperature(h, N.NVML_TEMPERATURE_GPU),
             N.nvmlDeviceGetPowerUsage, N.nvmlDeviceGetEnforcedPowerLimit,
             lambda h: N.nvmlDeviceGetClockInfo(h, N.NVML_CLOCK_SM),
             lambda h: N.nvmlDeviceGetClockInfo(h, N.NVML_CLOCK_MEM),
             N.nvmlDeviceGetCurrentClocksEventReasons]
    lists = [lambda h: [(p.pid, p.usedGpuMemory) for p in N.nvmlDeviceGetComputeRunningProcesses_v3(h)],
             lambda h: [(p.pid, p.usedGpuMemory) for p in N.nvmlDeviceGetGraphicsRunningProcesses_v3(h)]]
    pairs = None
    if gpm:
        pairs = []
        for h in handles:
            try:
                supported = N.nvmlGpmQueryDeviceSupport(h).isSupportedDevice
            except N.NVMLError:
                supported = 0
            pairs.append(pynvml_gpm_pair(h, cadences) if supported else None)
    return floor_refresh(calls, lists, handles, read_proc, pairs)


def fake_floor(b: FakeBackend, handles: list[Any], gpm: bool,
               cadences: list[GraphicsCadence]) -> Callable[[], Any]:
    calls = [b.utilization, b.memory, b.temperature, b.power_usage, b.power_limit, b.clock_sm,
             b.clock_mem, b.clock_event_reasons]
    lists = [lambda h: [(p.pid, p.used_memory) for p in b.compute_processes(h)],
             lambda h: [(p.pid, p.used_memory) for p in b.graphics_processes(h)]]
    pairs = None
    if gpm:
        def fake_pairs(h: Any) -> Callable[[], Any] | None:
            mig = h.index in b.scenario.mig_enabled
            if not b.scenario.gpm:
                return None
            owners = list(b.mig_gpu_instance_ids(h)) if mig else [None]
            buffers = {gi: [b.gpm_alloc(), b.gpm_alloc()] for gi in owners}
            schedule = {gi: GraphicsCadence() for gi in owners}
            cadences.extend(schedule.values())
            for gi in owners:
                b.gpm_sample(h, buffers[gi][0], gi)

            def pair() -> Any:
                out = []
                for gi, pair_of in buffers.items():
                    previous, spare = pair_of
                    b.gpm_sample(h, spare, gi)
                    ids = METRIC_IDS if schedule[gi].now_due() else FAST_IDS
                    out.append(b.gpm_metrics(previous, spare, ids))
                    pair_of[0], pair_of[1] = spare, previous
                return out

            return pair

        pairs = [fake_pairs(h) for h in handles]
    return floor_refresh(calls, lists, handles, b.proc_reader.read, pairs)


def slow_floor_pynvml(handles: list[Any], busy: set[int], exact_pcie: set[int]) -> Callable[[], Any]:
    """The sampler's calls, bare: PCIe throughput where GPM does not give it exactly, MIG mode,
    per-process utilization where busy, the energy counter, and the health and link readings."""
    import pynvml as N

    corr, unc = N.NVML_MEMORY_ERROR_TYPE_CORRECTED, N.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    vol, agg = N.NVML_VOLATILE_ECC, N.NVML_AGGREGATE_ECC
    events = []
    for h in handles:
        try:
            es = N.nvmlEventSetCreate()
            N.nvmlDeviceRegisterEvents(h, N.nvmlEventTypeXidCriticalError, es)
            events.append(es)
        except N.NVMLError:
            events.append(None)

    def xids(es: Any) -> list[int]:
        codes = []
        while es is not None:
            try:
                codes.append(N.nvmlEventSetWait(es, 0).eventData)
            except N.NVMLError:
                break
        return codes

    def sweep() -> Any:
        since = int(time.time() * 1e6) - 1_000_000
        out = []
        for i, h in enumerate(handles):
            row = [_guarded(N.nvmlDeviceGetMigMode, h),
                   _guarded(N.nvmlDeviceGetTotalEnergyConsumption, h),
                   _guarded(N.nvmlDeviceGetEncoderUtilization, h),
                   _guarded(N.nvmlDeviceGetDecoderUtilization, h),
                   _guarded(N.nvmlDeviceGetFieldValues, h, [N.NVML_FI_DEV_MEMORY_TEMP]),
                   _guarded(N.nvmlDeviceGetTotalEccErrors, h, corr, vol),
                   _guarded(N.nvmlDeviceGetTotalEccErrors, h, unc, vol),
                   _guarded(N.nvmlDeviceGetTotalEccErrors, h, corr, agg),
                   _guarded(N.nvmlDeviceGetTotalEccErrors, h, unc, agg),
                   _guarded(N.nvmlDeviceGetRemappedRows, h),
                   _guarded(N.nvmlDeviceGetPcieReplayCounter, h),
                   _guarded(N.nvmlDeviceGetCurrPcieLinkGeneration, h),
                   _guarded(N.nvmlDeviceGetCurrPcieLinkWidth, h),
                   xids(events[i])]
            if i not in exact_pcie:
                row += [_guarded(N.nvmlDeviceGetPcieThroughput, h, N.NVML_PCIE_UTIL_TX_BYTES),
                        _guarded(N.nvmlDeviceGetPcieThroughput, h, N.NVML_PCIE_UTIL_RX_BYTES)]
            if i in busy:
                row.append(_guarded(N.nvmlDeviceGetProcessesUtilizationInfo, h, since))
            out.append(row)
        return out

    return sweep


def slow_floor_fake(b: FakeBackend, handles: list[Any], busy: set[int], exact_pcie: set[int],
                    collector: NvmlCollector) -> Callable[[], Any]:
    """The sampler's calls on the fake, bare (NVLink and MIG instances as the sampler makes them)."""
    targets = {t.index: t for t in collector._targets}

    def sweep() -> Any:
        for i, h in enumerate(handles):
            for f in (b.mig_mode, b.energy, b.encoder_utilization, b.decoder_utilization, b.memory_temperature,
                      b.ecc_counts, b.remapped_rows, b.pcie_replay_counter, b.pcie_link):
                _guarded(f, h)
            t = targets[i]
            if t.xid_watch is not None:
                _guarded(b.xid_poll, t.xid_watch)
            if t.nvlinks:
                _guarded(b.nvlink_throughput, h, tuple(r.link for r in t.nvlinks))
                for r in t.nvlinks:
                    _guarded(b.nvlink_state, h, r.link)
            if i in b.scenario.mig_enabled:
                _guarded(b.mig_gpu_instance_ids, h)
            if i not in exact_pcie:
                _guarded(b.pcie_tx, h), _guarded(b.pcie_rx, h)
            if i in busy:
                _guarded(b.process_utilization, h, 0)

    return sweep


STAND_IN = Path(__file__).resolve().parents[1] / "tests" / "support" / "nvml_standin.py"


def load_stand_in(latency: str) -> Any:
    """The stand-in driver (tests/support/nvml_standin.py, loaded by path: this script runs as
    ``python bench/nvml_tick.py``), installed into pynvml; H200 call times unless ``instant``."""
    if not STAND_IN.is_file():
        raise SystemExit(f"--stand-in needs the repository's {STAND_IN.relative_to(STAND_IN.parents[2])}")
    spec = importlib.util.spec_from_file_location("nvml_standin", STAND_IN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.StandInNvml(call_us={} if latency == "instant" else None).install()


def same_calls(stand_in: Any, tick: Callable[[], Any], floor: Callable[[], Any], reps: int = 20) -> str:
    """The stand-in's count of each call (and each nvmlGpmMetricsGet's ids) over ``reps`` ticks,
    then over ``reps`` floors: one line saying whether they are the same, and what they were."""
    seen = []
    for fn in (tick, floor):
        calls, requests = stand_in.calls.copy(), stand_in.metric_requests.copy()
        for _ in range(reps):
            fn()
        seen.append((stand_in.calls - calls, stand_in.metric_requests - requests))
    (tick_calls, tick_ids), (floor_calls, floor_ids) = seen
    per_tick = ", ".join(f"{name} {count / reps:g}" for name, count in sorted(tick_calls.items()))
    ids = "; ".join(f"{len(k)} ids x{count / reps:g}" for k, count in sorted(tick_ids.items()))
    if tick_calls == floor_calls and tick_ids == floor_ids:
        return f"stand-in calls: same per tick and per floor ({per_tick}; nvmlGpmMetricsGet {ids or 'none'})"
    return (f"stand-in calls: DIFFER: per tick {dict(sorted(tick_calls.items()))} {dict(tick_ids)}, "
            f"per floor {dict(sorted(floor_calls.items()))} {dict(floor_ids)} over {reps} each")


def interleaved(a: Callable[[], Any], b: Callable[[], Any], reps: int) -> tuple[list[float], list[float]]:
    """Time ``a`` and ``b`` alternately (ABBA order), ``reps`` times each; seconds per call."""
    ta, tb = [], []
    clock = time.perf_counter
    for r in range(reps):
        order = ((a, ta), (b, tb)) if r % 2 == 0 else ((b, tb), (a, ta))
        for fn, sink in order:
            t0 = clock()
            fn()
            sink.append(clock() - t0)
    return ta, tb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fake", metavar="SCENARIO", choices=scenario_names(),
                        help="run against the fake backend (no GPU needed): " + ", ".join(scenario_names()))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reps", type=int, default=2000, help="ticks and floors each (default 2000)")
    parser.add_argument("--sweeps", type=int, default=10, help="sampler sweeps and bare sweeps each")
    parser.add_argument("--json", metavar="FILE", help="also write the last part as snapshot JSON")
    parser.add_argument("--gpm", action="store_true",
                        help="a GPM pair in every tick, and the same GPM calls in the floor")
    parser.add_argument("--stand-in", nargs="?", const="h200", choices=("h200", "instant"),
                        help="the real pynvml path against a stand-in driver (tests/support/nvml_standin.py): "
                             "H200 call times (default), or instant")
    args = parser.parse_args(argv)
    if args.fake and args.stand_in:
        parser.error("--fake and --stand-in exclude each other")

    stand_in = None
    if args.fake:
        backend: Any = FakeBackend(args.fake, seed=args.seed)
        backend.slow = {}  # the "hang" scenario's delay would only measure time.sleep
        proc_reader = backend.proc_reader
        print(f"FAKE backend, scenario {args.fake!r}: these numbers measure GPUFlow's Python "
              "overhead against a pure-Python fake, NOT NVML on a GPU")
    else:
        from gpuflow.collectors.nvml.pynvml_backend import PynvmlBackend

        if args.stand_in:
            stand_in = load_stand_in(args.stand_in)
            print(f"STAND-IN driver ({args.stand_in} call times): GPUFlow's and pynvml's real Python "
                  "against a stand-in for libnvidia-ml, NOT NVML on a GPU")
        backend, proc_reader = PynvmlBackend(), None
    # without --gpm no GPM pair after the first sample (an infinite gap); with it, one every tick
    collector = NvmlCollector(backend, AgentConfig(interval_s=1.0), proc_reader=proc_reader,
                              gpm_gap_s=0.0 if args.gpm else float("inf"))
    first = collector.poll_once()  # initializes NVML, fetches handles and static facts
    if not first.devices:
        print("no GPUs:", "; ".join(p.message for p in first.problems))
        return 1
    handles = [g.handle for g in collector._gpus]
    collector.sample_once()
    part = collector.poll_once()
    n = len(part.devices)
    busy = {a.device_index for p in part.processes for a in p.attachments}
    print(f"python {platform.python_version()}; {n} GPU(s): {part.devices[0].name}; driver "
          f"{part.host.driver_version}, CUDA {part.host.cuda_driver_version}; "
          f"{len(part.processes)} GPU process(es) on {len(busy)} GPU(s)")
    for p in part.processes:
        a = p.attachments[0]
        print(f"  pid {p.pid} {p.name} ({p.user}): {len(p.attachments)} GPU(s), "
              f"{a.memory_used_bytes} B, SM {a.sm_util_pct} %")

    cadences: list[GraphicsCadence] = []  # the floor's GRAPHICS_UTIL schedules
    floor = (fake_floor(backend, handles, args.gpm, cadences) if args.fake
             else pynvml_floor(handles, args.gpm, cadences))
    gpm_gpus = sum(1 for g in collector._gpus if g.gpm is not None and not g.gpm.broken)
    print(f"GPM: {'a pair every tick' if args.gpm else 'off (no pairs)'}; {gpm_gpus} of {n} GPU(s) "
          "support it" + (f" (+{sum(len(g.gpm_instances) for g in collector._gpus)} MIG instances)"
                          if args.gpm else ""))
    for _ in range(50):  # warm-up: caches, branch predictors, CPU clocks
        collector.poll_once()
        floor()
    if stand_in is not None:
        print(same_calls(stand_in, collector.poll_once, floor))
    trackers = [t for g in collector._gpus for t in (g.gpm, *g.gpm_instances.values()) if t is not None]
    evaluations = (sum(t.graphics_evaluations for t in trackers), sum(c.evaluations for c in cadences))
    started = time.monotonic()
    ticks, floors = interleaved(collector.poll_once, floor, args.reps)
    tick_ms = statistics.median(ticks) * 1e3
    floor_ms = statistics.median(floors) * 1e3

    def rebuilt_tick() -> None:
        collector.forget_built()
        collector.poll_once()

    rebuilt, floors2 = interleaved(rebuilt_tick, floor, args.reps)
    rebuilt_ms, floor2_ms = statistics.median(rebuilt) * 1e3, statistics.median(floors2) * 1e3
    if args.gpm:
        run_s = time.monotonic() - started
        by_ticks = sum(t.graphics_evaluations for t in trackers) - evaluations[0]
        by_floor = sum(c.evaluations for c in cadences) - evaluations[1]
        every_s = gpm_module.GRAPHICS_EVERY_S
        gpm_module.GRAPHICS_EVERY_S = 0.0  # both sides evaluate GRAPHICS_UTIL in every pair,
        for t in trackers:  # from the next one on (each was due 10 s after its last evaluation)
            t.graphics_next()
        for c in cadences:
            c.due = float("-inf")
        evaluations = (sum(t.graphics_evaluations for t in trackers), sum(c.evaluations for c in cadences))
        graphics, floors3 = interleaved(collector.poll_once, floor, max(20, args.reps // 10))
        gpm_module.GRAPHICS_EVERY_S = every_s
        graphics_ms, floor3_ms = statistics.median(graphics) * 1e3, statistics.median(floors3) * 1e3
        graphics_pairs = (sum(t.graphics_evaluations for t in trackers) - evaluations[0],
                          sum(c.evaluations for c in cadences) - evaluations[1], len(graphics))

    exact_pcie = {g.index for g in collector._gpus if g.gpm is not None and g.gpm.pcie_exact}
    if args.fake:
        slow_floor = slow_floor_fake(backend, handles, busy, exact_pcie, collector)
    else:
        slow_floor = slow_floor_pynvml(handles, busy, exact_pcie)
    collector.sample_once()  # warm-up: the fake's counters catch up on the polls made since
    slow_floor()
    sweeps, bare = interleaved(collector.sample_once, slow_floor, args.sweeps)
    print(f"every object rebuilt (as when every reading changed): rebuilt_ms={rebuilt_ms:.4f} "
          f"floor_ms={floor2_ms:.4f} ratio={rebuilt_ms / floor2_ms:.3f}")
    print(f"sampler (background thread): sweep_ms={statistics.median(sweeps) * 1e3:.3f} "
          f"bare_ms={statistics.median(bare) * 1e3:.3f} over {args.sweeps} sweeps each")
    if args.gpm:
        print(f"GPM GRAPHICS_UTIL at most every {every_s:g} s: evaluated {by_ticks} times by the ticks "
              f"and {by_floor} by the floor in the {run_s:.1f} s of the two runs above")
        print(f"a tick that evaluates GRAPHICS_UTIL: tick_ms={graphics_ms:.4f} floor_ms={floor3_ms:.4f} "
              f"ratio={graphics_ms / floor3_ms:.3f}; at a 1 s interval it adds "
              f"{(graphics_ms - tick_ms) / every_s:.4f} ms to the mean tick; evaluated by "
              f"{graphics_pairs[0]} of {graphics_pairs[2]} ticks and {graphics_pairs[1]} floors")
    print(f"tick: p10={statistics.quantiles(ticks, n=10)[0] * 1e3:.4f} ms "
          f"p90={statistics.quantiles(ticks, n=10)[-1] * 1e3:.4f} ms; per GPU "
          f"{tick_ms / n:.4f} ms (budget 1 ms per GPU); {args.reps} ticks and floors, interleaved")
    if args.json:
        import json

        from gpuflow.core.merge import merge_parts

        collector.sample_once()
        snapshot = merge_parts([collector.poll_once()], seq=1, timestamp=time.time())
        Path(args.json).write_text(json.dumps(snapshot.to_json_dict(), indent=1))
    collector.stop()
    print(f"tick_ms={tick_ms:.4f} floor_ms={floor_ms:.4f} ratio={tick_ms / floor_ms:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
