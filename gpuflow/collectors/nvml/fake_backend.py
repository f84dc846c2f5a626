"""A scripted, pure-Python NVML: GPUs and processes from a named scenario, faults on demand.

Used by the tests, by the benchmark (``bench/nvml_tick.py --fake``) and by a running agent
(``GPUFLOW_NVML_FAKE=shared8 gpuflow watch``, or ``AgentConfig.options["nvml"]["fake"]``) so the UI
can be shown and tested without a GPU. Scenarios are listed in
:mod:`gpuflow.collectors.nvml.fake_scenarios` and docs/nvml.md.

It raises pynvml's real exception classes (``NVMLError_NotSupported``, ``NVMLError_GpuIsLost``,
...) and returns raw NVML sentinels where NVML would, so the very same query function and
collector code run against it as against the real library.

Readings move so a live page looks alive: each GPU's load follows a slow wave plus noise, and
everything else (power, temperature, clocks, PCIe, per-process SM %, GPM's means, NVLink traffic,
the energy counter) follows the load. GPM samples are plain objects that remember which GPU and
poll they were taken at; :attr:`FakeBackend.gpm_buffers` and :attr:`FakeBackend.xid_watches`
count what is allocated and not yet given back (tests check that shutdown frees everything), and
:attr:`FakeBackend.gpm_asked` keeps the latest GPM evaluations (when, by the fake's ``clock``;
which GPU and instance; which metric ids), so a test can see which ids were asked when: give the
fake the collector's monotonic clock for that (the fake's own default is wall-clock time). A
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
from collections import deque
from typing import Callable

import pynvml

from gpuflow.collectors.nvml.backend import (
    MIG_DISABLE,
    MIG_ENABLE,
    ULLONG_MAX,
    EccCounts,
    FieldAnswer,
    MemoryInfo,
    PcieLink,
    RemappedRows,
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

KIB = 1024

H200_MEMORY_BYTES = 150_754_820_096
RESERVED_BYTES = 474 * MIB  #: what the driver and firmware hold, as nvidia-smi shows on an H200
ENERGY_AT_START_MJ = 3_600_000_000  #: the energy counter when the scenario starts (1 kWh)
NOT_SUPPORTED, INVALID_ARGUMENT = pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_INVALID_ARGUMENT
GPM_ASKED_KEPT = 4096  #: GPM evaluations FakeBackend.gpm_asked keeps (a demo agent runs for days)

#: What NVML cannot say about a whole GPU once it is split into MIG instances.
_MIG_UNSUPPORTED = frozenset({"utilization", "process_utilization"})


class FakeHandle:
    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"<FakeHandle gpu {self.index}>"


class FakeGpmSample:
    """A GPM sample buffer: which GPU (and MIG instance) and poll it was last filled at."""

    __slots__ = ("index", "gpu_instance_id", "step", "freed")

    def __init__(self) -> None:
        self.index: int | None = None
        self.gpu_instance_id: int | None = None
        self.step = 0
        self.freed = False


class FakeXidWatch:
    __slots__ = ("index", "delivered", "freed")

    def __init__(self, index: int) -> None:
        self.index = index
        self.delivered = False
        self.freed = False


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

    def cgroup(self, pid: int) -> bytes | None:
        p = self._procs.get(pid)
        if p is None or p.cgroup is None or pid in self._gone:
            return None
        return p.cgroup.encode()


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
        self._integrals: dict[tuple[str, int], tuple[int, float]] = {}  # (what, GPU) → (step, sum)
        self.gpm_buffers = 0  #: GPM sample buffers allocated and not yet freed
        self.xid_watches = 0  #: XID event sets created and not yet freed
        #: the latest nvmlGpmMetricsGet calls: (clock(), GPU index, GPU instance id, metric ids)
        self.gpm_asked: deque[tuple[float, int, int | None, tuple[int, ...]]] = deque(
            maxlen=GPM_ASKED_KEPT)

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
        return MemoryInfo(H200_MEMORY_BYTES, used, H200_MEMORY_BYTES - used - RESERVED_BYTES,
                          RESERVED_BYTES)

    def temperature(self, handle: FakeHandle) -> int:
        self._enter("temperature", handle)
        return round(31 + 45 * self._now_load(handle.index))

    def power_usage(self, handle: FakeHandle) -> int:
        self._enter("power_usage", handle)
        return self._power_mw(handle.index, self._steps[handle.index])

    def _power_mw(self, index: int, step: int) -> int:
        return round(88_000 + 570_000 * self._load(index, step))

    def _integral(self, what: str, index: int, per_poll: Callable[[int, int], float]) -> float:
        """The sum of ``per_poll(index, step)`` over this GPU's polls so far: a cumulative counter
        that grows by each poll's rate over one second (deterministic, computed once per poll)."""
        step = self._steps[index]
        done, total = self._integrals.get((what, index), (0, 0.0))
        while done < step:
            done += 1
            total += per_poll(index, done)
        self._integrals[(what, index)] = (done, total)
        return total

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

    # -- health and links ---------------------------------------------------------------------
    def energy(self, handle: FakeHandle) -> int:
        self._enter("energy", handle)
        return ENERGY_AT_START_MJ + round(self._integral("energy", handle.index, self._power_mw))

    def clock_event_reasons(self, handle: FakeHandle) -> int:
        self._enter("clock_event_reasons", handle)
        load = self._now_load(handle.index)
        if load < 0.05:
            return pynvml.nvmlClocksEventReasonGpuIdle
        return pynvml.nvmlClocksEventReasonSwPowerCap if load > 0.9 else 0

    def encoder_utilization(self, handle: FakeHandle) -> int:
        self._enter("encoder_utilization", handle)
        return self.scenario.media.get(handle.index, (0, 0))[0]

    def decoder_utilization(self, handle: FakeHandle) -> int:
        self._enter("decoder_utilization", handle)
        return self.scenario.media.get(handle.index, (0, 0))[1]

    def memory_temperature(self, handle: FakeHandle) -> FieldAnswer:
        self._enter("memory_temperature", handle)
        return FieldAnswer(0, round(36 + 40 * self._now_load(handle.index)))

    def ecc_counts(self, handle: FakeHandle) -> EccCounts:
        self._enter("ecc_counts", handle)
        return EccCounts(*self.scenario.ecc.get(handle.index, (0, 0, 0, 0)))

    def remapped_rows(self, handle: FakeHandle) -> RemappedRows:
        self._enter("remapped_rows", handle)
        return RemappedRows(*self.scenario.remapped.get(handle.index, (0, 0, 0, 0)))

    def pcie_replay_counter(self, handle: FakeHandle) -> int:
        self._enter("pcie_replay_counter", handle)
        return self.scenario.pcie_replays.get(handle.index, 0)

    def pcie_link(self, handle: FakeHandle) -> PcieLink:
        self._enter("pcie_link", handle)
        gen, width = self.scenario.pcie
        return PcieLink(gen if self._now_load(handle.index) > 0.05 else 1, width)  # idle: gen 1

    def pcie_link_max(self, handle: FakeHandle) -> PcieLink:
        self._enter("pcie_link_max", handle)
        return PcieLink(*self.scenario.pcie)

    def _links(self, index: int) -> int:
        peer = self.scenario.nvlink_peers.get(index)
        return 0 if peer is None else peer[1]

    def nvlink_state(self, handle: FakeHandle, link: int) -> int:
        self._enter("nvlink_state", handle)
        count = self._links(handle.index)
        if not count:
            raise pynvml.NVMLError(NOT_SUPPORTED)
        if link >= count:
            raise pynvml.NVMLError(INVALID_ARGUMENT)
        return 0 if (handle.index, link) in self.scenario.nvlink_down else 1

    def nvlink_remote_bus_id(self, handle: FakeHandle, link: int) -> str:
        self._enter("nvlink_remote_bus_id", handle)
        if link >= self._links(handle.index):
            raise pynvml.NVMLError(INVALID_ARGUMENT)
        return self.pci_bus_id(FakeHandle(self.scenario.nvlink_peers[handle.index][0]))

    def _nvlink_kib_per_poll(self, index: int, step: int) -> float:
        """KiB one up link of this GPU moves in a poll's second: ~22 GB/s at full load."""
        return 21_000_000 * self._load(index, step)

    def nvlink_throughput(self, handle: FakeHandle, links: tuple[int, ...]) -> list[FieldAnswer]:
        self._enter("nvlink_throughput", handle)
        index, count = handle.index, self._links(handle.index)
        kib = self._integral("nvlink", index, self._nvlink_kib_per_poll)
        out = []
        for link in links:
            if link >= count:
                out += [FieldAnswer(INVALID_ARGUMENT, 0)] * 2
            elif (index, link) in self.scenario.nvlink_down:
                out += [FieldAnswer(0, 0)] * 2
            else:
                out += [FieldAnswer(0, round(kib * 0.8)), FieldAnswer(0, round(kib))]  # tx, rx
        return out

    def xid_watch(self, handle: FakeHandle) -> FakeXidWatch:
        self._enter("xid_watch", handle)
        self.xid_watches += 1
        return FakeXidWatch(handle.index)

    def xid_poll(self, watch: FakeXidWatch) -> list[int]:
        self._enter("xid_poll", FakeHandle(watch.index))
        if watch.freed:
            raise pynvml.NVMLError(INVALID_ARGUMENT)
        event = self.scenario.xid_events.get(watch.index)
        if event is None or watch.delivered or self._steps[watch.index] < event[0]:
            return []
        watch.delivered = True
        return [event[1]]

    def xid_unwatch(self, watch: FakeXidWatch) -> None:
        self._enter("xid_unwatch")
        if watch.freed:
            raise pynvml.NVMLError(INVALID_ARGUMENT)
        watch.freed = True
        self.xid_watches -= 1

    # -- GPM ----------------------------------------------------------------------------------
    def gpm_supported(self, handle: FakeHandle) -> bool:
        self._enter("gpm_supported", handle)
        return self.scenario.gpm

    def gpm_alloc(self) -> FakeGpmSample:
        self._enter("gpm_alloc")
        self.gpm_buffers += 1
        return FakeGpmSample()

    def gpm_free(self, sample: FakeGpmSample) -> None:
        self._enter("gpm_free")
        if sample.freed:
            raise pynvml.NVMLError(INVALID_ARGUMENT)
        sample.freed = True
        self.gpm_buffers -= 1

    def gpm_sample(self, handle: FakeHandle, sample: FakeGpmSample, gpu_instance_id: int | None) -> None:
        self._enter("gpm_sample", handle)
        mig = handle.index in self.scenario.mig_enabled
        if not self.scenario.gpm or (mig and gpu_instance_id is None):
            raise pynvml.NVMLError(NOT_SUPPORTED)  # in MIG mode, GPM is per GPU instance
        if sample.freed or (gpu_instance_id is not None and gpu_instance_id not in self._instances(handle.index)):
            raise pynvml.NVMLError(INVALID_ARGUMENT)
        sample.index, sample.gpu_instance_id, sample.step = handle.index, gpu_instance_id, self._steps[handle.index]

    def gpm_metrics(self, first: FakeGpmSample, second: FakeGpmSample,
                    metric_ids: tuple[int, ...]) -> list[FieldAnswer]:
        self._enter("gpm_metrics", None if second.index is None else FakeHandle(second.index))
        if first.index is None or first.index != second.index or first.freed or second.freed:
            raise pynvml.NVMLError(INVALID_ARGUMENT)
        index, gi = second.index, second.gpu_instance_id
        self.gpm_asked.append((self._clock(), index, gi, tuple(metric_ids)))
        load = self.scenario.mig_instances.get(gi, 0.0) if gi is not None else self._load(index, second.step)
        mib = 1 << 20
        values = {1: 100 * load, 2: 95 * load, 3: 62 * load, 4: 6 * load, 5: 55 * load, 10: 40 * load,
                  11: 0.5 * load, 12: 18 * load, 13: 9 * load}
        if gi is None:
            values[20] = 2_400_000 * KIB * load ** 2 / mib  # MiB/s, as the throughput call's
            values[21] = 9_000_000 * KIB * load ** 3 / mib
            if self._links(index):
                up = self._links(index) - sum(1 for i, _ in self.scenario.nvlink_down if i == index)
                values[61] = up * self._nvlink_kib_per_poll(index, second.step) * 0.8 * KIB / mib
                values[60] = up * self._nvlink_kib_per_poll(index, second.step) * KIB / mib
        out = []
        for metric in metric_ids:
            value = values.get(metric)
            if metric in self.scenario.gpm_not_offered or value is None:
                out.append(FieldAnswer(NOT_SUPPORTED, 0.0))
            else:
                out.append(FieldAnswer(0, value))
        return out

    def _instances(self, index: int) -> tuple[int, ...]:
        return tuple(sorted(self.scenario.mig_instances)) if index in self.scenario.mig_enabled else ()

    def mig_gpu_instance_ids(self, handle: FakeHandle) -> list[int]:
        self._enter("mig_gpu_instance_ids", handle)
        if handle.index not in self.scenario.mig_enabled:
            raise pynvml.NVMLError(NOT_SUPPORTED)
        return list(self._instances(handle.index))

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


