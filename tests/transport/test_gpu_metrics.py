"""/metrics' GPU families (issue 19) from the real NVML collector over the fake backend, parsed by
prometheus_client's own parsers (the text format and the stricter OpenMetrics one): every family
of metrics_gpu's table present where the snapshot has the reading and absent where it is null,
base units, counters typed as counters, the bus id and host labels on every device series, the
agent's own series, and docs/metrics.md naming every family. Last, a real gunicorn running the
NVML plugin on the fake shared8 serves them over HTTP."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from falcon import testing
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

import gpuflow
from gpuflow.collectors.nvml.collector import NvmlCollector
from gpuflow.collectors.nvml.fake_backend import FakeBackend
from gpuflow.core.context import AgentConfig
from gpuflow.core.merge import merge_parts
from gpuflow.transport.app import AppSettings, create_app
from gpuflow.transport.metrics_gpu import DEVICE_SERIES, GPM_SERIES, LABELLED_SERIES
from servers import Gunicorn, http_get
from snapshots import board_with

ROOT = Path(__file__).resolve().parents[2]
HOST = {"Host": "localhost"}
AGENT_FAMILIES = ("gpuflow_build_info", "gpuflow_nvml_up", "gpuflow_nvml_polls_total",
                  "gpuflow_nvml_poll_errors_total", "gpuflow_nvml_poll_duration_seconds")


def snapshot_of(scenario: str, ticks: int = 6):
    now = [9_000.0]
    backend = FakeBackend(scenario, seed=2, clock=lambda: now[0])
    backend.slow = {}
    c = NvmlCollector(backend, AgentConfig(interval_s=1.0), proc_reader=backend.proc_reader,
                      clock=lambda: now[0], monotonic=lambda: now[0], hostname="node-7")
    c.poll_once()
    for _ in range(ticks):
        c.sample_once()
        now[0] += 1.0
        part = c.poll_once()
    c.stop()
    return merge_parts([part], seq=3, timestamp=now[0])


def scrape_text(snap, accept: str | None = None) -> str:
    app = create_app(board_with(snap), settings=AppSettings(first_snapshot_wait_s=0.05))
    headers = dict(HOST, **({"Accept": accept} if accept else {}))
    r = testing.TestClient(app, headers=HOST).simulate_get("/metrics", headers=headers)
    assert r.status_code == 200
    return r.text


def parsed(text: str, parse=text_string_to_metric_families):
    families = {f.name: f for f in parse(text)}
    samples = {}
    for f in families.values():
        for s in f.samples:
            samples.setdefault(s.name, []).append(s)
    return families, samples


def one(samples, name, **labels):
    found = [s for s in samples.get(name, []) if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, samples.get(name))
    return found[0]


@pytest.fixture(scope="module")
def shared8():
    snap = snapshot_of("shared8")
    return snap, parsed(scrape_text(snap))


def test_every_device_family_present_in_base_units_and_typed(shared8):
    snap, (families, samples) = shared8
    gpu5 = snap.devices[5]
    for name, kind, _, path, scale, _ in DEVICE_SERIES:
        sample_name = name + "_total" if kind == "counter" else name
        assert families[name].type == kind, name
        s = one(samples, sample_name, gpu="5")
        value = gpu5
        for part in path.split("."):
            value = getattr(value, part)
        assert s.value == pytest.approx(float(value) * scale), name
    assert one(samples, "gpuflow_gpu_energy_joules_total", gpu="0").value > 3.6e6  # J, not mJ
    assert one(samples, "gpuflow_gpu_sm_clock_hertz", gpu="0").value == 1980e6


def test_pcie_is_a_bytes_counter_equal_to_the_snapshots_total(shared8):
    snap, (families, samples) = shared8
    assert families["gpuflow_gpu_pcie_receive_bytes"].type == "counter"
    got = one(samples, "gpuflow_gpu_pcie_receive_bytes_total", gpu="0").value
    assert got == snap.devices[0].links.pcie_rx_bytes_total > 0
    assert not [n for n in samples if re.fullmatch(r"gpuflow_gpu_pcie_(tx|rx)_bytes_per_second", n)]
    # GPU 7 (MIG: no whole-GPU GPM, no exact source): no counter rather than a made-up one
    assert not [s for s in samples["gpuflow_gpu_pcie_receive_bytes_total"] if s.labels["gpu"] == "7"]


def test_every_device_series_has_bus_id_and_host_labels(shared8):
    snap, (_, samples) = shared8
    buses = {str(d.index): d.pci_bus_id for d in snap.devices}
    for name, rows in samples.items():
        for s in rows:
            if "gpu" in s.labels:
                assert s.labels["Hostname"] == "node-7", name
                assert s.labels["pci_bus_id"] == buses[s.labels["gpu"]], name


def test_gpm_families_per_gpu_and_per_mig_instance(shared8):
    snap, (_, samples) = shared8
    s = one(samples, "gpuflow_gpu_sm_active_ratio", gpu="0")
    assert s.labels["gpu_instance"] == "" and s.value == pytest.approx(snap.devices[0].gpm.sm_util_pct / 100)
    occupancy = one(samples, "gpuflow_gpu_sm_occupancy_ratio", gpu="0").value
    assert 0 < occupancy < 1
    mig = [x for x in samples["gpuflow_gpu_sm_active_ratio"] if x.labels["gpu"] == "7"]
    assert [x.labels["gpu_instance"] for x in mig] == ["1", "2", "5"]
    assert [x.value for x in mig] == pytest.approx([0.57, 0.0, 0.2375])
    for name, _, _, _ in GPM_SERIES:
        assert len(samples[name]) == 7 + 3, name


def test_health_families_with_their_own_labels(shared8):
    _, (families, samples) = shared8
    assert one(samples, "gpuflow_gpu_ecc_errors_total", gpu="3", type="corrected", counter="volatile").value == 2
    assert one(samples, "gpuflow_gpu_ecc_errors_total", gpu="3", type="corrected", counter="aggregate").value == 14
    assert one(samples, "gpuflow_gpu_remapped_rows_total", gpu="3", cause="correctable").value == 1
    assert one(samples, "gpuflow_gpu_xid_last", gpu="5").value == 31
    assert one(samples, "gpuflow_gpu_xid_errors_total", gpu="5").value == 1
    assert not [s for s in samples["gpuflow_gpu_xid_last"] if s.labels["gpu"] != "5"]  # none yet: absent
    assert one(samples, "gpuflow_gpu_clock_event_active", gpu="7", reason="gpu_idle").value == 1
    assert one(samples, "gpuflow_gpu_clock_event_active", gpu="7", reason="sw_power_cap").value == 0
    assert one(samples, "gpuflow_gpu_nvlink_up", gpu="3", link="3").value == 0
    up = one(samples, "gpuflow_gpu_nvlink_up", gpu="0", link="0")
    assert up.value == 1 and up.labels["peer_gpu"] == "1"
    assert one(samples, "gpuflow_gpu_nvlink_receive_bytes_total", gpu="0", link="2").value > 0


def test_the_agents_own_series(shared8):
    snap, (_, samples) = shared8
    assert one(samples, "gpuflow_nvml_up").value == 1
    assert one(samples, "gpuflow_build_info").labels["version"] == gpuflow.__version__
    assert one(samples, "gpuflow_nvml_polls_total").value == snap.host.nvml_polls
    assert one(samples, "gpuflow_nvml_poll_errors_total").value == 0
    assert one(samples, "gpuflow_nvml_poll_duration_seconds").value >= 0


def test_openmetrics_exposition_parses_strictly(shared8):
    snap, _ = shared8
    text = scrape_text(snap, "application/openmetrics-text; version=1.0.0")
    families, samples = parsed(text, openmetrics_families)
    assert families["gpuflow_gpu_energy_joules"].type == "counter"
    assert one(samples, "gpuflow_gpu_pcie_transmit_bytes_total", gpu="1").value > 0


def test_an_older_gpu_has_no_gpm_or_pcie_counters_and_a_driver_less_host_says_nvml_is_down():
    _, samples = parsed(scrape_text(snapshot_of("oldgpu")))
    for name, _, _, _ in GPM_SERIES:
        assert name not in samples, name
    assert "gpuflow_gpu_pcie_transmit_bytes_total" not in samples
    assert "gpuflow_gpu_remapped_rows_total" not in samples and "gpuflow_gpu_row_remap_pending" not in samples
    assert len(samples["gpuflow_gpu_energy_joules_total"]) == 2
    _, samples = parsed(scrape_text(snapshot_of("nodriver", ticks=1)))
    assert one(samples, "gpuflow_nvml_up").value == 0


def test_notsupported_health_is_absent_never_zero():
    _, samples = parsed(scrape_text(snapshot_of("notsupported")))
    for name in ("gpuflow_gpu_energy_joules_total", "gpuflow_gpu_memory_temperature_celsius",
                 "gpuflow_gpu_ecc_errors_total", "gpuflow_gpu_pcie_replays_total",
                 "gpuflow_gpu_clock_event_active", "gpuflow_gpu_xid_errors_total",
                 "gpuflow_gpu_pcie_link_generation_max"):
        assert name not in samples, name


def test_docs_metrics_md_maps_every_family():
    doc = (ROOT / "docs" / "metrics.md").read_text()
    names = ([row[0] + ("_total" if row[1] == "counter" else "") for row in DEVICE_SERIES]
             + [row[0] for row in GPM_SERIES] + [row[0] for row in LABELLED_SERIES] + list(AGENT_FAMILIES))
    missing = [n for n in names if f"`{n}`" not in doc]
    assert not missing, missing
    for row in DEVICE_SERIES + GPM_SERIES:
        dcgm = row[-1].split(" ")[0]
        if dcgm.startswith("DCGM_"):
            assert dcgm in doc, dcgm


@pytest.mark.slow
def test_real_gunicorn_serves_the_nvml_plugins_families():
    g = Gunicorn(env={"GPUFLOW_PLUGINS": "", "GPUFLOW_DISABLED_PLUGINS": "cupti",
                      "GPUFLOW_NVML_FAKE": "shared8", "GPUFLOW_INTERVAL_MS": "200"})
    try:
        deadline = time.monotonic() + 10
        while True:  # the agent starts in the worker on the first request; GPM needs a pair
            status, _, body = http_get(g.port, "/metrics")
            assert status == 200
            _, samples = parsed(body.decode())
            if "gpuflow_gpu_sm_active_ratio" in samples or time.monotonic() > deadline:
                break
            time.sleep(0.25)
        assert "gpuflow_gpu_sm_active_ratio" in samples, "no GPM series within 10 s"
        assert one(samples, "gpuflow_nvml_up").value == 1
        assert len(samples["gpuflow_gpu_info"]) == 8
        assert one(samples, "gpuflow_gpu_ecc_errors_total", gpu="3", type="corrected",
                   counter="aggregate").value == 14
    finally:
        g.stop()
