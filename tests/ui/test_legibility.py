"""Legibility right after fit: on a 1280x720 and a 1920x1080 window, with 8 GPUs and 8 to 16
processes, every GPU's utilization, memory, temperature and power and every process's SM % and
memory on each GPU it holds (and its pid) are drawn, all of them, at 11 CSS px or more, inside the
canvas and overlapping nothing; the bottom bar (the help line now, the timeline later) never
covers a node; level of detail follows the text's size in device pixels; and processes of one
name are told apart by their pid even zoomed far out.

The page records each of those texts with the font size and box it was drawn at (the test hook's
``drawn.texts``); the expected set is computed here from the frame the page drew, and for a live
agent also checked against /api/snapshot. Scenarios: ``?demo=shared``, ``?demo=multigpu``, and a
real agent with the fake collector at 8 GPUs and 8 and 16 processes.
"""

from __future__ import annotations

import time

import pytest

from .conftest import Agent, free_port, hook, shot, until

pytestmark = pytest.mark.browser

SIZES = {"1280x720": (1280, 720), "1920x1080": (1920, 1080)}
MIN_PX = 11
DEVICE_TEXTS = ("util", "memory", "temp", "power")


def eight_gpus(procs: int) -> dict[str, str]:
    return {"GPUFLOW_FAKE_GPUS": "8", "GPUFLOW_FAKE_PROCS": str(procs), "GPUFLOW_FAKE_TRACED": "0",
            "GPUFLOW_FAKE_RATE_HZ": "4"}


@pytest.fixture(scope="module")
def agents(browser):
    """Two agents, 8 GPUs each, with 8 and with 16 processes."""
    started = {}
    try:
        for procs in (8, 16):
            a = Agent(free_port(), eight_gpus(procs))
            a.start()
            started[procs] = a
        yield started
    finally:
        for a in started.values():
            a.stop()


def expected_ids(frame: dict) -> set[str]:
    ids = {f"d:{d['index']}.{t}" for d in frame["devices"] for t in DEVICE_TEXTS}
    for p in frame["processes"]:
        ids.add(f"p:{p['pid']}.pid")
        for i in p["devices"]:
            ids |= {f"p:{p['pid']}.gpu{i}.sm", f"p:{p['pid']}.gpu{i}.memory"}
    ids |= {f"p:{t['pid']}.pid" for t in frame["traced"]}
    return ids


def drawn_at_fit(page) -> dict:
    """The frame the page holds, what its last draw recorded, and the view, read together after
    a draw that showed that frame."""
    for _ in range(200):
        state = page.evaluate("""() => { const g = window.__gpuflow;
          return {pending: g.pendingDraw, frame: g.frame(), texts: g.drawn.texts, text: g.drawn.text, view: g.view,
                  touched: g.viewTouched, nodes: g.graph.nodes.map(id => [id, g.nodeRect(id)]),
                  plane: document.getElementById('plane').getBoundingClientRect().toJSON()}; }""")
        if not state["pending"]:
            return state
        time.sleep(0.01)
    pytest.fail("the page never finished drawing")


def overlap(a: dict, b: dict) -> bool:
    return a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]


def check_legible(page, name: str, size: str, procs: range) -> dict:
    state = drawn_at_fit(page)
    assert not state["touched"] and state["text"], "the fitted view draws node text"
    frame, view = state["frame"], state["view"]
    want = expected_ids(frame)
    assert len(frame["devices"]) == 8 and len(frame["processes"]) in procs, frame
    texts = {}
    for t in state["texts"]:
        assert t["id"] not in texts, f"{t['id']} drawn twice"
        texts[t["id"]] = t
    missing = want - set(texts)
    assert not missing, f"{name} {size}: not drawn: {sorted(missing)}"
    small = {i: texts[i]["px"] for i in want if texts[i]["px"] < MIN_PX}
    assert not small, f"{name} {size}: drawn below {MIN_PX} CSS px (zoom {view['s']:.3f}): {small}"
    for i in want:
        t = texts[i]
        assert t["s"].strip(), i
        assert t["x"] >= 0 and t["y"] >= 0 and t["x"] + t["w"] <= view["w"] and t["y"] + t["h"] <= view["h"], \
            f"{i} {t['s']!r} is not inside the canvas: {t}"
    boxes = [texts[i] for i in sorted(want)]
    for k, a in enumerate(boxes):
        for b in boxes[k + 1:]:
            assert not overlap(a, b), f"{a['id']} {a['s']!r} overlaps {b['id']} {b['s']!r}"
    rects = [(i, r) for i, r in state["nodes"] if r]
    for k, (i, a) in enumerate(rects):
        for j, b in rects[k + 1:]:
            assert not overlap(a, b), f"nodes {i} and {j} overlap"
    # nothing drawn under the bottom bar: the plane ends where it begins
    foot = page.locator("#foot").bounding_box()
    plane = state["plane"]
    assert plane["y"] + plane["height"] <= foot["y"] + 0.5
    for i, r in rects:
        assert r["y"] + r["h"] <= foot["y"] + 0.5, f"{i} reaches under the bottom bar"
    return state


