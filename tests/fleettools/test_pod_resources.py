"""The kubelet's GPU allocations from a (fake) pod-resources gRPC socket: each container's
nvidia.com devices, other resources left out, a container given none told apart from one the
kubelet did not list; a malformed or oversized answer and a socket nobody serves become one-line
problems; the answer is cached (fetched again on a miss, at most so often)."""

from __future__ import annotations

import time

import pytest

from gpuflow.workload import pod_resources
from gpuflow.workload.pod_resources import PodResourcesAllocations, decode_list_response

from fake_kubernetes import FakePodResources, encode_list

NODE = [
    ("ml", "trainer-0", {"main": {"nvidia.com/gpu": ["GPU-aaaa", "GPU-bbbb"], "example.com/fpga": ["f0"]},
                         "sidecar": {}}),
    ("serving", "server-7f9c", {"vllm": {"nvidia.com/mig-1g.10gb": ["MIG-cccc"]}}),
    ("default", "no-gpu", {"app": {"cpu-pinning.example/cores": ["3"]}}),
]


@pytest.fixture
def kubelet(tmp_path):
    server = FakePodResources(str(tmp_path / "kubelet.sock"), encode_list(NODE))
    yield server
    server.stop()


def test_each_containers_gpus_and_only_gpus(kubelet):
    a = PodResourcesAllocations(kubelet.path)
    try:
        a.refresher.refresh_once()
        assert a.problem is None
        assert a.devices("ml", "trainer-0", "main") == ("GPU-aaaa", "GPU-bbbb")
        assert a.devices("ml", "trainer-0", "sidecar") == ()
        assert a.devices("ml", "trainer-0", None) == ("GPU-aaaa", "GPU-bbbb")  # the whole pod
        assert a.devices("serving", "server-7f9c", "vllm") == ("MIG-cccc",)
        assert a.devices("default", "no-gpu", "app") == ()
        assert a.devices("ml", "trainer-0", "not-listed") is None
        assert a.devices("ml", "elsewhere", "main") is None
    finally:
        a.stop()


def test_malformed_answers_are_refused_whole():
    good = encode_list(NODE)
    for bad in (good[:-3], b"\x0a\xff\xff\xff\xff\x0f", b"\x07", b"\x0b\x00", b"\x00\x01"):
        with pytest.raises(ValueError):
            decode_list_response(bad)
    assert decode_list_response(b"") == {}


def test_a_malformed_answer_from_the_socket_is_a_problem(kubelet):
    kubelet.answer = encode_list(NODE)[:-3]
    a = PodResourcesAllocations(kubelet.path)
    try:
        a.refresher.refresh_once()
        assert a.problem.startswith("the kubelet's pod-resources answer is malformed: ")
    finally:
        a.stop()


def test_an_answer_over_the_bound_is_refused_by_grpc(kubelet, monkeypatch):
    monkeypatch.setattr(pod_resources, "MAX_BYTES", 64 * 1024)
    kubelet.answer = encode_list([("ml", f"pod-{i}", {"main": {"nvidia.com/gpu": ["GPU-" + "a" * 100]}})
                                  for i in range(2000)])
    assert len(kubelet.answer) > 64 * 1024
    a = PodResourcesAllocations(kubelet.path)
    try:
        a.refresher.refresh_once()
        assert a.problem == (f"the kubelet's pod-resources socket {kubelet.path} did not answer List "
                             "(RESOURCE_EXHAUSTED)")
    finally:
        a.stop()


def test_nobody_on_the_socket_is_a_problem(tmp_path, monkeypatch):
    monkeypatch.setattr(pod_resources, "TIMEOUT_S", 1.0)
    a = PodResourcesAllocations(str(tmp_path / "nobody.sock"))
    try:
        started = time.monotonic()
        a.refresher.refresh_once()
        assert time.monotonic() - started < 3
        assert a.problem == (f"the kubelet's pod-resources socket {tmp_path / 'nobody.sock'} did not "
                             "answer List (UNAVAILABLE)")
    finally:
        a.stop()


def test_answers_are_cached_and_a_missing_pod_asks_once(kubelet):
    a = PodResourcesAllocations(kubelet.path, gap_s=0.2, miss_s=60)
    a.start()
    try:
        deadline = time.monotonic() + 5
        while a.version == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert kubelet.calls == 1
        for _ in range(200):
            assert a.devices("ml", "trainer-0", "main") == ("GPU-aaaa", "GPU-bbbb")
            assert a.devices("ml", "new-pod", "main") is None
            time.sleep(0.003)
        time.sleep(0.5)
        assert kubelet.calls == 2
    finally:
        a.stop()
