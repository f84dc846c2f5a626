"""Fixtures for the PM-sampling tests: the helper, the fake driver, the test producer (build.py),
and a real agent whose pmsampling plugin runs them.

Constraints: no GPU (the fake driver stands in for it); every agent started here is stopped by the
fixture that started it.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import pytest

from gpuflow.core.agent import Agent
from gpuflow.core.context import AgentConfig
from gpuflow.core.plugins import get_plugin_manager

from .build import build_all

#: only the plugin under test: no NVML, no CUPTI collector, no entry points
ENVIRON = {"GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1", "GPUFLOW_DISABLED_PLUGINS": "nvml,cupti,recording"}


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> dict[str, Path]:
    return build_all(tmp_path_factory.mktemp("pmsampling"))


@pytest.fixture
def make_agent(built):
    """make_agent(**options) -> a started Agent with --gpu-metrics and the fake driver (or, with
    sampler=built["producer"], the test producer as its helper); stopped at the end."""
    agents: list[Agent] = []

    def make(**options) -> Agent:
        given = {"gpu_metrics": True, "sampler": str(built["sampler"]), "cuda_lib": str(built["fake"]),
                 "cupti_lib": str(built["fake"]), "decode_ms": 10, **options}
        agent = Agent(AgentConfig(interval_s=0.05, options={"pmsampling": given}), get_plugin_manager(environ=ENVIRON))
        agents.append(agent)
        agent.start()
        return agent

    yield make
    for agent in agents:
        agent.stop()


@contextmanager
def scenario(monkeypatch, variable: str, value: str):
    """The helper's environment is the agent's: set what the fake driver or the producer reads."""
    monkeypatch.setenv(variable, value)
    yield