def open_sized(browser, size: str, dpr: float = 1):
    w, h = SIZES[size] if size in SIZES else size
    context = browser.new_context(viewport={"width": w, "height": h}, device_scale_factor=dpr)
    return context, context.new_page()


#: processes each demo shows (the multigpu one's come and go)
DEMO_PROCS = {"shared": range(4, 5), "multigpu": range(11, 14)}


@pytest.mark.parametrize("size", sorted(SIZES))
@pytest.mark.parametrize("variant", sorted(DEMO_PROCS))
def test_every_reading_of_a_demo_is_legible_right_after_fit(browser, agent, variant, size):
    context, page = open_sized(browser, size)
    try:
        page.goto(agent.url + f"?demo={variant}")
        until(page, "window.__gpuflow.frames >= 4")
        state = check_legible(page, variant, size, DEMO_PROCS[variant])
        pids = [p["pid"] for p in state["frame"]["processes"]]
        assert len(pids) == len(set(pids))
        shot(page, f"legible-{variant}-{size}")
    finally:
        context.close()


@pytest.mark.parametrize("size", sorted(SIZES))
@pytest.mark.parametrize("procs", [8, 16])
def test_every_reading_of_a_live_agent_is_legible_right_after_fit(browser, agents, procs, size):
    agent = agents[procs]
    context, page = open_sized(browser, size)
    try:
        page.goto(agent.url)
        until(page, "window.__gpuflow.frames >= 3 && window.__gpuflow.connection === 'live'", timeout=15000)
        state = check_legible(page, f"live {procs} processes", size, range(procs, procs + 1))
        snap = agent.snapshot()
        assert sorted(d["index"] for d in snap["devices"]) == [d["index"] for d in state["frame"]["devices"]]
        assert sorted(p["pid"] for p in snap["processes"]) == sorted(p["pid"] for p in state["frame"]["processes"])
        assert len(snap["processes"]) == procs
        shot(page, f"legible-live{procs}-{size}")
    finally:
        context.close()


def test_level_of_detail_follows_text_size_in_device_pixels(browser, agent):
    # the same window at device scale 1 and 2: the same zoom, where 11 px text is under 8 device
    # pixels at scale 1 (titles only) and over it at scale 2 (every text)
    seen = {}
    for dpr in (1, 2):
        context, page = open_sized(browser, (800, 500), dpr)
        try:
            page.goto(agent.url + "?demo=multigpu")
            until(page, "window.__gpuflow.frames >= 3 && !window.__gpuflow.pendingDraw")
            seen[dpr] = page.evaluate("[window.__gpuflow.view.s, window.__gpuflow.drawn.text, window.__gpuflow.drawn.texts.length,"
                                      " window.__gpuflow.drawn.titles.length]")
            shot(page, f"lod-dpr{dpr}")
        finally:
            context.close()
    s1, s2 = seen[1][0], seen[2][0]
    assert s1 == pytest.approx(s2)
    assert 11 * s1 < 8 <= 11 * s1 * 2, f"zoom {s1}: the window does not sit between the two thresholds"
    assert seen[1][1] is False and seen[1][2] == 0 and seen[1][3] > 0
    assert seen[2][1] is True and seen[2][2] > 0 and seen[2][3] == 0


def test_processes_of_one_name_are_told_apart_by_pid_even_zoomed_out(page, agent):
    page.goto(agent.url + "?demo=multigpu")
    until(page, "window.__gpuflow.frames >= 3 && !window.__gpuflow.pendingDraw")
    ranks = [p["pid"] for p in page.evaluate("window.__gpuflow.frame()")["processes"] if p["name"] == "pt_main_thread"]
    assert len(ranks) == 8
    texts = {t["id"]: t["s"] for t in hook(page, "drawn")["texts"]}
    assert [texts[f"p:{pid}.pid"] for pid in ranks] == [f"pid {pid}" for pid in ranks]
    # zoomed far out each node is one title; a rank's title still says which rank it is
    page.mouse.move(700, 450)
    s0 = hook(page, "view")["s"]
    page.mouse.wheel(0, 500)   # under half the fitted zoom: node text too small to read, titles fit
    until(page, f"window.__gpuflow.view.s < {s0 * 0.5} && window.__gpuflow.drawn.text === false && !window.__gpuflow.pendingDraw")
    titles = {t["id"]: t["s"] for t in hook(page, "drawn")["titles"]}
    for pid in ranks:
        name, _, tail = titles[f"p:{pid}"].rpartition(" ")
        assert tail == str(pid), titles[f"p:{pid}"]
        assert name and "pt_main_thread".startswith(name.rstrip("…")), titles[f"p:{pid}"]
    assert len({titles[f"p:{pid}"] for pid in ranks}) == 8
    shot(page, "zoomed-out-titles")
