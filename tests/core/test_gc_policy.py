"""While an agent runs, the cyclic garbage collector leaves its frames' objects alone
(gpuflow.core.gc_policy), and is put back as it was when the last agent stops.

Why it matters is a time (a hub's lag and CPU at 700 agents, bench/hub.py); what is tested here
is the policy's life (applied at start, nested, restored at stop, never undoing what someone else
set), its variable, its effect on a heap like an agent's (objects replaced whole from one frame
to the next cause no collection under it, where the interpreter's thresholds make one at each
frame), and its ticks: what is made is frozen at the frames, and a reference cycle frozen before
it became garbage is collected within a full period.
"""

from __future__ import annotations

import gc
import time
import weakref

import pluggy
import pytest

from gpuflow.core import gc_policy, hookspecs
from gpuflow.core.agent import Agent
from gpuflow.core.context import AgentConfig
from gpuflow.transport.settings import from_environ

#: the interpreter's own young threshold, which each test starts from
DEFAULT_YOUNG = 700


@pytest.fixture
def collector(monkeypatch):
    """The interpreter's thresholds, and the policy's count as if no agent ran in this process
    (another test's agent left running would otherwise hold it)."""
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    gc.set_threshold(DEFAULT_YOUNG, *before[1:])
    monkeypatch.setattr(gc_policy, "_holders", 0)
    yield
    assert gc_policy._holders == 0, "an agent of the test was left running"
    gc.set_threshold(*before)
    if frozen == 0:
        gc.unfreeze()


def _agent(**config) -> Agent:
    pm = pluggy.PluginManager("gpuflow")
    pm.add_hookspecs(hookspecs)
    return Agent(AgentConfig(**{"interval_s": 0.5, **config}), pm, environ={})


def test_a_running_agent_freezes_what_exists_and_raises_the_young_threshold(collector):
    gc.unfreeze()
    agent = _agent()
    agent.start()
    try:
        assert gc.get_threshold()[0] == gc_policy.AGENT_GC_YOUNG_THRESHOLD
        assert gc.get_freeze_count() > 1000        # the modules, the test's objects, the agent's
    finally:
        agent.stop()
    assert gc.get_threshold()[0] == DEFAULT_YOUNG
    assert gc.get_freeze_count() == 0


def test_zero_leaves_the_interpreter_alone(collector):
    gc.unfreeze()
    agent = _agent(gc_young_threshold=0)
    agent.start()
    try:
        assert gc.get_threshold()[0] == DEFAULT_YOUNG
        assert gc.get_freeze_count() == 0
    finally:
        agent.stop()
    assert gc.get_threshold()[0] == DEFAULT_YOUNG


def test_the_policy_holds_until_the_last_agent_stops(collector):
    gc.unfreeze()
    first, second = _agent(), _agent()
    first.start()
    second.start()
    first.stop()
    try:
        assert gc.get_threshold()[0] == gc_policy.AGENT_GC_YOUNG_THRESHOLD
        assert gc.get_freeze_count() > 0
    finally:
        second.stop()
    assert gc.get_threshold()[0] == DEFAULT_YOUNG
    assert gc.get_freeze_count() == 0
    first.stop()                                    # stopping twice restores nothing twice
    assert gc_policy._holders == 0


def test_a_higher_threshold_a_host_program_set_is_kept(collector):
    gc.set_threshold(100_000, *gc.get_threshold()[1:])
    agent = _agent()
    agent.start()
    try:
        assert gc.get_threshold()[0] == 100_000     # a higher threshold is never lowered
    finally:
        agent.stop()
    assert gc.get_threshold()[0] == 100_000


def test_a_threshold_changed_while_the_agent_ran_is_not_overwritten_at_stop(collector):
    agent = _agent()
    agent.start()
    gc.set_threshold(2_000, *gc.get_threshold()[1:])
    agent.stop()
    assert gc.get_threshold()[0] == 2_000


def test_the_variable(collector):
    assert from_environ({}).agent.gc_young_threshold == gc_policy.AGENT_GC_YOUNG_THRESHOLD
    assert from_environ({"GPUFLOW_GC_YOUNG_THRESHOLD": "0"}).agent.gc_young_threshold == 0
    assert from_environ({"GPUFLOW_GC_YOUNG_THRESHOLD": " 20000 "}).agent.gc_young_threshold == 20_000
    for bad, says in (("5", "0 .the interpreter's own policy. or >= 100"), ("-1", ">= 0"),
                      ("x", "a number"), ("1.5", "a number"), ("20000000", "<= 10000000")):
        with pytest.raises(ValueError, match=f"GPUFLOW_GC_YOUNG_THRESHOLD must be {says}"):
            from_environ({"GPUFLOW_GC_YOUNG_THRESHOLD": bad})


