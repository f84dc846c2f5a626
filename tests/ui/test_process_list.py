"""The process list beside the graph: every process on the page (those holding a GPU and the
traced ones) with its GPUs, memory and SM %, sortable by each column; pointing at a row outlines
its node, clicking isolates it; collapsible, open by default only on a wide window, the choice
remembered.

Against a real agent whose fake collector builds one part and then nothing changes (the
``still_agent`` fixture), so the list and /api/snapshot can be compared exactly.
"""

from __future__ import annotations

import math

import pytest

from .conftest import hook, shot, until

pytestmark = pytest.mark.browser

COLUMNS = ["pid", "name", "user", "gpus", "memory", "sm"]
DESC_FIRST = {"memory", "sm"}


def fmt_bytes(b: float) -> str:
    for div, unit in ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if b >= div:
            x = b / div
            return f"{x:.0f} {unit}" if x >= 100 else f"{x:.1f} {unit}"
    return f"{round(b)} B"


def gpu_text(idx: list[int]) -> str:
    out, i = [], 0
    while i < len(idx):
        j = i
        while j + 1 < len(idx) and idx[j + 1] == idx[j] + 1:
            j += 1
        out.append(f"{idx[i]}–{idx[j]}" if j > i + 1 else f"{idx[i]},{idx[j]}" if j == i + 1 else str(idx[i]))
        i = j + 1
    return ",".join(out)


def entries(snap: dict) -> dict[int, dict]:
    """What each row must say, from /api/snapshot: memory summed over the GPUs, SM % their mean."""
    out = {}
    for p in snap["processes"]:
        mem = [a["memory_used_bytes"] for a in p["attachments"] if a["memory_used_bytes"] is not None]
        sm = [a["sm_util_pct"] for a in p["attachments"] if a["sm_util_pct"] is not None]
        out[p["pid"]] = {"pid": p["pid"], "name": p["name"], "user": p["user"],
                         "gpus": sorted(a["device_index"] for a in p["attachments"]),
                         "memory": sum(mem) if mem else None, "sm": sum(sm) / len(sm) if sm else None, "tag": ""}
    for t in snap["traced"]:
        e = out.setdefault(t["pid"], {"pid": t["pid"], "name": t["name"], "user": None, "gpus": [], "memory": None,
                                      "sm": None})
        e["tag"] = "exited" if t["state"] == "exited" else "traced"
    return out


def cells(e: dict) -> list[str]:
    return [str(e["pid"]), (e["name"] or "—") + e["tag"], e["user"] or "—", gpu_text(e["gpus"]) if e["gpus"] else "—",
            "—" if e["memory"] is None else fmt_bytes(e["memory"]),
            "—" if e["sm"] is None else f"{math.floor(e['sm'] + 0.5)} %"]


def rows(page) -> list[list[str]]:
    return page.evaluate("[...document.querySelectorAll('#proctable tbody tr')].map(tr => [...tr.cells].map(c => c.textContent))")


def expected_order(es: list[dict], key: str, direction: int) -> list[int]:
    def k(e):
        v = e[key]
        if key == "gpus":
            v = e["gpus"][0] * 1000 + len(e["gpus"]) if e["gpus"] else None
        return v

    known = [e for e in es if k(e) is not None]
    unknown = sorted((e for e in es if k(e) is None), key=lambda e: e["pid"])
    known.sort(key=lambda e: e["pid"])
    known.sort(key=k, reverse=direction < 0)   # stable: ties stay by pid
    return [e["pid"] for e in known + unknown]


def open_wide(browser, agent, width=1920, height=1080):
    context = browser.new_context(viewport={"width": width, "height": height}, device_scale_factor=1)
    page = context.new_page()
    page.goto(agent.url)
    until(page, "window.__gpuflow.frames >= 1 && window.__gpuflow.connection === 'live' && !window.__gpuflow.pendingDraw",
          timeout=15000)
    return context, page


def test_the_list_has_every_process_with_its_gpus_memory_and_sm(browser, still_agent):
    context, page = open_wide(browser, still_agent)
    try:
        assert hook(page, "list")["open"] and page.locator("#list").is_visible()
        want = entries(still_agent.snapshot())
        until(page, f"document.querySelectorAll('#proctable tbody tr').length === {len(want)}")
        got = {int(r[0]): r for r in rows(page)}
        assert set(got) == set(want)
        for pid, e in want.items():
            assert got[pid] == cells(e), pid
        assert page.locator("#listcount").inner_text() == str(len(want))
        assert any(e["tag"] == "traced" for e in want.values()) and any(len(e["gpus"]) > 1 for e in want.values())
        shot(page, "process-list")
    finally:
        context.close()


