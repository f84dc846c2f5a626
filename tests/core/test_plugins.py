"""The plugin manager factory: entry points, blocking, --plugin modules, validation."""

from __future__ import annotations

import textwrap

import pytest

from gpuflow.core.agent import Agent
from gpuflow.core.context import AgentConfig
from gpuflow.core.plugins import DEFAULT_PLUGINS, PluginLoadError, get_plugin_manager

NO_BUILTINS = {"GPUFLOW_DISABLED_PLUGINS": "nvml,cupti", "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1"}

COLLECTOR_SOURCE = textwrap.dedent('''
    """A third-party collector used by the tests."""
    import gpuflow
    from gpuflow.core.snapshot import Device, Problem, SnapshotPart

    @gpuflow.hookimpl
    def produce_snapshot(context):
        return SnapshotPart(
            source="{name}",
            devices=(Device(index=7, uuid="GPU-{name}", name="third-party device"),),
            problems=(Problem("{name}", "hello from a third-party collector", "info"),),
        )
''')


def write_distribution(root, dist_name: str, module: str, plugin_name: str) -> None:
    """A real installed distribution (dist-info on sys.path) with a gpuflow.collectors entry point."""
    (root / f"{module}.py").write_text(COLLECTOR_SOURCE.format(name=plugin_name))
    info = root / f"{dist_name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist_name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[gpuflow.collectors]\n{plugin_name} = {module}\n")


def snapshot_of(pm):
    agent = Agent(AgentConfig(), pm)
    agent.start()
    try:
        return agent.board.latest()
    finally:
        agent.stop()


def test_entry_point_collector_shows_up_in_snapshot(tmp_path, monkeypatch):
    write_distribution(tmp_path, "gpuflow_thirdparty", "gpuflow_thirdparty_collector", "thirdparty")
    monkeypatch.syspath_prepend(str(tmp_path))
    pm = get_plugin_manager(environ={"GPUFLOW_DISABLED_PLUGINS": "nvml,cupti"})
    assert pm.get_plugin("thirdparty") is not None
    snap = snapshot_of(pm)
    assert [d.uuid for d in snap.devices] == ["GPU-thirdparty"]
    assert snap.sources == ("thirdparty",)
    assert snap.problems[0].message == "hello from a third-party collector"


def test_entry_point_collector_can_be_disabled_by_name(tmp_path, monkeypatch):
    write_distribution(tmp_path, "gpuflow_thirdparty2", "gpuflow_thirdparty_collector2", "thirdparty2")
    monkeypatch.syspath_prepend(str(tmp_path))
    pm = get_plugin_manager(environ={"GPUFLOW_DISABLED_PLUGINS": "nvml,cupti,thirdparty2"})
    assert pm.get_plugin("thirdparty2") is None
    assert snapshot_of(pm).devices == ()


def test_autoload_can_be_switched_off(tmp_path, monkeypatch):
    write_distribution(tmp_path, "gpuflow_thirdparty3", "gpuflow_thirdparty_collector3", "thirdparty3")
    monkeypatch.syspath_prepend(str(tmp_path))
    pm = get_plugin_manager(environ=NO_BUILTINS)
    assert pm.get_plugin("thirdparty3") is None


def test_builtins_are_registered_by_name_and_can_each_be_disabled():
    names = [name for name, _ in DEFAULT_PLUGINS]
    assert names == ["nvml", "cupti", "pmsampling", "recording", "fleet"]
    pm = get_plugin_manager(environ={"GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1"})
    for name in names:
        assert pm.get_plugin(name) is not None
    pm = get_plugin_manager(environ={"GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1", "GPUFLOW_DISABLED_PLUGINS": "cupti"})
    assert pm.get_plugin("nvml") is not None and pm.get_plugin("cupti") is None


def test_plugin_option_loads_module_by_import_name(tmp_path, monkeypatch):
    (tmp_path / "my_local_collector.py").write_text(COLLECTOR_SOURCE.format(name="local"))
    monkeypatch.syspath_prepend(str(tmp_path))
    pm = get_plugin_manager(extra_modules=["my_local_collector"], environ=NO_BUILTINS)
    assert snapshot_of(pm).sources == ("local",)


def test_plugin_option_with_missing_module_is_a_clear_error():
    with pytest.raises(PluginLoadError, match="cannot import collector module 'no_such_gpuflow_module'"):
        get_plugin_manager(extra_modules=["no_such_gpuflow_module"], environ=NO_BUILTINS)


def test_misspelled_hook_is_rejected_by_check_pending(tmp_path, monkeypatch):
    (tmp_path / "typo_collector.py").write_text(
        "import gpuflow\n@gpuflow.hookimpl\ndef produce_snapshots(context):\n    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginLoadError, match="produce_snapshots"):
        get_plugin_manager(extra_modules=["typo_collector"], environ=NO_BUILTINS)


def test_plugin_option_with_a_module_that_has_no_hooks_is_refused():
    with pytest.raises(PluginLoadError, match="'json' is not a GPUFlow collector"):
        get_plugin_manager(extra_modules=["json"], environ=NO_BUILTINS)