def _collections_while_frames_replace(hosts: int = 50, objects: int = 1_000, frames: int = 20) -> int:
    """Collections of any generation while ``hosts`` states of ``objects`` tracked objects each are
    replaced whole, ``frames`` times, each new state made before the old one goes (as a hub's
    link does)."""
    seen = []

    def count(phase: str, info: dict) -> None:
        if phase == "stop":
            seen.append(info["generation"])

    state = [[[i] for i in range(objects)] for _ in range(hosts)]
    gc.collect()
    gc.callbacks.append(count)
    try:
        for _ in range(frames):
            for h in range(hosts):
                state[h] = [[i] for i in range(objects)]
    finally:
        gc.callbacks.remove(count)
    return len(seen)


def test_a_heap_replaced_frame_by_frame_is_not_collected_under_the_policy(collector):
    assert _collections_while_frames_replace() >= 50 * 20 // 2     # the interpreter's: about one a frame
    agent = _agent()
    agent.start()
    try:
        assert _collections_while_frames_replace() == 0
    finally:
        agent.stop()


def _in_sight(obj) -> bool:
    """Whether the collector would go over ``obj`` (it is in a generation, not frozen)."""
    return any(o is obj for o in gc.get_objects())


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


#: an agent whose frame loop does not wake while a test ticks by hand (no collector wakes it)
QUIET = {"interval_s": 3600.0}


def test_what_is_made_while_an_agent_runs_is_frozen_at_its_frames(collector):
    gc.unfreeze()
    agent = _agent(**QUIET)
    agent.start()
    try:
        made = [[i] for i in range(5_000)]
        frozen = gc.get_freeze_count()
        # the times are the policy's own, not the clock's: a loaded machine can take longer than
        # FREEZE_EVERY_S from start to here, and a tick then would rightly freeze ``made``
        started = gc_policy._last_freeze
        gc_policy.tick(started + gc_policy.FREEZE_EVERY_S / 2)      # too soon after start: nothing
        assert gc.get_freeze_count() == frozen and _in_sight(made)
        gc_policy.tick(started + gc_policy.FREEZE_EVERY_S)
        assert gc.get_freeze_count() >= frozen + len(made) and not _in_sight(made)
        assert gc.get_count()[0] < 100                   # the young generation starts again
    finally:
        agent.stop()
    assert gc.get_freeze_count() == 0


def test_a_cycle_frozen_before_it_became_garbage_is_collected_within_a_full_period(collector):
    gc.unfreeze()
    agent = _agent(**QUIET)
    agent.start()
    try:
        t0 = time.monotonic()
        a, b = Node(), Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        gc_policy.tick(t0 + gc_policy.FREEZE_EVERY_S)     # the cycle is frozen while alive
        del a, b
        gc.collect()                                     # frozen: no collection finds it
        assert gone() is not None
        gc_policy.tick(t0 + 2 * gc_policy.FREEZE_EVERY_S)
        assert gone() is not None
        gc_policy.tick(t0 + gc_policy.FULL_EVERY_S)      # everything unfrozen, collected, frozen again
        assert gone() is None
        assert gc.get_freeze_count() > 1000
    finally:
        agent.stop()


def test_objects_frozen_before_start_are_frozen_with_the_rest_and_unfrozen_at_the_end(collector):
    """As CPython 3.12 does with a few hundred of its own at start-up, or a host program with its
    own: the ticks go on (the policy once skipped them then, and a hub on 3.12 never froze again)."""
    gc.freeze()
    before = gc.get_freeze_count()
    agent = _agent(**QUIET)
    agent.start()
    try:
        made = [[i] for i in range(5_000)]
        assert _in_sight(made) and before > 0
        gc_policy.tick(time.monotonic() + gc_policy.FULL_EVERY_S)
        assert not _in_sight(made)
    finally:
        agent.stop()
    assert gc.get_freeze_count() == 0


def test_no_tick_acts_without_a_running_agent(collector):
    gc.unfreeze()
    made = [[i] for i in range(1_000)]
    gc_policy.tick(time.monotonic() + gc_policy.FULL_EVERY_S)
    assert gc.get_freeze_count() == 0 and made
