"""Plugin options: declared by the plugin, found in the given values, the environment or the
default, checked by the plugin's own converter, and wrong values named where they came from."""

from __future__ import annotations

import pluggy
import pytest

import gpuflow
from gpuflow.core import hookspecs
from gpuflow.core.agent import Agent
from gpuflow.core.context import AgentConfig, CollectorContext
from gpuflow.core.options import Option, OptionError, PluginOptions, boolean
from gpuflow.core.plugins import PluginLoadError, declared_options


def even(value):
    number = int(value)
    if number % 2:
        raise ValueError(f"must be even, got {number}")
    return number


DECLARED = PluginOptions("demo", (
    Option("size", even, 8, "an even size", flag="--demo-size", env="GPUFLOW_DEMO_SIZE"),
    Option("loud", boolean, False, "a switch", flag="--demo-loud", switch=True),
    Option("label", str, None, "code only"),
))


class Declaring:
    def __init__(self, declared=DECLARED):
        self.declared = declared
        self.seen = None

    @gpuflow.hookimpl
    def declare_options(self):
        return self.declared

    @gpuflow.hookimpl
    def start_collecting(self, context):
        self.seen = dict(context.plugin_options(self.declared))


def manager(*plugins):
    pm = pluggy.PluginManager("gpuflow")
    pm.add_hookspecs(hookspecs)
    for name, plugin in plugins:
        pm.register(plugin, name=name)
    return pm


def test_given_beats_environment_beats_default():
    env = {"GPUFLOW_DEMO_SIZE": "4"}
    assert DECLARED.resolve({}, {}) == {"size": 8, "loud": False, "label": None}
    assert DECLARED.resolve({}, env)["size"] == 4
    assert DECLARED.resolve({"size": 6}, env)["size"] == 6
    assert DECLARED.resolve({}, {"GPUFLOW_DEMO_SIZE": "  "})["size"] == 8  # blank is unset


@pytest.mark.parametrize("given,env,named", [
    ({"size": 3}, {}, "--demo-size: must be even, got 3"),
    ({}, {"GPUFLOW_DEMO_SIZE": "5"}, "GPUFLOW_DEMO_SIZE: must be even, got 5"),
    ({}, {"GPUFLOW_DEMO_SIZE": "x"}, "GPUFLOW_DEMO_SIZE: invalid literal"),
    ({"label": 1, "colour": "red"}, {}, "demo: unknown option(s) colour"),
    ({"loud": "maybe"}, {}, "--demo-loud: expected 1/0"),
])
def test_a_wrong_value_names_its_source(given, env, named):
    with pytest.raises(OptionError) as exc:
        DECLARED.resolve(given, env)
    assert named in str(exc.value)


def test_an_agent_gives_each_plugin_its_own_checked_values():
    plugin = Declaring()
    agent = Agent(AgentConfig(options={"demo": {"size": "10", "loud": "yes"}, "absent": {"x": 1}}),
                  manager(("demo", plugin)), environ={"GPUFLOW_DEMO_SIZE": "2"})
    agent.start()
    agent.stop()
    assert plugin.seen == {"size": 10, "loud": True, "label": None}


def test_an_agent_with_a_wrong_value_refuses_to_be_made():
    with pytest.raises(OptionError, match="GPUFLOW_DEMO_SIZE"):
        Agent(AgentConfig(), manager(("demo", Declaring())), environ={"GPUFLOW_DEMO_SIZE": "7"})


def test_values_are_resolved_once_per_context():
    context = CollectorContext(AgentConfig(options={"demo": {"size": 2}}), environ={})
    assert context.plugin_options(DECLARED) is context.plugin_options(DECLARED)


@pytest.mark.parametrize("second,clash", [
    (PluginOptions("demo", ()), "key demo"),
    (PluginOptions("other", (Option("s", str, None, "h", flag="--demo-size"),)), "flag --demo-size"),
    (PluginOptions("other", (Option("s", str, None, "h", env="GPUFLOW_DEMO_SIZE"),)), "variable GPUFLOW_DEMO_SIZE"),
])
def test_two_plugins_cannot_own_one_setting(second, clash):
    with pytest.raises(PluginLoadError, match=clash):
        declared_options(manager(("a", Declaring()), ("b", Declaring(second))))


def test_a_plugin_that_declares_something_else_is_named():
    with pytest.raises(PluginLoadError, match="'odd' declared its options as a dict"):
        declared_options(manager(("odd", Declaring({"size": 1}))))


@pytest.mark.parametrize("make", [
    lambda: Option("not a name", str, None, "h"),
    lambda: Option("x", str, None, "h", flag="-x"),
    lambda: Option("x", str, None, "h", commands=("serve",)),
    lambda: PluginOptions("p", (Option("x", str, None, "h"), Option("x", str, None, "h"))),
])
def test_malformed_declarations_are_refused(make):
    with pytest.raises(ValueError):
        make()
