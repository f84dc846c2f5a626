"""While an agent runs, the cyclic garbage collector leaves its frames' objects alone
(gpuflow.core.gc_policy), and is put back as it was when the last agent stops.

Why it matters is a time (a hub's lag and CPU at 700 agents, bench/hub.py); what is tested here
is the policy's life (applied at start, nested, restored at stop, never undoing what someone else
set), its variable, and its effect on a heap like an agent's: objects replaced whole from one frame
to the next cause no collection under it, where the interpreter's thresholds make one at each frame.
"""

from __future__ import annotations

import gc

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
    return Agent(AgentConfig(interval_s=0.5, **config), pm, environ={})


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


def test_what_a_host_program_set_is_kept(collector):
    gc.freeze()                                     # the host program froze its own objects
    gc.set_threshold(100_000, *gc.get_threshold()[1:])
    agent = _agent()
    agent.start()
    try:
        assert gc.get_threshold()[0] == 100_000     # a higher threshold is never lowered
    finally:
        agent.stop()
    assert gc.get_threshold()[0] == 100_000
    assert gc.get_freeze_count() > 0                # and its objects stay frozen


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
