"""The NVML collector: polls every GPU at ``--interval`` on its own thread, keeps one cached part.

:class:`NvmlCollector` turns NVML answers into a :class:`~gpuflow.core.snapshot.SnapshotPart`
(``source="nvml"``): the host (hostname, driver, NVML and CUDA driver versions), one
:class:`Device` per GPU and one :class:`Process` per pid holding any GPU (a job on four GPUs is
one process with four attachments). :meth:`latest` hands out the same object until a poll
produces different readings, so the agent sends a frame only when something changed.

Two threads: the poll thread (init, then a tick every interval: the fast per-device fields, the
process lists, /proc) and the sampler thread (:mod:`gpuflow.collectors.nvml.sampler`: PCIe
throughput, MIG mode, per-process utilization, which NVML is slow to give).

Faults, none of which stops the agent:

* nvmlInit fails (no driver, driver not loaded, no permission): the part carries a Problem saying
  why in plain words, and init is retried every ``init_retry_s``;
* one GPU answers GPU_IS_LOST / Unknown: it is reported ``lost`` with only its identity, a
  Problem names it, the others keep updating, and it is tried again each tick;
* one field fails (NotSupported, NoPermission, a sentinel): that field is None, nothing else;
* a pid NVML listed has left /proc by the time we look: dropped;
* a poll takes longer than the interval: the part says so; and while a poll is stuck,
  :meth:`latest` still returns at once (the cached part, plus a Problem saying NVML is not
  answering), so ``produce_snapshot`` never blocks the agent.

Constraints: NVML is initialized on the poll thread, never at import or in ``start`` (which must
return at once, inside the serving process); device handles and static facts (uuid, name, PCI
bus id) are fetched once per init; the tick budget is 1 ms per GPU (docs/nvml.md has the
measurements); nvmlShutdown happens in :meth:`stop` (and at interpreter exit if stop was missed).
"""

from __future__ import annotations

import atexit
import logging
import socket
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

from gpuflow.collectors.nvml.backend import NvmlBackend, ProcessInfo
from gpuflow.collectors.nvml.procinfo import LinuxProcReader, ProcReader, describe_cmdline
from gpuflow.collectors.nvml.query import DeviceLost, explain_init_error, nvml_query
from gpuflow.collectors.nvml.sampler import Sampled, Sampler
from gpuflow.core.context import AgentConfig
from gpuflow.core.snapshot import Attachment, Device, HostInfo, Problem, Process, SnapshotPart

log = logging.getLogger("gpuflow.nvml")

SOURCE = "nvml"
DEFAULT_INIT_RETRY_S = 30.0
FIRST_SAMPLE_WAIT_S = 0.5  #: how long the first tick waits for the sampler's first sweep
MIN_GAP_S = 0.005  #: the poll thread never spins, whatever the interval and the poll time


@dataclass(frozen=True)
class _Gpu:
    """What is fetched once per init for one device."""

    index: int
    handle: Any
    uuid: str
    name: str | None
    pci_bus_id: str | None


def cuda_version_text(version: int | None) -> str | None:
    """NVML's CUDA driver version number as text: 13000 → "13.0", 12040 → "12.4"."""
    if version is None or version <= 0:
        return None
    return f"{version // 1000}.{(version % 1000) // 10}"


