"""``gpuflow hub`` over real agents (``gpuflow watch``, fake NVML backend, fake traced collector) on
loopback ports: every host's latest summary under its own name; an agent killed is down within a
second, a frozen one (SIGSTOP, as a partition or a hang looks) stale within 3 of its intervals,
and a restarted one up again with its restart counted; the targets file is re-read when it
changes; tokens come from the credentials file."""

from __future__ import annotations

import json
import os
import time

import pytest

from fleet_agents import Agent, Hub, wait_for
from servers import SseClient

TOKEN_A = "Hq7-node-a-Zx2vLm9Rk4tW"
TOKEN_B = "Pw3-node-b-Yc8nQs1Tj6uE"
#: the agents' interval (ms): stale after 3 of them
INTERVAL_MS = 100


@pytest.fixture
def agents():
    made: list[Agent] = []

    def make(name: str, **kw) -> Agent:
        made.append(Agent(name, interval_ms=INTERVAL_MS, **kw))
        return made[-1]
    yield make
    for a in made:
        a.stop()


@pytest.fixture
def hubs():
    made: list[Hub] = []

    def make(*targets, **kw) -> Hub:
        made.append(Hub(*targets, **kw))
        return made[-1]
    yield make
    for h in made:
        h.stop()


def test_a_hub_serves_every_hosts_summary_under_its_own_name(agents, hubs):
    a, b = agents("node-a"), agents("node-b")
    hub = hubs(a.url, b.url)
    wait_for(lambda: {n: h["state"] for n, h in hub.hosts().items()} == {"node-a": "up", "node-b": "up"},
             10, what="both hosts up")
    snap = hub.snapshot()
    assert snap["schema"] == 3 and snap["sources"] == ["fleet"]   # this machine's collectors are off
    hosts = {h["name"]: h for h in snap["hosts"]}
    for name, agent in (("node-a", a), ("node-b", b)):
        own = agent.snapshot()["host"]
        assert hosts[name]["boot_epoch"] == own["boot_epoch"] and hosts[name]["interval_s"] == 0.1
        assert hosts[name]["address"] == agent.url + "/" and hosts[name]["detail"] == "summary"
        assert hosts[name]["restarts"] == 0 and hosts[name]["seen"] <= time.time()
        assert 0 <= hosts[name]["lag_ms"] < 1000   # one clock: the frame's age when the hub took it
    # the two agents are alike (same fake GPU uuid, same pids): the hub keeps them apart by host
    assert sorted((d["host"], d["uuid"]) for d in snap["devices"]) == sorted(
        (n, d["uuid"]) for n, ag in (("node-a", a), ("node-b", b)) for d in ag.snapshot()["devices"])
    traced = {(t["host"], t["pid"]): t for t in snap["traced"]}
    assert set(traced) == {("node-a", 5000), ("node-b", 5000)}
    assert all(t["kernels"] and t["lanes"] == [] for t in traced.values())   # summaries
    # the hub's own stream carries the fleet as any agent's does
    stream = SseClient(hub.port, "/api/stream?detail=summary")
    try:
        first = stream.next_frame().json
    finally:
        stream.close()
    assert {h["name"] for h in first["hosts"]} == {"node-a", "node-b"}


@pytest.mark.serial   # a bound in wall-clock time (the issue's): timed alone, after the parallel pass
def test_a_killed_agent_is_down_within_a_second_and_its_restart_is_counted(agents, hubs):
    a, b = agents("node-a"), agents("node-b")
    hub = hubs(a.url, b.url)
    before, _ = hub.wait_host("node-a", "up", 10)
    hub.wait_host("node-b", "up", 10)
    a.kill()
    down, took = hub.wait_host("node-a", "down", 5)
    assert took <= 1.0, took
    assert any("dialling again" in p["message"] for p in down["problems"])
    assert down["boot_epoch"] == before["boot_epoch"]   # its last state stays, marked down
    assert hub.hosts()["node-b"]["state"] == "up"
    a.start()   # the same port: the hub's backoff (from 1-1.5 s, doubling) finds it again
    again, _ = hub.wait_host("node-a", "up", 15)
    assert again["boot_epoch"] > before["boot_epoch"] and again["restarts"] == 1


@pytest.mark.serial   # a bound in wall-clock time (the issue's): timed alone, after the parallel pass
def test_a_frozen_agent_is_stale_within_three_intervals_and_up_when_it_thaws(agents, hubs):
    a = agents("node-a")
    hub = hubs(a.url)
    hub.wait_host("node-a", "up", 10)
    a.freeze()
    frozen_at = time.time()   # the clock the hub stamps its snapshots with

    def stale_snapshot() -> dict | None:
        snap = hub.snapshot()
        return snap if any(h["name"] == "node-a" and h["state"] == "stale" for h in snap["hosts"]) else None

    snap = wait_for(stale_snapshot, 5, what="node-a stale")
    # 3 intervals of silence, then the hub's sweep (100 ms) and its frame (50 ms to publish), by
    # the hub's own stamp on the first snapshot the test saw it stale in (a later one only makes
    # it longer): the test's polls, late on a loaded machine, are not counted
    assert snap["timestamp"] - frozen_at <= 3 * INTERVAL_MS / 1000 + 0.4, snap["timestamp"] - frozen_at
    assert any(d["host"] == "node-a" for d in snap["devices"])   # the last state, shown as stale
    a.thaw()
    hub.wait_host("node-a", "up", 5)


def test_the_targets_file_is_read_again_when_it_changes(agents, hubs, tmp_path):
    a, b = agents("node-a"), agents("node-b")
    targets = tmp_path / "targets.json"
    targets.write_text(json.dumps([{"targets": [f"127.0.0.1:{a.port}"], "labels": {"job": "gpuflow"}}]))
    hub = hubs(args=("--targets", str(targets)))
    hub.wait_host("node-a", "up", 10)
    replacement = tmp_path / "targets.json.new"   # replaced as tools do: a new file renamed over
    replacement.write_text(json.dumps([{"targets": [f"127.0.0.1:{b.port}"]}]))
    os.replace(replacement, targets)
    wait_for(lambda: set(hub.hosts()) == {"node-b"} and hub.hosts()["node-b"]["state"] == "up", 10,
             what="node-b instead of node-a")
    targets.write_text("[{\"targets\": [\"not a target\"]}]")   # broken: the targets before stay
    wait_for(lambda: any("targets file" in p["message"] for p in hub.snapshot()["host"]["problems"]), 5,
             what="the hub's problem")
    assert hub.hosts()["node-b"]["state"] == "up"


def test_tokens_come_from_the_credentials_file_and_go_only_to_their_agent(agents, hubs, tmp_path):
    a = agents("node-a", env={"GPUFLOW_TOKEN": TOKEN_A})
    b = agents("node-b", env={"GPUFLOW_TOKEN": TOKEN_B})
    creds = tmp_path / "credentials.json"
    creds.write_text(json.dumps({f"127.0.0.1:{a.port}": TOKEN_A, "*": "Nx5-wrong-token-Qa8sDf2Gh"}))
    creds.chmod(0o600)
    hub = hubs(a.url, b.url, args=("--credentials", str(creds)))
    hub.wait_host("node-a", "up", 10)
    refused = wait_for(lambda: [h for h in hub.hosts().values() if h["address"] == b.url + "/"
                                and any("refused the hub (401)" in p["message"] for p in h["problems"])],
                       10, what="node-b refusing the hub")
    assert refused[0]["state"] == "down" and refused[0]["name"] == f"127.0.0.1_{b.port}"
    assert TOKEN_A not in json.dumps(hub.snapshot()) and TOKEN_A not in hub.stop()
