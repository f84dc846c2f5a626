"""Demo mode: every variant renders what it promises, says DEMO on screen at all times, opens no
stream, needs no agent, and never appears without ?demo.
"""

from __future__ import annotations

import pytest

from .conftest import until, hook, open_live, shot

pytestmark = pytest.mark.browser

BANNER = "DEMO — synthetic frames"


def open_demo(page, base: str, variant: str | None):
    page.goto(base + ("?demo" if variant is None else f"?demo={variant}"))
    until(page, "window.__gpuflow.frames >= 3", timeout=10000)
    assert page.locator("#demo-banner").is_visible()
    assert page.locator("#demo-banner").inner_text().startswith(BANNER)
    assert hook(page, "connection") == "demo" and hook(page, "connects") == 0
    return hook(page, "graph")


def edges_of(graph, node):
    return sorted(e.split(">")[1] for e in graph["edges"] if e.startswith(node + ">"))


def test_default_demo_shows_every_kind_of_thing(page, agent):
    graph = open_demo(page, agent.url, None)
    assert hook(page, "demo") == "default"
    assert sum(n.startswith("d:") for n in graph["nodes"]) == 4
    drawn = hook(page, "drawn")
    assert "d:3.temperature_c" in drawn["dashCells"]          # the lost GPU
    assert "d:1.power_draw_w" in drawn["dashCells"]           # the vGPU's unsupported fields
    assert drawn["strips"] and drawn["strips"][0]["lanes"]
    assert hook(page, "deltaFrames") >= 2
    shot(page, "demo-default")


def test_shared_demo_one_job_on_four_cards(page, agent):
    graph = open_demo(page, agent.url, "shared")
    assert sum(n.startswith("d:") for n in graph["nodes"]) == 8
    assert edges_of(graph, "p:48213") == ["d:0", "d:1", "d:2", "d:3"]     # train_ddp
    assert edges_of(graph, "p:51877") == ["d:4", "d:5"]                   # sd_infer
    shot(page, "demo-shared")


def test_multigpu_demo_is_a_busy_node(page, agent):
    graph = open_demo(page, agent.url, "multigpu")
    assert sum(n.startswith("d:") for n in graph["nodes"]) == 8
    assert sum(n.startswith("p:") for n in graph["nodes"]) >= 11
    assert len(edges_of(graph, "p:70011")) == 8
    shot(page, "demo-multigpu")


def test_traced_demo_has_lively_lanes_an_exit_and_a_cupti_failure(page, agent):
    open_demo(page, agent.url, "traced")
    strips = {s["pid"]: s for s in hook(page, "drawn")["strips"]}
    running = strips[31337]
    assert len(running["lanes"]) == 8 and "nccl" in [l["label"] for l in running["lanes"]]
    assert "showing" in running["header"]
    assert strips[31402]["state"] == "exited" and strips[31402]["exit"] == "0"
    assert strips[31455]["cupti"] == "cupti_in_use"
    assert "tracing could not start" in strips[31455]["header"]
    spans = hook(page, "counts")["spans"]
    seq = hook(page, "lastSeq")
    until(page, f"window.__gpuflow.lastSeq >= {seq + 3}")
    kept = {t["pid"]: t for t in hook(page, "lanesKept")}
    assert all(l["held"] == l["executions"] - l["spans_elided"] for l in kept[31337]["lanes"])
    assert spans > 1000
    shot(page, "demo-traced")


def test_demo_needs_no_agent_any_static_server_of_the_page_folder_will_do(page, static_ui):
    graph = open_demo(page, static_ui, "shared")
    assert "p:48213" in graph["nodes"]


def test_the_live_page_never_loads_the_demos_code(page, agent):
    requested = []
    page.on("request", lambda r: requested.append(r.url.rsplit("/", 1)[-1]))
    open_live(page, agent)
    assert "main.js" in requested and "stream.js" in requested
    assert "demo.js" not in requested


def test_no_demo_data_without_the_demo_parameter(page, agent):
    open_live(page, agent)
    assert hook(page, "demo") is None
    assert not page.locator("#demo-banner").is_visible()
    nodes = set(hook(page, "graph")["nodes"])
    demo_pids = {"p:31337", "p:48213", "p:51877", "p:73020", "p:40000"}
    assert not nodes & demo_pids
    snap = agent.snapshot()
    assert {f"p:{p['pid']}" for p in snap["processes"]} <= nodes
