"""The SM grid on each GPU's card and the edges that carry bytes (issue 20), the PM band on the grid
and the PM rows above a traced process's lanes (issue 21), in Chromium, from a real agent.

The agent serves two test collectors (tests/ui/grid_scene.py: one snapshot with every case the grid
and the edges draw; tests/ui/grid_pm.py: the PM samples an H200 gave in scripts/gpu-check's "half
the SMs" phase, in the agent's own sample store, answered through /api/history as the pmsampling
collector answers them). The page tells what it drew through the test hook (``drawn.grids``,
``drawn.links``, ``drawn.pmRows``, the texts drawn with an id and their size and box); the expected
figures come from the scene's constants and the capture. The demo's 8 GPUs at 1280x720 are checked
for the grid's and the edges' texts: inside their card, legible, overlapping nothing. Screenshots
go to tests/artifacts/.
"""

from __future__ import annotations

import time

import pytest

from . import grid_scene as S
from .conftest import Agent, free_port, hook, shot, until
from .grid_pm import phase_figures

pytestmark = pytest.mark.browser

LABEL_PX = 8   #: the grid's and the edges' small text, at the least (the page's level of detail)


@pytest.fixture(scope="module")
def grid_agent(browser):
    a = Agent(free_port(), {}, plugin="tests.ui.grid_scene", args=("--plugin", "tests.ui.grid_pm"))
    a.start(timeout=40)
    yield a
    a.stop()


@pytest.fixture(scope="module")
def figures():
    return phase_figures()


