"""Hover, isolate and the page's own words about its state:

* a hover card is rebuilt with every frame while the pointer rests (it used to freeze until the
  pointer moved), and follows what is under the pointer when the view moves under it;
* isolate + F fits the isolated node and its neighbours wholly inside the plane, for a process, a
  GPU and the host, and the card then says what is under the pointer, or goes;
* the help line sits in a bar of its own below the plane, the demo banner in the top bar;
* the host's problems are drawn whole (wrapped), the no-driver explanation included, with a
  pointer to ``gpuflow doctor``;
* the frame line says when the last frame came, or, on a quiet live stream, that nothing has
  changed for how long (not an age that looks stale while the agent is fine);
* the top bar counts every process once, and says how many traced ones exited.
"""

from __future__ import annotations

import re
import time

import pytest

from .conftest import FAKE, Agent, free_port, hook, open_live, shot, until

pytestmark = pytest.mark.browser

LONG = ("fake collector: this problem is deliberately long, so that a card of fixed width has to "
        "wrap it over several lines, and every word of it, including the last one, must still be "
        "on the page: nothing may be cut mid-word (end of the message)")


DOCTOR_HINT = "Run gpuflow doctor on this machine: it checks each part and says what to do."


def settled(page, expr: str):
    for _ in range(300):
        pending, value = page.evaluate(f"[window.__gpuflow.pendingDraw, {expr}]")
        if not pending:
            return value
        time.sleep(0.01)
    pytest.fail("the page never finished drawing")


def inside(r: dict, box: dict) -> bool:
    return (r["x"] >= box["x"] - 0.5 and r["y"] >= box["y"] - 0.5 and r["x"] + r["w"] <= box["x"] + box["width"] + 0.5
            and r["y"] + r["h"] <= box["y"] + box["height"] + 0.5)


def node_under(page, x: float, y: float) -> str | None:
    rects = page.evaluate("window.__gpuflow.graph.nodes.map(id => [id, window.__gpuflow.nodeRect(id)])")
    hits = [i for i, r in rects if r["x"] <= x <= r["x"] + r["w"] and r["y"] <= y <= r["y"] + r["h"]]
    return hits[-1] if hits else None


def test_a_resting_hover_card_is_rebuilt_with_every_frame(page, agent):
    open_live(page, agent)
    r = page.evaluate("window.__gpuflow.nodeRect('d:0')")
    page.mouse.move(r["x"] + r["w"] * 0.7, r["y"] + r["h"] * 0.5)
    until(page, "window.__gpuflow.hover && window.__gpuflow.hover.tip !== null")
    first = hook(page, "hover")
    tips = {first["tip"]}
    for k in range(1, 4):   # the pointer does not move
        until(page, f"window.__gpuflow.lastSeq >= {first['seq'] + k}", timeout=5000)
        seq, last, tip = settled(page, "[window.__gpuflow.hover.seq, window.__gpuflow.lastSeq, window.__gpuflow.hover.tip]")
        assert seq == last, "the card shows an older frame than the picture"
        tips.add(tip)
    assert len(tips) > 1, "the card never changed while the readings did"
    assert first["node"] == hook(page, "hover")["node"] == "d:0"


@pytest.mark.parametrize("node", ["p:48213", "d:0", "host"])
def test_isolate_then_f_fits_the_lit_set_inside_the_plane_and_the_card_follows(browser, agent, node):
    context = browser.new_context(viewport={"width": 1280, "height": 720}, device_scale_factor=1)
    page = context.new_page()
    try:
        page.goto(agent.url + "?demo=shared")
        until(page, "window.__gpuflow.frames >= 3 && !window.__gpuflow.pendingDraw")
        r = page.evaluate(f"window.__gpuflow.nodeRect('{node}')")
        x, y = r["x"] + min(20, r["w"] / 2), r["y"] + min(12, r["h"] / 2)
        page.mouse.click(x, y)
        until(page, f"window.__gpuflow.isolated === '{node}' && window.__gpuflow.hover && window.__gpuflow.hover.tip !== null")
        v0 = hook(page, "view")
        page.keyboard.press("f")
        # the fit moves the view; where the lit set is as tall as the whole graph (a column of GPUs,
        # the host with every GPU) the zoom can stay what it was and only the view's place changes
        until(page, f"(window.__gpuflow.view.s !== {v0['s']} || window.__gpuflow.view.x !== {v0['x']} || "
                    f"window.__gpuflow.view.y !== {v0['y']}) && !window.__gpuflow.pendingDraw")
        plane = page.locator("#plane").bounding_box()
        lit = page.evaluate(f"""(() => {{ const g = window.__gpuflow.graph, ids = new Set(['{node}']);
          for (const e of g.edges) {{ const [a, b] = e.split('>'); if (a === '{node}') ids.add(b); if (b === '{node}') ids.add(a); }}
          return [...ids].map(id => [id, window.__gpuflow.nodeRect(id)]); }})()""")
        assert len(lit) > 1
        for i, q in lit:
            assert inside(q, plane), f"{i} is not wholly in the plane after F: {q} vs {plane}"
        # the pointer has not moved; the view has: the card is about what is under it now
        under = node_under(page, x, y)
        h = settled(page, "window.__gpuflow.hover")
        if under is None:
            assert h is None and not page.locator("#tip").is_visible()
        else:
            assert h["node"] == under and h["tip"] is not None
        shot(page, f"isolate-f-{node.replace(':', '')}")
        # off every node: the card goes
        page.mouse.move(plane["x"] + 3, plane["y"] + 3)
        assert node_under(page, plane["x"] + 3, plane["y"] + 3) is None
        until(page, "window.__gpuflow.hover === null")
        assert not page.locator("#tip").is_visible()
    finally:
        context.close()


