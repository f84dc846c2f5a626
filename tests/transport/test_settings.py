"""Settings from the environment, and get_app(): builds everything, starts nothing until asked."""

from __future__ import annotations

import pytest
from falcon import testing

from gpuflow.core.plugins import PluginLoadError
from gpuflow.transport import app as app_module
from gpuflow.transport.settings import AppSettings, from_environ


def test_defaults_are_safe():
    env = from_environ({})
    s = env.settings
    assert s.token is None and s.allow_hosts == () and not s.metrics_per_process
    assert s.max_streams == 60 and env.plugins == ()
    assert env.agent.interval_s == 1.0 and not env.agent.show_cmdline


def test_every_variable_is_read():
    env = from_environ({
        "GPUFLOW_INTERVAL_MS": "250", "GPUFLOW_PLUGINS": "a.b, c ,", "GPUFLOW_TOKEN": "t",
        "GPUFLOW_ALLOW_HOSTS": "gpu-node,*.lab", "GPUFLOW_SHOW_CMDLINE": "yes",
        "GPUFLOW_METRICS_PER_PROCESS": "1", "GPUFLOW_MAX_STREAMS": "200", "GPUFLOW_UI": "/x.html",
        "GPUFLOW_PING_S": "2", "GPUFLOW_MAX_STREAM_AGE_S": "60",
    })
    s, a = env.settings, env.agent
    assert env.plugins == ("a.b", "c")
    assert (s.token, s.allow_hosts, s.metrics_per_process, s.max_streams, s.ui_path) == \
        ("t", ("gpu-node", "*.lab"), True, 200, "/x.html")
    assert (s.ping_interval_s, s.max_stream_age_s) == (2.0, 60.0)
    assert (a.interval_s, a.show_cmdline, a.options) == (0.25, True, {})


@pytest.mark.parametrize("name,value", [
    ("GPUFLOW_INTERVAL_MS", "fast"), ("GPUFLOW_INTERVAL_MS", "0"), ("GPUFLOW_MAX_STREAMS", "0"),
    ("GPUFLOW_SHOW_CMDLINE", "maybe"),
])
def test_bad_values_name_the_variable(name, value):
    with pytest.raises(ValueError, match=name):
        from_environ({name: value})


def test_star_host_without_token_is_refused():
    with pytest.raises(ValueError, match="token"):
        from_environ({"GPUFLOW_ALLOW_HOSTS": "*"})
    assert from_environ({"GPUFLOW_ALLOW_HOSTS": "*", "GPUFLOW_TOKEN": "t"}).settings.allow_hosts == ("*",)


def test_settings_validate():
    with pytest.raises(ValueError):
        AppSettings(max_streams=0)
    with pytest.raises(ValueError):
        AppSettings(token="")


STRONG = "Zq7-Lp2_xK9vW4tYb8NcE3uR"


def test_flags_override_their_variables_and_leave_the_others():
    env = {"GPUFLOW_TOKEN": "from-the-environment-1", "GPUFLOW_ALLOW_HOSTS": "a,b", "GPUFLOW_MAX_STREAMS": "7",
           "GPUFLOW_INTERVAL_MS": "500", "GPUFLOW_UI": "/env.html"}
    got = from_environ(env, {"token": STRONG, "allow_hosts": ("c",), "interval_s": 0.25, "show_cmdline": True})
    s, a = got.settings, got.agent
    assert (s.token, s.allow_hosts, s.max_streams, s.ui_path) == (STRONG, ("c",), 7, "/env.html")
    assert (a.interval_s, a.show_cmdline, got.token_source) == (0.25, True, "--token")
    assert from_environ(env).settings.token == "from-the-environment-1"
    assert from_environ(env).token_source == "GPUFLOW_TOKEN"


def test_a_flag_can_fix_what_its_variable_got_wrong():
    """Settings are checked once, after the flags are applied."""
    assert from_environ({"GPUFLOW_ALLOW_HOSTS": "*"}, {"allow_hosts": ("gpu-node",)}).settings.allow_hosts == \
        ("gpu-node",)


def test_token_sources(tmp_path):
    path = tmp_path / "token"
    path.write_text(STRONG + "\r\n")
    path.chmod(0o600)
    assert from_environ({"GPUFLOW_TOKEN_FILE": str(path)}).settings.token == STRONG
    got = from_environ({"GPUFLOW_TOKEN": "x" * 20}, {"token_file": str(path)})
    assert (got.settings.token, got.token_source) == (STRONG, "--token-file")
    generated = from_environ({}, {"token": "auto"})
    assert generated.token_source == "generated" and len(generated.settings.token) == 43
    assert from_environ({"GPUFLOW_TOKEN": "auto"}).token_source == "generated"
    with pytest.raises(ValueError, match="gunicorn"):
        from_environ({"GPUFLOW_TOKEN": "auto"}, may_generate=False)
    with pytest.raises(ValueError, match="not both"):
        from_environ({"GPUFLOW_TOKEN": STRONG, "GPUFLOW_TOKEN_FILE": str(path)})
    with pytest.raises(ValueError, match="not both"):
        from_environ({}, {"token": STRONG, "token_file": str(path)})
    with pytest.raises(ValueError, match="printable ASCII"):
        from_environ({"GPUFLOW_TOKEN": "with space"})
    assert from_environ({"GPUFLOW_TOKEN": ""}).settings.token is None


