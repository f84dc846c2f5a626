"""The NVML collector: polls every GPU at ``--interval`` on its own thread, keeps one cached part.

:class:`NvmlCollector` turns NVML answers into a :class:`~gpuflow.core.snapshot.SnapshotPart`
(``source="nvml"``): the host (hostname, driver, NVML and CUDA driver versions), one
:class:`Device` per GPU and one :class:`Process` per pid holding any GPU (a job on four GPUs is
one process with four attachments), with who it belongs to (its container, pod and job:
:mod:`gpuflow.workload`, its cgroup read once per process). :meth:`latest` hands out the same
object until a poll produces different readings, so the agent sends a frame only when something
changed.

Two threads: the poll thread (init, then a tick every interval: the fast per-device fields, the
clock event reasons, each GPU's GPM pair, the process lists, /proc) and the sampler thread
(:mod:`gpuflow.collectors.nvml.sampler`: PCIe throughput, MIG mode, per-process utilization and
the energy counter, which NVML is slow to give, and the health and link readings that need no
tick-rate view). Once per init it reads each GPU's identity, its
maximum PCIe generation and width, whether it has GPM (then two GPM sample buffers), its NVLinks
and what each reaches, and opens an XID event set; :meth:`stop` gives those back before
nvmlShutdown. The host part carries the collector's own state (``nvml_up``, ticks, the last
tick's duration, failures so far) for /metrics. Each tick's part also
goes into the history (:mod:`gpuflow.collectors.nvml.history`, when the collector has one), stamped
with the clock's time at the tick's start.

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
bus id) are fetched once per init; the tick budget is 1 ms per GPU and its goal is at most 1.2×
the bare pynvml calls (docs/nvml.md has the measurements), so the tick calls the backend inline
and rebuilds a frozen Device / Attachment / Process only when its readings changed;
nvmlShutdown happens in :meth:`stop` (and at interpreter exit if stop was missed).
"""

from __future__ import annotations

import atexit
import logging
import socket
import threading
import time
from dataclasses import replace
from typing import Any, Callable

import pynvml

from gpuflow.collectors.nvml.backend import NvmlBackend
from gpuflow.collectors.nvml.gpm import MIN_GAP_S as GPM_MIN_GAP_S, GpmTracker
from gpuflow.collectors.nvml.history import HistoryStore
from gpuflow.collectors.nvml.procinfo import LinuxProcReader, ProcReader, describe_cmdline
from gpuflow.collectors.nvml.query import DeviceLost, explain_init_error, nvml_query
from gpuflow.collectors.nvml.readings import (
    GpuState,
    attachments_of,
    make_part,
    make_process,
    pcie_peak_bytes_per_s,
    read_gpu,
)
from gpuflow.collectors.nvml.sampler import Remote, Sampler, SweepTarget
from gpuflow.testing.ab_period import ab_period_ms, seconds_until_on
from gpuflow.collectors.nvml.options import DEFAULT_INIT_RETRY_S
from gpuflow.core.context import AgentConfig
from gpuflow.core.problem_log import restates
from gpuflow.core.snapshot import Attachment, Device, HostInfo, Problem, Process, SnapshotPart, Workload
from gpuflow.workload.resolver import WorkloadResolver

log = logging.getLogger("gpuflow.nvml")

