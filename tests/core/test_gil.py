"""The agent runs with a short GIL switch interval and gives the old one back (gpuflow.core.gil).

Why it matters is a time (``/healthz`` under hostile rings, bench/hostile_rings.py); what is
tested here is the setting's life: lowered while an agent runs, never raised, restored at stop.
"""

from __future__ import annotations

import sys

import pluggy
import pytest

from gpuflow.core import hookspecs
from gpuflow.core.agent import Agent
from gpuflow.core.context import AgentConfig
from gpuflow.core.gil import AGENT_SWITCH_INTERVAL_S


@pytest.fixture
def interval():
    before = sys.getswitchinterval()
    yield
    sys.setswitchinterval(before)


def _agent() -> Agent:
    pm = pluggy.PluginManager("gpuflow")
    pm.add_hookspecs(hookspecs)
    return Agent(AgentConfig(interval_s=0.5), pm, environ={})


def test_a_running_agent_lowers_the_interval_and_stop_restores_it(interval):
    sys.setswitchinterval(0.005)
    agent = _agent()
    agent.start()
    try:
        assert sys.getswitchinterval() == pytest.approx(AGENT_SWITCH_INTERVAL_S)
    finally:
        agent.stop()
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_a_shorter_interval_chosen_by_the_host_program_is_kept(interval):
    sys.setswitchinterval(0.0002)
    agent = _agent()
    agent.start()
    try:
        assert sys.getswitchinterval() == pytest.approx(0.0002)
    finally:
        agent.stop()
    assert sys.getswitchinterval() == pytest.approx(0.0002)


def test_an_interval_changed_while_the_agent_ran_is_not_overwritten_at_stop(interval):
    sys.setswitchinterval(0.005)
    agent = _agent()
    agent.start()
    sys.setswitchinterval(0.002)
    agent.stop()
    assert sys.getswitchinterval() == pytest.approx(0.002)
