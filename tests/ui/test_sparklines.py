"""The sparklines (issue 18) in real Chromium: every GPU's utilization, memory and power and every
process's SM % and memory on each GPU it holds, over the last minutes up to the moment shown.

* What each sparkline draws is the agent's GET /api/history for the page's own question (the
  minutes up to the moment, reduced to the points drawn): one point per available reading, none
  for a GPU that was lost (a gap, never a zero); at a past moment they end at that moment.
* Hovering one shows the reading under the pointer (the bucket's mean, least and greatest, as the
  agent answered them) and its time.
* At 1280x720, right after fit, on the busy 8-GPU demo: every GPU's three sparklines and every
  process row's are drawn at a readable size, inside the plane, over no reading's text.
"""

from __future__ import annotations

import time

import pytest

from .conftest import FAKE, Agent, free_port, hook, open_live, shot, until

pytestmark = pytest.mark.browser

#: the metrics the page asks for its sparklines (spark.js SPARK_METRICS) and how many points
METRICS = "utilization_gpu_pct,memory_used_bytes,power_draw_w,sm_util_pct"
POINTS = 48
DEVICE_SPARKS = ("utilization_gpu_pct", "memory_used_bytes", "power_draw_w")
#: the least a sparkline is drawn at, in CSS px, at 1280x720 after fit
MIN_W, MIN_H = 28, 9


@pytest.fixture(scope="module")
def agent(browser):
    """An agent whose fake recorder keeps its readings for an hour: the page's sparklines span
    the last minutes, so with the fake's 60 s its oldest readings left between the page's answer
    and the test's own question of the same range (a full run's shared agent is minutes old: 31
    points drawn, 30 served, in a fresh-clone CI run)."""
    a = Agent(free_port(), {**FAKE, "GPUFLOW_FAKE_RETAIN_S": "3600"})
    a.start()
    yield a
    a.stop()


def paused_at(page, ago: float) -> dict:
    """Clicks the timeline `ago` seconds back and waits until the plane and the sparklines show
    that moment; the timeline's state."""
    until(page, f"window.__gpuflow.timeline.retained && window.__gpuflow.timeline.retained.to - "
                f"window.__gpuflow.timeline.retained.from >= {ago + 3}", timeout=20000)
    tl = hook(page, "timeline")
    x = page.evaluate(f"window.__gpuflow.trackX({tl['now'] - ago!r})")
    page.mouse.click(x, tl["track"]["y"] + tl["track"]["h"] / 2)
    until(page, "(() => { const t = window.__gpuflow.timeline; return t.shown && t.shown.moment === t.moment && "
                "Math.abs(t.spark.to - t.moment) < 1e-6 && !window.__gpuflow.pendingDraw; })()", timeout=15000)
    time.sleep(0.4)   # a refresh once the moment settled (spark.js) asks the same range again
    until(page, "!window.__gpuflow.pendingDraw")
    return hook(page, "timeline")


def series_of(doc: dict) -> dict[tuple, dict]:
    return {(tuple(s["entity"]), s["metric"]): s for s in doc["series"]}


def sparks(page) -> dict[str, dict]:
    return {s["id"]: s for s in hook(page, "drawn")["sparks"]}


def test_each_sparkline_draws_the_agents_history_up_to_the_moment(page, agent):
    open_live(page, agent)
    until(page, "window.__gpuflow.timeline.sparkAnswers > 0", timeout=15000)
    tl = paused_at(page, 3)
    frm, to = tl["spark"]["from"], tl["spark"]["to"]
    assert to == pytest.approx(tl["moment"], abs=1e-6) and 60 <= to - frm <= 300
    doc = agent.get("api/history", **{"from": frm, "to": to, "metrics": METRICS, "points": POINTS})
    served, drawn = series_of(doc), sparks(page)
    snap = agent.snapshot()
    checked = 0
    for d in snap["devices"]:
        for metric in DEVICE_SPARKS:
            s = served.get((("device", d["uuid"]), metric))
            available = sum(v is not None for v in s["value"]) if s else 0
            assert drawn[f"d:{d['index']}.spark.{metric}"]["points"] == available, (d["index"], metric)
            if d["index"] == 2:
                assert available == 0, "GPU 2 is lost: no reading, and nothing drawn"
            else:
                assert available > 5
            checked += 1
    frame = page.evaluate("window.__gpuflow.frame()")
    for p in frame["processes"]:
        for i in p["devices"]:
            uuid = next(d["uuid"] for d in snap["devices"] if d["index"] == i)
            s = served[(("process", str(p["pid"]), uuid), "sm_util_pct")]
            assert drawn[f"p:{p['pid']}.gpu{i}.spark.sm_util_pct"]["points"] == sum(v is not None for v in s["value"]) > 5
            checked += 1
    assert checked >= 9 + 4
    shot(page, "sparklines-paused")


