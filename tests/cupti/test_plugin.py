"""The ``cupti`` plugin: its options, the launch it prepares (its private ring socket), inert without
one, the traced part with one inside a real agent, a refused GPUFLOW_CUPTI_PATH."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time

import pytest
from ringproducer import Courier

from gpuflow.collectors.cupti import injection, options, plugin
from gpuflow.core.agent import Agent
from gpuflow.core.context import AgentConfig, CollectorContext
from gpuflow.core.errors import LaunchRefused
from gpuflow.core.options import OptionError
from gpuflow.core.plugins import get_plugin_manager

ONLY_CUPTI = {"GPUFLOW_DISABLED_PLUGINS": "nvml", "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1"}


def cupti_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "gpuflow-cupti"]


def test_without_a_launch_or_a_ring_socket_nothing_starts():
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
                               environ={"GPUFLOW_RING_CAPACITY": "2048", "GPUFLOW_RING_SOCKET": "/run/x/ring.sock"})
    assert dict(context.plugin_options(options.OPTIONS)) == {
        "ring_capacity": 4096, "flush_ms": 50, "lane_span_cap": 512, "ring_socket": "/run/x/ring.sock",
        "max_names": 4096, "max_name_bytes": 4096, "max_lanes": 256, "max_pending_names": 16,
        "retain_mb": 256, "retain_s": None}
    flags = {o.flag: o.commands for o in plugin.declare_options().options if o.flag}
    assert flags == {"--ring-capacity": ("watch", "run"), "--flush-ms": ("run",), "--retain-mb": ("watch", "run"),
                     "--retain-s": ("watch", "run")}


@pytest.mark.parametrize("given,message", [
    ({"ring_capacity": 1000}, "power of two"),
    ({"ring_capacity": 1 << 27}, "between 1024 and 67108864"),
    ({"flush_ms": 4}, "at least 5 milliseconds"),
    ({"lane_span_cap": -1}, "lane_span_cap must be in"),
    ({"ring_socket": "ring.sock"}, "must be an absolute path"),
    ({"ring_socket": "/" + "x" * 107}, "longer than 107 bytes"),
    ({"ring_socket": "/a\0b"}, "must be an absolute path"),
    ({"retain_mb": -1}, r"between 0 \(no retention\)"),
    ({"retain_mb": "lots"}, "whole number of MiB"),
    ({"retain_s": 0}, "more than 0 and at most"),
    ({"retain_s": "nan"}, "more than 0 and at most"),
    ({"retain_s": 8 * 86400}, "more than 0 and at most"),
])
def test_wrong_options_are_refused_by_the_plugin(given, message):
    context = CollectorContext(AgentConfig(options={"cupti": given}), environ={})
    with pytest.raises(OptionError, match=message):
        context.plugin_options(options.OPTIONS)


def test_child_environment_names_a_private_ring_socket_and_the_settings(monkeypatch, tmp_path):
    inject, cupti = tmp_path / "libgpuflow_inject.so", tmp_path / "libcupti.so.13"
    monkeypatch.setattr(injection, "find_injection_paths",
                        lambda environ=None: injection.InjectionPaths(inject, cupti))
    context = CollectorContext(AgentConfig(options={"cupti": {"ring_capacity": 2048, "flush_ms": 20}}),
                               environ={})
    env = plugin.child_environment(context, "0123456789abcdef")
    socket_path = env.pop("GPUFLOW_RING_SOCKET")
    assert env == {"CUDA_INJECTION64_PATH": str(inject), "NVTX_INJECTION64_PATH": str(cupti),
                   "GPUFLOW_CUPTI_PATH": str(cupti), "GPUFLOW_RING_CAPACITY": "2048", "GPUFLOW_FLUSH_MS": "20"}
    directory = os.path.dirname(socket_path)
    assert os.path.basename(socket_path) == "ring.sock" and len(socket_path) <= 107
    assert not os.path.exists(directory)   # made when the agent starts, not before
    plugin.start_collecting(context)
    try:
        st = os.lstat(directory)
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
        assert stat.S_ISSOCK(os.lstat(socket_path).st_mode)
    finally:
        plugin.stop_collecting(context)
    assert not os.path.exists(directory)   # and gone when it stops


def test_a_second_launch_gets_another_directory(monkeypatch, tmp_path):
    monkeypatch.setattr(injection, "find_injection_paths",
                        lambda environ=None: injection.InjectionPaths(tmp_path / "a.so", tmp_path / "b.so"))
    sockets = {plugin.child_environment(CollectorContext(AgentConfig(), environ={}), "s")["GPUFLOW_RING_SOCKET"]
               for _ in range(2)}
    assert len(sockets) == 2


@pytest.mark.parametrize("kind", ["directory", "fifo", "device", "missing"])
def test_a_cupti_path_that_is_not_a_regular_file_refuses_the_launch(monkeypatch, tmp_path, kind):
    path = {"directory": tmp_path, "fifo": tmp_path / "fifo", "device": "/dev/zero",
            "missing": tmp_path / "none.so"}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    monkeypatch.setenv("GPUFLOW_CUPTI_PATH", str(path))
    monkeypatch.setattr(injection, "inject_library_path", lambda: tmp_path / "libgpuflow_inject.so")
    context = CollectorContext(AgentConfig(), environ={})
    expected = {"directory": "is not a regular file (a libcupti), but a directory",
                "fifo": "is not a regular file (a libcupti), but a FIFO",
                "device": "is not a regular file (a libcupti), but a character device",
                "missing": "No such file or directory"}[kind]
    with pytest.raises(LaunchRefused) as refused:
        plugin.child_environment(context, "abc")
    assert str(refused.value).startswith(f"cannot trace: GPUFLOW_CUPTI_PATH={path}")
    assert str(refused.value).endswith(expected)


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


def test_an_agent_with_a_ring_socket_reports_traced_processes(rings, tmp_path):
    """A gunicorn deployment: the agent listens where GPUFLOW_RING_SOCKET says, in a private
    directory the user made; a program started with that variable hands its ring over."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    socket_path = private / "ring.sock"
    p = rings.producer()
    p.set_status(1, "")
    p.kernel(0, 1, 13, 10, 20, "_Z1kv")
    agent = Agent(AgentConfig(interval_s=0.2, options={"cupti": {"lane_span_cap": 16}}),
                  get_plugin_manager(environ=ONLY_CUPTI), environ={"GPUFLOW_RING_SOCKET": str(socket_path)})
    agent.start()
    child = None
    try:
        child = Courier(rings.lib, p, socket_path)
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
            assert child.exit(0) == 0
            agent.process_exited(child.pid, 0)  # what gpuflow run does when its program ends
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and agent.board.latest().traced[0].state != "exited":
                time.sleep(0.02)
        finally:
            agent.stop()
        final = agent.board.latest().traced[0]
        assert (final.state, final.exit_status, final.kernels[0].count, final.truncated) == ("exited", 0, 2, False)
        assert plugin.produce_snapshot(agent.context) is collector.part()
        assert not cupti_threads() or all(not t.is_alive() for t in cupti_threads())
        assert not socket_path.exists() and private.is_dir()   # the socket goes, the user's directory stays
    finally:
        if child is not None and child.running():
            child.kill()


