"""The ``cupti`` plugin: its options, the launch it prepares, inert without a session, the traced
part with one inside a real agent."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from gpuflow.collectors.cupti import injection, options, plugin
from gpuflow.core.agent import Agent
from gpuflow.core.context import AgentConfig, CollectorContext
from gpuflow.core.errors import LaunchRefused
from gpuflow.core.options import OptionError
from gpuflow.core.plugins import get_plugin_manager

ONLY_CUPTI = {"GPUFLOW_DISABLED_PLUGINS": "nvml", "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1"}


def cupti_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "gpuflow-cupti"]


def test_without_a_session_nothing_starts():
    context = CollectorContext(AgentConfig(), environ={})
    before = len(cupti_threads())
    plugin.start_collecting(context)
    assert plugin.produce_snapshot(context) is None
    assert plugin.get_collector(context) is None
    assert len(cupti_threads()) == before
    plugin.process_exited(context, 1234, 0)  # nothing to tell: no error
    plugin.stop_collecting(context)


def test_its_options_and_flags():
    context = CollectorContext(AgentConfig(options={"cupti": {"ring_capacity": "0x1000"}}),
                               environ={"GPUFLOW_RING_CAPACITY": "2048", "GPUFLOW_SESSION": "abc"})
    assert dict(context.plugin_options(options.OPTIONS)) == {
        "ring_capacity": 4096, "flush_ms": 50, "lane_span_cap": 512, "session": "abc"}
    flags = {o.flag: o.commands for o in plugin.declare_options().options if o.flag}
    assert flags == {"--ring-capacity": ("watch", "run"), "--flush-ms": ("run",)}


@pytest.mark.parametrize("given,message", [
    ({"ring_capacity": 1000}, "power of two"),
    ({"ring_capacity": 1 << 27}, "between 1024 and 67108864"),
    ({"flush_ms": 4}, "at least 5 milliseconds"),
    ({"lane_span_cap": -1}, "lane_span_cap must be in"),
    ({"session": "../etc"}, "a session id is"),
    ({"session": "x" * 32}, "a session id is"),
])
def test_wrong_options_are_refused_by_the_plugin(given, message):
    context = CollectorContext(AgentConfig(options={"cupti": given}), environ={})
    with pytest.raises(OptionError, match=message):
        context.plugin_options(options.OPTIONS)


def test_child_environment_names_the_session_and_its_settings(monkeypatch, tmp_path):
    inject, cupti = tmp_path / "libgpuflow_inject.so", tmp_path / "libcupti.so.13"
    monkeypatch.setattr(injection, "find_injection_paths",
                        lambda environ=None: injection.InjectionPaths(inject, cupti))
    context = CollectorContext(AgentConfig(options={"cupti": {"ring_capacity": 2048, "flush_ms": 20}}),
                               environ={})
    env = plugin.child_environment(context, "0123456789abcdef")
    assert env == {"CUDA_INJECTION64_PATH": str(inject), "NVTX_INJECTION64_PATH": str(cupti),
                   "GPUFLOW_CUPTI_PATH": str(cupti), "GPUFLOW_SESSION": "0123456789abcdef",
                   "GPUFLOW_RING_CAPACITY": "2048", "GPUFLOW_FLUSH_MS": "20"}


def test_child_environment_refuses_the_launch_without_the_injection_library(monkeypatch):
    def missing(environ=None):
        raise injection.InjectionUnavailable("libgpuflow_inject.so was not built")

    monkeypatch.setattr(injection, "find_injection_paths", missing)
    context = CollectorContext(AgentConfig(), environ={})
    with pytest.raises(LaunchRefused, match="cannot trace: libgpuflow_inject.so was not built"):
        plugin.child_environment(context, "abc")
    assert plugin.get_collector(context) is None


def test_registered_under_its_name():
    pm = get_plugin_manager(environ=ONLY_CUPTI)
    assert pm.get_plugin("cupti") is plugin


def test_an_agent_with_a_session_reports_traced_processes(rings):
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        p = rings.producer(pid=child.pid)
        p.set_status(1, "")
        p.kernel(0, 1, 13, 10, 20, "_Z1kv")
        agent = Agent(AgentConfig(interval_s=0.2, options={"cupti": {"lane_span_cap": 16}}),
                      get_plugin_manager(environ=ONLY_CUPTI), environ={"GPUFLOW_SESSION": rings.session})
        agent.start()
        try:
            collector = plugin.get_collector(agent.context)
            assert collector is not None and len(cupti_threads()) >= 1
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                snap = agent.board.latest()
                if snap is not None and snap.traced:
                    break
                time.sleep(0.02)
            assert "cupti" in snap.sources
            assert snap.traced[0].pid == child.pid and snap.traced[0].kernels[0].count == 1
            p.kernel(0, 1, 13, 30, 40, "_Z1kv")
            p.mark_exited()
            child.communicate(b"", timeout=10)
            agent.process_exited(child.pid, 0)  # what gpuflow run does when its program ends
        finally:
            agent.stop()
        final = agent.board.latest().traced[0]
        assert (final.state, final.exit_status, final.kernels[0].count, final.truncated) == ("exited", 0, 2, False)
        assert plugin.produce_snapshot(agent.context) is collector.part()
        assert not cupti_threads() or all(not t.is_alive() for t in cupti_threads())
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_importing_the_collector_never_imports_nvml():
    code = ("import sys; import gpuflow.collectors.cupti.plugin, gpuflow.collectors.cupti.collector; "
            "print(any(m.startswith(('gpuflow.collectors.nvml', 'pynvml')) for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