def test_the_help_line_and_the_banner_have_bars_of_their_own(page, agent):
    page.goto(agent.url + "?demo=shared")
    until(page, "window.__gpuflow.frames >= 2")
    foot, help_, plane = (page.locator(s).bounding_box() for s in ("#foot", "#help", "#plane"))
    assert foot["y"] >= plane["y"] + plane["height"] - 0.5
    assert foot["y"] <= help_["y"] and help_["y"] + help_["height"] <= foot["y"] + foot["height"]
    assert help_["x"] >= 0 and help_["x"] + help_["width"] <= foot["width"]
    bg = page.evaluate("getComputedStyle(document.getElementById('foot')).backgroundColor")
    assert bg not in ("transparent", "rgba(0, 0, 0, 0)")
    bar, banner = page.locator("#bar").bounding_box(), page.locator("#demo-banner").bounding_box()
    assert bar["y"] <= banner["y"] and banner["y"] + banner["height"] <= bar["y"] + bar["height"]
    assert "F: fit" in page.locator("#help").inner_text() and "P: process list" in page.locator("#help").inner_text()


def test_host_problems_are_drawn_whole(browser):
    agent = Agent(free_port(), {**FAKE, "GPUFLOW_FAKE_PROBLEM": LONG})
    agent.start()
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    try:
        open_live(page, agent)
        lines = settled(page, "window.__gpuflow.drawn.problems")
        text = " ".join(lines)
        assert "▲ fake: " + LONG in text
        assert len([l for l in lines if l]) >= 4          # wrapped, not cut
        assert not any(l.endswith("…") for l in lines)
        r = page.evaluate("window.__gpuflow.nodeRect('host')")
        page.mouse.move(r["x"] + 20, r["y"] + 10)
        until(page, "window.__gpuflow.hover && window.__gpuflow.hover.tip !== null")
        assert LONG in hook(page, "hover")["tip"]
        shot(page, "host-problems-whole")
    finally:
        context.close()
        agent.stop()


def test_without_a_driver_the_page_says_why_whole_and_points_to_gpuflow_doctor(browser):
    # the NVML collector on its fake backend, scenario "nodriver": nvmlInit fails as if
    # libnvidia-ml.so.1 were missing; the page draws the collector's own Problem whole
    agent = Agent(free_port(), {"GPUFLOW_NVML_FAKE": "nodriver", "GPUFLOW_DISABLED_PLUGINS": "cupti"}, plugin=None)
    agent.start()
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    try:
        open_live(page, agent, frames=1)
        snap = agent.snapshot()
        (why,) = [p for p in snap["host"]["problems"] if p["severity"] == "error"]
        assert why["source"] == "nvml" and "driver" in why["message"]
        lines = settled(page, "window.__gpuflow.drawn.problems")
        text = " ".join(lines)
        assert "✖ nvml: " + why["message"] in text
        assert text.endswith(DOCTOR_HINT), text   # after the problems, where to look next
        assert "0 GPUs" in page.locator("#hostinfo").inner_text()
        r = page.evaluate("window.__gpuflow.nodeRect('host')")
        page.mouse.move(r["x"] + 20, r["y"] + 10)
        until(page, "window.__gpuflow.hover && window.__gpuflow.hover.tip !== null")
        tip = hook(page, "hover")["tip"]
        assert why["message"] in tip and "gpuflow doctor" in tip
        shot(page, "no-driver")
    finally:
        context.close()
        agent.stop()


def test_a_quiet_live_stream_says_nothing_changed_not_that_it_is_old(page, still_agent):
    open_live(page, still_agent, frames=1)
    until(page, "/unchanged for/.test(document.getElementById('frameinfo').textContent)", timeout=8000)
    line = page.locator("#frameinfo").inner_text()
    assert re.fullmatch(r"seq \d+ · unchanged for \d+(\.\d)? s · agent connected", line), line
    assert hook(page, "connection") == "live" and not page.locator("#stale").is_visible()


def test_a_flowing_stream_says_how_recent_the_last_frame_is(page, agent):
    open_live(page, agent)
    time.sleep(1.2)   # the line is rewritten every second and with every frame
    line = page.locator("#frameinfo").inner_text()
    m = re.fullmatch(r"seq \d+ · (\d+\.\d) s ago", line)
    assert m and float(m.group(1)) < 1.0, line


def test_the_top_bar_counts_each_process_once_and_the_exited_traced_ones(page, agent):
    page.goto(agent.url + "?demo=traced")
    until(page, "window.__gpuflow.frames >= 2")
    assert page.locator("#hostinfo").inner_text() == "gpu-node-3 · 2 GPUs · 3 processes · 3 traced, 1 exited"
