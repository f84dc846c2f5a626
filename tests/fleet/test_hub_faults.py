"""The hub against agents no real one would be: scripted agents on loopback that are busy (503 with
Retry-After), flapping (``retry:`` then gone), slow to answer, or hostile (oversized lines, bad
types, deep nesting, another host's name, redirects). Every byte from an agent is untrusted: the
hub bounds what it holds, says what was wrong without repeating it, keeps serving the others,
and dials nothing but its targets."""

from __future__ import annotations

import json
import re
import time

import pytest

from fleet_agents import Agent, Hub, wait_for
from scripted_agents import Conn, Meter, ScriptedAgent, frame_event, minimal_frame


@pytest.fixture
def scripted():
    made: list[ScriptedAgent] = []

    def make(answer, meter=None) -> ScriptedAgent:
        made.append(ScriptedAgent(answer, meter))
        return made[-1]
    yield make
    for s in made:
        s.close()


@pytest.fixture
def hubs():
    made: list[Hub] = []

    def make(*targets, **kw) -> Hub:
        made.append(Hub(*targets, **kw))
        return made[-1]
    yield make
    for h in made:
        h.stop()


def gaps(agent: ScriptedAgent, n: int, timeout: float) -> list[float]:
    """The seconds between the first ``n`` dials the agent received."""
    wait_for(lambda: len(agent.requests) >= n, timeout, what=f"{n} dials")
    at = [r.at for r in agent.requests[:n]]
    return [b - a for a, b in zip(at, at[1:])]


def host_by_address(hub: Hub, agent: ScriptedAgent) -> dict | None:
    return next((h for h in hub.hosts().values() if h["address"] == agent.url + "/"), None)


def problem_of(hub: Hub, agent: ScriptedAgent, pattern: str, timeout: float = 10) -> dict:
    """The host of ``agent`` once one of its problems matches ``pattern``."""
    def found():
        h = host_by_address(hub, agent)
        return h if h and any(re.search(pattern, p["message"]) for p in h["problems"]) else None
    return wait_for(found, timeout, what=pattern)


# -- reconnecting ----------------------------------------------------------------------------------
def test_reconnects_back_off_from_the_agents_retry_with_jitter(scripted, hubs):
    def flap(conn: Conn) -> None:   # a head and a retry:, then gone before any frame
        conn.sse_head()
        conn.send(b"retry: 200\n\n")
    agent = scripted(flap)
    hubs(agent.url)
    g = gaps(agent, 5, 15)
    for i, gap in enumerate(g):   # retry x 2^failures, times 1 to 1.5
        base = 0.2 * 2 ** i
        assert base * 0.95 <= gap <= base * 1.5 + 0.25, (i, g)


def test_a_503_is_waited_out_as_its_retry_after_says(scripted, hubs):
    def busy(conn: Conn) -> None:
        conn.sse_head("503 Service Unavailable", "Retry-After: 3\r\n", "text/plain")
        conn.send(b"busy\n")
    agent = scripted(busy)
    hub = hubs(agent.url)
    g = gaps(agent, 2, 10)
    assert 3.0 <= g[0] <= 3.0 * 1.5 + 0.25, g
    assert problem_of(hub, agent, r"answered 503")["state"] == "down"


def test_a_stream_that_flows_and_ends_is_dialled_again_at_once_honouring_nothing_else(scripted, hubs):
    def rotate(conn: Conn) -> None:   # frames for 1.2 s, then the stream ends in order
        conn.sse_head()
        conn.send(b"retry: 5000\n\n")
        for seq in range(1, 7):
            conn.send(frame_event(minimal_frame("rotating", seq=seq), f"1700000000000-{seq}"))
            time.sleep(0.2)
    agent = scripted(rotate)
    hub = hubs(agent.url)
    g = gaps(agent, 3, 10)
    assert all(1.1 <= gap <= 1.8 for gap in g), g   # not the 5 s retry: the host never went down
    assert hub.hosts()["rotating"]["state"] == "up"


def test_at_most_max_connecting_agents_are_dialled_at_once(scripted, hubs):
    meter = Meter()

    def slow(conn: Conn) -> None:   # 0.6 s before the answer's head, then a frame and pings
        time.sleep(0.6)
        conn.sse_head()
        conn.send(frame_event(minimal_frame(f"slow-{conn.sock.getsockname()[1]}")))
        for _ in range(50):
            time.sleep(0.1)
            conn.send(b": ping\n\n")
    agents = [scripted(slow, meter) for _ in range(6)]
    hub = hubs(*(a.url for a in agents), env={"GPUFLOW_HUB_MAX_CONNECTING": "2"})
    wait_for(lambda: sum(h["state"] == "up" for h in hub.hosts().values()) == 6, 10, what="all up")
    assert meter.most_waiting == 2
    started = sorted(a.requests[0].at for a in agents)
    assert started[-1] - started[0] >= 2 * 0.6 - 0.1   # three rounds of two


# -- untrusted bytes ---------------------------------------------------------------------------------
def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) / 1024


def test_a_line_over_the_bound_drops_the_connection_and_holds_no_more_than_the_bound(scripted, hubs):
    sent = []

    def endless(conn: Conn) -> None:
        conn.sse_head()
        conn.send(frame_event(minimal_frame("endless")))
        conn.send(b"data: ")
        junk = b"x" * (1 << 20)
        try:
            for _ in range(256):   # 256 MiB of one line, if the hub kept reading
                conn.send(junk)
                sent.append(len(junk))
        except OSError:
            pass
    agent = scripted(endless)
    good = Agent("good-node", interval_ms=100)
    try:
        hub = hubs(agent.url, good.url, env={"GPUFLOW_HUB_SUMMARY_FRAME_MB": "1"})
        host = problem_of(hub, agent, r"sent a line longer than 1048576 bytes \(the hub's bound\); dropped")
        assert host["name"] == "endless" and host["state"] == "down"
        assert sum(sent) < 64 << 20   # the hub stopped reading and closed long before 256 MiB
        assert rss_mb(hub.proc.pid) < 150
        # the other agent is followed all along (a real agent: under load its first frame may come
        # after the endless one is dropped; before it, the host is listed by its address)
        wait_for(lambda: hub.hosts().get("good-node", {}).get("state") == "up", 10, what="good-node up")
    finally:
        good.stop()


