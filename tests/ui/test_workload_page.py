"""Who a process belongs to, on the page: the process list names each process's pod, container or
Slurm job under its name, the process node's title carries the same label, and its hover card
the ids; a process on a GPU its container was not allocated is in the warning colour.

Against a real agent on the NVML collector's fake ``pods`` scenario (a containerd pod, a CRI-O
pod, a Docker container, a Slurm job, a host process), whose cgroup files the fake brings.
"""

from __future__ import annotations

import pytest

from gpuflow.collectors.nvml import fake_scenarios as fs

from .conftest import Agent, free_port, hook, shot, until

pytestmark = pytest.mark.browser

LABELS = {7001: "pod " + fs.POD_TRAIN_UID[:17], 7002: "pod " + fs.POD_SERVE_UID[:17],
          7003: "docker " + fs.CONTAINER_DOCKER[:12], 7004: f"job {fs.SLURM_JOB}", 7005: ""}


@pytest.fixture(scope="module")
def pods_agent(browser):
    a = Agent(free_port(), {"GPUFLOW_DISABLED_PLUGINS": "cupti", "GPUFLOW_NVML_FAKE": "pods",
                            "GPUFLOW_NVML_HISTORY": "0"}, plugin=None, args=("--interval", "500"))
    a.start()
    yield a
    a.stop()


def test_the_list_node_and_hover_say_who_each_process_belongs_to(browser, pods_agent):
    context = browser.new_context(viewport={"width": 1920, "height": 1080}, device_scale_factor=1)
    page = context.new_page()
    try:
        page.goto(pods_agent.url)
        until(page, "window.__gpuflow.frames >= 1 && window.__gpuflow.connection === 'live'", timeout=15000)
        until(page, "document.querySelectorAll('#proctable tbody tr').length === 5")
        got = dict(page.evaluate("[...document.querySelectorAll('#proctable tbody tr')].map(tr => "
                                 "[+tr.cells[0].textContent, tr.querySelector('.wl').textContent])"))
        assert got == LABELS
        title = page.evaluate("[...document.querySelectorAll('#proctable tbody tr')]"
                              ".find(tr => tr.cells[0].textContent === '7003').title")
        assert f"docker id: {fs.CONTAINER_DOCKER[:12]}" in title
        until(page, "!window.__gpuflow.pendingDraw")
        drawn = {t["id"] for t in hook(page, "drawn.texts") if t.get("id", "").endswith(".workload")}
        assert {"p:7001.workload", "p:7002.workload", "p:7003.workload", "p:7004.workload"} <= drawn
        assert "p:7005.workload" not in drawn
        r = page.evaluate("window.__gpuflow.nodeRect('p:7001')")
        page.mouse.move(r["x"] + r["w"] * 0.5, r["y"] + 8)
        until(page, "window.__gpuflow.hover && window.__gpuflow.hover.node === 'p:7001'")
        tip = hook(page, "hover")["tip"]
        assert f"poduid {fs.POD_TRAIN_UID}" in tip and "containerd id" in tip and fs.CONTAINER_TRAIN[:12] in tip
        shot(page, "workload-pods")
    finally:
        context.close()
