"""A host's full detail through the hub, only while a page watches it, and its recorder relayed.

``/api/stream?host=<name>`` on the hub is that host's own stream (its facts, its items, it alone
in ``hosts``); while one is open the hub takes the host's lanes from its agent (its lanes arrive
within a second), and once the last one closes it goes back to the summary. ``/api/window`` and
``/api/history`` with ``host=`` are the agent's own answers, asked with the agent's token, never
the page's; the hub checks the question first and dials nothing for a bad one."""

from __future__ import annotations

import json
import time

import pytest

from gpuflow.transport.wire import StreamReader
from fleet_agents import Agent, Hub, wait_for
from scripted_agents import Conn, ScriptedAgent, frame_event, minimal_frame
from servers import SseClient, http_get

AGENT_TOKEN = "Rm2-detail-agent-Xw8qLk5Tn3"
HUB_TOKEN = "Gs9-the-hub-page-Bv4zHd7Pq1"


def close(stream: SseClient) -> None:
    """Close the connection itself (http.client's response holds the socket open)."""
    stream.resp.close()
    stream.close()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    creds = tmp_path_factory.mktemp("creds") / "creds.json"
    env = {"GPUFLOW_TOKEN": AGENT_TOKEN, "GPUFLOW_NVML_HISTORY": "1"}
    a, b = Agent("node-a", interval_ms=100, env=env), Agent("node-b", interval_ms=100, env=env)
    creds.write_text(json.dumps({"*": AGENT_TOKEN}))
    creds.chmod(0o600)
    hub = Hub(a.url, b.url, args=("--credentials", str(creds)), env={"GPUFLOW_TOKEN": HUB_TOKEN})
    hub.auth = {"Authorization": f"Bearer {HUB_TOKEN}"}
    hub.snapshot = lambda headers=None, _s=hub.snapshot: _s(headers or hub.auth)
    wait_for(lambda: all(h["state"] == "up" for h in hub.hosts().values()) and len(hub.hosts()) == 2, 15,
             what="both up")
    yield hub, a, b
    hub.stop()
    a.stop()
    b.stop()


def detail(hub: Hub, name: str) -> str | None:
    return hub.hosts()[name]["detail"]


@pytest.mark.serial   # a bound in wall-clock time (the issue's): timed alone, after the parallel pass
def test_watching_a_host_brings_its_lanes_within_a_second_and_only_its_own(fleet):
    hub, a, _ = fleet
    opened = time.monotonic()
    stream = SseClient(hub.port, "/api/stream?host=node-a", headers=hub.auth)
    reader = StreamReader()
    try:
        while True:
            frame = reader.read(stream.next_frame().json)
            assert frame["host"]["name"] == "node-a" and [h["name"] for h in frame["hosts"]] == ["node-a"]
            assert {x["host"] for p in ("devices", "processes", "traced") for x in frame[p]} == {"node-a"}
            if any(l["spans"] for t in frame["traced"] for l in t["lanes"]):
                break
        took = time.monotonic() - opened
        assert took <= 1.0, took
        assert detail(hub, "node-a") == "full" and detail(hub, "node-b") == "summary"
        time.sleep(0.5)   # a few more of the agent's frames: the hub keeps its lanes' samples
        hub_lanes = {(t["pid"], l["stream"]): l for t in hub.snapshot()["traced"] if t["host"] == "node-a"
                     for l in t["lanes"]}
        own = {(t["pid"], l["stream"]): l for t in a.snapshot(headers={"Authorization": f"Bearer {AGENT_TOKEN}"})["traced"]
               for l in t["lanes"]}
        assert hub_lanes and set(hub_lanes) == set(own)
        for key, lane in hub_lanes.items():
            kept, theirs = [s["seq"] for s in lane["spans"]], [s["seq"] for s in own[key]["spans"]]
            assert len(kept) == lane["executions"] - lane["spans_elided"] and kept == sorted(kept)
            # the same run of the lane where they overlap: nothing lost, nothing doubled
            assert [s for s in theirs if s <= kept[-1]] == [s for s in kept if s >= theirs[0]]
    finally:
        close(stream)
    wait_for(lambda: detail(hub, "node-a") == "summary", 3, what="back to the summary")
    assert all(t["lanes"] == [] for t in hub.snapshot()["traced"] if t["host"] == "node-a")