SOURCE = "nvml"
FIRST_SAMPLE_WAIT_S = 0.5  #: how long the first tick waits for the sampler's first sweep
MIN_GAP_S = 0.005  #: the poll thread never spins, whatever the interval and the poll time


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
        history: HistoryStore | None = None,
        gpm_gap_s: float = GPM_MIN_GAP_S,
        workloads: WorkloadResolver | None = None,
    ) -> None:
        self._b = backend
        #: GPM pairs are at least this far apart (the benchmark sets 0: a pair every tick)
        self.gpm_gap_s = gpm_gap_s
        self.history = history  #: the readings over time (None: not kept)
        self.interval_s = config.interval_s
        self._show_cmdline = config.show_cmdline
        self._procs = proc_reader if proc_reader is not None else LinuxProcReader()
        #: who each process belongs to (its cgroup, read once per process; names where known)
        self.workloads = workloads if workloads is not None else WorkloadResolver(
            getattr(self._procs, "cgroup", _no_cgroup))
        self._notify = notify if notify is not None else (lambda: None)
        self._clock = clock
        self._monotonic = monotonic
        self._hostname = hostname if hostname is not None else socket.gethostname()
        self._init_retry_s = init_retry_s
        self._extra = extra_problems
        self.sampler = Sampler(backend, fresh_s=max(2.5 * self.interval_s, 1.0), clock=clock,
                               monotonic=monotonic)

        self._initialized = False
        self._next_init = 0.0  # monotonic time of the next nvmlInit attempt
        self._init_problem: Problem | None = None
        self._static_problems: tuple[Problem, ...] = ()
        self._host = HostInfo(hostname=self._hostname)
        self._gpus: tuple[GpuState, ...] = ()
        self._targets: tuple[SweepTarget, ...] = ()  # the GPUs as the sampler sees them
        self.poll_errors = 0  #: GPU reads that failed, and ticks longer than the interval
        self._built_host: HostInfo | None = None  # the static host the last built part was made from
        self._busy: frozenset[int] | None = None  # GPUs that had processes at the last tick
        self._busy_list: list[int] | None = None  # the same, as the tick found them
        self._unresolved_streak = 0
        #: last tick's: pid → (its /proc facts, attachments, Process, (index, uuid) of its GPUs)
        self._known_procs: dict[int, tuple[Any, tuple[Attachment, ...], Process, Any]] = {}
        self._shown_procs: tuple[Process, ...] = ()  # the processes of the last part the tick built
        self._built: SnapshotPart | None = None  # the last part the tick built

        self._part: SnapshotPart | None = None
        self._lock = threading.Lock()  # guards _part against the stall check in latest()
        self._poll_started: float | None = None
        self._stall_marked: float | None = None
        self.polls = 0
        self.last_poll_s: float | None = None

        self._stop = threading.Event()
        self._first_sweep = threading.Event()
        self._ab_period_ms = ab_period_ms()   # 0 unless benchmarking (gpuflow.testing.ab_period)
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
        self.workloads.start()
        self._poll_thread = threading.Thread(target=self._poll_loop, name="gpuflow-nvml-poll",
                                             daemon=True)
        self._poll_thread.start()
        atexit.register(self._shutdown_at_exit)

    def stop(self, timeout: float = 3.0) -> None:
        """Stop both threads and call nvmlShutdown; returns within ``timeout`` seconds."""
        self._stop.set()
        self.workloads.stop()
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
        self._release_per_init()
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
            if self._stand_aside():
                continue
            started = self._monotonic()
            try:
                self.poll_once()
            except Exception:  # noqa: BLE001 - the thread must outlive any bug in one poll
                self.poll_errors += 1
                log.exception("NVML poll failed")
            elapsed = self._monotonic() - started
            self._stop.wait(max(MIN_GAP_S, self.interval_s - elapsed))

    def _sample_loop(self) -> None:
        while not self._stop.is_set():
            if self._stand_aside():
                continue
            started = self._monotonic()
            try:
                self.sample_once()
            except Exception:  # noqa: BLE001
                log.exception("NVML sampling failed")
            self._first_sweep.set()
            elapsed = self._monotonic() - started
            self._stop.wait(max(MIN_GAP_S, self.interval_s - elapsed))

    def _stand_aside(self) -> bool:
        """Under GPUFLOW_AB_PERIOD_MS (benchmarking: gpuflow.testing.ab_period), wait out an off
        period without calling NVML; True when it waited."""
        gap = seconds_until_on(self._ab_period_ms)
        if gap <= 0:
            return False
        self._stop.wait(gap)
        return True

    def sample_once(self) -> None:
        """One sweep of the slow readings (the sampler thread calls this; so may tests)."""
        if self._initialized:
            self.sampler.sweep(self._targets, self._busy)

    def forget_built(self) -> None:
        """Drop every object the last tick built, so that the next one builds all anew, as when
        every reading changed (the benchmark's worst case; tests compare it with reuse)."""
        for gpu in self._gpus:
            gpu.readings = gpu.values = gpu.device = gpu.shown = gpu.health = gpu.links = None
            gpu.attached = {}
        self._known_procs = {}
        self._shown_procs = ()
        self._built = None

    def poll_once(self) -> SnapshotPart:
        """One tick: read every GPU, build the part, publish it if it changed. Returns the new part."""
        self._poll_started = self._monotonic()
        try:
            if not self._initialized and not self._try_init():
                part = SnapshotPart(source=SOURCE, host=replace(self._host, nvml_up=False),
                                    problems=self._problems_base())
                return self._publish(part)
            t0 = self._poll_started  # _try_init moves it past a slow init: that is not a slow poll
            history = self.history
            at = self._clock() if history is not None else 0.0
            part, new = self._tick()
            elapsed = self._monotonic() - t0
            self.last_poll_s = elapsed
            if history is not None:  # GPUFlow's own work: not part of "NVML is slow"
                history.record(at, part.devices, part.processes)
            if elapsed > self.interval_s:
                self.poll_errors += 1
                part = replace(part, problems=part.problems + (Problem(SOURCE, severity="warning", message=(
                    f"NVML is slow: the last poll took {elapsed:.2f} s, longer than the "
                    f"{self.interval_s:g} s interval, so readings arrive late")),))
            return self._publish(part, new)
        finally:
            self.polls += 1
            self._poll_started = None

    def _publish(self, part: SnapshotPart, new: bool = False) -> SnapshotPart:
        """Make ``part`` the latest unless it equals it; ``new``: the caller knows it differs."""
        if part is self._part:  # the tick found nothing new (no lock: latest() only replaces it)
            return part
        with self._lock:
            if self._part is not None and not new and part == self._part:
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
                log.warning("%s (retrying every %g s)", message, self._init_retry_s, extra=restates(message))
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
            gpu = GpuState(index, handle, _static(b.uuid, handle) or f"nvml-index-{index}",
                           _static(b.name, handle), _static(b.pci_bus_id, handle))
            self._read_links_and_gpm(gpu)
            gpus.append(gpu)
        if count == 0:
            problems.append(Problem(SOURCE, "NVML found no NVIDIA GPUs on this machine",
                                    severity="info"))
        _resolve_peers(gpus)
        self._gpus = tuple(gpus)
        self._targets = tuple(SweepTarget(g.index, g.handle, g.xid_watch, g.nvlinks, g.gpm)
                              for g in gpus)
        self._busy = self._busy_list = None
        self._known_procs = {}
        self._shown_procs = ()
        self._built = None
        self._static_problems = tuple(problems)

    def _read_links_and_gpm(self, gpu: GpuState) -> None:
        """Once per init: the GPU's maximum PCIe link, GPM support (two sample buffers), its
        NVLinks and what they reach, and an XID event set. Anything NVML cannot give stays None."""
        b, h = self._b, gpu.handle
        link = _static(b.pcie_link_max, h)
        if link is not None:
            gpu.pcie_max = (link[0], link[1])
            gpu.pcie_peak = pcie_peak_bytes_per_s(link[0], link[1])
        if _static(b.gpm_supported, h):
            gpu.gpm = GpmTracker.open(b)
        gpu.nvlinks = _discover_nvlinks(b, h)
        gpu.xid_watch = _static(b.xid_watch, h)

    def _release_per_init(self) -> None:
        """Give back what init took from NVML (GPM buffers, XID event sets): before nvmlShutdown."""
        b = self._b
        for gpu in self._gpus:
            if gpu.gpm is not None:
                gpu.gpm.close(b)
            for tracker in gpu.gpm_instances.values():
                tracker.close(b)
            gpu.gpm_instances = {}
            if gpu.xid_watch is not None:
                try:
                    b.xid_unwatch(gpu.xid_watch)
                except Exception as exc:  # noqa: BLE001 - shutting down must not raise
                    log.debug("nvmlEventSetFree failed: %r", exc)
                gpu.xid_watch = None

    # -- one tick -------------------------------------------------------------------------------
    # The hot path (docs/nvml.md, "Cost"). readings.py reads each GPU and reuses what did not
    # change; here the part is reused when nothing in it changed, and not compared with the
    # previous one when a device certainly changed.
    def _tick(self) -> tuple[SnapshotPart, bool]:
        """Read every GPU. Returns the part (the last one built if nothing in it changed) and
        whether it is known to differ from every earlier part (a device's readings moved)."""
        problems: list[Problem] = []  # this tick's, after the standing ones
        devices: list[Device] = []
        held: dict[int, list[Attachment]] = {}
        busy: list[int] = []
        oldest_us = None  # per-process samples older than this are not shown
        last = self._built
        fresh = last is None  # may anything differ from the last part built?
        new = False  # does something certainly differ?
        now, gap = self._monotonic(), self.gpm_gap_s
        for gpu in self._gpus:
            try:
                device, attachments = read_gpu(self._b, gpu, self.sampler.get(gpu.index), now, gap)
                if attachments:
                    if oldest_us is None:
                        oldest_us = int(self._clock() * 1e6) - int(self.sampler.fresh_s * 1e6)
                    attachments = attachments_of(gpu, attachments, oldest_us)
            except DeviceLost as exc:
                self.poll_errors += 1
                gpu.readings = None
                gpu.attached = {}
                if gpu.gpm is not None:
                    gpu.gpm.forget_pair()
                device, attachments = gpu.lost_device, ()
                problems.append(Problem(SOURCE, severity="error", message=(
                    f"GPU {gpu.index} ({gpu.name or 'unknown'}, {gpu.uuid}) is lost: NVML says "
                    f"\"{exc}\". Its readings are blank; the other GPUs keep updating. A GPU reset "
                    "or a reboot is usually needed (see dmesg for Xid errors).")))
            except Exception as exc:  # noqa: BLE001 - a bug or odd backend: lose this GPU only
                log.exception("reading GPU %d failed", gpu.index)
                self.poll_errors += 1
                gpu.readings = None
                gpu.attached = {}
                device, attachments = gpu.blank_device, ()
                problems.append(Problem(SOURCE, severity="error", message=(
                    f"reading GPU {gpu.index} failed ({type(exc).__name__}: {exc}); "
                    "its readings are blank")))
            devices.append(device)
            shown = gpu.shown
            if device is not shown:
                gpu.shown = device
                fresh = True
                # last tick showed this GPU's Device of other values (a new Device object means
                # new values, see read_gpu), so this part differs from every part before it
                if (device is gpu.device and shown is not None and shown is not gpu.lost_device
                        and shown is not gpu.blank_device):
                    new = True
            if attachments:
                busy.append(gpu.index)
                for pid, attachment in attachments:
                    mine = held.get(pid)
                    if mine is None:
                        held[pid] = [attachment]
                    else:
                        mine.append(attachment)
        if busy != self._busy_list:
            self._busy_list = busy
            self._busy = frozenset(busy)
        processes = self._describe(held, problems) if held else self._no_processes()
        problems.extend(self.workloads.problems(SOURCE))  # the Kubernetes API, the kubelet
        problems_t = self._problems_base() + tuple(problems) if problems else self._problems_base()
        if (not fresh and processes is last.processes and problems_t == last.problems
                and self._host is self._built_host):
            return last, False
        self._built_host = h = self._host
        host = HostInfo(h.hostname, h.driver_version, h.nvml_version, h.cuda_driver_version, True,
                        self.polls, self.last_poll_s, self.poll_errors)
        self._built = part = make_part(SOURCE, host, tuple(devices), processes, (), problems_t, (), (), False)
        return part, new

    def _no_processes(self) -> tuple[Process, ...]:
        self._unresolved_streak = 0
        if self._known_procs:
            self._known_procs = {}
            self.workloads.retain(())
        self._shown_procs = ()
        return ()

    def _describe(self, held: dict[int, list[Attachment]], problems: list[Problem]) -> tuple[Process, ...]:
        """Name the pids from /proc; drop those that vanished (unless none of them can be seen).

        ``held[pid]`` lists the attachments in device order (the GPUs are read in index order).
        A process equal to last tick's (same /proc facts, same attachment objects) is that
        same object, and if every process is, the tuple is last tick's too."""
        read = self._procs.read
        facts = [(pid, read(pid)) for pid in sorted(held)]
        for _, f in facts:
            if f is not None:
                self._unresolved_streak = 0
                break
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
        before, now = self._known_procs, {}
        out = []
        changed = False
        workload_of = self.workloads.workload
        for pid, f in facts:
            if f is None and not foreign:
                continue  # vanished between NVML's answer and our look at /proc
            attachments = tuple(held[pid])
            known = before.get(pid)
            same = known is not None and known[1] == attachments
            devices = known[3] if same else _devices(attachments)  # type: ignore[index]
            if known is not None and known[0] == f:
                old = known[2]
                workload = workload_of(pid, devices) if f is not None else None
                if same and old.workload is workload:
                    process = old
                else:  # same process, other readings: its name and command line stand
                    changed = True
                    process = make_process(pid, old.name, old.user, old.cmdline, attachments, None,
                                           workload)
            else:
                changed = True
                if known is not None:
                    self.workloads.forget(pid)  # another process has this pid now
                # a pid of another PID namespace (f None) may name an unrelated process here
                workload = workload_of(pid, devices) if f is not None else None
                if f is None:
                    process = make_process(pid, None, None, None, attachments, None, workload)
                else:
                    process = make_process(pid, f.name, f.user,
                                           describe_cmdline(f.argv, self._show_cmdline),
                                           attachments, None, workload)
            if workload is not None and workload.gpus_unallocated:
                problems.append(_unallocated_problem(process, workload))
            now[pid] = (f, attachments, process, devices)
            out.append(process)
        self._known_procs = now
        self.workloads.retain(now)
        if changed or len(out) != len(self._shown_procs):
            self._shown_procs = tuple(out)
        return self._shown_procs


