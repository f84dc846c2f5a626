"""The agent's frame loop: notify-driven frames, the 50 ms minimum gap, fault isolation."""

from __future__ import annotations

import threading
import time

import pluggy
import pytest

import gpuflow
from gpuflow.core import hookspecs
from gpuflow.core.agent import MIN_FRAME_GAP_S, Agent
from gpuflow.core.context import AgentConfig
from gpuflow.core.errors import LaunchRefused
from gpuflow.core.snapshot import Device, SnapshotPart


def manager(*plugins):
    pm = pluggy.PluginManager("gpuflow")
    pm.add_hookspecs(hookspecs)
    for name, plugin in plugins:
        pm.register(plugin, name=name)
    pm.check_pending()
    return pm


class Ticking:
    """A collector that makes a new part on demand and notifies."""

    def __init__(self):
        self.part = SnapshotPart(source="tick", devices=(Device(index=0, uuid="u0"),))
        self.started = self.stopped = 0
        self.context = None

    @gpuflow.hookimpl
    def start_collecting(self, context):
        self.started += 1
        self.context = context

    @gpuflow.hookimpl
    def produce_snapshot(self, context):
        return self.part

    @gpuflow.hookimpl
    def stop_collecting(self, context):
        self.stopped += 1

    def bump(self, n):
        self.part = SnapshotPart(source="tick", devices=(Device(index=0, uuid="u0", clock_sm_mhz=n),))
        self.context.notify()


class Broken:
    @gpuflow.hookimpl
    def start_collecting(self, context):
        raise RuntimeError("boom at start")

    @gpuflow.hookimpl
    def produce_snapshot(self, context):
        raise ValueError("boom")


def test_frames_follow_notify_and_unchanged_parts_make_no_frame():
    tick = Ticking()
    agent = Agent(AgentConfig(interval_s=10), manager(("tick", tick)))
    agent.start()
    try:
        first = agent.board.latest()
        assert first.seq == 1 and tick.started == 1
        tick.bump(1)
        second = agent.board.wait_newer(first.seq, timeout=2)
        assert second is not None and second.devices[0].clock_sm_mhz == 1
        agent.context.notify()  # nothing changed: no new frame
        assert agent.board.wait_newer(second.seq, timeout=0.3) is None
    finally:
        agent.stop()
    assert tick.stopped == 1


def test_frames_are_at_least_50ms_apart():
    tick = Ticking()
    agent = Agent(AgentConfig(interval_s=10), manager(("tick", tick)))
    agent.start()
    seen = []
    stop = threading.Event()

    def reader():
        seq = agent.board.latest().seq
        while not stop.is_set():
            snap = agent.board.wait_newer(seq, timeout=0.5)
            if snap is not None:   # when it was made (not when this thread woke to it: a load delays that)
                seen.append(snap.timestamp)
                seq = snap.seq

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(40):
            tick.bump(i)
            time.sleep(0.005)
        time.sleep(0.2)
    finally:
        stop.set()
        t.join()
        agent.stop()
    gaps = [b - a for a, b in zip(seen, seen[1:])]
    assert len(seen) >= 2
    assert min(gaps) >= MIN_FRAME_GAP_S * 0.9
    assert len(seen) < 40  # coalesced


def test_a_broken_collector_loses_only_its_own_part():
    tick = Ticking()
    agent = Agent(AgentConfig(interval_s=10), manager(("tick", tick), ("broken", Broken())))
    agent.start()
    try:
        snap = agent.board.latest()
        assert [d.uuid for d in snap.devices] == ["u0"]
        messages = [p.message for p in snap.problems]
        assert any("'broken' failed in" in m and "boom" in m for m in messages)
    finally:
        agent.stop()


def test_stop_releases_waiting_readers_and_publishes_a_final_snapshot():
    tick = Ticking()
    agent = Agent(AgentConfig(interval_s=10), manager(("tick", tick)))
    agent.start()
    seq = agent.board.latest().seq
    agent.stop()
    assert agent.board.latest().seq == seq + 1  # forced final snapshot
    agent.board.close()
    t0 = time.monotonic()
    assert agent.board.wait_newer(agent.board.latest().seq, timeout=5) is None
    assert time.monotonic() - t0 < 1


class Launching:
    """A plugin with the launch hooks: adds variables to a launched program, hears its exit."""

    def __init__(self, env):
        self.env = env
        self.exited = []

    @gpuflow.hookimpl
    def child_environment(self, context, session):
        if self.env is None:
            return None
        return {k: v.format(session=session) if isinstance(v, str) else v for k, v in self.env.items()}

    @gpuflow.hookimpl
    def process_exited(self, context, pid, status):
        self.exited.append((pid, status))


class BrokenExit:
    @gpuflow.hookimpl
    def process_exited(self, context, pid, status):
        raise RuntimeError("boom at exit")


def test_exit_status_reported_by_the_launcher_reaches_every_plugin_despite_a_broken_one():
    first, second = Launching(None), Launching(None)
    agent = Agent(AgentConfig(interval_s=10),
                  manager(("a", first), ("broken", BrokenExit()), ("z", second)))
    agent.start()
    try:
        agent.process_exited(1234, 137)
        assert first.exited == second.exited == [(1234, 137)]
        snap = agent.collect_once(force=True)
        assert any("'broken' failed in process_exited" in p.message and "boom at exit" in p.message
                   for p in snap.problems)
    finally:
        agent.stop()


def test_child_environment_merges_every_plugin_and_passes_the_session():
    agent = Agent(AgentConfig(), manager(("a", Launching({"A": "1", "S": "{session}"})),
                                         ("b", Launching({"B": "2", "S": "{session}"})),
                                         ("c", Launching(None))))
    assert agent.child_environment("abc123") == {"A": "1", "B": "2", "S": "abc123"}


@pytest.mark.parametrize("envs,message", [
    ([{"X": "1"}, {"X": "2"}], "both set X"),
    ([{"X": 1}], "not variable names mapped to text"),
    ([{"": "1"}], "not variable names mapped to text"),
])
def test_child_environment_refuses_conflicts_and_non_text(envs, message):
    plugins = [(f"p{i}", Launching(env)) for i, env in enumerate(envs)]
    agent = Agent(AgentConfig(), manager(*plugins))
    with pytest.raises(LaunchRefused, match=message):
        agent.child_environment("s")


def test_a_plugin_that_refuses_the_launch_stops_it_with_its_reason():
    class Refusing:
        @gpuflow.hookimpl
        def child_environment(self, context, session):
            raise LaunchRefused("cannot trace: no injection library")

    agent = Agent(AgentConfig(), manager(("r", Refusing()), ("a", Launching({"A": "1"}))))
    with pytest.raises(LaunchRefused, match="no injection library"):
        agent.child_environment("s")