def test_hovering_a_sparkline_shows_the_reading_and_its_time(page, agent):
    open_live(page, agent)
    until(page, "window.__gpuflow.timeline.sparkAnswers > 0", timeout=15000)
    tl = paused_at(page, 3)
    doc = agent.get("api/history", **{"from": tl["spark"]["from"], "to": tl["spark"]["to"], "metrics": METRICS,
                                      "points": POINTS})
    served = series_of(doc)
    snap = agent.snapshot()
    gpu0 = next(d["uuid"] for d in snap["devices"] if d["index"] == 0)
    for spark_id, entity, metrics, title in (
            ("d:0.spark.utilization_gpu_pct", ("device", gpu0), ["utilization_gpu_pct"], "GPU 0 · utilization"),
            ("p:4000.gpu0.spark.sm_util_pct", ("process", "4000", gpu0), ["sm_util_pct", "memory_used_bytes"],
             "pid 4000 on GPU 0 · SM and memory")):
        # the middle of the available points' buckets (a young agent's series fills the right end)
        s = served[(entity, metrics[0])]
        kept = [i for i, v in enumerate(s["value"]) if v is not None]
        at = s["t"][kept[len(kept) // 2]] + s["resolution_s"] / 2
        frac = (at - tl["spark"]["from"]) / (tl["spark"]["to"] - tl["spark"]["from"])
        p = page.evaluate(f"window.__gpuflow.sparkPoint('{spark_id}', {frac!r})")
        page.mouse.move(p["x"], p["y"])
        until(page, "window.__gpuflow.hover && window.__gpuflow.hover.spark && window.__gpuflow.hover.tip !== null")
        h = hook(page, "hover")
        assert h["spark"]["metrics"] == metrics
        tip = h["tip"]
        assert title in tip
        for got in h["spark"]["values"]:
            s = served[(entity, got["metric"])]
            i = s["t"].index(got["t"])
            assert got["v"] == s["value"][i] and got["res"] == s["resolution_s"]
            # a series that needed no reduction has no min and max: each point is its own
            assert got["lo"] == s.get("min", s["value"])[i] and got["hi"] == s.get("max", s["value"])[i]
            # the bucket under the pointer holds the time under it
            assert got["t"] - got["res"] <= h["spark"]["t"] <= got["t"] + 2 * got["res"]
        util = h["spark"]["values"][0]
        start = time.strftime("%H:%M:%S", time.localtime(util["t"]))
        assert start in tip and " ago" in tip
        if util["metric"] != "memory_used_bytes":
            assert f"{int(util['v'] + 0.5)} %" in tip
        page.mouse.move(2, 2)
        until(page, "window.__gpuflow.hover === null || !window.__gpuflow.hover.spark")
    # before the first reading kept: no reading, said so (a gap, never a zero)
    first = min(t for s in served.values() for t, v in zip(s["t"], s["value"]) if v is not None)
    if first - tl["spark"]["from"] > 6:
        p = page.evaluate("window.__gpuflow.sparkPoint('d:0.spark.utilization_gpu_pct', 0.02)")
        page.mouse.move(p["x"], p["y"])
        until(page, "window.__gpuflow.hover && window.__gpuflow.hover.spark && window.__gpuflow.hover.tip !== null")
        h = hook(page, "hover")
        assert h["spark"]["values"] == [{"metric": "utilization_gpu_pct", "t": None}]
        assert "no reading kept then" in h["tip"]


def test_sparklines_are_readable_at_1280x720_right_after_fit(page, agent):
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(agent.url + "?demo=multigpu")
    until(page, "window.__gpuflow.frames >= 4 && window.__gpuflow.timeline.sparkAnswers > 0", timeout=15000)
    until(page, "!window.__gpuflow.pendingDraw")
    drawn = hook(page, "drawn")
    frame = page.evaluate("window.__gpuflow.frame()")
    view = hook(page, "view")
    want = {f"d:{d['index']}.spark.{m}" for d in frame["devices"] for m in DEVICE_SPARKS}
    want |= {f"p:{p['pid']}.gpu{i}.spark.sm_util_pct" for p in frame["processes"] for i in p["devices"]}
    got = {s["id"]: s for s in drawn["sparks"]}
    assert want <= set(got), sorted(want - set(got))
    texts = drawn["texts"]
    for sid in want:
        s = got[sid]
        assert s["w"] >= MIN_W and s["h"] >= MIN_H, (sid, s)
        assert 0 <= s["x"] and s["x"] + s["w"] <= view["w"] and 0 <= s["y"] and s["y"] + s["h"] <= view["h"], (sid, s)
        for t in texts:
            apart = (t["x"] >= s["x"] + s["w"] or t["x"] + t["w"] <= s["x"] or
                     t["y"] >= s["y"] + s["h"] or t["y"] + t["h"] <= s["y"])
            assert apart, (sid, t["id"], s, t)
        if sid.startswith("d:") and not sid.endswith("memory_used_bytes"):
            assert s["points"] > 10, (sid, s)   # ten minutes of made-up readings before the demo began
    shot(page, "sparklines-1280x720")
