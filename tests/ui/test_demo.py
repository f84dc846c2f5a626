"""Demo mode: every variant renders what it promises, says DEMO on screen at all times, opens no
stream, needs no agent, and never appears without ?demo.
"""

from __future__ import annotations

import json

import pytest

from .conftest import until, hook, open_live, shot

pytestmark = pytest.mark.browser

BANNER = "DEMO — synthetic frames"
SPAN_FIELDS = ["seq", "start_us", "dur_ns", "kind", "name", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
               "bytes", "direction"]


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


WINDOW_ANSWERS = """async () => {
  const { makeDemo } = await import('./demo_source.js');
  // across a whole 1,000 s (10^9 µs), where a start's low digits are zeros
  const start = Math.floor(Date.now() / 1e6) * 1e6 - 10000, src = makeDemo('bench', { start });
  for (let t = start; t <= start + 20000; t += 50) src.frame(t);
  const end = (start + 20000) / 1000, out = [];
  for (const [ago, w, width] of [[3, 0.05, null], [5, 0.4, '4096'], [8, 1.5, '362'], [2, 2, '64'], [15, 3, '512'], [12, 0.2, null]]) {
    const q = { from: String(end - ago - w), to: String(end - ago) };
    if (width) q.width = width;
    out.push({ q, text: await src.rec.answer('api/window', q) });
  }
  return out;
}"""


def test_the_demos_window_answers_are_the_json_an_agent_sends(page, agent):
    # The demo's recorder writes a window's answer as text straight from its columns (a drag asks
    # one a frame): it is the JSON text JSON.stringify writes, every exact span inside the window in
    # the recorder's order, every reduced lane's buckets counting its executions, each no busier
    # than its width; a digit written wrong (a start's low digits, a sign) breaks one of these.
    page.goto(agent.url + "?demo=bench")
    until(page, "window.__gpuflow.frames >= 1", timeout=10000)
    answers = page.evaluate(WINDOW_ANSWERS)
    exact = reduced = 0
    for a in answers:
        text, q = a["text"], a["q"]
        doc = json.loads(text)
        assert json.dumps(doc, separators=(",", ":"), ensure_ascii=False) == text, q
        lo, hi = float(q["from"]) * 1e6, float(q["to"]) * 1e6
        lanes = [L for p in doc["processes"] for L in p["lanes"]]
        assert len(lanes) == 16, q
        for L in lanes:
            if "spans" in L:
                s = L["spans"]
                assert len(s["start_us"]) == L["executions"] > 0 and all(len(s[f]) == L["executions"] for f in SPAN_FIELDS), q
                assert all(lo <= t < hi for t in s["start_us"]) and s["seq"] == sorted(s["seq"]), q
                assert all(d > 0 for d in s["dur_ns"]) and all(k in (0, 1, 2) for k in s["kind"]), q
                assert all((n >= 0) == (k == 0) for n, k in zip(s["name"], s["kind"])), q
                exact += 1
            else:
                b = L["buckets"]
                assert len(b["count"]) == len(b["busy_ns"]) == int(q["width"]) < L["executions"] == sum(b["count"]), q
                assert all(0 <= x <= b["width_us"] * 1000 for x in b["busy_ns"]) and max(b["busy_ns"]) > 0, q
                reduced += 1
    assert exact > 16 and reduced > 16
