"""GET /api/window and /api/history: the recorder's contract through a real agent and app, with a
plugin that answers the hooks (the collectors that retain data are tested in their own folders)."""

from __future__ import annotations

from array import array

import pluggy
import pytest
from falcon import testing

import gpuflow
from gpuflow.core import hookspecs
from gpuflow.core.agent import Agent
from gpuflow.core.context import AgentConfig
from gpuflow.core.recorded import (
    HistoryPart, LaneWindow, ProcessWindow, Series, SpanBuckets, SpanColumns, WindowPart,
)
from gpuflow.core.snapshot import Span
from gpuflow.transport.app import AppSettings, create_app
from gpuflow.transport.recorded_api import MAX_RANGE_S, MAX_WIDTH_PX

SPANS = (Span(seq=7, kind="kernel", start_us=1_000_000, dur_ns=2_000, name="gemm", grid=(4, 1, 1),
              block=(128, 1, 1)),
         Span(seq=8, kind="memcpy", start_us=1_000_010, dur_ns=500, bytes=4096, direction="h2d"))


class Retaining:
    """Answers what a retaining collector would, and records what it was asked."""

    def __init__(self):
        self.asked = []

    @gpuflow.hookimpl
    def query_window(self, context, start_s, end_s, pid, width_px):
        self.asked.append(("window", start_s, end_s, pid, width_px))
        exact = LaneWindow(device=0, context=1, stream=7, label="compute", executions=2,
                           spans=SpanColumns.from_spans(SPANS))
        reduced = LaneWindow(device=0, context=1, stream=8, label="copies", executions=900,
                             buckets=SpanBuckets(start_us=1e6, width_us=250.0, count=array("q", [600, 300]),
                                                 busy_ns=array("q", [250_000, 12_000])))
        return WindowPart(source="rec", processes=(ProcessWindow(
            pid=42, session="s1", name="train", retained_from_s=0.5, retained_to_s=2.5,
            lanes=(exact, reduced), complete=False),))

    @gpuflow.hookimpl
    def query_history(self, context, start_s, end_s):
        self.asked.append(("history", start_s, end_s))
        return HistoryPart(source="rec", retained_from_s=100.0, retained_to_s=200.0, series=(
            Series(entity=("device", "GPU-0"), metric="utilization_gpu_pct", unit="%", resolution_s=1.0,
                   t_s=array("d", [150.0, 151.0]), value=array("d", [40.0, float("nan")])),))


class Broken:
    @gpuflow.hookimpl
    def query_window(self, context, start_s, end_s, pid, width_px):
        raise RuntimeError("window store on fire")

    @gpuflow.hookimpl
    def query_history(self, context, start_s, end_s):
        return "not a part"


def client(*plugins, token=None):
    pm = pluggy.PluginManager("gpuflow")
    pm.add_hookspecs(hookspecs)
    for name, plugin in plugins:
        pm.register(plugin, name=name)
    agent = Agent(AgentConfig(), pm)
    app = create_app(agent, settings=AppSettings(token=token, start_agent=False))
    return testing.TestClient(app, headers={"Host": "localhost"})


def test_a_window_travels_column_by_column_with_its_names_and_buckets():
    plugin = Retaining()
    r = client(("rec", plugin)).simulate_get("/api/window", params={"from": "1", "to": "2", "pid": "42",
                                                                      "width": "800"})
    assert r.status_code == 200, r.text
    doc = r.json
    assert plugin.asked == [("window", 1.0, 2.0, 42, 800)]
    assert (doc["from"], doc["to"], doc["pid"], doc["width"], doc["sources"]) == (1.0, 2.0, 42, 800, ["rec"])
    (proc,) = doc["processes"]
    assert (proc["pid"], proc["retained_from"], proc["retained_to"], proc["complete"]) == (42, 0.5, 2.5, False)
    exact, reduced = proc["lanes"]
    spans = exact["spans"]
    assert spans["seq"] == [7, 8] and spans["kind"] == [0, 1] and spans["names"] == ["gemm"]
    assert spans["name"] == [0, -1] and spans["bytes"] == [-1, 4096] and spans["direction"] == [-1, 0]
    assert (spans["grid_x"], spans["block_x"]) == ([4, -1], [128, -1])
    assert "buckets" not in exact and "spans" not in reduced
    assert reduced["buckets"] == {"start_us": 1e6, "width_us": 250.0, "count": [600, 300],
                                  "busy_ns": [250_000, 12_000]}


