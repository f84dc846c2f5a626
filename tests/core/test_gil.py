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


def _agent(**config) -> Agent:
    pm = pluggy.PluginManager("gpuflow")
    pm.add_hookspecs(hookspecs)
    return Agent(AgentConfig(interval_s=0.5, **config), pm, environ={})


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


def test_the_configured_interval_is_the_one_the_agent_runs_with(interval):
    sys.setswitchinterval(0.005)
    agent = _agent(switch_interval_s=0.002)
    agent.start()
    try:
        assert sys.getswitchinterval() == pytest.approx(0.002)
    finally:
        agent.stop()
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_the_variable_sets_it_a_command_line_default_yields_to_it_and_bad_values_name_it():
    from gpuflow.transport.settings import from_environ

    assert from_environ({}).agent.switch_interval_s == pytest.approx(AGENT_SWITCH_INTERVAL_S)
    assert from_environ({"GPUFLOW_SWITCH_INTERVAL_MS": "2"}).agent.switch_interval_s == pytest.approx(0.002)
    assert from_environ({}, {"switch_interval_s": 0.005}).agent.switch_interval_s == pytest.approx(0.005)
    for bad in ("0", "nan", "fast", "1000"):
        with pytest.raises(ValueError, match="GPUFLOW_SWITCH_INTERVAL_MS"):
            from_environ({"GPUFLOW_SWITCH_INTERVAL_MS": bad})


def test_a_hub_runs_with_the_interpreters_own_interval_unless_the_variable_says_or_it_collects(monkeypatch):
    """gpuflow hub's default (its threads wait on sockets; measured cheaper and no slower to
    answer), through the command line's own path to the agent's configuration."""
    import argparse

    from gpuflow.cli import hub, serving

    seen = []

    def build_app(args):
        seen.append(serving.overrides(args).get("switch_interval_s"))
        raise serving.StartupError("stop here")

    monkeypatch.setattr(serving, "build_app", build_app)
    monkeypatch.setattr(hub, "_fleet_only", lambda plugins: None)
    args = argparse.Namespace(local_collectors=False, plugin=[], interval=None, show_cmdline=False, ui=None,
                              token=None, token_file=None, allow_host=[], metrics_per_process=False,
                              insecure_no_auth=False)
    monkeypatch.delenv("GPUFLOW_SWITCH_INTERVAL_MS", raising=False)
    assert hub.cmd_hub(args) == 2
    local = argparse.Namespace(**{**vars(args), "switch_interval_s": None, "local_collectors": True})
    assert hub.cmd_hub(local) == 2   # its own collectors drain rings: the agent's interval
    monkeypatch.setenv("GPUFLOW_SWITCH_INTERVAL_MS", "1")
    assert hub.cmd_hub(argparse.Namespace(**{**vars(args), "switch_interval_s": None})) == 2
    assert seen == [hub.HUB_SWITCH_INTERVAL_S, None, None]
