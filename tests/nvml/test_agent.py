"""The NVML plugin inside a real Agent built by the real plugin manager: the published JSON."""

from __future__ import annotations

import json
import time

from gpuflow.core.agent import Agent
from gpuflow.core.context import AgentConfig
from gpuflow.core.plugins import get_plugin_manager

ENVIRON = {"GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1", "GPUFLOW_DISABLED_PLUGINS": "cupti"}


def published(scenario, until, timeout=5.0, **options):
    """Run an agent with the fake scenario until ``until(json_dict)`` holds; return the JSON text."""
    pm = get_plugin_manager(environ=ENVIRON)
    assert pm.get_plugin("nvml") is not None and pm.get_plugin("cupti") is None
    agent = Agent(AgentConfig(interval_s=0.05, options={"nvml": {"fake": scenario, **options}}), pm)
    agent.start()
    try:
        deadline = time.monotonic() + timeout
        seq = -1
        while time.monotonic() < deadline:
            snap = agent.board.wait_newer(seq, timeout=0.5)
            if snap is None:
                continue
            seq = snap.seq
            text = json.dumps(snap.to_json_dict())
            if until(json.loads(text)):
                return text
        raise AssertionError(f"no snapshot satisfied the condition; last: {text[:2000]}")
    finally:
        agent.stop()


def test_notsupported_publishes_nulls_not_zeros():
    text = published("notsupported", lambda d: bool(d["devices"]))
    doc = json.loads(text)
    assert doc["sources"] == ["nvml"]
    gpu = doc["devices"][0]
    for field in ("utilization_gpu_pct", "utilization_memory_pct", "temperature_c", "power_draw_w",
                  "power_limit_w", "clock_sm_mhz", "clock_mem_mhz", "pcie_tx_bytes_per_s",
                  "pcie_rx_bytes_per_s", "mig_mode"):
        assert gpu[field] is None, field
    assert '"temperature_c": null' in text and '"temperature_c": 0' not in text
    assert gpu["memory_total_bytes"] == 150754820096 and gpu["lost"] is False
    attachment = doc["processes"][0]["attachments"][0]
    assert attachment["sm_util_pct"] is None and attachment["memory_used_bytes"] > 0


def test_wddm_publishes_null_process_memory():
    doc = json.loads(published("wddm", lambda d: bool(d["processes"])))
    attachments = doc["processes"][0]["attachments"]
    assert [a["device_index"] for a in attachments] == [0, 1]
    assert all(a["memory_used_bytes"] is None for a in attachments)
    assert all(d["memory_used_bytes"] > 0 for d in doc["devices"])


def test_shared8_job_on_four_gpus_and_redacted_cmdline():
    doc = json.loads(published("shared8", lambda d: len(d["devices"]) == 8
                               and d["devices"][0]["pcie_tx_bytes_per_s"] is not None))
    job = next(p for p in doc["processes"] if p["pid"] == 4242)
    assert [a["device_index"] for a in job["attachments"]] == [0, 1, 2, 3]
    assert job["cmdline"] == "python"
    assert "sk-not-a-real-secret" not in json.dumps(doc)
    assert doc["host"]["cuda_driver_version"] == "13.0"
    assert [p["severity"] for p in doc["host"]["problems"]] == ["info"]  # the "simulated" notice


def test_lost_gpu_in_the_published_snapshot():
    doc = json.loads(published("lost", lambda d: any(g["lost"] for g in d["devices"])))
    lost = [g for g in doc["devices"] if g["lost"]]
    assert [g["index"] for g in lost] == [2]
    assert lost[0]["utilization_gpu_pct"] is None and lost[0]["uuid"].startswith("GPU-")
    assert all(g["utilization_gpu_pct"] is not None for g in doc["devices"] if not g["lost"])
    assert any(p["severity"] == "error" and "GPU 2" in p["message"] for p in doc["host"]["problems"])


def test_no_driver_agent_runs_and_says_why():
    doc = json.loads(published("nodriver", lambda d: any(
        p["severity"] == "error" for p in d["host"]["problems"])))
    assert doc["devices"] == [] and doc["processes"] == []
    messages = [p["message"] for p in doc["host"]["problems"]]
    assert ("NVIDIA driver not found (libnvidia-ml.so.1 could not be loaded): GPUFlow shows no GPUs"
            in messages)


def test_vanishing_pid_never_reaches_the_browser():
    seen = []

    def record(doc):
        seen.append({p["pid"] for p in doc["processes"]})
        return len(seen) >= 8

    published("vanishing", record)
    assert all(pids <= {4600} for pids in seen)
    assert {4600} in seen


def test_hanging_nvml_does_not_hold_up_the_frames():
    t0 = time.monotonic()
    when = []

    def stuck(doc):
        if any("not answering" in p["message"] for p in doc["host"]["problems"]):
            when.append(time.monotonic() - t0)
            return True
        return False

    doc = json.loads(published("hang", stuck, fake_slow_s=1.0))
    # the first poll is stuck in NVML for 1 s, yet a frame saying so went out well before
    assert when[0] < 0.8
    assert doc["devices"] == []
