"""An opened recording in GPUFlow's own page, in real Chromium (Debian's, through Playwright; never
``playwright install``): the recording said on the host card and in the timeline's words, the
scrubber spanning exactly the recorded range although it ended long before now, and a past moment
inside it drawn from the recording's answers (its GPU's readings, its processes, its traced
window span for span). Screenshots land in tests/artifacts/."""

from __future__ import annotations

import math
import signal

import pytest
import requests
from chromium import ARTIFACTS, until
from cli_process import start_gpuflow, stop_gpuflow

from .traces import Recorded

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """A minute of the fake collector's one-GPU scenario (in late 2025: long before now), opened."""
    recorded = Recorded(ticks=240, gpus=1, procs=3, traced=2, lanes=4, spans=8)
    path = tmp_path_factory.mktemp("recording") / "minute.perfetto-trace"
    path.write_bytes(recorded.trace())
    proc, port = start_gpuflow("open", "--port", "0", str(path))
    yield recorded, f"http://127.0.0.1:{port}/"
    out = stop_gpuflow(proc, signal.SIGTERM)
    assert proc.returncode == 0, out


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1920, "height": 1080}, device_scale_factor=1)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    yield pg
    context.close()
    assert not errors, errors


def hook(page, name: str):
    return page.evaluate(f"window.__gpuflow.{name}")


def get(url: str, route: str, **params) -> dict:
    r = requests.get(url + route, params=params, timeout=10)
    r.raise_for_status()
    return r.json()


def test_the_page_shows_a_recording_and_scrubs_over_its_range(page, recording):
    recorded, url = recording
    page.goto(url)
    until(page, "window.__gpuflow.frames >= 1 && window.__gpuflow.timeline.retained !== null", timeout=15000)
    snap = get(url, "api/snapshot")
    (said,) = [p["message"] for p in snap["host"]["problems"] if "recording of" in p["message"]]
    drawn = " ".join(hook(page, "drawn")["problems"])   # the host card's lines, as wrapped
    assert "recording of minute.perfetto-trace" in drawn and "not live" in drawn
    # the connection chip: connected to the agent, but what it serves is not live
    assert page.inner_text("#conntext") == "recording · not live"
    # the scrubber spans the recorded range, which ended long before the page's now
    history = get(url, "api/history", **{"from": recorded.start_s, "to": recorded.end_s})
    window = get(url, "api/window", **{"from": recorded.start_s, "to": recorded.end_s, "width": 1})
    first = min([history["retained_from"]] + [p["retained_from"] for p in window["processes"]])
    last = max([history["retained_to"]] + [p["retained_to"] for p in window["processes"]])
    tl = hook(page, "timeline")
    assert tl["retained"]["from"] == pytest.approx(first, abs=1e-6)
    assert tl["retained"]["to"] == pytest.approx(last, abs=1e-6)
    assert tl["now"] - last > 86_400 and tl["mode"] == "live"
    assert tl["texts"][3].startswith("retained ") and tl["texts"][3].endswith("· recording")
    page.screenshot(path=str(ARTIFACTS / "recording-opened-1920x1080.png"))
    # a moment in the middle of it, clicked on the track
    moment = (first + last) / 2
    x = page.evaluate(f"window.__gpuflow.trackX({moment!r})")
    page.mouse.click(x, tl["track"]["y"] + tl["track"]["h"] / 2)
    until(page, "(() => { const t = window.__gpuflow.timeline; return t.shown && Math.abs(t.shown.moment - t.moment)"
                " < 1e-6 && !window.__gpuflow.pendingDraw; })()", timeout=15000)
    tl = hook(page, "timeline")
    t, w = tl["moment"], tl["windowS"]
    assert tl["mode"] == "paused" and first <= t <= last and abs(t - moment) < (last - first) / 50
    assert tl["texts"][3].endswith("· recording")   # still said while the plane shows the past
    # its traced window, span for span, as the recording answers it
    served = get(url, "api/window", **{"from": t - w, "to": t, "width": tl["shown"]["width"]})
    lanes = {p["pid"]: p for p in hook(page, "pastLanes")}
    assert sorted(lanes) == [p["pid"] for p in served["processes"]] == [5000, 5001]
    for p in served["processes"]:
        assert lanes[p["pid"]]["exact"] and lanes[p["pid"]]["execs"] == sum(l["executions"] for l in p["lanes"]) > 0
        assert {l["key"]: l["seqs"] for l in lanes[p["pid"]]["lanes"]} == {
            f"{l['device']}:{l['context']}:{l['stream']}": l["spans"]["seq"] for l in p["lanes"]}
    # its GPU's readings then, and the processes that held it then
    (device,) = snap["devices"]
    (utilization,) = [s for s in get(url, "api/history", **{"from": t - 30, "to": t + 30})["series"]
                      if s["entity"] == ["device", device["uuid"]] and s["metric"] == "utilization_gpu_pct"]
    then = [v for ts, v in zip(utilization["t"], utilization["value"]) if ts <= t][-1]
    drawn = {d["id"]: d["s"] for d in hook(page, "drawn")["texts"]}
    assert drawn["d:0.util"] == f"{math.floor(then + 0.5)} %"
    frame = page.evaluate("window.__gpuflow.frame()")
    assert sorted(p["pid"] for p in frame["processes"]) == [4000, 4001, 4002]
    page.screenshot(path=str(ARTIFACTS / "recording-scrubbed-1920x1080.png"))
    assert said.endswith("(gpuflow open)")