@pytest.mark.parametrize("mode, message", [(0o750, "is open to other users (mode 750); it must be 0700"),
                                           (0o777, "is open to other users (mode 777)")])
def test_a_ring_socket_in_a_directory_others_can_enter_is_refused(tmp_path, mode, message):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    agent = Agent(AgentConfig(), get_plugin_manager(environ=ONLY_CUPTI),
                  environ={"GPUFLOW_RING_SOCKET": str(shared / "ring.sock")})
    agent.start()
    try:
        snap = agent.collect_once(force=True)
        assert any(message in pr.message and pr.severity == "error" for pr in snap.problems), snap.problems
        assert plugin.get_collector(agent.context) is None and not (shared / "ring.sock").exists()
    finally:
        agent.stop()


def test_a_ring_socket_another_agent_listens_on_is_refused_and_a_stale_one_replaced(tmp_path):
    from gpuflow.collectors.cupti.handover import RingSocket, SocketSetupError
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    first = RingSocket.at(private / "ring.sock")
    with pytest.raises(SocketSetupError, match="another GPUFlow agent listens on"):
        RingSocket.at(private / "ring.sock")
    first._listener.close()   # an agent that died: its socket file stays behind
    assert (private / "ring.sock").exists()
    second = RingSocket.at(private / "ring.sock")
    second.close()
    (private / "ring.sock").write_text("not a socket")
    with pytest.raises(SocketSetupError, match="exists and is not a socket"):
        RingSocket.at(private / "ring.sock")


def test_importing_the_collector_never_imports_nvml():
    code = ("import sys; import gpuflow.collectors.cupti.plugin, gpuflow.collectors.cupti.collector; "
            "print(any(m.startswith(('gpuflow.collectors.nvml', 'pynvml')) for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
