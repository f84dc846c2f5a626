"""/metrics: names, labels, base units, null → absent, per-process series behind the setting."""

from __future__ import annotations

import pytest
from falcon import testing
from prometheus_client.parser import text_string_to_metric_families

from gpuflow.core.board import SnapshotBoard
from gpuflow.core.snapshot import KernelStat, TracedProcess, TransferStat
from gpuflow.transport.app import AppSettings, create_app
from snapshots import board_with, make_snapshot

HOST = {"Host": "localhost"}


def scrape(board, **settings) -> dict[str, list]:
    app = create_app(board, settings=AppSettings(first_snapshot_wait_s=0.05, **settings))
    r = testing.TestClient(app, headers=HOST).simulate_get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    samples: dict[str, list] = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            samples.setdefault(s.name, []).append(s)
    return samples


def one(samples, name, **labels):
    found = [s for s in samples.get(name, []) if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, samples.get(name))
    return found[0]


def test_device_series_in_base_units_with_gpu_uuid_name_bus_and_host_labels():
    m = scrape(board_with(make_snapshot(seq=5)))
    s = one(m, "gpuflow_gpu_utilization_ratio", gpu="0")
    assert s.labels == {"gpu": "0", "uuid": "GPU-a", "name": "Test GPU",
                        "pci_bus_id": "00000000:19:00.0", "Hostname": "h"}
    assert s.value == pytest.approx(0.87)
    assert one(m, "gpuflow_gpu_memory_utilization_ratio", gpu="0").value == pytest.approx(0.41)
    assert one(m, "gpuflow_gpu_memory_used_bytes", gpu="0").value == 21 << 30
    assert one(m, "gpuflow_gpu_memory_total_bytes", gpu="0").value == 80 << 30
    assert one(m, "gpuflow_gpu_temperature_celsius", gpu="0").value == 47
    assert one(m, "gpuflow_gpu_power_watts", gpu="0").value == 412.5
    assert one(m, "gpuflow_gpu_power_limit_watts", gpu="0").value == 700
    assert one(m, "gpuflow_gpu_sm_clock_hertz", gpu="0").value == 1980e6
    assert one(m, "gpuflow_gpu_memory_clock_hertz", gpu="0").value == 3201e6
    # PCIe is a _bytes_total counter now (test_gpu_metrics.py); the per-second gauges are gone
    assert not [n for n in m if n.startswith("gpuflow_gpu_pcie_") and n.endswith("_per_second")
                and "peak" not in n]
    assert one(m, "gpuflow_gpu_info", gpu="0").labels["pci_bus_id"] == "00000000:19:00.0"
    assert one(m, "gpuflow_gpu_lost", gpu="1").value == 1
    assert one(m, "gpuflow_gpu_lost", gpu="0").value == 0
    assert one(m, "gpuflow_gpu_processes", gpu="1").value == 1
    assert one(m, "gpuflow_snapshot_seq").value == 5
    assert one(m, "gpuflow_problems", source="nvml", severity="warning").value == 1
    assert one(m, "gpuflow_driver_info").labels["driver_version"] == "580.1"
    assert all(name.startswith("gpuflow_") for name in m)


def test_null_readings_are_absent_not_zero():
    m = scrape(board_with(make_snapshot()))
    # GPU 1 is lost: every reading is None; GPU 0 has no PCIe RX reading
    for name in ("gpuflow_gpu_temperature_celsius", "gpuflow_gpu_utilization_ratio",
                 "gpuflow_gpu_power_watts", "gpuflow_gpu_memory_used_bytes"):
        assert [s.labels["gpu"] for s in m[name]] == ["0"], name
    assert "gpuflow_gpu_pcie_receive_bytes_total" not in m  # no GPM: no exact byte counter


def test_per_process_series_only_with_the_setting():
    board = board_with(make_snapshot())
    assert not [n for n in scrape(board) if n.startswith(("gpuflow_process_", "gpuflow_traced_"))]
    m = scrape(board, metrics_per_process=True)
    s = one(m, "gpuflow_process_gpu_memory_used_bytes", gpu="0", pid="4242")
    assert s.value == 3 << 30
    assert s.labels == {"gpu": "0", "uuid": "GPU-a", "name": "Test GPU", "pid": "4242",
                        "process": "train", "user": "alice", "pci_bus_id": "00000000:19:00.0",
                        "Hostname": "h", "container_id": "", "k8s_pod_uid": "", "k8s_pod_name": "",
                        "k8s_namespace_name": "", "k8s_container_name": "", "slurm_job_id": ""}
    assert one(m, "gpuflow_process_sm_utilization_ratio", gpu="0").value == pytest.approx(0.34)
    assert "gpuflow_process_memory_utilization_ratio" not in m  # None everywhere
    assert [s.labels["gpu"] for s in m["gpuflow_process_gpu_memory_used_bytes"]] == ["0"]


