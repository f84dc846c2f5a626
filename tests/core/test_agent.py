"""The agent's frame loop: notify-driven frames, the 50 ms minimum gap, fault isolation."""

from __future__ import annotations

import threading
import time

import pluggy

import gpuflow
from gpuflow.core import hookspecs
from gpuflow.core.agent import MIN_FRAME_GAP_S, Agent
from gpuflow.core.context import AgentConfig
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
            if snap is not None:
                seen.append(time.monotonic())
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


def test_exit_status_reported_by_the_launcher_reaches_collectors():
    tick = Ticking()
    agent = Agent(AgentConfig(interval_s=10), manager(("tick", tick)))
    agent.start()
    try:
        agent.context.record_exit(1234, 137)
        assert tick.context.exit_statuses == {1234: 137}
    finally:
        agent.stop()
