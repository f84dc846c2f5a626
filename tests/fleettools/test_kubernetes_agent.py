"""A real agent (``gpuflow watch``, fake NVML ``pods``) on a Kubernetes node played by a fake API
server and a fake kubelet pod-resources socket: its snapshot names each pod, namespace and
container, says which GPUs each container was allocated, and flags the process on a GPU its
container was not allocated; a wrong API URL stops it at start in one line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpuflow.collectors.nvml import fake_scenarios as fs

from cli_process import gpuflow_env
from fake_kubernetes import FakeApiServer, FakePodResources, encode_list, pod
from fleet_agents import Agent, wait_for


@pytest.fixture
def node(tmp_path):
    api = FakeApiServer([
        pod(fs.POD_TRAIN_UID, "trainer-0", "ml", {"main": f"containerd://{fs.CONTAINER_TRAIN}"}),
        pod(fs.POD_SERVE_UID, "server-7f9c", "serving", {"vllm": f"cri-o://{fs.CONTAINER_SERVE}"}),
    ])
    token = tmp_path / "token"
    token.write_text("fake-token-for-the-test")
    kubelet = FakePodResources(str(tmp_path / "kubelet.sock"), b"")
    yield api, token, kubelet
    kubelet.stop()
    api.stop()


def test_the_agent_names_pods_and_flags_a_gpu_its_container_was_not_given(node):
    api, token, kubelet = node
    agent = Agent("node-a", env={"GPUFLOW_NVML_FAKE": "pods", "GPUFLOW_K8S_API": api.url,
                                 "GPUFLOW_K8S_TOKEN_FILE": str(token),
                                 "GPUFLOW_POD_RESOURCES_SOCKET": kubelet.path})
    try:
        uuids = {d["index"]: d["uuid"] for d in agent.snapshot()["devices"]}
        # trainer-0 holds GPUs 0 and 1 and was given GPU 0; server-7f9c was given GPU 2
        kubelet.answer = encode_list([
            ("ml", "trainer-0", {"main": {"nvidia.com/gpu": [uuids[0]]}}),
            ("serving", "server-7f9c", {"vllm": {"nvidia.com/gpu": [uuids[2]]}})])

        def named():
            snap = agent.snapshot()
            w = {p["pid"]: p["workload"] for p in snap["processes"]}
            ready = w.get(7001) and w[7001]["gpus_allocated"] and w.get(7002) and w[7002]["gpus_allocated"]
            return (snap, w) if ready else None

        snap, w = wait_for(named, timeout=30, interval=0.3, what="names and allocations")
        assert (w[7001]["pod_name"], w[7001]["pod_namespace"], w[7001]["container_name"]) == ("trainer-0", "ml", "main")
        assert (w[7002]["pod_name"], w[7002]["container_name"]) == ("server-7f9c", "vllm")
        assert w[7001]["gpus_allocated"] == [uuids[0]] and w[7001]["gpus_unallocated"] == [1]
        assert w[7002]["gpus_allocated"] == [uuids[2]] and w[7002]["gpus_unallocated"] == []
        assert w[7003]["pod_name"] is None and w[7005] is None
        assert any(p["message"] == "process 7001 (pod ml/trainer-0, container main) uses GPU 1, which "
                   "the kubelet did not allocate to its container" for p in snap["host"]["problems"])
        assert {auth for _, auth in api.requests} == {"Bearer fake-token-for-the-test"}
        assert len(api.requests) <= 3 and kubelet.calls <= 4  # cached, not asked per tick
    finally:
        agent.stop()


def test_plain_http_to_another_host_stops_the_agent_in_one_line():
    env = gpuflow_env(GPUFLOW_NVML_FAKE="single", GPUFLOW_DISABLED_PLUGINS="cupti",
                      GPUFLOW_K8S_API="http://10.1.2.3:6443")
    r = subprocess.run([sys.executable, "-m", "gpuflow", "watch", "--port", "0"], env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "GPUFLOW_K8S_API" in lines[0] and "clear text" in lines[0], r.stderr
