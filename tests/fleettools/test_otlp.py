"""The OTLP/HTTP metrics exporter against a local receiver that decodes the protobuf payloads
with OpenTelemetry's own classes: hw.gpu.* / hw.* names, units and instruments where the
conventions have them, gpuflow.* where they are silent, exact values from the snapshot, the host
and each process as resources (host.name, process.pid, k8s.*, container.id), not-available left
out; then a real agent (``gpuflow watch --otlp-endpoint``) pushing every interval, and a bad
endpoint refused at start in one line."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import replace

import pytest

from gpuflow.core.snapshot import (
    Attachment, HostInfo, KernelStat, Process, TracedProcess, TransferStat, Workload,
)
from gpuflow.exporters.otlp.exporter import OtlpExporter, metrics_url

from cli_process import gpuflow_env
from fleet_agents import Agent, wait_for
from otlp_receiver import OtlpReceiver, points
from snapshots import make_snapshot

POD = "0f8f4f3c-6a4e-4c1e-9a55-2b1d7e9c1a01"
CID = "3b7e" + "a1" * 30


@pytest.fixture
def receiver():
    r = OtlpReceiver()
    yield r
    r.stop()


def snapshot():
    w = Workload(container_id=CID, container_runtime="containerd", pod_uid=POD, pod_name="trainer-0",
                 pod_namespace="ml", container_name="main")
    procs = (Process(pid=4242, name="train", user="alice", cmdline="python", workload=w,
                     attachments=(Attachment(0, "GPU-a", "compute", 3 << 30, 34.0, None),)),)
    traced = (TracedProcess(pid=4242, session="s1", name="train", records=500, dropped_ring=3,
                            kernels=(KernelStat("k1", "_Z2k1", 10, 2_000_000_000, 1, 5),),
                            transfers=(TransferStat("h2d", 4, 4096, 100),)),)
    snap = make_snapshot(processes=procs, traced=traced)
    return replace(snap, host=HostInfo(hostname="vm-1", driver_version="580.1", name="gpu-node-3"))


def by(rows, name, **attrs):
    found = [r for r in rows if r[1] == name and all(r[4].get(k) == v for k, v in attrs.items())]
    return found


def test_names_units_instruments_and_values(receiver):
    snap = snapshot()
    exporter = OtlpExporter(lambda: snap, receiver.url, per_process=True, start_ns=1_000, node_name="gpu-node-3")
    try:
        assert exporter.export_once()
    finally:
        exporter.stop()
    (request,) = receiver.requests[:1]
    assert receiver.content_types[0] == "application/x-protobuf"
    rows = points(request)
    host = rows[0][0]
    assert host["host.name"] == "gpu-node-3" and host["service.name"] == "gpuflow"
    assert host["k8s.node.name"] == "gpu-node-3"

    def one(name, **attrs):
        (row,) = by(rows, name, **attrs)
        return row

    r = one("hw.gpu.utilization", **{"hw.id": "GPU-a", "hw.gpu.task": "general"})
    assert r[2:4] == ("1", "gauge") and r[5] == pytest.approx(0.87)
    assert r[4]["hw.type"] == "gpu" and r[4]["hw.model"] == "Test GPU" and r[4]["hw.driver_version"] == "580.1"
    r = one("hw.gpu.memory.usage", **{"hw.id": "GPU-a"})
    assert r[2:4] == ("By", "updowncounter") and r[5] == 21 << 30
    assert one("hw.gpu.memory.limit", **{"hw.id": "GPU-a"})[5] == 80 << 30
    assert one("hw.gpu.memory.utilization", **{"hw.id": "GPU-a"})[5] == pytest.approx(21 / 80)
    r = one("hw.power", **{"hw.id": "GPU-a"})
    assert r[2:4] == ("W", "gauge") and r[5] == 412.5
    r = one("hw.temperature", **{"hw.parent": "GPU-a", "hw.id": "GPU-a/gpu"})
    assert r[2:4] == ("Cel", "gauge") and r[5] == 47 and r[4]["hw.type"] == "temperature"
    assert one("gpuflow.gpu.clock.sm", **{"hw.id": "GPU-a"})[2] == "Hz"
    assert one("gpuflow.gpu.clock.sm", **{"hw.id": "GPU-a"})[5] == 1980e6
    assert one("gpuflow.gpu.memory.activity", **{"hw.id": "GPU-a"})[5] == pytest.approx(0.41)
    # the lost GPU: its status, nothing else measured
    assert one("hw.status", **{"hw.id": "GPU-b", "hw.state": "failed"})[5] == 1
    assert one("hw.status", **{"hw.id": "GPU-b", "hw.state": "ok"})[5] == 0
    assert not by(rows, "hw.gpu.utilization", **{"hw.id": "GPU-b"}) and not by(rows, "hw.temperature", **{"hw.parent": "GPU-b"})
    # not available is absent: no PCIe byte counters, no GPM without readings
    assert not by(rows, "hw.gpu.io") and not by(rows, "gpuflow.gpu.sm.active")
    # the process: a resource of its own, who it belongs to
    r = one("gpuflow.process.gpu.memory.usage", **{"hw.id": "GPU-a"})
    assert r[5] == 3 << 30 and r[2] == "By"
    assert {k: r[0][k] for k in ("process.pid", "k8s.pod.name", "k8s.namespace.name", "k8s.container.name",
                                  "k8s.pod.uid", "container.id", "host.name", "process.owner")} == {
        "process.pid": 4242, "k8s.pod.name": "trainer-0", "k8s.namespace.name": "ml", "k8s.container.name": "main",
        "k8s.pod.uid": POD, "container.id": CID, "host.name": "gpu-node-3", "process.owner": "alice"}
    assert one("gpuflow.process.gpu.utilization", **{"hw.id": "GPU-a"})[5] == pytest.approx(0.34)
    # the traced process: counters, cumulative from the agent's start
    r = one("gpuflow.traced.kernel.launches")
    assert r[2:4] == ("{launch}", "counter") and r[5] == 10 and r[0]["gpuflow.session"] == "s1"
    assert one("gpuflow.traced.kernel.time")[5] == pytest.approx(2.0) and one("gpuflow.traced.kernel.time")[2] == "s"
    assert one("gpuflow.traced.transfer.io", **{"gpuflow.transfer.direction": "h2d"})[5] == 4096
    assert one("gpuflow.traced.records.dropped", **{"gpuflow.drop.reason": "ring"})[5] == 3
    stamps = {(dp.start_time_unix_nano, dp.time_unix_nano) for rm in request.resource_metrics
              for sm in rm.scope_metrics for m in sm.metrics if m.WhichOneof("data") == "sum"
              for dp in m.sum.data_points}
    assert stamps == {(1_000, int(snap.timestamp * 1e9))}
    for row in rows:   # kernel names are never attributes
        assert "k1" not in row[4].values() and "_Z2k1" not in row[4].values()


def test_without_per_process_only_the_host_resource(receiver):
    snap = snapshot()
    exporter = OtlpExporter(lambda: snap, receiver.url)
    try:
        assert exporter.export_once()
    finally:
        exporter.stop()
    assert len(receiver.requests[0].resource_metrics) == 1
    assert not [r for r in points(receiver.requests[0]) if r[1].startswith(("gpuflow.process.", "gpuflow.traced."))]


def test_a_receiver_that_is_not_there_is_a_failed_export_not_an_error():
    exporter = OtlpExporter(snapshot, "http://127.0.0.1:9", timeout_s=1.0)
    try:
        started = time.monotonic()
        assert exporter.export_once() is False and exporter.failed == 1
        assert time.monotonic() - started < 5
    finally:
        exporter.stop()


def test_endpoint_urls():
    assert metrics_url("http://collector:4318") == "http://collector:4318/v1/metrics"
    assert metrics_url("https://otlp.example/v1/metrics") == "https://otlp.example/v1/metrics"
    assert metrics_url("http://c:4318/prefix/") == "http://c:4318/prefix/v1/metrics"
    for bad in ("collector:4318", "ftp://c/", "http://user:pw@c:4318"):
        with pytest.raises(ValueError):
            metrics_url(bad)


def test_a_real_agent_pushes_every_interval(receiver):
    agent = Agent("node-o", interval_ms=200, args=("--otlp-endpoint", receiver.url, "--metrics-per-process"),
                  env={"GPUFLOW_OTLP_INTERVAL_S": "0.5"})
    try:
        wait_for(lambda: len(receiver.requests) >= 3, timeout=30, interval=0.1, what="three exports")
        snap = agent.snapshot()
        rows = points(receiver.requests[-1])
        assert {r[0]["host.name"] for r in rows} == {"node-o"}
        uuid = snap["devices"][0]["uuid"]
        (limit,) = by(rows, "hw.gpu.memory.limit", **{"hw.id": uuid})
        assert limit[5] == snap["devices"][0]["memory_total_bytes"]
        names = {r[1] for r in rows}
        assert {"hw.gpu.utilization", "hw.gpu.memory.usage", "hw.power", "hw.energy", "hw.gpu.io",
                "gpuflow.gpu.sm.active", "gpuflow.process.gpu.memory.usage",
                "gpuflow.traced.kernel.launches"} <= names
        launches = [r[5] for req in receiver.requests for r in points(req) if r[1] == "gpuflow.traced.kernel.launches"]
        assert launches == sorted(launches) and launches[-1] > 0   # a counter, growing
    finally:
        agent.stop()


def test_a_bad_endpoint_stops_the_agent_in_one_line():
    env = gpuflow_env(GPUFLOW_NVML_FAKE="single", GPUFLOW_DISABLED_PLUGINS="cupti")
    r = subprocess.run([sys.executable, "-m", "gpuflow", "watch", "--port", "0", "--otlp-endpoint", "collector:4318"],
                       env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--otlp-endpoint: expected an http:// or https:// URL" in lines[0], r.stderr


def test_gunicorns_variable_is_checked_at_start_too():
    from gpuflow.transport.settings import from_environ

    with pytest.raises(ValueError, match=r"^GPUFLOW_OTLP_ENDPOINT: expected an http"):
        from_environ({"GPUFLOW_OTLP_ENDPOINT": "collector:4318"})
    settings = from_environ({"GPUFLOW_OTLP_ENDPOINT": "http://127.0.0.1:4318",
                             "GPUFLOW_OTLP_INTERVAL_S": "2.5"}).settings
    assert (settings.otlp_endpoint, settings.otlp_interval_s) == ("http://127.0.0.1:4318", 2.5)