def test_insecure_opt_out_is_read_from_its_variable_or_its_flag():
    assert from_environ({"GPUFLOW_INSECURE_NO_AUTH": "1"}).settings.insecure_no_auth
    assert from_environ({}, {"insecure_no_auth": True}).settings.insecure_no_auth
    assert not from_environ({}).settings.insecure_no_auth
    with pytest.raises(ValueError, match="GPUFLOW_INSECURE_NO_AUTH"):
        from_environ({"GPUFLOW_INSECURE_NO_AUTH": "maybe"})


def test_only_known_settings_can_be_overridden():
    with pytest.raises(TypeError, match="max_stream"):
        from_environ({}, {"max_stream": 3})


@pytest.fixture
def live_apps(monkeypatch):
    monkeypatch.setattr(app_module, "LIVE_APPS", [])
    monkeypatch.setattr(app_module.atexit, "register", lambda fn: None)
    return app_module.LIVE_APPS


def test_get_app_starts_nothing_until_the_first_request(fake_env, monkeypatch, live_apps):
    monkeypatch.setenv("GPUFLOW_FAKE_RATE_HZ", "0")
    app = app_module.get_app()
    try:
        assert live_apps == [app]
        agent = app.state.agent
        assert not agent.running and agent.board.latest() is None
        r = testing.TestClient(app, headers={"Host": "localhost"}).simulate_get("/api/snapshot")
        assert r.status_code == 200 and r.json["sources"] == ["fake"]
        assert agent.running
    finally:
        app.close()
    assert not agent.running


def test_get_app_refused_host_does_not_start_the_agent(fake_env, live_apps):
    app = app_module.get_app()
    r = testing.TestClient(app, headers={"Host": "evil.example"}).simulate_get("/api/snapshot")
    assert r.status_code == 403 and not app.state.agent.running


def test_get_app_bad_plugin_fails_at_load(fake_env, monkeypatch, live_apps):
    monkeypatch.setenv("GPUFLOW_PLUGINS", "no_such_module_here")
    with pytest.raises(PluginLoadError, match="no_such_module_here"):
        app_module.get_app()


def test_get_app_gives_each_plugin_its_own_variables(fake_env, monkeypatch, live_apps):
    """GPUFLOW_RING_CAPACITY and GPUFLOW_RING_SOCKET are the CUPTI plugin's, read and checked by it."""
    from gpuflow.collectors.cupti.options import OPTIONS

    monkeypatch.setenv("GPUFLOW_DISABLED_PLUGINS", "nvml")
    monkeypatch.setenv("GPUFLOW_RING_CAPACITY", "1024")
    monkeypatch.setenv("GPUFLOW_RING_SOCKET", "/run/user/1000/gpuflow/ring.sock")
    app = app_module.get_app()
    values = app.state.agent.context.plugin_options(OPTIONS)
    assert (values["ring_capacity"], values["ring_socket"]) == (1024, "/run/user/1000/gpuflow/ring.sock")


@pytest.mark.parametrize("name,value", [("GPUFLOW_RING_CAPACITY", "1000"), ("GPUFLOW_RING_SOCKET", "ring.sock"),
                                        ("GPUFLOW_FAKE_GPUS", "two")])
def test_get_app_refuses_a_bad_plugin_variable_naming_it(fake_env, monkeypatch, live_apps, name, value):
    monkeypatch.setenv("GPUFLOW_DISABLED_PLUGINS", "nvml")
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name):
        app_module.get_app()
    assert live_apps == []


def test_app_does_not_stop_an_agent_it_did_not_start(fake_env, monkeypatch, live_apps):
    monkeypatch.setenv("GPUFLOW_FAKE_RATE_HZ", "0")
    from gpuflow.core.agent import Agent
    from gpuflow.core.context import AgentConfig
    from gpuflow.core.plugins import get_plugin_manager

    agent = Agent(AgentConfig(), get_plugin_manager(["gpuflow.testing.fake_collector"]))
    agent.start()
    try:
        app = app_module.create_app(agent, settings=AppSettings())
        testing.TestClient(app, headers={"Host": "localhost"}).simulate_get("/healthz")
        app.close()
        assert agent.running
    finally:
        agent.stop()