def drawn_when(page, expr: str, timeout: float = 15.0) -> dict:
    """The hook's ``drawn`` of a finished picture for which ``expr`` (over ``d``, the drawn record) holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = page.evaluate(f"() => {{ const g = window.__gpuflow, d = g.drawn; return g.pendingDraw ? null : ({expr}) ? d : null; }}")
        if state is not None:
            return state
        time.sleep(0.05)
    pytest.fail(f"the page never drew a picture where {expr}")


def open_grid(page, agent) -> dict:
    page.goto(agent.url)
    until(page, "window.__gpuflow.connection === 'live' && window.__gpuflow.frames >= 1", timeout=20000)
    # the PM answers come after the first pictures: wait for GPU 0's band
    return drawn_when(page, "d.grids.some(r => r.id === 'd:0' && r.band && r.band.sm)")


def by_id(records: list[dict]) -> dict[str, dict]:
    return {r["id"]: r for r in records}


def texts(drawn: dict) -> dict[str, dict]:
    return {t["id"]: t for t in drawn["texts"]}


def test_the_grid_has_a_cell_per_sm_its_caption_and_the_traced_kernels_occupancy(page, grid_agent):
    d = open_grid(page, grid_agent)
    grids, t = by_id(d["grids"]), texts(d)
    assert set(grids) == {"d:0", "d:1", "d:2", "d:4"}, "a lost GPU has no grid"
    g0 = grids["d:0"]
    assert g0["sms"] == g0["cells"] == S.SMS
    assert g0["cols"] * g0["pitch"] <= 108 + 1e-6 and g0["cols"] * ((S.SMS + g0["cols"] - 1) // g0["cols"]) >= S.SMS
    assert (g0["sm_util_pct"], g0["occupancy_pct"]) == S.GPM[0]
    assert g0["theoretical_pct"] == S.TOP.occupancy_pct and g0["top"] == S.KERNELS[0].name
    assert g0["caption"] == f"{S.SMS} SMs · cells: GPU means · band: SM spread (PM)"
    assert g0["lines"] == ["traced 50 % · regs · 1.2–3.4 waves"]
    assert t["d:0.grid.caption"]["s"] == g0["caption"] and t["d:0.grid.traced"]["s"] == g0["lines"][0]
    assert t["d:0.gpm.sm_util_pct"]["s"] == "72 %" and t["d:0.gpm.sm_occupancy_pct"]["s"] == "40 %"
    # GPU 1: the same traced process, no GPM: its means are dashes; its kernel's occupancy not known
    g1 = grids["d:1"]
    assert g1["sms"] == g1["cells"] == S.SMS and g1["sm_util_pct"] is None and g1["theoretical_pct"] is None
    assert g1["caption"] == f"{S.SMS} SMs · each cell the GPU mean (GPM)", "GPU 1 has no PM samples: no band"
    assert g1["lines"] == ["traced: occupancy — (cluster launch)"]
    assert {"d:1.gpm.sm_util_pct", "d:1.gpm.sm_occupancy_pct"} <= set(d["dashCells"])
    assert t["d:1.gpm.sm_util_pct"]["s"] == "—"
    # GPU 2: no traced process has described it: no cells, and the caption says why; its means are drawn
    g2 = grids["d:2"]
    assert g2["sms"] is None and g2["cells"] == 0 and g2["band"] is None
    assert g2["caption"] == "SM count not known: no traced process on this GPU"
    assert (g2["sm_util_pct"], g2["occupancy_pct"]) == S.GPM[2] and g2["lines"] == [None]
    # GPU 4: a traced process holds it, but its records never described it
    g4 = grids["d:4"]
    assert g4["cells"] == 0 and g4["caption"] == "SM count not known: no traced process described it"
    for i in ("d:0", "d:1", "d:2", "d:4"):
        assert t[f"{i}.grid.caption"]["px"] >= LABEL_PX
    # the hover says where the count came from and the kernel's configuration, whole
    r = page.evaluate("window.__gpuflow.nodeRect('d:0')")
    page.mouse.move(r["x"] + r["w"] * 0.2, r["y"] + r["h"] * 0.9)
    until(page, "window.__gpuflow.hover && window.__gpuflow.hover.node === 'd:0' && window.__gpuflow.hover.tip !== null")
    tip = hook(page, "hover")["tip"]
    assert f"{S.SMS} (from the DEVICE record of traced pid {S.PID})" in tip
    assert "50.0 % theoretical (registers), 37.5 % – 50.0 % over its configurations" in tip
    assert "1.2 – 3.4 (grid blocks over blocks an SM holds × SMs)" in tip and S.KERNELS[0].name in tip
    shot(page, "sm-grid-hover")


def test_pcie_strands_are_as_thick_as_their_rates_point_the_way_the_bytes_go_and_dash_when_not_measured(page, grid_agent):
    d = open_grid(page, grid_agent)
    links, t = by_id(d["links"]), texts(d)
    l0, l1, l2, l3 = (links[f"d:{i}>host"] for i in range(4))
    for i, link in ((0, l0), (2, l2)):
        rx, tx = S.PCIE[i]
        assert (link["in"], link["out"], link["peak"]) == (rx, tx, S.PEAK)
        assert link["in_px"] == pytest.approx(1 + 6 * rx / S.PEAK) and link["out_px"] == pytest.approx(1 + 6 * tx / S.PEAK)
    assert l0["in_px"] > l2["in_px"] and l2["out_px"] > l0["out_px"], "a higher rate is a thicker strand"
    # not measured (GPU 1), or lost (GPU 3): dashed hairlines with no arrowhead
    for link in (l1, l3):
        assert link["in_px"] is None and link["out_px"] is None and link["in_head"] is None and link["out_head"] is None
    # direction: the out strand's head points toward the host, the in strand's toward the GPU
    host = page.evaluate("window.__gpuflow.nodeRect('host')")
    plane = page.locator("#plane").bounding_box()
    for i, link in ((0, l0), (2, l2)):
        gpu = page.evaluate(f"window.__gpuflow.nodeRect('d:{i}')")
        to_host = (host["x"] + host["w"] / 2 - (gpu["x"] + gpu["w"] / 2), 0)
        for head, sign in ((link["out_head"], 1), (link["in_head"], -1)):
            assert (head["dx"] * to_host[0]) * sign > 0, (i, head)
            assert plane["x"] + head["x"] > min(gpu["x"], host["x"]) and plane["x"] + head["x"] < max(gpu["x"] + gpu["w"], host["x"] + host["w"])
    # the card's PCIe row is the edge's label
    assert t["d:0.pcie"]["s"] == "in 40.0 · out 5.0 of 63.0 GB/s"
    assert t["d:2.pcie"]["s"] == "in 10.0 · out 20.0 of 63.0 GB/s"
    assert t["d:1.pcie"]["s"] == "in — · out — of 63.0 GB/s"
    assert {"d:1.pcie_rx_bytes_per_s", "d:1.pcie_tx_bytes_per_s"} <= set(d["dashCells"])
    shot(page, "sm-grid-edges")


def test_an_nvlink_edge_joins_two_gpus_each_way_and_a_traced_processs_edge_says_its_busy_share_and_copies(page, grid_agent):
    d = open_grid(page, grid_agent)
    links, t = by_id(d["links"]), texts(d)
    nv = links["d:0~d:1"]
    assert (nv["ab"], nv["ba"], nv["links"], nv["down"]) == (4 * S.NVLINK_TX, 4 * S.NVLINK_RX, 4, 0)
    assert nv["ab_px"] > nv["ba_px"] > 1
    assert nv["label"] == "NVLink 0→1 120 · 1→0 30.0 GB/s" and t["d:0~d:1.label"]["s"] == nv["label"]
    plane = page.locator("#plane").bounding_box()
    a, b = (page.evaluate(f"window.__gpuflow.nodeRect('d:{i}')") for i in (0, 1))
    way = (b["x"] - a["x"], b["y"] - a["y"])   # from GPU 0 toward GPU 1
    assert nv["ab_head"]["dx"] * way[0] + nv["ab_head"]["dy"] * way[1] > 0
    assert nv["ba_head"]["dx"] * way[0] + nv["ba_head"]["dy"] * way[1] < 0
    for head in (nv["ab_head"], nv["ba_head"]):   # between the two cards
        y = plane["y"] + head["y"]
        assert min(a["y"], b["y"]) - 1 <= y <= max(a["y"] + a["h"], b["y"] + b["h"]) + 1
    assert not any(k.startswith("d:2~") or "~d:2" in k or "~d:3" in k for k in links), "only NVLinked GPUs are joined"
    # the traced process's edge to GPU 0: its busy share there, its copies by direction and memory
    traced = links[f"p:{S.PID}>d:0"]
    assert traced["lines"] == ["busy 88 % of 1 s", "h2d 53.2 pinned · 11.9 pageable GB/s", "d2h 20.1 pinned GB/s"]
    for i, s in enumerate(traced["lines"]):
        assert t[f"p:{S.PID}>d:0.copies{i}"]["s"] == s and t[f"p:{S.PID}>d:0.copies{i}"]["px"] >= LABEL_PX
    assert f"p:{S.PID}>d:1" not in links, "no busy share and no copies on GPU 1: no label"


def test_the_pm_band_on_the_grid_is_the_spread_across_sms_the_samples_give(page, grid_agent, figures):
    d = open_grid(page, grid_agent)
    g0, t = by_id(d["grids"])["d:0"], texts(d)
    for what, base in (("sm", "pm_sm_active"), ("warps", "pm_warps_active")):
        band, least, busiest, mean = g0["band"][what], figures[base + "_min_pct"], figures[base + "_max_pct"], figures[base + "_pct"]
        assert least["min"] <= band["min"] <= least["max"], (what, band, least)
        assert busiest["mean"] - 1 <= band["max"] <= busiest["max"], (what, band, busiest)
        assert mean["mean"] - 2 <= band["avg"] <= mean["mean"] + 1, (what, band, mean)
    sm = g0["band"]["sm"]
    assert t["d:0.gpm.sm_util_pct.band"]["s"] == f"{round(sm['min'])}–{round(sm['max'])}"
    r = page.evaluate("window.__gpuflow.nodeRect('d:0')")
    page.mouse.move(r["x"] + r["w"] * 0.2, r["y"] + r["h"] * 0.9)
    until(page, "window.__gpuflow.hover && window.__gpuflow.hover.node === 'd:0' && window.__gpuflow.hover.tip !== null")
    tip = hook(page, "hover")["tip"]
    assert "PM across SMs" in tip and f"least SM {sm['min']:.1f} %" in tip
    shot(page, "sm-grid-pm-band")


def test_the_pm_rows_draw_the_real_samplers_series_above_the_lanes(page, grid_agent, figures):
    # issue 21's rows, from the capture's samples as /api/history answers them: per GPU the lanes
    # use, warps in flight and SM active (the mean as a line, the least to the busiest SM as a band)
    # and DRAM; a GPU without samples says why in its row
    open_grid(page, grid_agent)
    d = drawn_when(page, "(d.pmRows || []).some(r => r.device === 0 && r.points > 0)")
    rows = {(r["device"], r["row"]): r for r in d["pmRows"] if r["pid"] == S.PID}
    assert set(rows) == {(dev, row) for dev in (0, 1) for row in ("warps", "SM", "mem")}
    for row, metric in (("warps", "pm_warps_active_pct"), ("SM", "pm_sm_active_pct"), ("mem", "pm_dram_throughput_pct")):
        r = rows[(0, row)]
        assert r["uuid"] == S.UUIDS[0] and r["points"] > 100, r
        assert figures[metric]["min"] - 0.5 <= r["value"] <= figures[metric]["max"] + 0.5, (row, r)
        assert rows[(1, row)]["points"] == 0 and rows[(1, row)]["uuid"] == S.UUIDS[1]
    t = texts(d)
    assert t[f"p:{S.PID}.pm1.why"]["s"] == "GPU metrics: no samples in this window yet"
    assert t[f"p:{S.PID}.pm0.warps"]["s"] == "GPU0 warps"
    shot(page, "pm-rows")


def test_a_past_moment_draws_no_live_means_or_rates(page, grid_agent):
    # history keeps no GPM means and no NVLink rates: at a past moment the grid's means are dashes
    # and the NVLink strands dashed hairlines, never the live figures; the SM count stays (a fact)
    open_grid(page, grid_agent)
    until(page, "window.__gpuflow.timeline.retained !== null", timeout=15000)
    page.keyboard.press("ArrowLeft")
    until(page, "window.__gpuflow.timeline.shown !== null && !window.__gpuflow.pendingDraw", timeout=15000)
    d = drawn_when(page, "d.grids.some(r => r.id === 'd:0' && r.band)")
    g0, links = by_id(d["grids"])["d:0"], by_id(d["links"])
    assert g0["cells"] == S.SMS and g0["sm_util_pct"] is None and g0["occupancy_pct"] is None
    nv = links["d:0~d:1"]
    assert nv["ab"] is None and nv["ab_px"] is None and nv["ab_head"] is None
    assert nv["label"] == "NVLink 0→1 — · 1→0 — GB/s"


def foot_texts(drawn: dict, card: str) -> list[dict]:
    keep = (".grid.", ".gpm.", ".nvswitch", ".pcie")
    return [t for t in drawn["texts"] if t["id"].startswith(card + ".") and any(k in t["id"] for k in keep)]


def overlap(a: dict, b: dict) -> bool:
    return a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]


@pytest.mark.parametrize("variant", ["multigpu", "shared", "traced"])
def test_the_grid_and_edge_texts_of_a_demo_at_1280x720_are_legible_and_overlap_nothing(browser, grid_agent, variant):
    context = browser.new_context(viewport={"width": 1280, "height": 720}, device_scale_factor=1)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(grid_agent.url + f"?demo={variant}")
        until(page, "window.__gpuflow.frames >= 4 && !window.__gpuflow.pendingDraw")
        page.mouse.move(2, 718)
        time.sleep(1.0)
        d = drawn_when(page, "d.grids.length > 0")
        plane = page.locator("#plane").bounding_box()
        devices = [i for i in hook(page, "graph")["nodes"] if i.startswith("d:")]
        for dev in devices:
            card = page.evaluate(f"window.__gpuflow.nodeRect('{dev}')")
            card = {**card, "x": card["x"] - plane["x"], "y": card["y"] - plane["y"]}
            mine = foot_texts(d, dev)
            assert mine, dev
            others = [t for t in d["texts"] if t["id"].startswith(dev + ".") and t not in mine]
            for a in mine:
                assert a["px"] >= LABEL_PX, a
                assert card["x"] - 0.5 <= a["x"] and a["x"] + a["w"] <= card["x"] + card["w"] + 0.5, (dev, a, card)
                assert card["y"] - 0.5 <= a["y"] and a["y"] + a["h"] <= card["y"] + card["h"] + 0.5, (dev, a, card)
                for b in mine + others:
                    assert b is a or not overlap(a, b), (a, b)
        # the edges' own labels overlap no card's text
        edge_labels = [t for t in d["texts"] if ".copies" in t["id"] or t["id"].endswith(".label")]
        for a in edge_labels:
            assert a["px"] >= LABEL_PX, a
            for b in d["texts"]:
                assert b is a or not overlap(a, b), (a, b)
        if variant == "traced":
            assert {g["id"]: g["cells"] for g in d["grids"]} == {"d:0": 132, "d:1": 132}
            assert len(edge_labels) == 6
        if variant == "shared":
            nv = {link["id"]: link for link in d["links"] if link["kind"] == "nvlink"}
            assert sorted(nv) == ["d:0~d:1", "d:2~d:3", "d:4~d:5", "d:6~d:7"]
            # GPU 3 says one of its links to GPU 2 is down, GPU 2 does not: the pair's label says it
            assert nv["d:2~d:3"]["down"] == 1 and nv["d:2~d:3"]["label"].endswith(" GB/s · 1 of 12 down")
            assert nv["d:0~d:1"]["down"] == 0 and nv["d:0~d:1"]["label"].endswith(" GB/s")
        shot(page, f"demo-{variant}-grid-1280x720")
        assert not errors, errors
    finally:
        context.close()
