"""WorkloadResolver: a pid's cgroup read once (misses too), forgotten when the pid is another
process or holds no GPU, joined with names and allocations, the same object while nothing changed."""

from __future__ import annotations

from gpuflow.core.snapshot import Workload
from gpuflow.workload.resolver import PodNames, WorkloadResolver, unallocated

POD = "5a1c3e2f-8b4d-4f0e-9c6a-1d2e3f405161"
CID = "8f14e45fceea167a5a36dedd4bea2543b16f9a3c1e7b2d9a0c4e6f8a1b3d5c7e"
IN_POD = (f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{POD.replace('-', '_')}"
          f".slice/cri-containerd-{CID}.scope\n").encode()
ON_HOST = b"0::/user.slice/user-1000.slice/session-2.scope\n"
GPU0, GPU1 = (0, "GPU-aaaa"), (1, "GPU-bbbb")


class Files:
    """pid → cgroup bytes, counting reads."""

    def __init__(self, files: dict[int, bytes]) -> None:
        self.files, self.reads = files, []

    def __call__(self, pid: int) -> bytes | None:
        self.reads.append(pid)
        return self.files.get(pid)


class Names:
    def __init__(self) -> None:
        self.version, self.known, self.asked = 0, {}, []

    def names(self, pod_uid, container_id):
        self.asked.append((pod_uid, container_id))
        return self.known.get(pod_uid)


class Allocations:
    def __init__(self) -> None:
        self.version, self.known = 0, {}

    def devices(self, namespace, pod_name, container_name):
        return self.known.get((namespace, pod_name, container_name))


def test_each_pid_is_read_once_misses_included():
    files = Files({1: IN_POD, 2: ON_HOST})
    r = WorkloadResolver(files)
    for _ in range(5):
        w = r.workload(1, (GPU0,))
        assert r.workload(2, (GPU0,)) is None and r.workload(3) is None  # 3: no file at all
    assert w == Workload(container_id=CID, container_runtime="containerd", pod_uid=POD)
    assert sorted(files.reads) == [1, 2, 3]


def test_the_same_object_while_nothing_changed_and_a_new_one_when_names_arrive():
    names = Names()
    r = WorkloadResolver(Files({1: IN_POD}), names=names)
    first = r.workload(1, (GPU0,))
    assert r.workload(1, (GPU0,)) is first and first.pod_name is None
    asked = len(names.asked)
    assert r.workload(1, (GPU0,)) is first and len(names.asked) == asked  # no look-up per tick
    names.known[POD] = PodNames("trainer-0", "ml", "main", "containerd")
    names.version += 1
    second = r.workload(1, (GPU0,))
    assert (second.pod_name, second.pod_namespace, second.container_name) == ("trainer-0", "ml", "main")
    names.version += 1  # a fetch that changed nothing for this pod: the same object
    assert r.workload(1, (GPU0,)) is second


def test_a_gpu_its_container_was_not_allocated_is_named():
    names, allocations = Names(), Allocations()
    names.known[POD] = PodNames("trainer-0", "ml", "main", None)
    r = WorkloadResolver(Files({1: IN_POD}), names=names, allocations=allocations)
    assert r.workload(1, (GPU0, GPU1)).gpus_allocated is None  # the kubelet has not said: no flag
    allocations.known[("ml", "trainer-0", "main")] = ("GPU-aaaa",)
    allocations.version += 1
    w = r.workload(1, (GPU0, GPU1))
    assert w.gpus_allocated == ("GPU-aaaa",) and w.gpus_unallocated == (1,)
    assert r.workload(1, (GPU0,)).gpus_unallocated == ()  # it let go of GPU 1


def test_forget_and_retain():
    files = Files({1: IN_POD, 2: ON_HOST})
    r = WorkloadResolver(files)
    r.workload(1), r.workload(2)
    r.forget(1)
    r.workload(1)
    r.retain({1: None})
    r.workload(2)
    assert files.reads == [1, 2, 1, 2]


def test_unallocated_by_uuid_or_index_and_never_for_unknown_or_mig():
    held = ((0, "GPU-a"), (1, "GPU-b"), (2, "GPU-c"))
    assert unallocated(held, ("GPU-a", "GPU-c")) == (1,)
    assert unallocated(held, ("0", "1")) == (2,)  # the device plugin's index strategy
    assert unallocated(held, ()) == (0, 1, 2)  # a pod given no GPU at all
    assert unallocated(held, None) == ()
    assert unallocated(held, ("MIG-1234",)) == ()
