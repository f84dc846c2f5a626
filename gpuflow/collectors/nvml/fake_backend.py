"""A scripted, pure-Python NVML: GPUs and processes from a named scenario, faults on demand.

Used by the tests, by the benchmark (``bench/nvml_tick.py --fake``) and by a running agent
(``GPUFLOW_NVML_FAKE=shared8 gpuflow watch``, or ``AgentConfig.options["nvml"]["fake"]``) so the UI
can be shown and tested without a GPU. Scenarios are listed in
:mod:`gpuflow.collectors.nvml.fake_scenarios` and docs/nvml.md.

It raises pynvml's real exception classes (``NVMLError_NotSupported``, ``NVMLError_GpuIsLost``,
...) and returns raw NVML sentinels where NVML would, so the very same query function and
collector code run against it as against the real library.

Readings move so a live page looks alive: each GPU's load follows a slow wave plus noise, and
everything else (power, temperature, clocks, PCIe, per-process SM %) follows the load. A
scenario with churn (``churn``) starts short jobs poll after poll, each with a pid of its own.
Deterministic: the values depend only on the seed and on how many times each GPU has been polled
(not on wall-clock time); only per-process utilization timestamps come from ``clock``.

Constraints: no I/O, no threads; thread-safe enough for the collector's two threads (each GPU's
poll counter is advanced only by the ``utilization`` call, which only the poll thread makes).
"""

from __future__ import annotations

import math
import random
import time
from typing import Callable

import pynvml

from gpuflow.collectors.nvml.backend import (
    MIG_DISABLE,
    MIG_ENABLE,
    ULLONG_MAX,
    MemoryInfo,
    ProcessInfo,
    ProcessUtilSample,
    Utilization,
)
from gpuflow.collectors.nvml.fake_scenarios import (
    CHURN_FIRST_PID,
    GIB,
    MIB,
    SCENARIOS,
    FakeProcess,
    Scenario,
)
from gpuflow.collectors.nvml.procinfo import ProcFacts

H200_MEMORY_BYTES = 150_754_820_096

#: What NVML cannot say about a whole GPU once it is split into MIG instances.
_MIG_UNSUPPORTED = frozenset({"utilization", "process_utilization"})


class FakeHandle:
    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"<FakeHandle gpu {self.index}>"


class FakeProcReader:
    """/proc stand-in for the scenario's made-up pids; vanishing pids are already gone."""

    def __init__(self, scenario: Scenario) -> None:
        self._procs = {p.pid: p for p in scenario.processes}
        self._gone = scenario.vanishing_pids
        self._churn = scenario.churn_every > 0

    def read(self, pid: int) -> ProcFacts | None:
        p = self._procs.get(pid)
        if p is None and self._churn and pid >= CHURN_FIRST_PID:
            p = churn_job(pid - CHURN_FIRST_PID, 0)
        if p is None or pid in self._gone:
            return None
        return ProcFacts(p.name, p.user, p.argv)


def churn_job(number: int, index: int) -> FakeProcess:
    """The ``number``-th short job of a scenario with churn, on GPU ``index``."""
    return FakeProcess(CHURN_FIRST_PID + number, "python", "erin", ("python", f"job{number}.py"),
                       {index: "compute"}, (1 + number % 4) * GIB, 0.3)


def scenario_names() -> list[str]:
    return sorted(SCENARIOS)


def get_scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise ValueError(
            f"unknown fake NVML scenario {name!r}; known: {', '.join(scenario_names())}"
        ) from None