def test_the_list_sorts_by_each_column_both_ways(browser, still_agent):
    context, page = open_wide(browser, still_agent)
    try:
        es = list(entries(still_agent.snapshot()).values())
        until(page, f"document.querySelectorAll('#proctable tbody tr').length === {len(es)}")
        for key in COLUMNS:
            first = -1 if key in DESC_FIRST else 1
            for direction in (first, -first):
                page.click(f"#proctable th[data-key={key}]")
                order = [int(r[0]) for r in rows(page)]
                assert order == expected_order(es, key, direction), (key, direction)
                assert hook(page, "list")["key"] == key and hook(page, "list")["dir"] == direction
                th = page.locator(f"#proctable th[data-key={key}]")
                assert th.get_attribute("class") == ("asc" if direction > 0 else "desc")
    finally:
        context.close()


def test_pointing_at_a_row_outlines_its_node_and_clicking_isolates_it(browser, still_agent):
    context, page = open_wide(browser, still_agent)
    try:
        snap = still_agent.snapshot()
        worker = next(p for p in snap["processes"] if len(p["attachments"]) == 1)
        node = f"p:{worker['pid']}"
        row = page.locator("#proctable tbody tr", has=page.locator(f"td:text-is('{worker['pid']}')"))
        row.hover()
        until(page, f"window.__gpuflow.highlight === '{node}' && window.__gpuflow.drawn.highlighted === '{node}'"
                    " && window.__gpuflow.drawn.dimmed > 0 && !window.__gpuflow.pendingDraw")
        assert hook(page, "isolated") is None
        shot(page, "process-list-pointed")
        page.mouse.move(5, 300)   # off the list: the outline goes
        until(page, "window.__gpuflow.highlight === null && window.__gpuflow.drawn.dimmed === 0")
        row.click()
        until(page, f"window.__gpuflow.isolated === '{node}'")
        assert "sel" in row.get_attribute("class")
        total = len(hook(page, "graph")["nodes"])
        until(page, f"window.__gpuflow.drawn.dimmed === {total - 2}")   # the process and its one GPU stay lit
        row.click()
        until(page, "window.__gpuflow.isolated === null")
        assert "sel" not in (row.get_attribute("class") or "")
        # isolating in the graph marks the row too
        r = page.evaluate(f"window.__gpuflow.nodeRect('{node}')")
        page.mouse.click(r["x"] + r["w"] / 2, r["y"] + r["h"] / 2)
        until(page, f"window.__gpuflow.isolated === '{node}'")
        until(page, f"document.querySelector('#proctable tbody tr.sel') !== null")
        assert page.locator("#proctable tbody tr.sel td").first.inner_text() == str(worker["pid"])
    finally:
        context.close()


def test_the_list_collapses_gives_the_graph_its_width_and_remembers(browser, still_agent):
    # a wide window opens with the list; the graph then has the width left
    context, page = open_wide(browser, still_agent)
    try:
        list_w = page.locator("#list").bounding_box()["width"]
        assert hook(page, "view")["w"] == pytest.approx(1920 - list_w, abs=1)
        s_open = hook(page, "view")["s"]
        page.click("#listbtn")
        until(page, "window.__gpuflow.list.open === false && window.__gpuflow.view.w === 1920")
        assert not page.locator("#list").is_visible()
        until(page, f"window.__gpuflow.view.s > {s_open} && !window.__gpuflow.pendingDraw")   # refitted to the wider plane
        # the choice is remembered: a reload keeps it closed
        page.reload()
        until(page, "window.__gpuflow.frames >= 1 && !window.__gpuflow.pendingDraw")
        assert hook(page, "list")["open"] is False
        page.keyboard.press("p")
        until(page, "window.__gpuflow.list.open === true")
    finally:
        context.close()
    # a laptop-sized window starts with it closed: the graph needs the width
    context, page = open_wide(browser, still_agent, 1280, 720)
    try:
        assert hook(page, "list")["open"] is False and hook(page, "view")["w"] == 1280
        assert page.locator("#listbtn").is_visible()
        page.keyboard.press("P")
        until(page, "window.__gpuflow.list.open === true && document.querySelectorAll('#proctable tbody tr').length > 0")
        shot(page, "process-list-1280")
    finally:
        context.close()