def test_the_host_stays_watched_while_any_page_watches_it(fleet):
    hub, _, _ = fleet
    first = SseClient(hub.port, "/api/stream?host=node-b", headers=hub.auth)
    second = SseClient(hub.port, "/api/stream?host=node-b", headers=hub.auth)
    try:
        first.next_frame()
        second.next_frame()
        wait_for(lambda: detail(hub, "node-b") == "full", 3, what="watched")
        close(first)
        time.sleep(1.0)
        assert detail(hub, "node-b") == "full"
    finally:
        close(second)
    wait_for(lambda: detail(hub, "node-b") == "summary", 3, what="no longer watched")


def test_a_summary_of_one_host_watches_nothing_and_other_hosts_are_404(fleet):
    hub, _, _ = fleet
    stream = SseClient(hub.port, "/api/stream?host=node-b&detail=summary", headers=hub.auth)
    try:
        frame = StreamReader().read(stream.next_frame().json)
        assert [h["name"] for h in frame["hosts"]] == ["node-b"] and frame["traced"]
        time.sleep(0.5)
        assert detail(hub, "node-b") == "summary"
    finally:
        close(stream)
    assert http_get(hub.port, "/api/stream?host=node-zz", headers=hub.auth)[0] == 404
    for bad in ("host=", "host=a%20b", "host=node-a&host=node-b", "host=" + "x" * 300):
        status, _, body = http_get(hub.port, "/api/stream?" + bad, headers=hub.auth)
        assert status == 400 and b"host must be given once" in body, bad


def test_an_agent_serves_its_own_host_by_name_and_no_other(fleet):
    _, a, _ = fleet
    auth = {"Authorization": f"Bearer {AGENT_TOKEN}"}
    stream = SseClient(a.port, "/api/stream?host=node-a", headers=auth)
    try:
        frame = StreamReader().read(stream.next_frame().json)
    finally:
        close(stream)
    assert frame["host"]["name"] == "node-a" and frame["traced"][0]["lanes"]
    assert http_get(a.port, "/api/stream?host=node-b", headers=auth)[0] == 404


def window_doc(body: bytes) -> dict:
    """A window answer without what moves on its own (what is retained, at the time of asking)."""
    doc = json.loads(body)
    for p in doc.get("processes", []):
        p.pop("retained_from")
        p.pop("retained_to")
    return {k: v for k, v in doc.items() if not k.startswith("retained")}


def test_the_recorder_of_a_host_is_its_agents_answer(fleet):
    hub, a, _ = fleet
    auth = {"Authorization": f"Bearer {AGENT_TOKEN}"}
    now = time.time()
    query = f"from={now - 4}&to={now - 2}&width=200"
    status, _, relayed = http_get(hub.port, f"/api/window?host=node-a&{query}", headers=hub.auth)
    assert status == 200
    own_status, _, own = http_get(a.port, f"/api/window?{query}", headers=auth)
    assert own_status == 200 and window_doc(relayed) == window_doc(own)
    assert json.loads(relayed)["processes"]
    question = f"from={now - 4}&to={now - 2}&points=16&metrics=utilization_gpu_pct"
    status, _, history = http_get(hub.port, f"/api/history?host=node-a&{question}", headers=hub.auth)
    assert status == 200 and json.loads(history)["series"]
    assert window_doc(history) == window_doc(http_get(a.port, f"/api/history?{question}", headers=auth)[2])
    # this machine's own name is its own recorder; no such host is 404
    own_name = hub.snapshot()["host"]["name"]
    assert http_get(hub.port, f"/api/window?host={own_name}&{query}", headers=hub.auth)[0] == 200
    assert http_get(hub.port, f"/api/window?host=node-zz&{query}", headers=hub.auth)[0] == 404
    assert http_get(hub.port, f"/api/window?host=node-a&{query}")[0] == 401


