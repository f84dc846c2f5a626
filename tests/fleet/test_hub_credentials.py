"""The hub's credentials file is read again when it changes: a rotated token reaches its agent at
the link's next dial, without restarting the hub; a new version that cannot be used (not JSON, a
bad token, readable by others) keeps the tokens read before and says so in one line, which goes
when a good version comes. Real agents whose token changes (restarted on the same port)."""

from __future__ import annotations

import json
import os

import pytest

from fleet_agents import Agent, Hub, wait_for

OLD = "Hq7-rotate-old-Zx2vLm9Rk4tW"
NEW = "Pw3-rotate-new-Yc8nQs1Tj6uE"
INTERVAL_MS = 200


@pytest.fixture
def parts():
    made: list = []
    yield made
    for part in reversed(made):
        part.stop()


def write_private(path, doc) -> None:
    """As a secret is rotated: a new private file renamed over the old one."""
    fresh = path.with_name(path.name + ".new")
    fresh.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    fresh.chmod(0o600)
    os.replace(fresh, path)


def problems(hub: Hub) -> list[str]:
    return [p["message"] for p in hub.snapshot()["host"]["problems"] if "credentials file" in p["message"]]


def restart_with(agent: Agent, token: str) -> None:
    agent.stop()
    agent.env["GPUFLOW_TOKEN"] = token
    agent.start()


def test_a_rotated_token_reaches_its_agent_at_the_next_dial(parts, tmp_path):
    a = Agent("node-a", interval_ms=INTERVAL_MS, env={"GPUFLOW_TOKEN": OLD})
    parts.append(a)
    creds = tmp_path / "credentials.json"
    write_private(creds, {f"127.0.0.1:{a.port}": OLD})
    hub = Hub(a.url, args=("--credentials", str(creds)))
    parts.append(hub)
    up, _ = hub.wait_host("node-a", "up", 15)

    write_private(creds, {f"127.0.0.1:{a.port}": NEW})   # the secret rotated, then the agent
    wait_for(lambda: not problems(hub), 5, what="no problem")
    restart_with(a, NEW)
    again, _ = hub.wait_host("node-a", "up", 20)
    assert again["boot_epoch"] > up["boot_epoch"]   # the restarted agent took the new token
    assert not any("refused" in p["message"] for p in again["problems"])


@pytest.mark.parametrize("bad, says", [
    ("{not json", "not JSON"),
    ({"*": "two words"}, "printable ASCII characters without spaces"),
    ("readable", "other users have access to it"),
])
def test_a_bad_new_version_keeps_the_tokens_before_and_says_so(parts, tmp_path, bad, says):
    a = Agent("node-a", interval_ms=INTERVAL_MS, env={"GPUFLOW_TOKEN": OLD})
    parts.append(a)
    creds = tmp_path / "credentials.json"
    write_private(creds, {"*": OLD})
    hub = Hub(a.url, args=("--credentials", str(creds)))
    parts.append(hub)
    before, _ = hub.wait_host("node-a", "up", 15)
    if bad == "readable":   # the same tokens, a mode every user may read: refused as at start
        write_private(creds, {"*": NEW})
        creds.chmod(0o644)
    else:
        write_private(creds, bad)
    line = wait_for(lambda: problems(hub), 5, what="the credentials' problem")[0]
    assert says in line and line.endswith("the tokens read before are kept")
    assert OLD not in line and NEW not in line
    restart_with(a, OLD)   # the next dial still carries the token read before
    again, _ = hub.wait_host("node-a", "up", 20)
    assert again["boot_epoch"] > before["boot_epoch"]
    write_private(creds, {"*": OLD})
    wait_for(lambda: not problems(hub), 5, what="the problem gone with a good version")
