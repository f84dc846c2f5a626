"""The hub as it is deployed: ``gpuflow hub`` refusing bad flags and files in one line, and the hub
under real gunicorn (``get_app()`` with ``GPUFLOW_HUB_*``) following an agent that is itself real
gunicorn serving https, with its token from the credentials file and the CA from ``--ca-file``'s
variable; the same Host, token and public-bind rules as any agent."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cli_process import gpuflow, gpuflow_env
from fleet_agents import wait_for
from servers import FAKE_ENV, ROOT, free_port, http_get, wait_listening

AGENT_TOKEN = "Vb6-tls-agent-Kq3mWz8Rt1yP"
HUB_TOKEN = "Jd4-the-hub-itself-Lp7xNc2Sv9"


# -- the command line ------------------------------------------------------------------------------
@pytest.fixture
def files(tmp_path):
    (tmp_path / "bad.json").write_text("[{\"targets\": [\"gpu-node-1\"]}]")
    (tmp_path / "ok.json").write_text("[{\"targets\": [\"127.0.0.1:9\"]}]")
    loose = tmp_path / "loose-creds.json"
    loose.write_text(json.dumps({"*": AGENT_TOKEN}))
    loose.chmod(0o644)
    (tmp_path / "not-a-ca.pem").write_text("hello\n")
    return tmp_path


@pytest.mark.parametrize("args, env, says", [
    ((), {}, "no agent to follow: give --targets FILE"),
    (("--target", "ftp://gpu-node-1:7717"), {}, "--target: the scheme must be http or https"),
    (("--target", f"http://me:{AGENT_TOKEN}@gpu-node-1:7717"), {}, "--target: no credentials in a URL"),
    (("--targets", "{tmp}/missing.json"), {}, "--targets: targets file {tmp}/missing.json: No such file"),
    (("--targets", "{tmp}/bad.json"), {}, "port is missing"),
    (("--targets", "{tmp}/ok.json", "--credentials", "{tmp}/loose-creds.json"), {}, "--credentials: file {tmp}/loose-creds.json: other users have access"),
    (("--targets", "{tmp}/ok.json", "--ca-file", "{tmp}/not-a-ca.pem"), {}, "--ca-file: no CA certificates"),
    (("--targets", "{tmp}/ok.json"), {"GPUFLOW_HUB_MAX_CONNECTING": "0"}, "GPUFLOW_HUB_MAX_CONNECTING: must be between 1 and 1024"),
    (("--targets", "{tmp}/ok.json", "--bind", "0.0.0.0"), {}, "--bind 0.0.0.0 is reachable from other machines"),
])
def test_a_bad_flag_or_file_stops_the_hub_in_one_line(files, args, env, says):
    args = tuple(a.format(tmp=files) for a in args)
    result = gpuflow("hub", "--port", "0", *args, env=gpuflow_env(**env))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith("gpuflow hub: error: ") and says.format(tmp=files) in lines[0], lines[0]
    assert AGENT_TOKEN not in result.stderr + result.stdout and "Traceback" not in result.stderr
    assert "http://" not in result.stdout   # nothing was served


# -- under gunicorn, over TLS ----------------------------------------------------------------------
def gunicorn(env: dict, *args: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "python:gpuflow.transport.gunicorn_conf",
                             "gpuflow.transport.app:get_app()", "-k", "gthread", "--workers", "1",
                             "--threads", "16", "--graceful-timeout", "3", "--no-control-socket",
                             "--log-level", "warning", "-b", f"127.0.0.1:{port}", *args],
                            env=full, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    wait_listening(port, proc)
    return proc, port


def stop(proc: subprocess.Popen) -> str:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return proc.stdout.read()


@pytest.fixture(scope="module")
def tls_agent(tmp_path_factory):
    """A real gunicorn agent (the fake collector) serving https with a certificate for 127.0.0.1."""
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", str(d / "key.pem"), "-out", str(d / "cert.pem"), "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    env = {**FAKE_ENV, "NODE_NAME": "tls-node", "GPUFLOW_TOKEN": AGENT_TOKEN, "GPUFLOW_INTERVAL_MS": "200"}
    proc, port = gunicorn(env, "--certfile", str(d / "cert.pem"), "--keyfile", str(d / "key.pem"))
    creds = d / "creds.json"
    creds.write_text(json.dumps({f"127.0.0.1:{port}": AGENT_TOKEN}))
    creds.chmod(0o600)
    yield {"port": port, "ca": str(d / "cert.pem"), "creds": str(creds)}
    stop(proc)


def hub_env(tls_agent, **extra) -> dict:
    return {"GPUFLOW_HUB_TARGETS": f"https://127.0.0.1:{tls_agent['port']}",
            "GPUFLOW_HUB_CREDENTIALS": tls_agent["creds"], "GPUFLOW_DISABLED_PLUGINS": "nvml,cupti,pmsampling",
            "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1", "GPUFLOW_TOKEN": HUB_TOKEN, **extra}


def get(port: int, path: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
    """A GET with time for a loaded machine: the worker starts the hub (imports aiohttp) first."""
    return http_get(port, path, headers=headers, timeout=30)


def hub_hosts(port: int) -> dict:
    status, _, body = get(port, "/api/snapshot", headers={"Authorization": f"Bearer {HUB_TOKEN}"})
    assert status == 200, status
    return {h["name"]: h for h in json.loads(body)["hosts"]}


def test_a_hub_under_gunicorn_follows_an_https_agent_with_its_token(tls_agent):
    proc, port = gunicorn(hub_env(tls_agent, GPUFLOW_HUB_CA_FILE=tls_agent["ca"]))
    try:
        assert get(port, "/api/snapshot")[0] == 401   # the hub's own token
        assert get(port, "/api/snapshot", headers={"Authorization": f"Bearer {HUB_TOKEN}",
                                                         "Host": "evil.example"})[0] == 403
        host = wait_for(lambda: hub_hosts(port).get("tls-node", {}).get("state") == "up"
                        and hub_hosts(port)["tls-node"], 20, what="tls-node up")
        assert host["address"] == f"https://127.0.0.1:{tls_agent['port']}/"
        status, _, body = get(port, "/metrics", headers={"Authorization": f"Bearer {HUB_TOKEN}"})
        assert status == 200 and b"gpuflow" in body
    finally:
        out = stop(proc)
    assert AGENT_TOKEN not in out


def test_an_https_agent_the_hub_cannot_trust_is_down_and_says_why(tls_agent):
    proc, port = gunicorn(hub_env(tls_agent))   # no CA file: the system's CAs do not know it
    try:
        host = wait_for(lambda: next((h for h in hub_hosts(port).values()
                                      if any("TLS certificate is not trusted" in p["message"] for p in h["problems"])),
                                     None), 20, what="the TLS problem")
        assert host["state"] == "down"
    finally:
        stop(proc)


def test_a_hub_under_gunicorn_on_a_public_bind_needs_a_token_as_an_agent_does(tls_agent):
    env = {k: v for k, v in hub_env(tls_agent).items() if k != "GPUFLOW_TOKEN"}
    port = free_port()
    result = subprocess.run([sys.executable, "-m", "gunicorn", "-c", "python:gpuflow.transport.gunicorn_conf",
                             "gpuflow.transport.app:get_app()", "-k", "gthread", "--workers", "1",
                             "--no-control-socket", "-b", f"0.0.0.0:{port}"],
                            env={**os.environ, "PYTHONPATH": str(ROOT), **env}, cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 4, result.stderr
    assert "refusing to serve: 0.0.0.0 is reachable from other machines" in result.stderr
