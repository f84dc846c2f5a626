"""``/proc/<pid>/cgroup`` → the container id, the pod UID and the Slurm job id of a process.

The file has one line per hierarchy, ``<id>:<controllers>:<path>``: a single ``0::<path>`` on
cgroup v2, a dozen controller lines on v1 (and on hybrid systems both). The path says who placed
the process there:

====================================  =========================================================
``/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_with_underscores>.slice/``
``cri-containerd-<id>.scope``         Kubernetes, systemd cgroup driver, containerd
  ``…/crio-<id>.scope``               … CRI-O (``crio-conmon-<id>.scope`` is its monitor, not the container)
  ``…/docker-<id>.scope``             … Docker (cri-dockerd)
``/kubepods/burstable/pod<uid>/<id>`` Kubernetes, cgroupfs driver (the runtime is not named)
``/system.slice/docker-<id>.scope``   Docker, systemd driver; ``/docker/<id>`` with cgroupfs
``/system.slice/slurmstepd.scope/job_<n>/step_0/…``   Slurm on cgroup v2
``/slurm/uid_<n>/job_<n>/step_0/…``   Slurm on cgroup v1 (``/slurm_<node>/…`` with several slurmds)
====================================  =========================================================

An agent in a private cgroup namespace (a container without the host's) reads other processes'
paths relative to its own root, so they may begin with ``/..`` segments: those are skipped.

**Only what the trusted side placed counts.** A workload with a delegated cgroup subtree (a
systemd user session, a container that runs systemd or Docker inside) can create sub-cgroups of
any name below its own, ``…/kubepods-pod<another pod>.slice/cri-containerd-<another id>.scope``
included. So a pod is taken only where every segment above it is a ``kubepods`` one, its
container only directly below it, a Docker container only at the top (``system.slice`` or
``docker`` above it), a Slurm job only directly below ``slurmstepd.scope`` or ``slurm*/uid_<n>``
at the top: the outermost placement, which the kubelet, the runtime or slurmstepd made. Ids must
match strict patterns (a pod UID is a UUID or a static pod's 32 hex digits, a container id 64 hex
digits, a job id 1-10 digits), so nothing else a path holds reaches the snapshot.

Constraints: the file is read once per process (the resolver caches it), at most
:data:`MAX_BYTES`, at most :data:`MAX_LINES` lines; parsing is linear in that.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

MAX_BYTES = 64 * 1024  #: what is read of a cgroup file (v1 has ~13 lines of at most a path each)
MAX_LINES = 64  #: hierarchies looked at
MAX_SEGMENTS = 64  #: segments of one path looked at

RUNTIMES = ("containerd", "cri-o", "docker")

_UUID = r"[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}|[0-9a-f]{32}"
_ID = r"[0-9a-f]{64}"
#: kubepods-pod<uid>.slice, kubepods-<qos>-pod<uid>.slice (systemd); pod<uid> (cgroupfs)
_POD = re.compile(rf"(?:kubepods(?:-besteffort|-burstable)?-pod(?P<s>{_UUID})\.slice|pod(?P<c>{_UUID}))")
#: the segments that may stand above a pod: the kubepods tree and its QoS classes
_KUBEPODS = re.compile(r"kubepods(?:\.slice|-besteffort\.slice|-burstable\.slice)?|besteffort|burstable")
#: a container directly below its pod: systemd scopes of each runtime, or the bare id (cgroupfs)
_POD_CONTAINER = re.compile(rf"(?:(?P<rt>cri-containerd|crio|docker)-(?P<s>{_ID})\.scope|(?P<c>{_ID}))")
_SCOPE_RUNTIME = {"cri-containerd": "containerd", "crio": "cri-o", "docker": "docker"}
_DOCKER_SCOPE = re.compile(rf"docker-(?P<id>{_ID})\.scope")
_BARE_ID = re.compile(_ID)
_JOB = re.compile(r"job_(?P<id>[0-9]{1,10})")
_SLURM_V1 = re.compile(r"slurm(?:_[A-Za-z0-9._-]{1,253})?")
_SLURM_UID = re.compile(r"uid_[0-9]{1,10}")

#: v1 hierarchies in the order they are asked (the unified v2 line first); others after these
_PREFERRED = ("", "memory", "pids", "cpu,cpuacct", "cpuacct,cpu", "cpu", "devices", "freezer",
              "cpuset")


class CgroupIds(NamedTuple):
    """What a process's cgroups say about it; each None where they say nothing."""

    container_id: str | None = None  #: 64 hex digits
    container_runtime: str | None = None  #: one of RUNTIMES, None where the path does not say
    pod_uid: str | None = None  #: with dashes, as the API server writes it
    slurm_job_id: int | None = None

    @property
    def empty(self) -> bool:
        return self.container_id is None and self.pod_uid is None and self.slurm_job_id is None


