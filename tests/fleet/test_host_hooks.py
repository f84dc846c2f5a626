"""The hooks a plugin that shows other hosts implements, through a real agent and its embedded server:
``watch_hosts`` hears the set of hosts pages watch whenever it changes (counted per host: two
pages, one change), and ``answer_for_host`` answers the recorder's routes for its hosts, the first
plugin in name order winning and a failing one answering 502 in one line."""

from __future__ import annotations

import json
import threading
import time

import pluggy
import pytest

import gpuflow
from gpuflow.core import hookspecs
from gpuflow.core.agent import Agent
from gpuflow.core.context import AgentConfig
from gpuflow.core.host_answer import HostAnswer
from gpuflow.core.snapshot import Device, FleetHost, HostInfo, SnapshotPart
from gpuflow.transport.app import AppSettings, create_app
from gpuflow.transport.server import EmbeddedServer
from fleet_agents import wait_for
from servers import SseClient, http_get


class Elsewhere:
    """Shows one other host, "far", and answers for it; records what the agent told it."""

    def __init__(self) -> None:
        self.watched: list[frozenset[str]] = []
        self.asked: list[tuple[str, str, str]] = []
        self.lock = threading.Lock()

    @gpuflow.hookimpl
    def produce_snapshot(self, context):
        return SnapshotPart(source="elsewhere", hosts=(FleetHost(HostInfo(name="far"), address="http://far:1/"),),
                            devices=(Device(0, "GPU-far", host="far"),))

    @gpuflow.hookimpl
    def watch_hosts(self, context, hosts):
        with self.lock:
            self.watched.append(hosts)

    @gpuflow.hookimpl
    def answer_for_host(self, context, host, route, query):
        self.asked.append((host, route, query))
        if host != "far":
            return None
        return HostAnswer(200, "application/json", json.dumps({"route": route, "query": query}).encode())


class Failing:
    @gpuflow.hookimpl
    def answer_for_host(self, context, host, route, query):
        if host == "boom":
            raise RuntimeError("boom")
        return None


@pytest.fixture
def served():
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    elsewhere = Elsewhere()
    pm.register(elsewhere, name="elsewhere")
    pm.register(Failing(), name="a-failing")
    app = create_app(Agent(AgentConfig(interval_s=0.2), pm), settings=AppSettings(poll_s=0.1))
    server = EmbeddedServer(app, "127.0.0.1", 0)
    server.serve_in_thread()
    yield server, elsewhere
    server.shutdown()
    app.close()


def close(stream: SseClient) -> None:
    stream.resp.close()
    stream.close()


def test_watch_hosts_hears_each_change_of_the_watched_set(served):
    server, elsewhere = served
    one = SseClient(server.port, "/api/stream?host=far")
    two = SseClient(server.port, "/api/stream?host=far")
    one.next_frame()
    two.next_frame()
    assert elsewhere.watched == [frozenset({"far"})]
    close(one)
    time.sleep(0.6)
    assert elsewhere.watched == [frozenset({"far"})]
    close(two)
    wait_for(lambda: elsewhere.watched == [frozenset({"far"}), frozenset()], 3, what="the empty set")
    summary = SseClient(server.port, "/api/stream?host=far&detail=summary")   # no detail asked: no watch
    summary.next_frame()
    close(summary)
    assert elsewhere.watched == [frozenset({"far"}), frozenset()]


def test_answer_for_host_relays_and_a_failing_plugin_answers_502(served):
    server, elsewhere = served
    status, _, body = http_get(server.port, "/api/window?host=far&from=5&to=6&width=10")
    assert status == 200 and json.loads(body) == {"route": "/api/window", "query": "from=5.0&to=6.0&width=10"}
    status, _, body = http_get(server.port, "/api/window?host=boom&from=5&to=6")
    assert status == 502 and json.loads(body) == {"error": "collector a-failing failed to answer for the host"}
    assert http_get(server.port, "/api/history?host=nowhere&from=5&to=6")[0] == 404
    assert ("nowhere", "/api/history", "from=5.0&to=6.0") in elsewhere.asked
