"""Pod names from a (fake) Kubernetes API server: this node's pods listed with the service
account's token, indexed by UID (and a static pod's mirror annotation), a container's name by its
id; a refusal says which permission is missing; an answer too large or too slow is dropped
within its bounds; names that are not Kubernetes names are not kept; fetches are made on a miss,
at most so often, and a key still missing is not asked for again at once."""

from __future__ import annotations

import time

import pytest

from gpuflow.collectors.nvml import fake_scenarios as fs
from gpuflow.workload import kube_api
from gpuflow.workload.kube_api import ApiConfig, KubeApiNames, parse_pods
from gpuflow.workload.resolver import PodNames

from fake_kubernetes import FakeApiServer, pod

STATIC_HASH = "6f1a0c2e9b8d7f6e5d4c3b2a19081726"
MIRROR_UID = "11111111-2222-4333-8444-555555555555"


def node_pods() -> list[dict]:
    return [
        pod(fs.POD_TRAIN_UID, "trainer-0", "ml", {"main": f"containerd://{fs.CONTAINER_TRAIN}",
                                                  "sidecar": "containerd://" + "ab" * 32}),
        pod(fs.POD_SERVE_UID, "server-7f9c", "serving", {"vllm": f"cri-o://{fs.CONTAINER_SERVE}"}),
        pod(MIRROR_UID, "etcd-node-a", "kube-system", {}, mirror=STATIC_HASH),
    ]


@pytest.fixture
def server():
    s = FakeApiServer(node_pods())
    yield s
    s.stop()


@pytest.fixture
def token(tmp_path):
    path = tmp_path / "token"
    path.write_text("eyJhbGciOiJSUzI1NiJ9.fake-service-account-token\n")
    return str(path)


def test_the_nodes_pods_are_listed_with_the_token_and_named(server, token):
    names = KubeApiNames(ApiConfig(server.url, token, None), "node-a")
    names.refresher.refresh_once()
    assert names.problem is None
    ((path, auth),) = server.requests
    assert path == "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a"
    assert auth == "Bearer eyJhbGciOiJSUzI1NiJ9.fake-service-account-token"
    assert names.names(fs.POD_TRAIN_UID, fs.CONTAINER_TRAIN) == PodNames("trainer-0", "ml", "main", "containerd")
    assert names.names(fs.POD_SERVE_UID, fs.CONTAINER_SERVE) == PodNames("server-7f9c", "serving", "vllm", "cri-o")
    assert names.names(STATIC_HASH, None) == PodNames("etcd-node-a", "kube-system", None, None)


def test_a_refusal_says_what_permission_is_missing_and_keeps_what_was_known(server, token):
    names = KubeApiNames(ApiConfig(server.url, token, None), "node-a")
    names.refresher.refresh_once()
    server.status = 403
    names.refresher.refresh_once()
    assert "refused to list this node's pods (403)" in names.problem and "get and list on pods" in names.problem
    assert names.names(fs.POD_TRAIN_UID, None).pod_name == "trainer-0"


def test_an_answer_over_its_size_bound_is_not_read(server, token, monkeypatch):
    monkeypatch.setattr(kube_api, "MAX_BYTES", 1 << 20)
    server.body = b"[" + b" " * (3 << 20) + b"]"
    names = KubeApiNames(ApiConfig(server.url, token, None), "node-a")
    names.refresher.refresh_once()
    assert names.problem == "the Kubernetes API server's pods list is over 1 MiB: not read"
    assert names.refresher.index is None


def test_a_dripping_answer_is_given_up_at_its_deadline(server, token, monkeypatch):
    monkeypatch.setattr(kube_api, "DEADLINE_S", 1.0)
    server.drip_s = 0.05
    names = KubeApiNames(ApiConfig(server.url, token, None), "node-a")
    started = time.monotonic()
    names.refresher.refresh_once()
    assert time.monotonic() - started < 3.0
    assert "took over 1 s" in names.problem


def test_malformed_names_and_ids_are_not_kept():
    items = node_pods() + [
        pod("not-a-uid", "x", "ml"),
        pod("22222222-2222-4333-8444-555555555555", "<script>alert(1)</script>", "ml"),
        pod("33333333-2222-4333-8444-555555555555", "ok", "Name Space"),
        pod("44444444-2222-4333-8444-555555555555", "ok2", "ml", {"Bad_Name": "containerd://" + "cd" * 32,
                                                                  "good": "containerd://" + "EF" * 32}),
        "not a pod", {"metadata": "nor this"},
    ]
    index = parse_pods(items)
    assert set(index) == {fs.POD_TRAIN_UID, fs.POD_SERVE_UID, MIRROR_UID, STATIC_HASH,
                          "44444444-2222-4333-8444-555555555555"}
    assert index["44444444-2222-4333-8444-555555555555"][2] == {}  # neither container kept


def test_plain_http_is_refused_beyond_loopback():
    with pytest.raises(ValueError, match="clear text"):
        ApiConfig("http://10.0.0.1:6443", None, None)
    assert ApiConfig("http://127.0.0.1:8001", None, None).url == "http://127.0.0.1:8001"
    with pytest.raises(ValueError, match="https:// URL"):
        ApiConfig("ftp://api:21", None, None)


def test_a_miss_asks_for_a_fetch_once_and_a_known_pod_asks_nothing(server, token):
    names = KubeApiNames(ApiConfig(server.url, token, None), "node-a", gap_s=0.2, miss_s=60)
    names.start()
    try:
        deadline = time.monotonic() + 5
        while names.version == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(server.requests) == 1
        for _ in range(200):   # a known pod, on every tick
            assert names.names(fs.POD_TRAIN_UID, fs.CONTAINER_TRAIN).container_name == "main"
        unknown = "99999999-2222-4333-8444-555555555555"
        for _ in range(200):   # an unknown one: one fetch, then a cached miss
            assert names.names(unknown, None) is None
            time.sleep(0.005)
        time.sleep(0.5)
        assert len(server.requests) == 2
    finally:
        names.stop()