NOTHING = CgroupIds()


def read_cgroup_file(proc_root: str, pid: int) -> bytes | None:
    """The first :data:`MAX_BYTES` of ``<proc_root>/<pid>/cgroup``; None if it cannot be read (the
    process left, hidepid, not Linux). Opened without following a FIFO's wait (``O_NONBLOCK``)."""
    try:
        fd = os.open(f"{proc_root}/{pid}/cgroup", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, MAX_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)


def parse_cgroup(raw: bytes | None) -> CgroupIds:
    """The ids a cgroup file's bytes name (:data:`NOTHING` for none, or for bytes that are not one).

    The container and pod come from the first hierarchy that names either, the Slurm job from the
    first that names one (on a hybrid system the v2 line may show only slurmd's service while the
    v1 controllers show the job)."""
    if not raw:
        return NOTHING
    paths = _paths(raw[:MAX_BYTES].decode("utf-8", "replace"))
    placed = job = None
    for path in paths:
        segments = _segments(path)
        if placed is None:
            placed = _placement(segments)
        if job is None:
            job = _slurm_job(segments)
        if placed is not None and job is not None:
            break
    if placed is None and job is None:
        return NOTHING
    container_id, runtime, pod_uid = placed if placed is not None else (None, None, None)
    return CgroupIds(container_id, runtime, pod_uid, job)


def _paths(text: str) -> list[str]:
    """The paths of the file's lines, the preferred hierarchies first (malformed lines skipped)."""
    ranked: list[tuple[int, int, str]] = []
    for n, line in enumerate(text.split("\n", MAX_LINES)[:MAX_LINES]):
        parts = line.split(":", 2)
        if len(parts) != 3 or not parts[2].startswith("/"):
            continue
        controllers = parts[1]
        rank = _PREFERRED.index(controllers) if controllers in _PREFERRED else len(_PREFERRED)
        ranked.append((rank, n, parts[2]))
    return [path for _, _, path in sorted(ranked)]


def _segments(path: str) -> list[str]:
    """The path's segments below the reader's cgroup namespace root (leading ``..`` dropped)."""
    segments = [s for s in path.split("/", MAX_SEGMENTS + 1)[:MAX_SEGMENTS + 1] if s]
    while segments and segments[0] == "..":
        segments.pop(0)
    return segments[:MAX_SEGMENTS]


def _placement(segments: list[str]) -> tuple[str | None, str | None, str | None] | None:
    """(container id, runtime, pod UID) the trusted side placed the path at, or None."""
    for i, segment in enumerate(segments):
        pod = _POD.fullmatch(segment)
        if pod is not None:
            uid = (pod.group("s") or pod.group("c")).replace("_", "-")
            container = runtime = None
            if i + 1 < len(segments):
                c = _POD_CONTAINER.fullmatch(segments[i + 1])
                if c is not None:
                    container = c.group("s") or c.group("c")
                    runtime = _SCOPE_RUNTIME.get(c.group("rt") or "")
            return container, runtime, uid
        if not _KUBEPODS.fullmatch(segment):
            break
    return _docker(segments)


def _docker(segments: list[str]) -> tuple[str, str, None] | None:
    """A Docker container at the top: ``system.slice/docker-<id>.scope`` or ``docker/<id>``."""
    if len(segments) >= 2 and segments[0] == "system.slice":
        m = _DOCKER_SCOPE.fullmatch(segments[1])
        return (m.group("id"), "docker", None) if m else None
    if segments:
        m = _DOCKER_SCOPE.fullmatch(segments[0])
        if m:  # a private cgroup namespace rooted at system.slice or below it
            return m.group("id"), "docker", None
    if len(segments) >= 2 and segments[0] == "docker" and _BARE_ID.fullmatch(segments[1]):
        return segments[1], "docker", None
    return None


def _slurm_job(segments: list[str]) -> int | None:
    """The job of ``[system.slice/]slurmstepd.scope/job_<n>`` or ``slurm[_node]/uid_<n>/job_<n>``."""
    rest = segments[1:] if segments and segments[0] == "system.slice" else segments
    if len(rest) >= 2 and rest[0] == "slurmstepd.scope":
        m = _JOB.fullmatch(rest[1])
        return int(m.group("id")) if m else None
    if (len(segments) >= 3 and _SLURM_V1.fullmatch(segments[0])
            and _SLURM_UID.fullmatch(segments[1])):
        m = _JOB.fullmatch(segments[2])
        return int(m.group("id")) if m else None
    return None
