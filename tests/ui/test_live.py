"""The page against a real agent fed by the fake collector: what is drawn matches the snapshot.

Each test reads the page's state through its read-only hook (window.__gpuflow) and compares it
with what the agent serves on /api/snapshot: nodes and edges, "—" exactly where a drawn value is
null, the TRACED strip (lane labels, "showing N of M", spans rebuilt from delta frames equal the
agent's own lanes), span hover details, and the mouse/keyboard interactions.
"""

from __future__ import annotations

import re
import time

import pytest

from .conftest import until, hook, open_live, shot

pytestmark = pytest.mark.browser

#: device fields the node draws as numbers (a null one must be drawn as "—", and only a null one)
# the clocks are in a GPU's hover, not on its card; the card's PCIe row and SM grid have cells of
# their own (the link's peak, the GPM means: device_grid_cells)
DEVICE_CELLS = ("name", "utilization_gpu_pct", "memory_used_bytes", "memory_total_bytes", "temperature_c",
                "power_draw_w", "power_limit_w", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s")
ATTACHMENT_CELLS = ("sm_util_pct", "memory_used_bytes")


def expected_graph(snap: dict) -> tuple[list[str], list[str]]:
    nodes = {"host"} | {f"d:{d['index']}" for d in snap["devices"]}
    nodes |= {f"p:{p['pid']}" for p in snap["processes"]} | {f"p:{t['pid']}" for t in snap["traced"]}
    edges = {f"p:{p['pid']}>d:{a['device_index']}" for p in snap["processes"] for a in p["attachments"]}
    edges |= {f"d:{d['index']}>host" for d in snap["devices"]}
    return sorted(nodes), sorted(edges)


def lanes_at_one_seq(page, agent, tries: int):
    """The page's kept lanes and /api/snapshot's lanes (key -> span seqs), caught at one seq."""
    for _ in range(tries):
        seq, lanes = page.evaluate("(() => { const t = window.__gpuflow.lanesKept[0];"
                                   " return [window.__gpuflow.lastSeq, window.__gpuflow.laneSeqs(t.pid)]; })()")
        snap = agent.snapshot()
        if snap["seq"] == seq:
            break
        time.sleep(0.03)
    else:
        pytest.fail("never caught the page and /api/snapshot at the same seq")
    served = {f"{l['device']}:{l['context']}:{l['stream']}": [s["seq"] for s in l["spans"]]
              for l in snap["traced"][0]["lanes"]}
    return lanes, served

def test_nodes_and_edges_match_the_snapshot(page, agent):
    open_live(page, agent)
    snap = agent.snapshot()
    nodes, edges = expected_graph(snap)
    graph = hook(page, "graph")
    assert graph["nodes"] == nodes
    assert graph["edges"] == edges
    # the fitted view shows every node and every edge
    counts = hook(page, "counts")
    assert counts["nodes"] == len(nodes) and counts["edges"] == len(edges)
    assert counts["devices"] == len(snap["devices"])
    assert hook(page, "demo") is None
    assert not page.locator("#demo-banner").is_visible()
    assert page.locator("#conn").inner_text().startswith("live")
    # the header names the host the agent reported
    assert snap["host"]["hostname"] in page.locator("#hostinfo").inner_text()
    shot(page, "live-fit")


def test_layout_is_stable_across_frames(page, agent):
    open_live(page, agent)
    ids = hook(page, "graph")["nodes"]
    before = {i: page.evaluate(f"window.__gpuflow.nodeRect('{i}')") for i in ids}
    seq = hook(page, "lastSeq")
    until(page, f"window.__gpuflow.lastSeq >= {seq + 3}", timeout=5000)
    after = {i: page.evaluate(f"window.__gpuflow.nodeRect('{i}')") for i in ids}
    assert after == before, "nodes moved while only values changed"


def device_grid_cells(d: dict) -> set[str]:
    """The dashes of a GPU's PCIe row's peak and, unless it is lost, of its SM grid's GPM means."""
    out = set()
    if (d["links"] or {}).get("pcie_peak_bytes_per_s") is None:
        out.add(f"d:{d['index']}.pcie_peak_bytes_per_s")
    if not d["lost"]:
        for f in ("sm_util_pct", "sm_occupancy_pct"):
            if (d["gpm"] or {}).get(f) is None:
                out.add(f"d:{d['index']}.gpm.{f}")
    return out


def test_null_values_are_drawn_as_dashes_and_only_they(page, agent):
    open_live(page, agent)
    # a frame's nulls are the same in every frame of the fake scenario, so /api/snapshot tells
    snap = agent.snapshot()
    cells = set(hook(page, "drawn")["dashCells"])
    expected = set()
    for d in snap["devices"]:
        for f in DEVICE_CELLS:
            if d[f] is None:
                expected.add(f"d:{d['index']}.{f}")
        expected |= device_grid_cells(d)
    for p in snap["processes"]:
        for f in ("name", "user"):
            if p[f] is None:
                expected.add(f"p:{p['pid']}.{f}")
    for t in snap["traced"]:   # traced but holding no GPU: NVML never told its user
        if t["pid"] not in {p["pid"] for p in snap["processes"]}:
            expected.add(f"p:{t['pid']}.user")
        for a in p["attachments"]:
            for f in ATTACHMENT_CELLS:
                if a[f] is None:
                    expected.add(f"p:{p['pid']}.gpu{a['device_index']}.{f}")
    assert expected, "the fake scenario should have null values (odd GPUs' PCIe rx, the lost GPU)"
    assert "d:1.pcie_rx_bytes_per_s" in expected and "d:2.temperature_c" in expected
    node_cells = {c for c in cells if not c.startswith("host.") and ".window" not in c and ".behind" not in c}
    assert node_cells == expected
    lost = [d for d in snap["devices"] if d["lost"]]
    assert [d["index"] for d in lost] == [2]


def drawn_and_kept(page):
    """What the last draw showed and what the page keeps, read together after a draw that
    showed the latest frame (no frame arrived in between)."""
    for _ in range(100):
        pending, drawn, kept = page.evaluate(
            "[window.__gpuflow.pendingDraw, window.__gpuflow.drawn, window.__gpuflow.lanesKept]")
        if not pending:
            return drawn, kept
        time.sleep(0.01)
    pytest.fail("the page never finished drawing")


def test_traced_strip_states_lanes_and_showing_n_of_m(page, agent):
    open_live(page, agent)
    snap = agent.snapshot()
    (t,) = snap["traced"]
    until(page, f"window.__gpuflow.lastSeq > {snap['seq']}", timeout=5000)
    # once the lanes are past their cap, the strip shows a sample and says so
    until(page, "window.__gpuflow.lanesKept[0].lanes.every(l => l.executions > l.held)", timeout=10000)
    drawn, kept = drawn_and_kept(page)
    (strip,) = drawn["strips"]
    assert strip["pid"] == t["pid"] and strip["cupti"] == "ok" and strip["state"] == "running"
    lanes = sorted(t["lanes"], key=lambda l: (l["device"], l["context"], l["stream"]))
    assert [l["label"] for l in strip["lanes"]] == [l["label"] for l in lanes]
    assert set(drawn["laneLabels"]) == {"default", "compute", "copy-engine", "prefetch"}
    kept = {l["label"]: l for l in kept[0]["lanes"]}
    for l in strip["lanes"]:
        k = kept[l["label"]]
        # what the page keeps is exactly what the agent says its sample holds
        assert k["held"] == k["executions"] - k["spans_elided"] == l["showing"]
        assert l["of"] == k["executions"] and l["of"] > l["showing"] > 0
        assert l["text"] == f"showing {l['showing']:,} of {l['of']:,}"
    m = re.search(r"window (\S+ \S+) · (\S+ \S+) behind live · showing ([\d,]+) of ([\d,]+)", strip["header"])
    assert m, strip["header"]
    assert int(m.group(3).replace(",", "")) == sum(l["showing"] for l in strip["lanes"])
    assert int(m.group(4).replace(",", "")) == sum(l["of"] for l in strip["lanes"])
    assert hook(page, "counts")["spans"] > 0


def test_delta_frames_rebuild_exactly_the_agents_lanes(page, agent):
    open_live(page, agent, frames=4)
    assert hook(page, "deltaFrames") >= 2
    lanes, served = lanes_at_one_seq(page, agent, tries=40)
    assert {l["key"]: l["seqs"] for l in lanes} == served
    assert hook(page, "resyncs") == 0


def test_hovering_a_span_tells_what_ran(page, agent):
    open_live(page, agent)
    # zoom in on the strip with the wheel: the point under the cursor stays put
    pid = hook(page, "lanesKept")[0]["pid"]
    p = page.evaluate(f"window.__gpuflow.spanPoint({pid}, 0, -1)")
    cx, cy = round(p["x"] - 120), round(p["y"])      # wheel events carry whole-pixel positions
    page.mouse.move(cx, cy)
    v0 = hook(page, "view")
    page.mouse.wheel(0, -400)
    until(page, f"window.__gpuflow.view.s > {v0['s'] * 1.5}")
    v1 = hook(page, "view")
    top = page.evaluate("document.getElementById('plane').getBoundingClientRect().top")
    cy -= top
    w0 = ((cx - v0["x"]) / v0["s"], (cy - v0["y"]) / v0["s"])
    w1 = ((cx - v1["x"]) / v1["s"], (cy - v1["y"]) / v1["s"])
    assert w0 == pytest.approx(w1, abs=0.01)
    seen = {}
    for _ in range(60):
        lanes = hook(page, "lanesKept")[0]["lanes"]
        for li in range(len(lanes)):
            p = page.evaluate(f"window.__gpuflow.spanPoint({pid}, {li}, -3)")
            if not p:
                continue
            page.mouse.move(p["x"], p["y"])
            h = hook(page, "hover")
            if h and h["span"] and h["tip"] and h["span"]["kind"] not in seen:
                seen[h["span"]["kind"]] = h
        if "kernel" in seen and ("memcpy" in seen or "memset" in seen):
            break
    assert "kernel" in seen, seen
    k = seen["kernel"]
    assert k["span"]["name"] in k["tip"]
    assert "duration" in k["tip"] and "grid" in k["tip"] and "block" in k["tip"]
    assert "×".join(map(str, k["span"]["grid"])) in k["tip"]
    c = seen.get("memcpy") or seen.get("memset")
    assert c is not None, seen
    assert "bytes" in c["tip"] and "direction" in c["tip"] and c["span"]["direction"] in c["tip"]
    shot(page, "live-hover-span")


def test_hovering_a_traced_process_tells_its_own_cost(page, agent):
    # the node's details carry GPUFlow's own CPU time in the process, from the snapshot
    open_live(page, agent)
    pid = hook(page, "lanesKept")[0]["pid"]
    r = page.evaluate(f"window.__gpuflow.nodeRect('p:{pid}')")
    page.mouse.move(r["x"] + 12, r["y"] + 6)          # the title, above the lane strip
    until(page, "window.__gpuflow.hover && window.__gpuflow.hover.tip !== null")
    tip = hook(page, "hover")["tip"]
    assert "GPUFlow CPU" in tip and " in the process · " in tip and " ns a record" in tip
    # 30 ns a record, as the fake collector reports it
    assert "30 ns a record" in tip
    shot(page, "live-hover-process")


def test_isolate_fit_escape_pan(page, agent):
    open_live(page, agent)
    snap = agent.snapshot()
    worker = next(p for p in snap["processes"] if len(p["attachments"]) == 1)
    wid = f"p:{worker['pid']}"
    fit_view = hook(page, "view")
    total = hook(page, "counts")["nodes"]
    # click isolates the node and its edges: the rest is dimmed
    r = page.evaluate(f"window.__gpuflow.nodeRect('{wid}')")
    page.mouse.click(r["x"] + r["w"] / 2, r["y"] + r["h"] / 2)
    until(page, f"window.__gpuflow.isolated === '{wid}'")
    lit = {wid, f"d:{worker['attachments'][0]['device_index']}"}
    until(page, f"window.__gpuflow.drawn.dimmed === {total - len(lit)}")
    shot(page, "live-isolated")
    # F fits the isolated node and its neighbours
    page.keyboard.press("f")
    until(page, f"window.__gpuflow.view.s > {fit_view['s'] * 1.2}")
    vw, vh = page.viewport_size["width"], page.viewport_size["height"]
    for nid in lit:
        q = page.evaluate(f"window.__gpuflow.nodeRect('{nid}')")
        assert 0 <= q["x"] and q["x"] + q["w"] <= vw and 0 <= q["y"] and q["y"] + q["h"] <= vh
    # Esc clears the isolation
    page.keyboard.press("Escape")
    until(page, "window.__gpuflow.isolated === null && window.__gpuflow.drawn.dimmed === 0")
    # drag pans (and is not a click)
    v = hook(page, "view")
    page.mouse.move(300, 800)   # on the plane, above the bottom bar (the timeline)
    page.mouse.down()
    page.mouse.move(360, 770, steps=4)
    page.mouse.up()
    v2 = hook(page, "view")
    assert (v2["x"] - v["x"], v2["y"] - v["y"]) == pytest.approx((60, -30), abs=0.5)
    assert hook(page, "isolated") is None
    # F with nothing isolated fits everything again
    page.keyboard.press("F")
    until(page, f"Math.abs(window.__gpuflow.view.s - {fit_view['s']}) < 1e-9")
    assert hook(page, "view") == pytest.approx(fit_view)
    # clicking empty space clears an isolation too
    page.mouse.click(r["x"] + r["w"] / 2, r["y"] + r["h"] / 2)
    until(page, "window.__gpuflow.isolated !== null")
    page.mouse.click(5, 60)
    until(page, "window.__gpuflow.isolated === null")


def test_hidpi_and_resize(browser, agent):
    context = browser.new_context(viewport={"width": 900, "height": 600}, device_scale_factor=2)
    page = context.new_page()
    try:
        open_live(page, agent)
        size = page.evaluate("[document.getElementById('plane').width, document.getElementById('plane').height]")
        v = hook(page, "view")
        assert v["dpr"] == 2 and size == [round(v["w"] * 2), round(v["h"] * 2)]
        page.set_viewport_size({"width": 1300, "height": 800})
        until(page, "window.__gpuflow.view.w === 1300")
        size = page.evaluate("[document.getElementById('plane').width, document.getElementById('plane').height]")
        assert size[0] == 2600
        # still fitted (untouched view follows the window) and every node drawn
        assert hook(page, "counts")["nodes"] == len(hook(page, "graph")["nodes"])
        shot(page, "live-hidpi")
    finally:
        context.close()


@pytest.mark.serial   # the page must keep up with 16 busy lanes' deltas, which a loaded machine may not let it
def test_a_busy_program_shows_each_lanes_newest_spans_and_says_how_many(page, busy_agent):
    # every delta carries only each lane's newest spans (the stream's span budget) and says how
    # many it skipped: the page then keeps just those, never a sample with a hole in it
    open_live(page, busy_agent, frames=4)
    lanes, served = lanes_at_one_seq(page, busy_agent, tries=60)
    held = {l["key"]: l["seqs"] for l in lanes}
    assert set(held) == set(served) and len(held) == 16
    for key, seqs in held.items():
        assert 0 < len(seqs) < len(served[key]) == 512, (key, len(seqs))
        assert seqs == served[key][-len(seqs):], key   # the newest, contiguous
    drawn, kept = drawn_and_kept(page)   # read together: a later frame may have come in
    (strip,) = drawn["strips"]
    kept = {l["key"]: l for l in kept[0]["lanes"]}
    for l in strip["lanes"]:
        k = kept[f"{l['device']}:1:{l['stream']}"]
        assert l["showing"] == k["held"] < 512 < l["of"] == k["executions"]
    assert hook(page, "resyncs") == 0 and hook(page, "deltaFrames") >= 2
    shot(page, "live-busy")
