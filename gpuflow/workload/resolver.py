"""One :class:`~gpuflow.core.snapshot.Workload` per pid: its cgroup ids, cached, joined with names.

A collector asks :meth:`WorkloadResolver.workload` for every GPU process on every tick. The
cgroup file of a pid is read and parsed once and kept (a process that is in no container, pod or
job is kept as such: misses are cached too), until the collector says the pid is another process
now (:meth:`forget`) or no longer holds a GPU (:meth:`retain`). The Kubernetes names
(:class:`NameSource`) and the kubelet's device allocations (:class:`AllocationSource`) are joined
in on each call from what their own threads last fetched; a miss asks them to fetch again (each
rate-limits itself), and the next tick after their answer shows it.

The same Workload object comes back for as long as nothing it holds changed, so the collector can
keep its Process objects (and skip a frame) when nothing did.

Constraints: called on the collector's poll thread, once per GPU process per tick: a dict look-up
and two integer comparisons when nothing changed; the one read of /proc per new process is bounded
(:mod:`gpuflow.workload.cgroup`). The cache is bounded by the processes the collector keeps asking
about, and at most :data:`MAX_PIDS` in any case.
"""

from __future__ import annotations

from typing import Callable, Iterable, NamedTuple, Protocol

from gpuflow.core.snapshot import Problem, Workload
from gpuflow.workload.cgroup import CgroupIds, parse_cgroup

MAX_PIDS = 4096  #: pids kept; beyond it the cache starts again (a collector prunes it every tick)


class PodNames(NamedTuple):
    """What the API server says of a pod, and of the container a process is in."""

    pod_name: str
    namespace: str
    container_name: str | None  #: None: no container of the pod has that id (yet)
    container_runtime: str | None  #: from the container's status ("containerd://…"), if known


class NameSource(Protocol):
    """Pod and container names, fetched by a thread of its own."""

    #: changes whenever what :meth:`names` answers may have changed
    version: int

    def names(self, pod_uid: str, container_id: str | None) -> PodNames | None:
        """The pod's names (None: unknown); a miss asks for a new fetch."""


class AllocationSource(Protocol):
    """The devices the kubelet allocated to each container, fetched by a thread of its own."""

    version: int

    def devices(self, namespace: str, pod_name: str, container_name: str | None) -> tuple[str, ...] | None:
        """The GPU device ids allocated to the container (to the whole pod when the container is
        not known); None when the kubelet did not say (yet)."""


class _Entry:
    __slots__ = ("ids", "key", "workload")

    def __init__(self, ids: CgroupIds) -> None:
        self.ids = ids
        self.key: tuple[object, ...] | None = None  #: what ``workload`` was built from
        self.workload: Workload | None = None


class WorkloadResolver:
    """The poll thread's view of who each GPU process belongs to.

    :param read_cgroup: pid → the bytes of its cgroup file, or None (unreadable, gone).
    :param names: pod and container names, or None (no Kubernetes API).
    :param allocations: the kubelet's allocations, or None (no pod-resources socket).
    """

    def __init__(self, read_cgroup: Callable[[int], bytes | None], names: NameSource | None = None,
                 allocations: AllocationSource | None = None) -> None:
        self._read = read_cgroup
        self.names = names
        self.allocations = allocations
        self._entries: dict[int, _Entry] = {}
        self.reads = 0  #: cgroup files read so far (a test sees the cache work)
        self._problem_lines: tuple[str, ...] = ()
        self._problems: tuple[Problem, ...] = ()

    def workload(self, pid: int, devices: tuple[tuple[int, str], ...] = ()) -> Workload | None:
        """Who ``pid`` belongs to (None: no container, pod or job), given the GPUs it holds as
        (index, uuid) pairs: those its container was not allocated are named in the answer."""
        entry = self._entries.get(pid)
        if entry is None:
            if len(self._entries) >= MAX_PIDS:
                self._entries.clear()
            self.reads += 1
            entry = self._entries[pid] = _Entry(parse_cgroup(self._read(pid)))
        ids = entry.ids
        if ids.empty:
            return None
        names, allocations = self.names, self.allocations
        key = (names.version if names is not None else None,
               allocations.version if allocations is not None else None,
               devices if ids.pod_uid is not None and allocations is not None else None)
        if key == entry.key:
            return entry.workload
        made = self._make(ids, devices)
        if made != entry.workload:
            entry.workload = made
        entry.key = key
        return entry.workload

    def start(self) -> None:
        """Start the sources' own threads (each fetches when asked and now and then)."""
        for source in (self.names, self.allocations):
            start = getattr(source, "start", None)
            if start is not None:
                start()

    def stop(self) -> None:
        for source in (self.names, self.allocations):
            stop = getattr(source, "stop", None)
            if stop is not None:
                stop()

    def problems(self, source: str) -> tuple[Problem, ...]:
        """Why a source's latest fetch failed, as warnings of the collector ``source``."""
        lines = tuple(p for p in (getattr(self.names, "problem", None),
                                  getattr(self.allocations, "problem", None)) if p)
        if lines != self._problem_lines:
            self._problem_lines = lines
            self._problems = tuple(Problem(source, line, "warning") for line in lines)
        return self._problems

    def forget(self, pid: int) -> None:
        """``pid`` is another process now: read its cgroup again when next asked."""
        self._entries.pop(pid, None)

    def retain(self, pids: Iterable[int]) -> None:
        """Forget every pid but ``pids`` (the processes that still hold a GPU)."""
        keep = pids if isinstance(pids, (dict, set, frozenset)) else set(pids)
        if len(keep) != len(self._entries) or any(pid not in keep for pid in self._entries):
            self._entries = {pid: e for pid, e in self._entries.items() if pid in keep}

    def _make(self, ids: CgroupIds, devices: tuple[tuple[int, str], ...]) -> Workload:
        pod = None
        if ids.pod_uid is not None and self.names is not None:
            pod = self.names.names(ids.pod_uid, ids.container_id)
        if pod is None:
            return Workload(container_id=ids.container_id, container_runtime=ids.container_runtime,
                            pod_uid=ids.pod_uid, slurm_job_id=ids.slurm_job_id)
        allocated = None
        if self.allocations is not None:
            allocated = self.allocations.devices(pod.namespace, pod.pod_name, pod.container_name)
        return Workload(
            container_id=ids.container_id,
            container_runtime=ids.container_runtime or pod.container_runtime,
            pod_uid=ids.pod_uid, pod_name=pod.pod_name, pod_namespace=pod.namespace,
            container_name=pod.container_name, slurm_job_id=ids.slurm_job_id,
            gpus_allocated=allocated, gpus_unallocated=unallocated(devices, allocated))


def unallocated(devices: tuple[tuple[int, str], ...], allocated: tuple[str, ...] | None) -> tuple[int, ...]:
    """The indexes of ``devices`` (index, uuid) that ``allocated`` does not name, by uuid or by
    index (the device plugin's two id strategies). Nothing when the allocation is unknown, or
    names MIG devices (a MIG instance's id is not its GPU's uuid: not compared)."""
    if allocated is None or any(a.startswith("MIG-") for a in allocated):
        return ()
    given = set(allocated)
    return tuple(index for index, uuid in devices if uuid not in given and str(index) not in given)