def test_questions_are_checked_and_rebuilt_and_carry_the_agents_token_only(tmp_path):
    seen = []

    def agent(conn: Conn) -> None:
        if conn.request.path.startswith("/api/stream"):
            conn.sse_head()
            conn.send(frame_event(minimal_frame("scripted")))
            for _ in range(100):
                time.sleep(0.1)
                conn.send(b": ping\n\n")
            return
        seen.append(conn.request)
        body = b'{"from": 1, "to": 2, "processes": []}'
        conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                  b"Connection: close\r\n\r\n%s" % (len(body), body))
    scripted = ScriptedAgent(agent)
    creds = tmp_path / "creds.json"
    creds.write_text(json.dumps({f"127.0.0.1:{scripted.port}": AGENT_TOKEN}))
    creds.chmod(0o600)
    hub = Hub(scripted.url, args=("--credentials", str(creds)), env={"GPUFLOW_TOKEN": HUB_TOKEN})
    auth = {"Authorization": f"Bearer {HUB_TOKEN}"}
    try:
        wait_for(lambda: "scripted" in {h["name"] for h in hub.snapshot(auth)["hosts"]}, 10, what="up")
        for bad in ("from=1", "from=1&to=2&pid=0", "from=1&to=2&width=x", "from=2&to=1",
                    "from=1&to=2&token=" + HUB_TOKEN, "from=1&to=2&metrics=A"):
            assert http_get(hub.port, f"/api/window?host=scripted&{bad}", headers=auth)[0] == 400, bad
        assert seen == []   # nothing was asked of the agent
        status, _, body = http_get(hub.port, "/api/window?host=scripted&to=2.5&from=1&pid=42", headers=auth)
        assert status == 200 and json.loads(body)["processes"] == []
        [asked] = seen
        assert asked.path == "/api/window?from=1.0&to=2.5&pid=42"
        assert asked.headers["authorization"] == f"Bearer {AGENT_TOKEN}"   # the agent's, not the page's
    finally:
        hub.stop()
        scripted.close()


def test_an_answer_too_large_or_a_redirect_is_not_relayed(tmp_path):
    elsewhere = ScriptedAgent(lambda conn: conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"))

    def agent(conn: Conn) -> None:
        if conn.request.path.startswith("/api/stream"):
            conn.sse_head()
            conn.send(frame_event(minimal_frame("big")))
            for _ in range(300):
                time.sleep(0.1)
                conn.send(b": ping\n\n")
        elif conn.request.path.startswith("/api/history"):
            conn.send(f"HTTP/1.1 302 Found\r\nLocation: {elsewhere.url}/\r\nContent-Length: 0\r\n\r\n".encode())
        else:
            conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n[")
            chunk = b"1," * (1 << 19)
            try:
                for _ in range(128):   # 128 MiB, if the hub kept reading
                    conn.send(chunk)
            except OSError:
                pass
    scripted = ScriptedAgent(agent)
    hub = Hub(scripted.url)
    try:
        wait_for(lambda: "big" in hub.hosts(), 10, what="up")
        status, _, body = http_get(hub.port, "/api/window?host=big&from=1&to=2", timeout=60)
        assert status == 502 and b"answered more than 67108864 bytes" in body
        status, _, body = http_get(hub.port, "/api/history?host=big&from=1&to=2", timeout=30)
        assert status == 502 and b"redirect" in body and elsewhere.requests == []
        assert http_get(hub.port, "/healthz")[0] == 200
    finally:
        hub.stop()
        scripted.close()
        elsewhere.close()