def test_history_says_what_is_kept_and_null_for_not_available():
    r = client(("rec", Retaining())).simulate_get("/api/history", params={"from": "100", "to": "300"})
    assert r.status_code == 200, r.text
    doc = r.json
    assert (doc["retained_from"], doc["retained_to"]) == (100.0, 200.0)
    (series,) = doc["series"]
    assert series == {"entity": ["device", "GPU-0"], "metric": "utilization_gpu_pct", "unit": "%",
                      "resolution_s": 1.0, "t": [150.0, 151.0], "value": [40.0, None]}


def test_nothing_retained_is_an_empty_200_not_an_error():
    c = client()
    for route in ("/api/window", "/api/history"):
        r = c.simulate_get(route, params={"from": "1", "to": "2"})
        assert r.status_code == 200 and r.json["sources"] == []
    assert client().simulate_get("/api/window", params={"from": "1", "to": "2"}).json["processes"] == []


@pytest.mark.parametrize("params,named", [
    ({"to": "2"}, "from is required"),
    ({"from": "x", "to": "2"}, "from must be a number"),
    ({"from": "nan", "to": "2"}, "finite"),
    ({"from": "inf", "to": "2"}, "finite"),
    ({"from": "-1", "to": "2"}, "non-negative"),
    ({"from": "2", "to": "2"}, "to must be after from"),
    ({"from": "3", "to": "2"}, "to must be after from"),
    ({"from": "0", "to": str(MAX_RANGE_S + 1)}, "at most"),
    ({"from": "1", "to": "2", "width": "0"}, "width must be between"),
    ({"from": "1", "to": "2", "width": str(MAX_WIDTH_PX + 1)}, "width must be between"),
    ({"from": "1", "to": "2", "width": "1e3"}, "width must be a whole number"),
    ({"from": "1", "to": "2", "pid": "-4"}, "pid must be a whole number"),
    ({"from": "1", "to": "2", "pid": "9" * 40}, "pid must be a whole number"),
    ({"from": "1", "to": "2", "colour": "red"}, "unknown parameter"),
])
def test_malformed_queries_are_400_naming_the_parameter_never_echoing_it(params, named):
    r = client(("rec", Retaining())).simulate_get("/api/window", params=params)
    assert r.status_code == 400
    assert named in r.json["error"]
    for value in params.values():
        if len(value) > 2:
            assert value not in r.text


def test_a_broken_plugin_answers_with_a_problem_and_the_others_still_answer():
    c = client(("rec", Retaining()), ("broken", Broken()))
    window = c.simulate_get("/api/window", params={"from": "1", "to": "2"}).json
    assert [p["pid"] for p in window["processes"]] == [42]
    assert any("'broken' failed in query_window" in p["message"] and "on fire" in p["message"]
               for p in window["problems"])
    history = c.simulate_get("/api/history", params={"from": "1", "to": "2"}).json
    assert [s["metric"] for s in history["series"]] == ["utilization_gpu_pct"]
    assert any("returned a str" in p["message"] for p in history["problems"])


def test_the_recorder_routes_need_the_token_like_every_data_route():
    c = client(("rec", Retaining()), token="s3cr3t-t0ken-for-the-tests-0123456789")
    assert c.simulate_get("/api/window", params={"from": "1", "to": "2"}).status_code == 401
    ok = c.simulate_get("/api/window", params={"from": "1", "to": "2"},
                        headers={"Authorization": "Bearer s3cr3t-t0ken-for-the-tests-0123456789"})
    assert ok.status_code == 200