class NvmlCollector:
    def __init__(
        self,
        backend: NvmlBackend,
        config: AgentConfig,
        *,
        proc_reader: ProcReader | None = None,
        notify: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        hostname: str | None = None,
        init_retry_s: float = DEFAULT_INIT_RETRY_S,
        extra_problems: tuple[Problem, ...] = (),
    ) -> None:
        self._b = backend
        self.interval_s = config.interval_s
        self._show_cmdline = config.show_cmdline
        self._procs = proc_reader if proc_reader is not None else LinuxProcReader()
        self._notify = notify if notify is not None else (lambda: None)
        self._clock = clock
        self._monotonic = monotonic
        self._hostname = hostname if hostname is not None else socket.gethostname()
        self._init_retry_s = init_retry_s
        self._extra = extra_problems
        self.sampler = Sampler(backend, fresh_s=max(2.5 * self.interval_s, 1.0), clock=clock)

        self._initialized = False
        self._next_init = 0.0  # monotonic time of the next nvmlInit attempt
        self._init_problem: Problem | None = None
        self._static_problems: tuple[Problem, ...] = ()
        self._host = HostInfo(hostname=self._hostname)
        self._gpus: tuple[_Gpu, ...] = ()
        self._busy: frozenset[int] | None = None  # GPUs that had processes at the last tick
        self._unresolved_streak = 0

        self._part: SnapshotPart | None = None
        self._lock = threading.Lock()  # guards _part against the stall check in latest()
        self._poll_started: float | None = None
        self._stall_marked: float | None = None
        self.polls = 0
        self.last_poll_s: float | None = None

        self._stop = threading.Event()
        self._first_sweep = threading.Event()
        self._poll_thread: threading.Thread | None = None
        self._sample_thread: threading.Thread | None = None
        self._threaded = False

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the poll thread (it initializes NVML); returns at once."""
        if self._poll_thread is not None:
            return
        self._threaded = True
        self._stop.clear()
        self._poll_thread = threading.Thread(target=self._poll_loop, name="gpuflow-nvml-poll",
                                             daemon=True)
        self._poll_thread.start()
        atexit.register(self._shutdown_at_exit)

    def stop(self, timeout: float = 3.0) -> None:
        """Stop both threads and call nvmlShutdown; returns within ``timeout`` seconds."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        for thread in (self._poll_thread, self._sample_thread):
            if thread is not None:
                thread.join(max(0.0, deadline - time.monotonic()))
        stuck = any(t is not None and t.is_alive() for t in (self._poll_thread, self._sample_thread))
        self._poll_thread = self._sample_thread = None
        self._threaded = False
        atexit.unregister(self._shutdown_at_exit)
        if stuck:
            log.warning("NVML is not answering; leaving nvmlShutdown to process exit")
            return
        self._shutdown()

    def _shutdown(self) -> None:
        if not self._initialized:
            return
        self._initialized = False
        self.sampler.forget()
        try:
            self._b.shutdown()
        except Exception as exc:  # noqa: BLE001 - shutting down must not raise
            log.debug("nvmlShutdown failed: %r", exc)

    def _shutdown_at_exit(self) -> None:
        self._stop.set()
        self._shutdown()

    # -- reading -------------------------------------------------------------------------------
    def latest(self) -> SnapshotPart | None:
        """The latest part; never blocks. A poll stuck past the interval adds a Problem (once)."""
        part = self._part
        started = self._poll_started
        if started is None or not self._threaded or self._stall_marked == started:
            return part
        elapsed = self._monotonic() - started
        if elapsed <= self.interval_s:
            return part
        with self._lock:
            if self._poll_started != started or self._stall_marked == started:
                return self._part
            self._stall_marked = started
            base = self._part if self._part is not None else SnapshotPart(source=SOURCE, host=self._host)
            stuck = Problem(SOURCE, severity="warning", message=(
                f"NVML is not answering: a poll has been running for {elapsed:.1f} s (interval "
                f"{self.interval_s:g} s); the GPU readings shown are stale until it returns"))
            self._part = part = replace(base, problems=base.problems + (stuck,))
        self._notify()
        return part

    # -- the poll thread ------------------------------------------------------------------------
    def _poll_loop(self) -> None:
        while not self._stop.is_set():
            started = self._monotonic()
            try:
                self.poll_once()
            except Exception:  # noqa: BLE001 - the thread must outlive any bug in one poll
                log.exception("NVML poll failed")
            elapsed = self._monotonic() - started
            self._stop.wait(max(MIN_GAP_S, self.interval_s - elapsed))

    def _sample_loop(self) -> None:
        while not self._stop.is_set():
            started = self._monotonic()
            try:
                self.sample_once()
            except Exception:  # noqa: BLE001
                log.exception("NVML sampling failed")
            self._first_sweep.set()
            elapsed = self._monotonic() - started
            self._stop.wait(max(MIN_GAP_S, self.interval_s - elapsed))

    def sample_once(self) -> None:
        """One sweep of the slow readings (the sampler thread calls this; so may tests)."""
        if self._initialized:
            self.sampler.sweep(((g.index, g.handle) for g in self._gpus), self._busy)

    def poll_once(self) -> SnapshotPart:
        """One tick: read every GPU, build the part, publish it if it changed. Returns the new part."""
        self._poll_started = self._monotonic()
        try:
            if not self._initialized and not self._try_init():
                part = SnapshotPart(source=SOURCE, host=self._host, problems=self._problems_base())
                return self._publish(part)
            t0 = self._monotonic()
            part = self._tick()
            elapsed = self._monotonic() - t0
            self.last_poll_s = elapsed
            if elapsed > self.interval_s:
                part = replace(part, problems=part.problems + (Problem(SOURCE, severity="warning", message=(
                    f"NVML is slow: the last poll took {elapsed:.2f} s, longer than the "
                    f"{self.interval_s:g} s interval, so readings arrive late")),))
            return self._publish(part)
        finally:
            self.polls += 1
            self._poll_started = None

    def _publish(self, part: SnapshotPart) -> SnapshotPart:
        with self._lock:
            if self._part is not None and part == self._part:
                return self._part
            self._part = part
        self._notify()
        return part

    def _problems_base(self) -> tuple[Problem, ...]:
        init = (self._init_problem,) if self._init_problem is not None else ()
        return self._extra + init + self._static_problems

    # -- init -----------------------------------------------------------------------------------
    def _try_init(self) -> bool:
        now = self._monotonic()
        if now < self._next_init:
            return False
        try:
            self._b.init()  # not through nvml_query: its failure is the collector's state, not a field
        except Exception as exc:  # noqa: BLE001 - NVMLError, OSError from ctypes, anything
            message = explain_init_error(exc)
            if self._init_problem is None or self._init_problem.message != message:
                log.warning("%s (retrying every %g s)", message, self._init_retry_s)
            self._init_problem = Problem(SOURCE, message, severity="error")
            self._next_init = now + self._init_retry_s
            return False
        self._init_problem = None
        self._initialized = True
        self.sampler.forget()
        self._read_static()
        if self._threaded and self._sample_thread is None:
            self._first_sweep.clear()
            self._sample_thread = threading.Thread(target=self._sample_loop,
                                                   name="gpuflow-nvml-sample", daemon=True)
            self._sample_thread.start()
            self._first_sweep.wait(min(FIRST_SAMPLE_WAIT_S, self.interval_s))
        self._poll_started = self._monotonic()  # a slow init is not a slow poll
        return True

    def _read_static(self) -> None:
        b = self._b
        problems: list[Problem] = []
        self._host = HostInfo(
            hostname=self._hostname,
            driver_version=_static(b.driver_version),
            nvml_version=_static(b.nvml_version),
            cuda_driver_version=cuda_version_text(_static(b.cuda_driver_version)),
        )
        count = _static(b.device_count) or 0
        gpus = []
        for index in range(count):
            try:
                handle = nvml_query(b.handle_by_index, index)
            except DeviceLost as exc:
                problems.append(Problem(SOURCE, severity="error", message=(
                    f"GPU {index} is lost (NVML: {exc}) and is not shown; a GPU reset or a reboot "
                    "is usually needed (see dmesg for Xid errors)")))
                continue
            if handle is None:
                problems.append(Problem(SOURCE, severity="warning", message=(
                    f"GPU {index} could not be opened through NVML (no permission or not "
                    "supported) and is not shown")))
                continue
            gpus.append(_Gpu(
                index=index,
                handle=handle,
                uuid=_static(b.uuid, handle) or f"nvml-index-{index}",
                name=_static(b.name, handle),
                pci_bus_id=_static(b.pci_bus_id, handle),
            ))
        if count == 0:
            problems.append(Problem(SOURCE, "NVML found no NVIDIA GPUs on this machine",
                                    severity="info"))
        self._gpus = tuple(gpus)
        self._busy = None
        self._static_problems = tuple(problems)

    # -- one tick -------------------------------------------------------------------------------
    def _tick(self) -> SnapshotPart:
        problems = list(self._problems_base())
        devices: list[Device] = []
        held: dict[int, list[Attachment]] = {}
        busy = set()
        now_us = int(self._clock() * 1e6)
        for gpu in self._gpus:
            try:
                device, attachments = self._read_gpu(gpu, now_us)
            except DeviceLost as exc:
                device, attachments = self._identity(gpu, lost=True), {}
                problems.append(Problem(SOURCE, severity="error", message=(
                    f"GPU {gpu.index} ({gpu.name or 'unknown'}, {gpu.uuid}) is lost: NVML says "
                    f"\"{exc}\". Its readings are blank; the other GPUs keep updating. A GPU reset "
                    "or a reboot is usually needed (see dmesg for Xid errors).")))
            except Exception as exc:  # noqa: BLE001 - a bug or odd backend: lose this GPU only
                log.exception("reading GPU %d failed", gpu.index)
                device, attachments = self._identity(gpu, lost=False), {}
                problems.append(Problem(SOURCE, severity="error", message=(
                    f"reading GPU {gpu.index} failed ({type(exc).__name__}: {exc}); "
                    "its readings are blank")))
            devices.append(device)
            if attachments:
                busy.add(gpu.index)
            for pid, attachment in attachments.items():
                held.setdefault(pid, []).append(attachment)
        self._busy = frozenset(busy)
        processes = self._describe(held, problems)
        return SnapshotPart(source=SOURCE, host=self._host, devices=tuple(devices),
                            processes=processes, problems=tuple(problems))

    @staticmethod
    def _identity(gpu: _Gpu, lost: bool) -> Device:
        return Device(index=gpu.index, uuid=gpu.uuid, name=gpu.name, pci_bus_id=gpu.pci_bus_id,
                      lost=lost)

    def _read_gpu(self, gpu: _Gpu, now_us: int) -> tuple[Device, dict[int, Attachment]]:
        b, h, q = self._b, gpu.handle, nvml_query
        util = q(b.utilization, h)
        mem = q(b.memory, h)
        temperature = q(b.temperature, h)
        power = q(b.power_usage, h)
        limit = q(b.power_limit, h)
        clock_sm = q(b.clock_sm, h)
        clock_mem = q(b.clock_mem, h)
        compute = q(b.compute_processes, h, not_found=[])
        graphics = q(b.graphics_processes, h, not_found=[])
        sampled = self.sampler.get(gpu.index)
        device = Device(
            index=gpu.index,
            uuid=gpu.uuid,
            name=gpu.name,
            pci_bus_id=gpu.pci_bus_id,
            utilization_gpu_pct=None if util is None else util.gpu,
            utilization_memory_pct=None if util is None else util.memory,
            memory_used_bytes=None if mem is None else mem.used,
            memory_total_bytes=None if mem is None else mem.total,
            temperature_c=temperature,
            power_draw_w=None if power is None else power / 1000,
            power_limit_w=None if limit is None else limit / 1000,
            clock_sm_mhz=clock_sm,
            clock_mem_mhz=clock_mem,
            pcie_tx_bytes_per_s=None if sampled is None else sampled.pcie_tx_bytes_per_s,
            pcie_rx_bytes_per_s=None if sampled is None else sampled.pcie_rx_bytes_per_s,
            mig_mode=None if sampled is None else sampled.mig_mode,
        )
        if not compute and not graphics:
            return device, {}
        return device, self._attachments(gpu, compute or (), graphics or (), sampled, now_us)

    def _attachments(self, gpu: _Gpu, compute: Any, graphics: Any, sampled: Sampled | None,
                     now_us: int) -> dict[int, Attachment]:
        kinds: dict[int, list[Any]] = {}  # pid → [compute?, graphics?, memory]
        entry: ProcessInfo
        for entry in compute:
            kinds[entry.pid] = [True, False, entry.used_memory]
        for entry in graphics:
            known = kinds.get(entry.pid)
            if known is None:
                kinds[entry.pid] = [False, True, entry.used_memory]
            else:
                known[1] = True
                if known[2] is None:
                    known[2] = entry.used_memory
        util = sampled.proc_util if sampled is not None and sampled.proc_util_supported else None
        oldest = now_us - int(self.sampler.fresh_s * 1e6)
        out = {}
        for pid, (is_compute, is_graphics, memory) in kinds.items():
            sample = None if util is None else util.get(pid)
            if sample is not None and sample.timestamp_us < oldest:
                sample = None
            out[pid] = Attachment(
                device_index=gpu.index,
                device_uuid=gpu.uuid,
                kind="compute+graphics" if is_compute and is_graphics else (
                    "compute" if is_compute else "graphics"),
                memory_used_bytes=memory,
                sm_util_pct=None if sample is None else sample.sm,
                mem_util_pct=None if sample is None else sample.mem,
            )
        return out

    def _describe(self, held: dict[int, list[Attachment]], problems: list[Problem]) -> tuple[Process, ...]:
        """Name the pids from /proc; drop those that vanished (unless none of them can be seen)."""
        if not held:
            self._unresolved_streak = 0
            return ()
        facts = {pid: self._procs.read(pid) for pid in held}
        if any(f is not None for f in facts.values()):
            self._unresolved_streak = 0
        else:
            self._unresolved_streak += 1
        # NVML reports pids of the host's PID namespace. If none of them exist here twice in a
        # row, we are in another namespace (a container): keep them, nameless, and say why.
        foreign = self._unresolved_streak >= 2
        if foreign:
            problems.append(Problem(SOURCE, severity="info", message=(
                "NVML reports process ids that do not exist in this PID namespace (GPUFlow runs in "
                "a container without the host's PID namespace?): process names, users and command "
                "lines are unknown")))
        out = []
        for pid in sorted(held):
            f = facts[pid]
            attachments = tuple(sorted(held[pid], key=lambda a: a.device_index))
            if f is None:
                if foreign:
                    out.append(Process(pid=pid, attachments=attachments))
                continue  # vanished between NVML's answer and our look at /proc
            out.append(Process(pid=pid, name=f.name, user=f.user,
                               cmdline=describe_cmdline(f.argv, self._show_cmdline),
                               attachments=attachments))
        return tuple(out)


def _static(func: Callable[..., Any], *args: Any) -> Any:
    """A once-per-init read: None if unavailable, also if the GPU is lost right now."""
    try:
        return nvml_query(func, *args)
    except DeviceLost:
        return None
