"""The NVML collector names who each GPU process belongs to (the fake ``pods`` scenario: a
containerd pod, a CRI-O pod, a Docker container, a Slurm job and a host process), reads each
cgroup once, and a real agent serves it in /api/snapshot."""

from __future__ import annotations

from gpuflow.collectors.nvml import fake_scenarios as fs
from gpuflow.collectors.nvml.collector import NvmlCollector
from gpuflow.collectors.nvml.fake_backend import FakeBackend
from gpuflow.core.context import AgentConfig
from gpuflow.core.snapshot import Workload
from gpuflow.workload.resolver import PodNames, WorkloadResolver

from fleet_agents import Agent, wait_for


def collector(**kw) -> NvmlCollector:
    backend = FakeBackend("pods")
    return NvmlCollector(backend, AgentConfig(), proc_reader=backend.proc_reader, hostname="node-a",
                         **kw)


def tick(c: NvmlCollector):
    if c.polls == 0:
        c.poll_once()
    c.sample_once()
    return c.poll_once()


EXPECTED = {
    7001: Workload(container_id=fs.CONTAINER_TRAIN, container_runtime="containerd",
                   pod_uid=fs.POD_TRAIN_UID),
    7002: Workload(container_id=fs.CONTAINER_SERVE, container_runtime="cri-o", pod_uid=fs.POD_SERVE_UID),
    7003: Workload(container_id=fs.CONTAINER_DOCKER, container_runtime="docker"),
    7004: Workload(slurm_job_id=fs.SLURM_JOB),
    7005: None,
}


def test_every_process_carries_its_workload_and_each_cgroup_is_read_once():
    c = collector()
    part = tick(c)
    assert {p.pid: p.workload for p in part.processes} == EXPECTED
    before = {p.pid: p.workload for p in part.processes}
    for _ in range(5):
        part = tick(c)
    assert c.workloads.reads == 5  # one per process, the host process's miss included
    assert all(p.workload is before[p.pid] for p in part.processes)


class OneName:
    version = 1

    def names(self, pod_uid, container_id):
        if pod_uid == fs.POD_TRAIN_UID:
            return PodNames("trainer-0", "ml", "main", None)
        return None


class OnlyTheFirstGpu:
    """The kubelet gave trainer-0's container one GPU: the first one."""

    version = 1

    def __init__(self, uuid: str) -> None:
        self.uuid = uuid

    def devices(self, namespace, pod_name, container_name):
        return (self.uuid,) if (namespace, pod_name, container_name) == ("ml", "trainer-0", "main") else None


def test_a_process_on_a_gpu_its_pod_was_not_allocated_is_flagged():
    c = collector()
    uuid0 = tick(c).devices[0].uuid
    c.workloads = WorkloadResolver(c._procs.cgroup, names=OneName(), allocations=OnlyTheFirstGpu(uuid0))
    part = tick(c)
    w = {p.pid: p.workload for p in part.processes}[7001]
    assert (w.pod_name, w.pod_namespace, w.container_name) == ("trainer-0", "ml", "main")
    assert w.gpus_allocated == (uuid0,) and w.gpus_unallocated == (1,)
    flagged = [p.message for p in part.problems if "did not allocate" in p.message]
    assert flagged == ["process 7001 (pod ml/trainer-0, container main) uses GPU 1, which the "
                       "kubelet did not allocate to its container"]


def test_a_real_agent_serves_the_workloads():
    agent = Agent("node-a", env={"GPUFLOW_NVML_FAKE": "pods"})
    try:
        snap = wait_for(lambda: (lambda s: s if len(s["processes"]) == 5 else None)(agent.snapshot()),
                        timeout=20, interval=0.2, what="five processes")
        served = {p["pid"]: p["workload"] for p in snap["processes"]}
        assert served[7005] is None
        assert served[7001]["pod_uid"] == fs.POD_TRAIN_UID
        assert served[7001]["container_runtime"] == "containerd"
        assert served[7002]["container_id"] == fs.CONTAINER_SERVE
        assert served[7003] == {"container_id": fs.CONTAINER_DOCKER, "container_runtime": "docker",
                                "pod_uid": None, "pod_name": None, "pod_namespace": None,
                                "container_name": None, "slurm_job_id": None,
                                "gpus_allocated": None, "gpus_unallocated": []}
        assert served[7004]["slurm_job_id"] == fs.SLURM_JOB
    finally:
        agent.stop()
