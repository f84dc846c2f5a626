"""The CUPTI collector's flight recorder: windows of real rings, handed over by real processes.

Rings are written by the compiled test producer and handed over by couriers (as in
test_collector.py); the collector answers ``query_window`` while the process runs, after it exits
and after the collector stops (what ``gpuflow run --trace-out`` asks); a small budget or
``retain_s`` lets part go, and the window says so; a real agent with the CUPTI plugin serves the
same through ``GET /api/window`` of the real app.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from falcon import testing

from gpuflow.core.agent import Agent
from gpuflow.core.context import AgentConfig
from gpuflow.core.plugins import get_plugin_manager
from gpuflow.transport import window_columns
from gpuflow.transport.app import AppSettings, create_app

from .conftest import WALL0
from .test_collector import poll_until

CUPTI0 = 1_000_000
NAME = "_Z13attention_fwdPKfPfi"


def us(cupti_ns: int) -> int:
    """A CUPTI time of these rings as wall-clock microseconds (the ring's pair: CUPTI0 -> WALL0)."""
    return (cupti_ns - CUPTI0 + WALL0) // 1000


def write(p, n: int, first: int = 0) -> None:
    """``n`` kernels on the 'compute' stream, 10 us apart, then a copy on the null stream."""
    for i in range(first, first + n):
        p.kernel(0, 1, 13, CUPTI0 + 10_000 * i, CUPTI0 + 10_000 * i + 2_000, NAME, (64 + i, 1, 1), (128, 1, 1))
    p.memcpy(0, 1, 7, CUPTI0 + 10_000 * (first + n), CUPTI0 + 10_000 * (first + n) + 500, 1, 4096)


def start(p) -> None:
    p.set_status(1, "")
    p.context(0, 1, 7)
    p.clock_sync(CUPTI0, WALL0)
    p.stream_name(0, 1, 13, "compute")


def whole(c, pid=None, width=None):
    return c.window(WALL0 / 1e9 - 1, WALL0 / 1e9 + 60, pid, width)


def test_a_window_holds_every_execution_named_and_labelled_as_the_snapshot(collector_factory, rings):
    p, child = rings.traced()
    start(p)
    write(p, 5)
    c = collector_factory()
    poll_until(c, lambda part: part.traced and part.traced[0].records == p.head)
    part = whole(c)
    assert part.source == "cupti" and part.problems == ()
    (proc,) = part.processes
    assert (proc.pid, proc.session, proc.name, proc.complete) == (child.pid, rings.session, "ring_courier", True)
    assert proc.retained_from_s == WALL0 / 1e9 and proc.retained_to_s == (WALL0 + 50_500) / 1e9
    copies, compute = proc.lanes
    assert (compute.label, compute.executions, copies.label, copies.executions) == ("compute", 5, "default", 1)
    spans = compute.spans
    assert list(spans.start_us) == [us(CUPTI0 + 10_000 * i) for i in range(5)]
    assert list(spans.dur_ns) == [2_000] * 5 and list(spans.grid_x) == [64, 65, 66, 67, 68]
    assert spans.names == ("attention_fwd(float const*, float*, int)",)   # as the snapshot shows it
    assert [s.name for s in spans] == [spans.names[0]] * 5
    (copy,) = copies.spans
    assert (copy.kind, copy.bytes, copy.direction, copy.name) == ("memcpy", 4096, "h2d", None)
    # a window inside, and one reduced to a pixel
    inside = c.window(us(CUPTI0 + 10_000) / 1e6, us(CUPTI0 + 30_000) / 1e6, None, None)
    assert [lane.executions for lane in inside.processes[0].lanes] == [2]
    reduced = whole(c, width=1).processes[0].lanes[1]
    assert reduced.spans is None and list(reduced.buckets.count) == [5]
    assert list(reduced.buckets.busy_ns) == [10_000]
    assert whole(c, pid=child.pid + 1).processes == ()


def test_an_exited_process_is_answered_after_its_ring_is_released_and_after_stop(collector_factory, rings):
    p = rings.producer()
    start(p)
    write(p, 3)
    pid = rings.gone(p)
    c = collector_factory()
    poll_until(c, lambda part: part.traced and part.traced[0].state == "exited")
    assert c._rings[pid].mapped is None   # released
    assert whole(c).processes[0].lanes[1].executions == 3
    c.stop()
    assert whole(c).processes[0].lanes[1].executions == 3


def test_what_the_budget_let_go_is_said(collector_factory, rings):
    p, _child = rings.traced(capacity=1 << 14)
    start(p)
    c = collector_factory(retain_bytes=1 << 14)
    for k in range(4):          # chunks of 1,024 then 2,048 records, each over the budget alone
        write(p, 1_500, first=1_500 * k)
        poll_until(c, lambda part: part.traced and part.traced[0].records == p.head)
    (proc,) = whole(c).processes
    assert not proc.complete
    assert proc.retained_from_s > WALL0 / 1e9
    kept = proc.lanes[1].executions
    assert 0 < kept < 6_000
    # a window after what left is complete
    late = c.window(proc.retained_from_s + 1e-3, WALL0 / 1e9 + 60, None, None)
    assert late.processes[0].complete


def test_retain_s_lets_older_executions_go(collector_factory, rings):
    p, _child = rings.traced(capacity=1 << 14)
    start(p)
    now = [WALL0 + 50_000_000]
    c = collector_factory(retain_s=1.0)
    c._clock_ns = lambda: now[0]
    write(p, 3_000)
    poll_until(c, lambda part: part.traced and part.traced[0].records == p.head)
    assert whole(c).processes[0].complete
    now[0] = WALL0 + 10_000_000_000     # 10 s later: everything ended more than 1 s ago
    c.poll()
    (proc,) = whole(c).processes
    assert proc.lanes == () and not proc.complete and proc.retained_from_s is None


def test_without_retention_the_collector_answers_nothing(collector_factory, rings):
    p, _child = rings.traced()
    start(p)
    write(p, 2)
    c = collector_factory(retain_bytes=0)
    poll_until(c, lambda part: part.traced)
    assert c.window(0, 1e10, None, None) is None


def as_lists(value):
    """A columnar answer as the JSON form has it (each column a list)."""
    if isinstance(value, dict):
        return {key: as_lists(v) for key, v in value.items()}
    if isinstance(value, list):
        return [as_lists(v) for v in value]
    return value.tolist() if hasattr(value, "tolist") else value


def test_a_real_agent_serves_its_window_through_the_app(rings):
    """The CUPTI plugin's query_window, through the agent's hook call and GET /api/window."""
    private = Path(tempfile.mkdtemp(prefix="gpuflow-window-"))   # mode 0700: a private directory
    socket_path = private / "ring.sock"
    env = {"GPUFLOW_DISABLED_PLUGINS": "nvml", "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1"}
    agent = Agent(AgentConfig(options={"cupti": {"ring_socket": str(socket_path), "retain_mb": 16}}),
                  get_plugin_manager(environ=env))
    agent.start()
    try:
        p = rings.producer(pid=os.getpid())
        start(p)
        write(p, 4)
        from ringproducer import Courier

        courier = Courier(rings.lib, p, socket_path)
        try:
            client = testing.TestClient(create_app(agent, settings=AppSettings(start_agent=False)),
                                        headers={"Host": "localhost"})
            deadline = time.monotonic() + 30
            while True:
                r = client.simulate_get("/api/window", params={"from": str(WALL0 / 1e9 - 1),
                                                               "to": str(WALL0 / 1e9 + 60)})
                assert r.status_code == 200, r.text
                procs = r.json["processes"]
                if (procs and sum(lane["executions"] for lane in procs[0]["lanes"]) == 5
                        and any(lane["label"] == "compute" for lane in procs[0]["lanes"])):
                    break   # every record retained, and the lanes named: a build came after the drain
                assert time.monotonic() < deadline, r.json
                time.sleep(0.05)
            assert r.json["sources"] == ["cupti"]
            (proc,) = procs
            assert proc["pid"] == courier.pid and proc["complete"] is True
            compute = next(lane for lane in proc["lanes"] if lane["label"] == "compute")
            assert compute["spans"]["start_us"] == [us(CUPTI0 + 10_000 * i) for i in range(4)]
            assert compute["spans"]["names"] == ["attention_fwd(float const*, float*, int)"]
            reduced = client.simulate_get("/api/window", params={"from": str(WALL0 / 1e9 - 1),
                                                                 "to": str(WALL0 / 1e9 + 60), "width": "2"}).json
            compute = next(lane for lane in reduced["processes"][0]["lanes"] if lane["label"] == "compute")
            assert sum(compute["buckets"]["count"]) == 4
            for width, as_json in ((None, r.json), ("2", reduced)):   # the columnar form holds the same
                params = {"from": str(WALL0 / 1e9 - 1), "to": str(WALL0 / 1e9 + 60), "format": "columns"}
                columnar = client.simulate_get("/api/window", params={**params, **({"width": width} if width else {})})
                assert columnar.status_code == 200 and as_lists(window_columns.read(columnar.content)) == as_json
        finally:
            courier.kill()
    finally:
        agent.stop()
