"""The page's stream: it survives the agent dying and coming back, retries itself when
EventSource gives up, and closes its stream while the tab is hidden.
"""

from __future__ import annotations

import json
import time

import pytest

from .conftest import until, hook, open_live, shot

pytestmark = pytest.mark.browser

HIDE = """(() => { Object.defineProperty(document, 'hidden', {configurable: true, get: () => %s});
  document.dispatchEvent(new Event('visibilitychange')); })()"""


def test_kill_the_agent_and_restart_it_the_tab_recovers_without_reload(page, fresh_agent):
    open_live(page, fresh_agent)
    page.evaluate("window.__sameDocument = 42")
    full0 = hook(page, "fullFrames")
    fresh_agent.kill()
    until(page, "window.__gpuflow.connection !== 'live'", timeout=10000)
    until(page, "window.__gpuflow.connection === 'unreachable'", timeout=20000)
    assert "unreachable" in page.locator("#conn").inner_text()
    shot(page, "agent-unreachable")
    frames = hook(page, "frames")
    back = fresh_agent.start()
    until(page, f"window.__gpuflow.connection === 'live' && window.__gpuflow.frames > {frames}",
                           timeout=10000)
    took = time.monotonic() - back
    print(f"recovered {took:.2f} s after the agent was back")
    assert took <= 5.0, f"recovered {took:.1f} s after the agent was back"
    assert page.evaluate("window.__sameDocument") == 42, "the page was reloaded"
    # the new agent's first frame is a full one, and the page drew it
    assert hook(page, "fullFrames") > full0
    assert hook(page, "graph")["nodes"]


def test_when_eventsource_gives_up_the_page_retries_with_backoff(page, agent):
    calls = []

    def stream(route):
        calls.append(time.monotonic())
        if len(calls) <= 2:
            route.fulfill(status=503, body="busy", headers={"Retry-After": "1"})
        elif len(calls) == 3:
            route.fulfill(status=200, content_type="text/plain", body="not an event stream")
        else:
            route.continue_()

    page.route("**/api/stream", stream)
    page.goto(agent.url)
    until(page, "window.__gpuflow.connection === 'live' && window.__gpuflow.frames >= 2", timeout=15000)
    assert len(calls) >= 4 and hook(page, "connects") >= 4
    gaps = [b - a for a, b in zip(calls, calls[1:4])]
    assert all(g >= 0.15 for g in gaps), gaps          # waited before each retry
    assert gaps[2] > gaps[0], gaps                       # and waited longer each time
    assert sum(gaps) < 5, gaps


def test_hidden_tab_closes_its_stream_and_reopens_when_visible(page, fresh_agent):
    open_live(page, fresh_agent)
    assert fresh_agent.health()["streams"] == 1
    page.evaluate(HIDE % "true")
    until(page, "window.__gpuflow.connection === 'paused'")
    deadline = time.monotonic() + 5
    while fresh_agent.health()["streams"] != 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert fresh_agent.health()["streams"] == 0, "the agent still holds the hidden tab's stream"
    frames = hook(page, "frames")
    page.evaluate(HIDE % "false")
    until(page, f"window.__gpuflow.connection === 'live' && window.__gpuflow.frames > {frames}",
                           timeout=5000)
    assert fresh_agent.health()["streams"] == 1


def test_a_delta_that_does_not_follow_makes_the_page_start_over(page, agent):
    snap = agent.snapshot()
    full = dict(snap, frame="full", base_seq=None, seq=10)
    stray = dict(snap, frame="delta", base_seq=5, seq=11)
    body = ("retry: 200\n\n"
            f"event: snapshot\ndata: {json.dumps(full)}\n\n"
            "event: snapshot\ndata: {\"not\": \"a snapshot\"}\n\n"
            f"event: snapshot\ndata: {json.dumps(stray)}\n\n")
    calls = []

    def stream(route):
        calls.append(1)
        if len(calls) == 1:
            route.fulfill(status=200, content_type="text/event-stream", body=body)
        else:
            route.continue_()

    page.route("**/api/stream", stream)
    page.goto(agent.url)
    # the canned full frame, then the agent's own on the new connection
    until(page, "window.__gpuflow.resyncs === 1 && window.__gpuflow.connection === 'live' "
                "&& window.__gpuflow.fullFrames >= 2", timeout=10000)
    assert hook(page, "badFrames") == 1
    assert hook(page, "connects") >= 2
    assert hook(page, "graph")["nodes"] == sorted(
        {"host"} | {f"d:{d['index']}" for d in snap["devices"]} | {f"p:{p['pid']}" for p in snap["processes"]}
        | {f"p:{t['pid']}" for t in snap["traced"]})
