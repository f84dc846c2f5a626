"""Benchmark: one NVML collector tick against a bare-pynvml refresh of the same fields.

    python bench/nvml_tick.py                  # on a machine with NVIDIA GPUs
    python bench/nvml_tick.py --fake shared8   # anywhere: against the fake backend

Both sides run in this one process, interleaved (tick, floor, floor, tick, ...), many times;
the medians are compared. The *tick* is ``NvmlCollector.poll_once()``: every per-tick NVML call
with its error and sentinel mapping, the process lists, /proc for each GPU process, the frozen
Snapshot objects and the change check. The *floor* makes the same NVML calls straight through
pynvml (each in a plain ``try``, no mapping, no fallbacks, no dataclasses) and the same /proc
reads, keeping the results in plain lists and tuples - the least any Python tool must do to
know the same things.

The tick builds a frozen object only where readings changed since the last tick. Ticks made
back to back (as here) often see the same readings on a real GPU, while at a 1 s interval a busy
GPU's readings change every tick; so the ``rebuilt`` line also times ticks that build every
object anew (``forget_built()`` first: everything the last tick built is dropped), the cost of
a tick in which every reading changed.

The slow readings (PCIe throughput, MIG mode, per-process utilization) are made by the
collector's background sampler, not by the tick; they are measured the same way on a line of
their own (sweep vs bare calls), fewer times because PCIe throughput blocks ~20 ms per counter.

Goals (docs/nvml.md states them and what was measured): ratio ≤ 1.2; tick ≤ 1 ms per GPU. The
last line is exactly ``tick_ms=<x> floor_ms=<y> ratio=<x/y>``.

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

from gpuflow.collectors.nvml.collector import NvmlCollector
from gpuflow.collectors.nvml.fake_backend import FakeBackend, scenario_names
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
                  handles: list[Any], read: Callable[[int], Any]) -> Callable[[], Any]:
    """The floor: straight calls, each in its own try (free in CPython 3.11+ unless it raises:
    cheaper than one list comprehension, and a field that raises is not asked twice); a field
    that raises is None. ``calls`` take a handle; ``lists`` return (pid, memory) lists."""

    def refresh() -> Any:
        out, pids = [], set()
        for h in handles:
            row = []
            for f in calls:
                try:
                    row.append(f(h))
                except Exception:  # noqa: BLE001 - NVMLError of any kind: the field is unknown
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


def pynvml_floor(handles: list[Any]) -> Callable[[], Any]:
    import pynvml as N

    def util(h):
        u = N.nvmlDeviceGetUtilizationRates(h)
        return u.gpu, u.memory

    def mem(h):
        m = N.nvmlDeviceGetMemoryInfo(h)
        return m.used, m.total

    calls = [util, mem,
             lambda h: N.nvmlDeviceGetTemperature(h, N.NVML_TEMPERATURE_GPU),
             N.nvmlDeviceGetPowerUsage, N.nvmlDeviceGetEnforcedPowerLimit,
             lambda h: N.nvmlDeviceGetClockInfo(h, N.NVML_CLOCK_SM),
             lambda h: N.nvmlDeviceGetClockInfo(h, N.NVML_CLOCK_MEM)]
    lists = [lambda h: [(p.pid, p.usedGpuMemory) for p in N.nvmlDeviceGetComputeRunningProcesses_v3(h)],
             lambda h: [(p.pid, p.usedGpuMemory) for p in N.nvmlDeviceGetGraphicsRunningProcesses_v3(h)]]
    return floor_refresh(calls, lists, handles, read_proc)


def fake_floor(b: FakeBackend, handles: list[Any]) -> Callable[[], Any]:
    calls = [b.utilization, b.memory, b.temperature, b.power_usage, b.power_limit, b.clock_sm,
             b.clock_mem]
    lists = [lambda h: [(p.pid, p.used_memory) for p in b.compute_processes(h)],
             lambda h: [(p.pid, p.used_memory) for p in b.graphics_processes(h)]]
    return floor_refresh(calls, lists, handles, b.proc_reader.read)


def slow_floor_pynvml(handles: list[Any], busy: set[int]) -> Callable[[], Any]:
    import pynvml as N

    def sweep() -> Any:
        since = int(time.time() * 1e6) - 1_000_000
        out = []
        for i, h in enumerate(handles):
            row = [_guarded(N.nvmlDeviceGetPcieThroughput, h, N.NVML_PCIE_UTIL_TX_BYTES),
                   _guarded(N.nvmlDeviceGetPcieThroughput, h, N.NVML_PCIE_UTIL_RX_BYTES),
                   _guarded(N.nvmlDeviceGetMigMode, h)]
            if i in busy:
                row.append(_guarded(N.nvmlDeviceGetProcessesUtilizationInfo, h, since))
            out.append(row)
        return out

    return sweep


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
    args = parser.parse_args(argv)

    if args.fake:
        backend: Any = FakeBackend(args.fake, seed=args.seed)
        backend.slow = {}  # the "hang" scenario's delay would only measure time.sleep
        proc_reader = backend.proc_reader
        print(f"FAKE backend, scenario {args.fake!r}: these numbers measure GPUFlow's Python "
              "overhead against a pure-Python fake, NOT NVML on a GPU")
    else:
        from gpuflow.collectors.nvml.pynvml_backend import PynvmlBackend

        backend, proc_reader = PynvmlBackend(), None
    collector = NvmlCollector(backend, AgentConfig(interval_s=1.0), proc_reader=proc_reader)
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

    floor = fake_floor(backend, handles) if args.fake else pynvml_floor(handles)
    for _ in range(50):  # warm-up: caches, branch predictors, CPU clocks
        collector.poll_once()
        floor()
    ticks, floors = interleaved(collector.poll_once, floor, args.reps)
    tick_ms = statistics.median(ticks) * 1e3
    floor_ms = statistics.median(floors) * 1e3

    def rebuilt_tick() -> None:
        collector.forget_built()
        collector.poll_once()

    rebuilt, floors2 = interleaved(rebuilt_tick, floor, args.reps)
    rebuilt_ms, floor2_ms = statistics.median(rebuilt) * 1e3, statistics.median(floors2) * 1e3

    if args.fake:
        def slow_floor() -> None:
            for i, h in enumerate(handles):
                _guarded(backend.pcie_tx, h), _guarded(backend.pcie_rx, h), _guarded(backend.mig_mode, h)
                if i in busy:
                    _guarded(backend.process_utilization, h, 0)
    else:
        slow_floor = slow_floor_pynvml(handles, busy)
    sweeps, bare = interleaved(collector.sample_once, slow_floor, args.sweeps)
    print(f"every object rebuilt (as when every reading changed): rebuilt_ms={rebuilt_ms:.4f} "
          f"floor_ms={floor2_ms:.4f} ratio={rebuilt_ms / floor2_ms:.3f}")
    print(f"sampler (background thread): sweep_ms={statistics.median(sweeps) * 1e3:.3f} "
          f"bare_ms={statistics.median(bare) * 1e3:.3f} over {args.sweeps} sweeps each")
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