class FakeBackend:
    """An :class:`~gpuflow.collectors.nvml.backend.NvmlBackend` playing a :class:`Scenario`."""

    def __init__(
        self,
        scenario: str | Scenario = "single",
        seed: int = 0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        slow: dict[str, float] | None = None,
    ) -> None:
        self.scenario = get_scenario(scenario) if isinstance(scenario, str) else scenario
        self.seed = seed
        self._clock = clock
        self._sleep = sleep
        self.slow = dict(self.scenario.slow if slow is None else slow)  #: method → seconds per call
        self.init_error: int | None = self.scenario.init_error  #: tests may clear it to "fix the driver"
        self.initialized = False
        self.calls: dict[str, int] = {}  #: method → times called (tests assert on call counts)
        self.proc_reader = FakeProcReader(self.scenario)
        n = self.scenario.gpus
        self._steps = [0] * n  # polls per GPU, advanced by utilization()
        rng = random.Random(seed)
        self._phase = [rng.uniform(0, 2 * math.pi) for _ in range(n)]
        self._period = [rng.uniform(20, 40) for _ in range(n)]
        self._load_cache = [(-1, 0.0)] * n  # (step, load) per GPU
        self._on_device: list[list[tuple[FakeProcess, str]]] = [[] for _ in range(n)]
        for p in self.scenario.processes:
            for index, kind in p.devices.items():
                self._on_device[index].append((p, kind))
        self._churned: dict[tuple[int, int], list[tuple[FakeProcess, str]]] = {}  # (GPU, step) →

    # -- plumbing -----------------------------------------------------------------------------
    def _enter(self, method: str, handle: FakeHandle | None = None) -> None:
        self.calls[method] = self.calls.get(method, 0) + 1
        delay = self.slow.get(method)
        if delay:
            self._sleep(delay)
        if method != "init" and not self.initialized:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        if handle is not None:
            if self._is_lost(handle.index):
                raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
            if method in self.scenario.unsupported or (
                    method in _MIG_UNSUPPORTED and handle.index in self.scenario.mig_enabled):
                raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def _is_lost(self, index: int) -> bool:
        s = self.scenario
        return s.lost_gpu == index and self._steps[index] > s.lose_after

    def _load(self, index: int, step: int) -> float:
        """0..1: how busy GPU ``index`` is at its ``step``-th poll (deterministic)."""
        demand = min(1.0, sum(p.busy for p, _ in self._on_device[index])
                     + sum(p.busy for p, _ in self._churn_on(index, step)))
        if demand <= 0:
            return 0.0
        wave = 0.8 + 0.2 * math.sin(2 * math.pi * step / self._period[index] + self._phase[index])
        noise = random.Random(self.seed * 1_000_003 + index * 10_007 + step).uniform(-0.04, 0.04)
        return max(0.0, min(1.0, demand * wave + noise))

    def _now_load(self, index: int) -> float:
        step = self._steps[index]
        cached = self._load_cache[index]
        if cached[0] != step:
            cached = self._load_cache[index] = (step, self._load(index, step))
        return cached[1]

    def _present(self, index: int) -> list[tuple[FakeProcess, str]]:
        """Processes NVML lists on this GPU now (vanishing pids drop off after a while, short jobs
        come and go)."""
        s = self.scenario
        if s.churn_every:
            return self._on_device[index] + self._churn_on(index, self._steps[index])
        if not s.vanishing_pids or self._steps[index] < s.vanish_after:
            return self._on_device[index]
        return [(p, k) for p, k in self._on_device[index] if p.pid not in s.vanishing_pids]

    def _churn_on(self, index: int, step: int) -> list[tuple[FakeProcess, str]]:
        """The short jobs holding GPU ``index`` at its ``step``-th poll: job n starts at poll
        ``n * churn_every`` on GPU ``n % gpus`` and holds it for ``churn_life`` polls."""
        s = self.scenario
        if not s.churn_every:
            return []
        known = self._churned.get((index, step))
        if known is None:
            if len(self._churned) > 4 * s.gpus:
                self._churned.clear()
            first = max(0, -(-(step - s.churn_life + 1) // s.churn_every))
            known = self._churned[(index, step)] = [
                (churn_job(n, index), "compute") for n in range(first, step // s.churn_every + 1)
                if n % s.gpus == index]
        return known

    # -- library and system -------------------------------------------------------------------
    def init(self) -> None:
        self._enter("init")
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)
        self.initialized = True

    def shutdown(self) -> None:
        self._enter("shutdown")
        self.initialized = False

    def device_count(self) -> int:
        self._enter("device_count")
        return self.scenario.gpus

    def handle_by_index(self, index: int) -> FakeHandle:
        self._enter("handle_by_index")
        if not 0 <= index < self.scenario.gpus:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if self._is_lost(index):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return FakeHandle(index)

    def driver_version(self) -> str:
        self._enter("driver_version")
        return "580.159.04"

    def nvml_version(self) -> str:
        self._enter("nvml_version")
        return "13.580.159.04"

    def cuda_driver_version(self) -> int:
        self._enter("cuda_driver_version")
        return 13000

    # -- static per device --------------------------------------------------------------------
    def uuid(self, handle: FakeHandle) -> str:
        self._enter("uuid", handle)
        r = random.Random(self.seed * 7919 + handle.index)
        h = "%032x" % r.getrandbits(128)
        return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def name(self, handle: FakeHandle) -> str:
        self._enter("name", handle)
        return self.scenario.gpu_name

    def pci_bus_id(self, handle: FakeHandle) -> str:
        self._enter("pci_bus_id", handle)
        return f"00000000:{0x18 + 0x10 * handle.index:02X}:00.0"

    # -- every tick ---------------------------------------------------------------------------
    def utilization(self, handle: FakeHandle) -> Utilization:
        self._steps[handle.index] += 1  # one poll of this GPU
        self._enter("utilization", handle)
        load = self._now_load(handle.index)
        return Utilization(round(100 * load), round(45 * load))

    def memory(self, handle: FakeHandle) -> MemoryInfo:
        self._enter("memory", handle)
        used = 512 * MIB + sum(self._proc_memory(p, handle.index) for p, _ in self._present(handle.index))
        return MemoryInfo(H200_MEMORY_BYTES, used)

    def temperature(self, handle: FakeHandle) -> int:
        self._enter("temperature", handle)
        return round(31 + 45 * self._now_load(handle.index))

    def power_usage(self, handle: FakeHandle) -> int:
        self._enter("power_usage", handle)
        return round(88_000 + 570_000 * self._now_load(handle.index))

    def power_limit(self, handle: FakeHandle) -> int:
        self._enter("power_limit", handle)
        return 700_000

    def clock_sm(self, handle: FakeHandle) -> int:
        self._enter("clock_sm", handle)
        return 1980 if self._now_load(handle.index) > 0.05 else 345

    def clock_mem(self, handle: FakeHandle) -> int:
        self._enter("clock_mem", handle)
        return 3201

    def compute_processes(self, handle: FakeHandle) -> list[ProcessInfo]:
        self._enter("compute_processes", handle)
        return self._listed(handle.index, "compute")

    def graphics_processes(self, handle: FakeHandle) -> list[ProcessInfo]:
        self._enter("graphics_processes", handle)
        return self._listed(handle.index, "graphics")

    def _listed(self, index: int, kind: str) -> list[ProcessInfo]:
        out = []
        for p, k in self._present(index):
            if kind in k:
                mem = ULLONG_MAX if self.scenario.wddm else self._proc_memory(p, index)
                out.append(ProcessInfo(p.pid, mem))
        return out

    def _proc_memory(self, p: FakeProcess, index: int) -> int:
        # grows and shrinks a little with the GPU's load, in whole MiB
        return p.memory_bytes + round(256 * self._now_load(index)) * MIB if p.busy else p.memory_bytes

    # -- background sampler -------------------------------------------------------------------
    def pcie_tx(self, handle: FakeHandle) -> int:
        self._enter("pcie_tx", handle)
        return round(2_400_000 * self._now_load(handle.index) ** 2)  # KB/s

    def pcie_rx(self, handle: FakeHandle) -> int:
        self._enter("pcie_rx", handle)
        return round(9_000_000 * self._now_load(handle.index) ** 3)  # KB/s

    def mig_mode(self, handle: FakeHandle) -> int:
        self._enter("mig_mode", handle)
        return MIG_ENABLE if handle.index in self.scenario.mig_enabled else MIG_DISABLE

    def process_utilization(self, handle: FakeHandle, last_seen_us: int) -> list[ProcessUtilSample]:
        self._enter("process_utilization", handle)
        if self.scenario.wddm:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        now_us = int(self._clock() * 1e6)
        index = handle.index
        if now_us <= last_seen_us:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        load = self._now_load(index)
        demand = (sum(p.busy for p, _ in self._on_device[index])
                  + sum(p.busy for p, _ in self._churn_on(index, self._steps[index]))) or 1.0
        samples = [
            ProcessUtilSample(p.pid, now_us, round(100 * load * p.busy / demand),
                              round(45 * load * p.busy / demand))
            for p, _ in self._present(index) if p.busy > 0  # NVML samples only what ran
        ]
        if not samples:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return samples


def describe(scenario: Scenario) -> str:
    """A one-line description for problems and logs."""
    return f"{scenario.name}: {scenario.description}"


