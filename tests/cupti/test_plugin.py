"""The ``cupti`` plugin inside a real agent: inert without a session, the traced part with one."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from gpuflow.collectors.cupti import plugin
from gpuflow.core.agent import Agent
from gpuflow.core.context import AgentConfig, CollectorContext
from gpuflow.core.plugins import get_plugin_manager

ONLY_CUPTI = {"GPUFLOW_DISABLED_PLUGINS": "nvml", "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1"}


def cupti_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "gpuflow-cupti"]


def test_without_a_session_nothing_starts():
    context = CollectorContext(AgentConfig(session=None))
    before = len(cupti_threads())
    plugin.start_collecting(context)
    assert plugin.produce_snapshot(context) is None
    assert plugin.get_collector(context) is None and "cupti" not in context.slots
    assert len(cupti_threads()) == before
    plugin.stop_collecting(context)


def test_registered_under_its_name():
    pm = get_plugin_manager(environ=ONLY_CUPTI)
    assert pm.get_plugin("cupti") is plugin


def test_an_agent_with_a_session_reports_traced_processes(rings):
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        p = rings.producer(pid=child.pid)
        p.set_status(1, "")
        p.kernel(0, 1, 13, 10, 20, "_Z1kv")
        agent = Agent(AgentConfig(session=rings.session, lane_span_cap=16, interval_s=0.2),
                      get_plugin_manager(environ=ONLY_CUPTI))
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
            record_exit = getattr(agent.context, "record_exit", None)
            if record_exit is not None:  # the CLI's way (CollectorContext.record_exit)
                record_exit(child.pid, 0)
            else:
                collector.set_exit_status(child.pid, 0)
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