def test_traced_counters_with_the_setting():
    traced = TracedProcess(
        pid=77, session="s", name="bench", records=500, dropped_ring=3,
        kernels=(KernelStat("k1", "_Z2k1", 10, 2_000_000_000, 1, 5),
                 KernelStat("k2", "_Z2k2", 5, 500_000_000, 1, 5)),
        transfers=(TransferStat("h2d", 4, 4096, 100),), translate_cpu_ns=12_500_000,
    )
    m = scrape(board_with(make_snapshot(traced=(traced,))), metrics_per_process=True)
    assert one(m, "gpuflow_traced_records_total", pid="77").value == 500
    assert one(m, "gpuflow_traced_dropped_records_total", pid="77", reason="ring").value == 3
    assert one(m, "gpuflow_traced_dropped_records_total", pid="77", reason="cupti").value == 0
    assert one(m, "gpuflow_traced_kernel_launches_total", pid="77").value == 15
    assert one(m, "gpuflow_traced_kernel_seconds_total", pid="77").value == pytest.approx(2.5)
    assert one(m, "gpuflow_traced_transfer_bytes_total", direction="h2d").value == 4096
    assert one(m, "gpuflow_traced_transfers_total", direction="h2d").value == 4
    assert one(m, "gpuflow_traced_translate_cpu_seconds_total", pid="77").value == pytest.approx(0.0125)


def test_no_snapshot_yet_only_transport_series():
    m = scrape(SnapshotBoard())
    assert set(m) == {"gpuflow_sse_streams_open", "gpuflow_sse_streams_rejected_total",
                      "gpuflow_sse_streams_served_total"}


def test_scrape_reads_the_cached_snapshot_each_time():
    board = board_with(make_snapshot(seq=1))
    app = create_app(board, settings=AppSettings(first_snapshot_wait_s=0.05))
    c = testing.TestClient(app, headers=HOST)
    assert "gpuflow_snapshot_seq 1.0" in c.simulate_get("/metrics").text
    board.publish(make_snapshot(seq=2, processes=()))
    text = c.simulate_get("/metrics").text
    assert "gpuflow_snapshot_seq 2.0" in text


def test_openmetrics_when_asked():
    app = create_app(board_with(make_snapshot()), settings=AppSettings())
    r = testing.TestClient(app, headers=HOST).simulate_get(
        "/metrics", headers={**HOST, "Accept": "application/openmetrics-text; version=1.0.0"})
    assert r.headers["content-type"].startswith("application/openmetrics-text")
    assert r.text.rstrip().endswith("# EOF")


def test_the_folded_roll_up_is_under_pid_folded_so_a_sum_by_session_is_complete():
    from gpuflow.core.snapshot import KernelStat, RetiredTraced, TransferStat
    traced = TracedProcess(pid=77, session="s1", name="train", records=10,
                           kernels=(KernelStat("k", "_Z1kv", 5, 10**9, 1, 2, 5),))
    retired = RetiredTraced(session="s1", processes=40, records=400,
                            kernels=(KernelStat("k", "_Z1kv", 200, 4 * 10**9, 1, 2, 200),),
                            transfers=(TransferStat("h2d", 40, 4096 * 40, 10, 40),))
    m = scrape(board_with(make_snapshot(traced=(traced,), traced_retired=(retired,))), metrics_per_process=True)
    assert one(m, "gpuflow_traced_kernel_launches_total", pid="folded", session="s1").value == 200
    assert one(m, "gpuflow_traced_kernel_seconds_total", pid="folded").value == pytest.approx(4.0)
    assert one(m, "gpuflow_traced_transfer_bytes_total", pid="folded", direction="h2d").value == 4096 * 40
    assert one(m, "gpuflow_traced_folded_processes_total", session="s1").value == 40
    assert sum(s.value for s in m["gpuflow_traced_kernel_launches_total"]) == 205