@pytest.mark.parametrize("frame, why", [
    (minimal_frame("typed", devices=[{"index": "zero", "uuid": "GPU-x"}]), r"devices\[0\]\.index: expected a whole number"),
    (minimal_frame("typed", devices=[{"index": True, "uuid": "GPU-x"}]), r"devices\[0\]\.index: expected a whole number"),
    (minimal_frame("typed", devices=[{"index": 0, "uuid": "GPU-x", "temperature_c": 1e999}]), r"not JSON|finite"),
    (minimal_frame("typed", devices=[{"index": 0}]), r"devices\[0\]\.uuid: missing"),
    (minimal_frame("typed", devices=[{"index": 0, "uuid": "u" * 70_000}]), r"devices\[0\]\.uuid: expected text"),
    (minimal_frame("typed", processes=[{"pid": 1 << 70}]), r"processes\[0\]\.pid: expected a whole number"),
    (minimal_frame("typed", devices=[{"index": i, "uuid": f"G{i}"} for i in range(300)]), r"devices: more than 256"),
])
def test_a_frame_with_a_wrong_value_is_refused_by_place_never_by_value(scripted, hubs, frame, why):
    def answer(conn: Conn) -> None:
        conn.sse_head()
        conn.send(frame_event(frame))
        time.sleep(3)
    agent = scripted(answer)
    hub = hubs(agent.url)
    host = problem_of(hub, agent, why)
    assert host["state"] == "down" and not any(d["host"] == host["name"] for d in hub.snapshot()["devices"])
    assert "zero" not in json.dumps(hub.snapshot()) and "uuuuuu" not in json.dumps(hub.snapshot())


def test_deep_nesting_and_bytes_that_are_not_json_are_refused(scripted, hubs):
    bodies = iter([b"[" * 200_000 + b"]" * 200_000, b"\xff\xfe{not json", b"[1, 2, 3]"])

    def answer(conn: Conn) -> None:
        conn.sse_head()
        conn.send(b"event: snapshot\ndata: " + next(bodies, b"{}") + b"\n\n")
        time.sleep(2)
    agent = scripted(answer)
    hub = hubs(agent.url)
    problem_of(hub, agent, r"not JSON|not a snapshot")
    wait_for(lambda: len(agent.requests) >= 3, 15, what="three dials")
    problem_of(hub, agent, r"not a snapshot|cannot be read")
    assert hub.snapshot()["host"]["name"]   # the hub serves on


def test_an_agent_cannot_take_another_hosts_name_nor_put_items_under_it(scripted, hubs):
    def victim(conn: Conn) -> None:
        conn.sse_head()
        conn.send(frame_event(minimal_frame("victim")))
        time.sleep(8)

    def impostor(conn: Conn) -> None:
        time.sleep(1.0)   # after the victim
        conn.sse_head()
        doc = minimal_frame("victim", devices=[{"index": 0, "uuid": "GPU-forged", "host": "victim"}])
        conn.send(frame_event(doc))
        time.sleep(8)
    real, fake = scripted(victim), scripted(impostor)
    hub = hubs(real.url, fake.url)
    host = problem_of(hub, fake, r"says it is victim, which another target is")
    assert host["name"] == f"127.0.0.1_{fake.port}" and host["state"] == "up"
    snap = hub.snapshot()
    assert {d["uuid"]: d["host"] for d in snap["devices"]} == {"GPU-scripted": "victim", "GPU-forged": host["name"]}
    assert hub.hosts()["victim"]["address"] == real.url + "/"


def test_the_hub_follows_no_redirect_and_no_proxy(scripted, hubs):
    elsewhere = scripted(lambda conn: conn.sse_head())
    redirect = scripted(lambda conn: conn.sse_head("302 Found", f"Location: {elsewhere.url}/api/stream\r\n",
                                                   "text/plain"))
    hub = hubs(redirect.url, env={"HTTP_PROXY": elsewhere.url, "http_proxy": elsewhere.url,
                                  "ALL_PROXY": elsewhere.url})
    problem_of(hub, redirect, r"answered with a redirect \(302\), which the hub does not follow")
    time.sleep(0.5)
    assert elsewhere.requests == [] and len(redirect.requests) >= 1


def test_an_answer_that_is_no_event_stream_is_said_so(scripted, hubs):
    agent = scripted(lambda conn: (conn.sse_head(content_type="text/html"), conn.send(b"<html>")))
    hub = hubs(agent.url)
    problem_of(hub, agent, r"something other than an event stream")


def test_past_max_hosts_the_hub_follows_the_first_and_says_so(scripted, hubs):
    def answer(conn: Conn) -> None:
        conn.sse_head()
        conn.send(frame_event(minimal_frame(f"h{conn.sock.getsockname()[1]}")))
        time.sleep(5)
    agents = [scripted(answer) for _ in range(3)]
    hub = hubs(*(a.url for a in agents), env={"GPUFLOW_HUB_MAX_HOSTS": "2"})
    wait_for(lambda: len(hub.hosts()) == 2, 10, what="two hosts")
    problems = hub.snapshot()["host"]["problems"]
    assert any("3 targets are configured; the hub follows the first 2" in p["message"] for p in problems)
    assert agents[2].requests == []
