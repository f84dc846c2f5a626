"""/metrics' fleet labels: ``Hostname`` is the host's name in the fleet (NODE_NAME when set), the
per-process and traced series say who each process belongs to (k8s_pod_name, k8s_namespace_name,
k8s_container_name, never ``pod``, which Prometheus's Kubernetes targets take), and a GPU held by
a process its container was not allocated is counted, per GPU, without the per-process series."""

from __future__ import annotations

import urllib.request

from falcon import testing
from prometheus_client.parser import text_string_to_metric_families

from gpuflow.collectors.nvml import fake_scenarios as fs
from gpuflow.collectors.nvml.collector import NvmlCollector
from gpuflow.collectors.nvml.fake_backend import FakeBackend
from gpuflow.core.context import AgentConfig
from gpuflow.core.identity import Identity
from gpuflow.core.merge import merge_parts
from gpuflow.core.snapshot import SnapshotPart, TracedProcess
from gpuflow.transport.app import AppSettings, create_app
from gpuflow.workload.resolver import PodNames, WorkloadResolver

from fleet_agents import Agent, wait_for
from snapshots import board_with

HOST = {"Host": "localhost"}


class Names:
    version = 1

    def names(self, pod_uid, container_id):
        return {fs.POD_TRAIN_UID: PodNames("trainer-0", "ml", "main", None),
                fs.POD_SERVE_UID: PodNames("server-7f9c", "serving", "vllm", None)}.get(pod_uid)


class Allocations:
    """The kubelet gave trainer-0 the first GPU only (it holds two)."""

    version = 1

    def __init__(self, uuid: str) -> None:
        self.uuid = uuid

    def devices(self, namespace, pod_name, container_name):
        return (self.uuid,) if pod_name == "trainer-0" else () if pod_name == "server-7f9c" else None


def pods_snapshot(traced=()):
    backend = FakeBackend("pods")
    c = NvmlCollector(backend, AgentConfig(), proc_reader=backend.proc_reader, hostname="vm-4711")
    c.poll_once()
    c.sample_once()
    uuid0 = c.poll_once().devices[0].uuid
    c.workloads = WorkloadResolver(backend.proc_reader.cgroup, names=Names(), allocations=Allocations(uuid0))
    c.sample_once()
    part = c.poll_once()
    c.stop()
    return merge_parts([part, SnapshotPart("fake", traced=traced)], seq=1, timestamp=1.0,
                       identity=Identity("gpu-node-3", 1), interval_s=1.0)


def scrape(snap, per_process: bool) -> dict[str, list]:
    app = create_app(board_with(snap), settings=AppSettings(first_snapshot_wait_s=0.05,
                                                             metrics_per_process=per_process))
    text = testing.TestClient(app, headers=HOST).simulate_get("/metrics").text
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append(s)
    return out


def test_hostname_is_the_fleet_name_not_the_machine_hostname():
    m = scrape(pods_snapshot(), per_process=False)
    assert {s.labels["Hostname"] for s in m["gpuflow_gpu_utilization_ratio"]} == {"gpu-node-3"}


def test_process_series_carry_the_workload_labels():
    m = scrape(pods_snapshot(), per_process=True)
    by_pid = {}
    for s in m["gpuflow_process_gpu_memory_used_bytes"]:
        by_pid.setdefault(s.labels["pid"], s.labels)
    assert {k: by_pid["7001"][k] for k in ("k8s_pod_name", "k8s_namespace_name", "k8s_container_name",
                                          "k8s_pod_uid", "container_id", "slurm_job_id")} == {
        "k8s_pod_name": "trainer-0", "k8s_namespace_name": "ml", "k8s_container_name": "main",
        "k8s_pod_uid": fs.POD_TRAIN_UID, "container_id": fs.CONTAINER_TRAIN, "slurm_job_id": ""}
    assert by_pid["7003"]["container_id"] == fs.CONTAINER_DOCKER and by_pid["7003"]["k8s_pod_name"] == ""
    assert by_pid["7004"]["slurm_job_id"] == str(fs.SLURM_JOB)
    assert all(by_pid["7005"][k] == "" for k in ("container_id", "k8s_pod_name", "slurm_job_id"))
    for labels in by_pid.values():
        assert not {"pod", "namespace", "container"} & set(labels)


def test_a_traced_process_has_the_workload_of_its_pid():
    traced = (TracedProcess(pid=7002, session="s1", name="python3", records=10),)
    m = scrape(pods_snapshot(traced), per_process=True)
    (s,) = m["gpuflow_traced_records_total"]
    assert (s.labels["k8s_pod_name"], s.labels["k8s_namespace_name"], s.labels["Hostname"]) == (
        "server-7f9c", "serving", "gpu-node-3")


def test_gpus_held_without_an_allocation_are_counted_per_gpu():
    m = scrape(pods_snapshot(), per_process=False)
    counts = {s.labels["gpu"]: s.value for s in m["gpuflow_gpu_unallocated_processes"]}
    # trainer-0 holds GPUs 0 and 1 and was given 0; server-7f9c was given none and holds GPU 2
    assert counts == {"0": 0, "1": 1, "2": 1, "3": 0}


def test_a_real_agent_labels_its_series_with_node_name():
    agent = Agent("node-a7", env={"GPUFLOW_NVML_FAKE": "pods"}, args=("--metrics-per-process",))
    try:
        def scraped():
            with urllib.request.urlopen(agent.url + "/metrics", timeout=5) as resp:
                text = resp.read().decode()
            return text if "gpuflow_process_gpu_memory_used_bytes" in text else None
        text = wait_for(scraped, timeout=20, interval=0.2, what="per-process series")
        hosts = {s.labels["Hostname"] for f in text_string_to_metric_families(text)
                 for s in f.samples if "Hostname" in s.labels}
        assert hosts == {"node-a7"}
        pods = {s.labels["k8s_pod_uid"] for f in text_string_to_metric_families(text) for s in f.samples
                if s.name == "gpuflow_process_gpu_memory_used_bytes"}
        assert pods == {fs.POD_TRAIN_UID, fs.POD_SERVE_UID, ""}
    finally:
        agent.stop()