def _no_cgroup(pid: int) -> None:
    """The cgroup reader of a ProcReader that has none: no process belongs to anything."""
    return None


def _devices(attachments: tuple[Attachment, ...]) -> tuple[tuple[int, str], ...]:
    """The (index, uuid) of each GPU a process holds: what its pod's allocation is checked against."""
    return tuple((a.device_index, a.device_uuid) for a in attachments)


def _unallocated_problem(process: Process, w: Workload) -> Problem:
    where = f"pod {w.pod_namespace}/{w.pod_name}" + (
        f", container {w.container_name}" if w.container_name else "")
    gpus = ", ".join(str(i) for i in w.gpus_unallocated)
    return Problem(SOURCE, severity="warning", message=(
        f"process {process.pid} ({where}) uses GPU {gpus}, which the kubelet did not allocate to "
        "its container"))


def _discover_nvlinks(b: NvmlBackend, handle: Any) -> tuple[Remote, ...]:
    """The NVLinks NVML answers for (a PCIe GPU has none: every link is NotSupported) and the
    PCI bus id each reaches; the peer GPU's index is filled in by :func:`_resolve_peers`."""
    links = []
    for link in range(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            b.nvlink_state(handle, link)
        except pynvml.NVMLError as exc:
            if isinstance(exc, (pynvml.NVMLError_GpuIsLost, pynvml.NVMLError_Unknown,
                                pynvml.NVMLError_FunctionNotFound)):
                break
            continue  # NotSupported / InvalidArgument: no such link
        links.append(Remote(link, _static(b.nvlink_remote_bus_id, handle, link), None))
    return tuple(links)


def _bus_key(bus_id: str | None) -> tuple[int, str] | None:
    """A PCI bus id in a comparable form: NVML writes the domain with 4 or 8 digits."""
    if not bus_id or ":" not in bus_id:
        return None
    domain, _, rest = bus_id.partition(":")
    try:
        return int(domain, 16), rest.lower()
    except ValueError:
        return None


def _resolve_peers(gpus: list[GpuState]) -> None:
    """Fill in each NVLink's peer GPU index where its remote bus id is a GPU of this host."""
    by_bus = {_bus_key(g.pci_bus_id): g.index for g in gpus if _bus_key(g.pci_bus_id) is not None}
    for g in gpus:
        if g.nvlinks:
            g.nvlinks = tuple(r._replace(device_index=by_bus.get(_bus_key(r.pci_bus_id)))
                              for r in g.nvlinks)


def _static(func: Callable[..., Any], *args: Any) -> Any:
    """A once-per-init read: None if unavailable, also if the GPU is lost right now."""
    try:
        return nvml_query(func, *args)
    except DeviceLost:
        return None
