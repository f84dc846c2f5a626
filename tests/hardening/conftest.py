"""Real agents for the hardening tests: one gunicorn worker and one embedded server, fed by the fake
collector (NVML and CUPTI disabled), each as its own process, as users run them:

* ``python -m gunicorn 'gpuflow.transport.app:get_app()' -k gthread --workers 1 --threads 64
  --no-control-socket -c python:gpuflow.transport.gunicorn_conf``
* ``python -m gpuflow watch --port 0 --plugin gpuflow.testing.fake_collector``

The ``server`` fixture runs a test against both. Servers are shared by the whole session
(starting one takes about a second); tests must leave them healthy, and each bad-input test
checks that they are.
"""

from __future__ import annotations

import signal
import subprocess
from dataclasses import dataclass

import pytest

from cli_process import gpuflow_env, start_gpuflow
from servers import FAKE_ENV, Gunicorn

from .rawhttp import get, one

TOKEN = "hardening-" + "k" * 40


@dataclass
class Agent:
    kind: str  # "gunicorn" or "embedded"
    port: int
    proc: subprocess.Popen
    token: str | None = None

    @property
    def serving_pid(self) -> int:
        """The process that answers requests (gunicorn: its one worker)."""
        if self.kind == "embedded":
            return self.proc.pid
        with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
            return int(f.read().split()[0])

    def healthy(self) -> bool:
        extra = [("Authorization", f"Bearer {self.token}")] if self.token else []
        r = one(self.port, get("/healthz", f"127.0.0.1:{self.port}", *extra))
        return r.status == 200 and self.proc.poll() is None


def start_gunicorn(env: dict | None = None, threads: int = 64) -> tuple[Agent, Gunicorn]:
    g = Gunicorn(env={"GPUFLOW_FAKE_RATE_HZ": "10", **(env or {})}, threads=threads, conf=True)
    return Agent("gunicorn", g.port, g.proc, (env or {}).get("GPUFLOW_TOKEN")), g


def start_embedded(*flags: str, token: str | None = None) -> Agent:
    env = gpuflow_env(**FAKE_ENV, GPUFLOW_FAKE_RATE_HZ="10")
    args = ["watch", "--port", "0", "--plugin", "gpuflow.testing.fake_collector", *flags]
    if token:
        args += ["--token", token]
    proc, port = start_gpuflow(*args, env=env)
    return Agent("embedded", port, proc, token)


def stop_embedded(agent: Agent) -> None:
    if agent.proc.poll() is None:
        agent.proc.send_signal(signal.SIGTERM)
        try:
            agent.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            agent.proc.kill()
            agent.proc.wait()


@pytest.fixture(scope="session")
def gunicorn_agent():
    agent, g = start_gunicorn()
    yield agent
    g.stop()


@pytest.fixture(scope="session")
def embedded_agent():
    agent = start_embedded()
    yield agent
    stop_embedded(agent)


@pytest.fixture(params=["gunicorn", "embedded"])
def server(request) -> Agent:
    agent = request.getfixturevalue(f"{request.param}_agent")
    assert agent.proc.poll() is None, f"the {agent.kind} agent died in an earlier test"
    return agent


@pytest.fixture(scope="session")
def gunicorn_token_agent():
    agent, g = start_gunicorn(env={"GPUFLOW_TOKEN": TOKEN})
    yield agent
    g.stop()


@pytest.fixture(scope="session")
def embedded_token_agent():
    agent = start_embedded(token=TOKEN)
    yield agent
    stop_embedded(agent)


@pytest.fixture(params=["gunicorn", "embedded"])
def token_server(request) -> Agent:
    return request.getfixturevalue(f"{request.param}_token_agent")


def proc_status(pid: int) -> dict[str, str]:
    """``/proc/<pid>/status`` as a dict (Threads, VmRSS, ...)."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out
