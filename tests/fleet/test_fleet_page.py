"""A hub's page in real headless Chromium: the fleet's overview (a tile per host), a host's plane with
its lanes within a second of a click on its tile, back to the overview, and a killed agent's tile
shown down. The hub and its agents are real (``gpuflow hub``, ``gpuflow watch`` with the fake NVML
backend and the fake traced collector); the page runs under the hub's Content-Security-Policy.
Screenshots go to tests/artifacts/."""

from __future__ import annotations

import time

import pytest
from chromium import ARTIFACTS, until
from fleet_agents import Agent, Hub


@pytest.fixture(scope="module")
def fleet():
    agents = [Agent(f"node-{c}", interval_ms=200) for c in "abc"]
    hub = Hub(*(a.url for a in agents))
    yield hub, agents
    hub.stop()
    for a in agents:
        a.stop()


def fleet_state(page) -> dict:
    return page.evaluate("() => window.__gpuflow.fleet")


@pytest.mark.serial   # a bound in wall-clock time (the issue's): timed alone, after the parallel pass
def test_the_overview_a_hosts_plane_and_back(browser, fleet):
    hub, agents = fleet
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" and "Refused" in m.text else None)
    try:
        page.goto(hub.url + "/")
        until(page, "window.__gpuflow && window.__gpuflow.fleet.mode === 'overview' && "
                    "window.__gpuflow.fleet.drawn.length === 3", timeout=15000)
        state = fleet_state(page)
        assert state["hosts"] == ["node-a", "node-b", "node-c"] and set(state["states"].values()) == {"up"}
        assert page.evaluate("() => window.__gpuflow.graph.nodes") == []   # no plane of every host
        assert "3 hosts · 3 up" in page.text_content("#hostinfo")
        page.screenshot(path=str(ARTIFACTS / "fleet-overview-1280x720.png"))
        # a click on node-b's tile: that host's plane, its lanes within a second
        point = page.evaluate("() => window.__gpuflow.tilePoint('node-b')")
        clicked = time.monotonic()
        page.mouse.click(point["x"], point["y"])
        until(page, "window.__gpuflow.fleet.mode === 'host' && window.__gpuflow.lanesKept.some("
                    "t => t.lanes.some(l => l.held > 0))", timeout=5000, polling=20)
        took = time.monotonic() - clicked
        assert took <= 1.0, took
        assert page.evaluate("() => window.__gpuflow.frame().devices.length") == 1
        assert "d:0" in page.evaluate("() => window.__gpuflow.graph.nodes")
        assert page.is_visible("#fleetbtn") and "node-b" in page.text_content("#fleetbtn")
        page.screenshot(path=str(ARTIFACTS / "fleet-host-1280x720.png"))
        # back, and a host that dies is shown down
        page.keyboard.press("Backspace")
        until(page, "window.__gpuflow.fleet.mode === 'overview' && window.__gpuflow.fleet.drawn.length === 3",
              timeout=5000)
        assert not page.is_visible("#fleetbtn")
        agents[2].kill()
        until(page, "window.__gpuflow.fleet.states['node-c'] === 'down'", timeout=5000)
        page.screenshot(path=str(ARTIFACTS / "fleet-overview-down-1280x720.png"))
    finally:
        page.close()
    assert not errors, errors


WARN, BORDER = (0xd2, 0x99, 0x22), (0x30, 0x36, 0x3d)   # canvas.js's COL.warn and COL.border


def edge_colour_distance(page, name: str, colour: tuple[int, int, int]) -> int:
    """How near the pixels across the left edge of ``name``'s tile come to ``colour`` (the smallest
    sum of channel differences), read from the canvas itself."""
    return page.evaluate("""([name, colour]) => {
      const h = window.__gpuflow, a = h.tilePoint('node-a'), b = h.tilePoint('node-b'), p = h.tilePoint(name);
      const s = (b.x - a.x) / 232, canvas = document.querySelector('canvas'), r = canvas.getBoundingClientRect();
      const k = canvas.width / r.width, x = Math.round((p.x - r.left - 110 * s) * k), y = Math.round((p.y - r.top) * k);
      const px = canvas.getContext('2d').getImageData(x - 4, y, 9, 1).data;
      let best = 1e9;
      for (let i = 0; i < 9; i++) best = Math.min(best, Math.abs(px[4 * i] - colour[0]) + Math.abs(px[4 * i + 1] - colour[1]) + Math.abs(px[4 * i + 2] - colour[2]));
      return best;
    }""", [name, list(colour)])


def test_zoomed_out_a_host_that_goes_stale_and_back_is_repainted(browser, fleet):
    """Zoomed out, the overview is drawn from cached bitmaps (fleet_tiles.js): a host whose state
    changes must be painted again in them, never left as it was."""
    hub, agents = fleet
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(hub.url + "/")
        until(page, "window.__gpuflow && window.__gpuflow.fleet.mode === 'overview' && "
                    "window.__gpuflow.fleet.states['node-a'] === 'up'", timeout=15000)
        centre = page.evaluate("() => window.__gpuflow.tilePoint('node-b')")
        page.mouse.move(centre["x"], centre["y"])
        page.mouse.wheel(0, 900)   # to about a quarter of the fitted scale: below one device pixel per unit
        until(page, "(() => { const h = window.__gpuflow, a = h.tilePoint('node-a'), b = h.tilePoint('node-b');"
                    " return (b.x - a.x) / 232 < 0.9; })()", timeout=5000)
        page.wait_for_timeout(300)
        assert edge_colour_distance(page, "node-a", BORDER) < 60
        agents[0].freeze()
        try:
            until(page, "window.__gpuflow.fleet.states['node-a'] === 'stale'", timeout=5000)
            page.wait_for_timeout(300)
            assert edge_colour_distance(page, "node-a", WARN) < 90   # its edge in the warning colour
            assert edge_colour_distance(page, "node-b", WARN) > 150   # and no other tile's
        finally:
            agents[0].thaw()
        until(page, "window.__gpuflow.fleet.states['node-a'] === 'up'", timeout=5000)
        page.wait_for_timeout(300)
        assert edge_colour_distance(page, "node-a", WARN) > 150
        page.screenshot(path=str(ARTIFACTS / "fleet-overview-zoomed-out-1280x720.png"))
    finally:
        page.close()
    assert not errors, errors
