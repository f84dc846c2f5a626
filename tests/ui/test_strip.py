"""A traced process's lane strip at laptop size (``?demo=traced`` on 1280x720, right after fit):
lane labels readable, a time axis with ticks at round times and their labels, kernel names using
the room the table has, counts exact where they fit, the full name and exact figures of a kernel
on hover, and a lane the program did not name said to be an unnamed stream, with a hover that
says why.
"""

from __future__ import annotations

import math
import time

import pytest

from .conftest import hook, shot, until

pytestmark = pytest.mark.browser

PID = 31337
READABLE_PX = 10


@pytest.fixture
def traced(browser, agent):
    context = browser.new_context(viewport={"width": 1280, "height": 720}, device_scale_factor=1)
    page = context.new_page()
    page.goto(agent.url + "?demo=traced")
    until(page, "window.__gpuflow.frames >= 4 && !window.__gpuflow.pendingDraw")
    yield page
    context.close()


def settled(page, expr: str):
    """`expr` evaluated right after a draw that showed the latest frame."""
    for _ in range(300):
        pending, value = page.evaluate(f"[window.__gpuflow.pendingDraw, {expr}]")
        if not pending:
            return value
        time.sleep(0.01)
    pytest.fail("the page never finished drawing")


def strip(page, pid=PID) -> dict:
    return next(s for s in settled(page, "window.__gpuflow.drawn.strips") if s["pid"] == pid)


def tick_label(rel_us: float, step_us: float) -> str:
    a, sign = abs(rel_us), "\u2212" if rel_us < 0 else ""
    if a < 0.5:
        return "0"
    if step_us >= 500_000:
        return sign + f"{a / 1e6:.{0 if step_us >= 1e6 else 1}f} s"
    if step_us >= 1000:
        return sign + f"{round(a / 1000):,} ms"
    return sign + f"{round(a):,} µs"


def test_lanes_are_readable_at_1280_with_a_time_axis(traced):
    page = traced
    texts = {t["id"]: t for t in settled(page, "window.__gpuflow.drawn.texts")}
    s = strip(page)
    assert len(s["lanes"]) == 8
    for i, lane in enumerate(s["lanes"]):
        t = texts[f"p:{PID}.lane{i}"]
        assert t["s"] == lane["shown"] and t["px"] >= READABLE_PX, t
    ticks = s["axis"]
    assert len(ticks) >= 3, ticks
    steps = {b["rel_us"] - a["rel_us"] for a, b in zip(ticks, ticks[1:])}
    assert len(steps) == 1, ticks
    step = steps.pop()
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert round(mantissa, 6) in (1, 2, 5), step
    assert all(t["rel_us"] % step == 0 and t["rel_us"] <= 0 for t in ticks)   # round times before the frame
    assert [t["label"] for t in ticks] == [tick_label(t["rel_us"], step) for t in ticks]
    gaps = [b["x"] - a["x"] for a, b in zip(ticks, ticks[1:])]
    assert max(gaps) - min(gaps) < 0.01 and min(gaps) >= 60   # evenly spaced, labels apart
    shot(page, "strip-1280")


def test_kernel_names_use_their_room_and_counts_are_exact_where_they_fit(traced):
    page = traced
    fonts = page.evaluate("window.__gpuflow.fonts")
    s = strip(page)
    kernels = s["kernels"]
    assert len(kernels) == 6
    def one_more(k: dict) -> str:
        """The shown name with one more character of the name it was cut from, before the ellipsis."""
        if not k["shown"].endswith("…"):
            return k["shown"]
        prefix = k["shown"][:-1]
        assert k["from"].startswith(prefix), k
        return prefix + k["from"][len(prefix)] + "…"

    widths = page.evaluate("""([font, probes]) => { const c = document.createElement('canvas').getContext('2d');
      c.font = font; return probes.map(p => c.measureText(p).width); }""",
                           [fonts["small"], [k["shown"] for k in kernels] + [one_more(k) for k in kernels]])
    n = len(kernels)
    for k, w, longer in zip(kernels, widths[:n], widths[n:]):
        # the name from its function name on: the return type and namespaces are what is left out
        plain = k["name"].removeprefix("void ").replace("(anonymous namespace)", "{anon}")
        assert plain.endswith(k["from"]) and k["from"].split("<")[0].split("(")[0] in k["name"], k
        assert k["shown"] == k["from"] or k["shown"].endswith("…"), k
        assert k["room"] >= 0.5 * k["columnW"], k          # the name column is most of the table
        assert w <= k["room"] + 0.01, k
        if k["shown"].endswith("…"):
            # cut only where it had to be: one more character would not fit
            assert longer > k["room"], k
        assert k["countText"] == f"{k['count']:,}", k     # exact: there is room
    assert max(len(k["shown"]) for k in kernels) > 28         # not the old 20-character cut
    for lane in s["lanes"]:
        assert lane["counts"] == f"{lane['showing']:,}/{lane['of']:,}"


def test_hovering_a_kernel_row_gives_its_full_name_and_exact_figures(traced):
    page = traced
    seen = 0
    for i in range(6):
        p = page.evaluate(f"window.__gpuflow.kernelRow({PID}, {i})")
        page.mouse.move(p["x"], p["y"])
        until(page, "window.__gpuflow.hover && window.__gpuflow.hover.kernel !== null")
        # the tip and the kernel it is about read together: the live demo's rows reorder as their
        # totals grow, so a later read of the hovered kernel can be another row's
        tip, kernel, kernels = settled(page, "[window.__gpuflow.hover.tip, window.__gpuflow.hover.kernel, "
                                             f"window.__gpuflow.kernelsOf({PID})]")
        k = next(k for k in kernels if k["name"] == kernel)
        assert tip.startswith(k["name"])
        assert f"{k['count']:,}" in tip and f"{k['total_ns']:,} ns" in tip, tip
        if k["mangled"] != k["name"]:
            assert k["mangled"] in tip
        seen += 1
    assert seen == 6
    shot(page, "strip-kernel-hover")


def test_a_lane_the_program_did_not_name_says_so(traced):
    page = traced
    s = strip(page)
    unnamed = [(i, l) for i, l in enumerate(s["lanes"]) if l["label"] == str(l["stream"])]
    assert unnamed, s["lanes"]
    for i, lane in unnamed:
        assert lane["shown"] == f"{lane['device']}·stream {lane['stream']}"
        p = page.evaluate(f"window.__gpuflow.laneLabelPoint({PID}, {i})")
        page.mouse.move(p["x"], p["y"])
        until(page, f"window.__gpuflow.hover && window.__gpuflow.hover.laneLabel === '{lane['label']}'"
                    " && window.__gpuflow.hover.tip !== null")
        tip = hook(page, "hover")["tip"]
        assert f"did not name CUDA stream {lane['stream']} with NVTX" in tip, tip
    named = next(l for l in s["lanes"] if l["label"] == "compute")
    assert named["shown"].endswith("compute")
    shot(page, "strip-unnamed-stream")
