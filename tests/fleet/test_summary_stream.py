"""``/api/stream?detail=summary``: devices, processes and traced aggregates without lanes or spans,
from a real agent (``gpuflow watch``) and from real gunicorn; bad values are 400 and the Host and
token rules hold as on every route; every stream pings at least every agent interval."""

from __future__ import annotations

import json
import time

import pytest

from gpuflow.transport.wire import StreamReader
from fleet_agents import Agent
from servers import Gunicorn, SseClient, http_get

TOKEN = "k3Vq9-fleet-summary-Tz7wP2xR"


@pytest.fixture(scope="module")
def agent():
    a = Agent("summary-node")
    yield a
    a.stop()


def frames(port: int, path: str, n: int, headers: dict | None = None) -> list[dict]:
    """The first ``n`` frames of a stream, read into the plain form."""
    stream, reader, out = SseClient(port, path, headers=headers), StreamReader(), []
    try:
        assert stream.status == 200, stream.status
        while len(out) < n:
            out.append(reader.read(stream.next_frame().json))
    finally:
        stream.close()
    return out


def test_a_summary_has_every_aggregate_and_no_lane(agent):
    summary = frames(agent.port, "/api/stream?detail=summary", 6)
    full = frames(agent.port, "/api/stream", 2)
    assert all(f["traced"] and f["devices"] and f["processes"] for f in summary)
    assert all(t["lanes"] == [] for f in summary for t in f["traced"])
    assert all(t["kernels"] and t["records"] > 0 for f in summary for t in f["traced"])
    assert any(l["spans"] for t in full[0]["traced"] for l in t["lanes"])   # the agent has spans
    # apart from the lanes, a summary frame is the agent's snapshot
    newest = summary[-1]
    plain = agent.snapshot()
    assert newest["hosts"][0]["name"] == plain["hosts"][0]["name"] == "summary-node"
    assert [d["uuid"] for d in newest["devices"]] == [d["uuid"] for d in plain["devices"]]
    assert set(newest["traced"][0]) == set(plain["traced"][0])


def test_an_explicit_full_detail_is_the_default_stream(agent):
    [full] = frames(agent.port, "/api/stream?detail=full", 1)
    assert any(l["spans"] for t in full["traced"] for l in t["lanes"])


@pytest.mark.parametrize("query", ["detail=lanes", "detail=", "detail=SUMMARY", "detail=summary&detail=full",
                                   "detail=summary%00", "detail=%ff"])
def test_a_bad_detail_is_400_in_one_line_that_does_not_echo_it(agent, query):
    status, headers, body = http_get(agent.port, "/api/stream?" + query)
    assert status == 400 and headers["content-type"].startswith("application/json")
    error = json.loads(body)["error"]
    assert "\n" not in error and "detail" in error
    for echoed in ("lanes", "SUMMARY", "%00", "%ff", "\x00"):
        assert echoed not in body.decode("utf-8", "replace")
    assert http_get(agent.port, "/healthz")[0] == 200


@pytest.mark.serial   # a wake-up latency: measured alone, not beside other tests' agents
def test_every_stream_pings_at_least_every_agent_interval():
    # nothing changes on this agent after its first frames (no NVML, the fake part made once)
    quiet = Agent("quiet-node", interval_ms=200,
                  env={"GPUFLOW_DISABLED_PLUGINS": "nvml,cupti", "GPUFLOW_FAKE_RATE_HZ": "0"})
    try:
        for path in ("/api/stream", "/api/stream?detail=summary"):
            stream = SseClient(quiet.port, path)
            try:
                stream.next_frame()
                gaps, last = [], time.monotonic()
                while len(gaps) < 5:
                    ev = stream.next_event()
                    now = time.monotonic()
                    gaps.append(now - last)
                    last = now
                    assert ev.comments == ["ping"] or ev.data, ev
            finally:
                stream.close()
            assert max(gaps) < 0.2 + 0.35, (path, gaps)   # the interval, and the server's wake-up
    finally:
        quiet.stop()


def test_under_gunicorn_a_summary_keeps_the_host_and_token_rules():
    server = Gunicorn(env={"GPUFLOW_TOKEN": TOKEN, "GPUFLOW_FAKE_LANES": "2"})
    try:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert http_get(server.port, "/api/stream?detail=summary")[0] == 401
        assert http_get(server.port, "/api/stream?detail=summary", headers={**auth, "Host": "evil.example"})[0] == 403
        assert http_get(server.port, "/api/stream?detail=bogus")[0] == 401   # the token before the query
        assert http_get(server.port, "/api/stream?detail=bogus", headers=auth)[0] == 400
        summary = frames(server.port, "/api/stream?detail=summary", 3, headers=auth)
        assert summary[-1]["traced"] and all(t["lanes"] == [] for f in summary for t in f["traced"])
    finally:
        server.stop()
