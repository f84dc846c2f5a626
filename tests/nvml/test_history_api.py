"""GET /api/history answered by the NVML plugin: a real Agent from the real plugin manager, the real
app on the embedded server, a real HTTP client. A collector ticked with a fake clock gives exact
ranges (inside, across the join, outside what is kept); a started agent shows the live path."""

from __future__ import annotations

import json
import math
import time
from contextlib import contextmanager

import pytest

from gpuflow.collectors.nvml.history import ROLLUP_S
from gpuflow.collectors.nvml.plugin import SLOT
from gpuflow.core.agent import Agent
from gpuflow.core.context import AgentConfig
from gpuflow.core.options import OptionError
from gpuflow.core.plugins import get_plugin_manager
from gpuflow.transport.app import AppSettings, create_app
from gpuflow.transport.server import EmbeddedServer
from servers import http_get

from .ticked import Ticked, minute_stats, reading, samples

ENVIRON = {"GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1", "GPUFLOW_DISABLED_PLUGINS": "cupti"}


def make_agent(**options) -> Agent:
    pm = get_plugin_manager(environ=ENVIRON)
    assert pm.get_plugin("nvml") is not None and pm.get_plugin("cupti") is None
    return Agent(AgentConfig(interval_s=0.05, options={"nvml": options}), pm)


@contextmanager
def serving(agent: Agent):
    server = EmbeddedServer(create_app(agent, settings=AppSettings(start_agent=False)), "127.0.0.1", 0)
    server.serve_in_thread()
    try:
        yield lambda start, end: history(server.port, start, end)
    finally:
        server.shutdown()


def history(port: int, start: float, end: float) -> dict:
    status, headers, body = http_get(port, f"/api/history?from={start!r}&to={end!r}")
    assert status == 200, body[:300]
    assert headers["content-type"].startswith("application/json")
    return json.loads(body)


@contextmanager
def ticked_agent(run: Ticked):
    """A real agent whose NVML plugin answers from ``run``'s collector (what start_collecting
    would have put in its slot, with a clock the test moves)."""
    agent = make_agent()
    agent.context.slots[SLOT] = run.collector
    with serving(agent) as get:
        yield get


def series_of(doc: dict, entity: list, metric: str) -> list[dict]:
    return [s for s in doc["series"] if s["entity"] == entity and s["metric"] == metric]


def as_json(v: float) -> float | None:
    return None if math.isnan(v) else v


def test_inside_what_is_kept_every_sample_with_null_for_not_available():
    run = Ticked("shared8")
    run.tick(120)
    first, last = run.parts[0][0], run.parts[-1][0]
    with ticked_agent(run) as get:
        doc = get(last - 30, last + 0.5)
    assert doc["sources"] == ["nvml"] and doc["problems"] == []
    assert (doc["retained_from"], doc["retained_to"]) == (first, last)
    mig = ["device", run.parts[0][1].devices[7].uuid]  # GPU 7: MIG, utilization not available
    (util,) = series_of(doc, mig, "utilization_gpu_pct")
    assert util["value"] == [None] * 31 and util["resolution_s"] == 1.0
    assert util["t"] == [t for t, _ in run.parts[-31:]] and "min" not in util
    for s in doc["series"]:
        expected = [as_json(reading(part, tuple(s["entity"]), s["metric"])) for _, part in run.parts[-31:]]
        assert s["value"] == expected, (s["entity"], s["metric"])
    assert {s["entity"][0] for s in doc["series"]} == {"device", "process"}
    assert "null" in json.dumps(doc) and all(0 != v for v in util["value"])


def test_across_the_join_roll_ups_then_samples_with_min_and_max():
    run = Ticked("lost", fine_s=300)
    run.tick(900)
    last = run.parts[-1][0]
    with ticked_agent(run) as get:
        doc = get(run.parts[0][0], last + 1)
    lost = ["device", run.parts[0][1].devices[2].uuid]
    well = ["device", run.parts[0][1].devices[0].uuid]
    rolled, fine = series_of(doc, well, "power_draw_w")
    assert (rolled["resolution_s"], fine["resolution_s"]) == (ROLLUP_S, 1.0)
    assert rolled["t"][-1] + ROLLUP_S == fine["t"][0]  # joined: no overlap, no gap
    assert fine["t"][-1] == last and "min" not in fine
    minute = int(rolled["t"][1] // ROLLUP_S)
    of_minute = [v for t, v in samples(run.parts, tuple(well), "power_draw_w") if int(t // ROLLUP_S) == minute]
    assert len(of_minute) == 60
    assert (rolled["value"][1], rolled["min"][1], rolled["max"][1]) == minute_stats(of_minute)
    assert rolled["min"][1] < rolled["value"][1] < rolled["max"][1]
    lost_rolled, lost_fine = series_of(doc, lost, "temperature_c")
    assert lost_rolled["value"][0] is not None and lost_rolled["value"][1:] == [None] * (len(lost_rolled["t"]) - 1)
    assert lost_rolled["min"][1:] == lost_rolled["max"][1:] == lost_rolled["value"][1:]
    assert set(lost_fine["value"]) == {None}
    assert any("GPU 2" in p.message for p in run.parts[-1][1].problems)


def test_outside_what_is_kept_is_an_empty_200_that_says_what_is_kept():
    run = Ticked("single")
    run.tick(30)
    first, last = run.parts[0][0], run.parts[-1][0]
    with ticked_agent(run) as get:
        for start, end in ((1.0, 2.0), (first - 7200, first - 1), (last + 1, last + 99)):
            doc = get(start, end)
            assert doc["series"] == [] and doc["sources"] == ["nvml"]
            assert (doc["retained_from"], doc["retained_to"]) == (first, last)


def test_a_started_agent_answers_its_live_history():
    agent = make_agent(fake="shared8")
    agent.start()
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            collector = agent.context.slots[SLOT]
            if collector.polls >= 6:
                break
            time.sleep(0.02)
        with serving(agent) as get:
            now = time.time()
            doc = get(now - 60, now + 1)
            before = get(now - 7200, now - 3600)
    finally:
        agent.stop()
    devices = {tuple(s["entity"]) for s in doc["series"] if s["entity"][0] == "device"}
    assert len(devices) == 8
    (util,) = series_of(doc, ["device", sorted(devices)[0][1]], "utilization_gpu_pct")
    assert util["resolution_s"] == 0.05 and len(util["t"]) >= 5
    assert util["t"] == sorted(util["t"]) and now - 60 <= util["t"][0]
    assert any(s["entity"][:2] == ["process", "4242"] for s in doc["series"])
    assert before["series"] == [] and before["retained_from"] <= util["t"][0]


def test_history_off_answers_nothing_and_wrong_budgets_are_refused():
    agent = make_agent(fake="single", history=False)
    agent.start()
    try:
        assert agent.context.slots[SLOT].history is None
        assert agent.query_history(0.0, time.time() + 1) == ()
    finally:
        agent.stop()
    for option, value, says in (("history_fine_s", "60", "300 to 86400 seconds"),
                                ("history_coarse_s", "1e9", "60 to 604800 seconds"),
                                ("history_processes", "-1", "whole number >= 0"),
                                ("history_processes", "5000", "0 to 256 series"),
                                ("history", "maybe", "expected 1/0")):
        with pytest.raises(OptionError, match=says):
            make_agent(fake="single", **{option: value}).start()
