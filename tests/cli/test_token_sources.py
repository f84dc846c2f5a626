"""Where ``gpuflow watch`` takes its token from, and what it refuses, through the real command.

A token on the command line is readable by every local user (``/proc/<pid>/cmdline``), so it
also comes from a file (``--token-file``, judged on the opened descriptor: a regular file of the
user's own, no access for group or others) or the environment (``GPUFLOW_TOKEN``, which the CLI
used to ignore and serve without authentication). ``--token auto`` generates one and prints it
once, in the login URL. Weak tokens are refused on a bind other machines can reach; malformed
ones everywhere. The settings the CLI and gunicorn read are the same (``GPUFLOW_ALLOW_HOSTS``
too), the flags overriding the variables.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest

from cli_process import gpuflow, gpuflow_env, start_gpuflow, stop_gpuflow
from servers import FAKE_ENV, SseClient, http_get

STRONG = "q7Xf-2LpZr_9vKmW4tYb8NcE"
FAKE = ["--plugin", "gpuflow.testing.fake_collector"]


def env(**extra: str) -> dict[str, str]:
    return gpuflow_env(**{k: v for k, v in FAKE_ENV.items() if k != "GPUFLOW_PLUGINS"}, **extra)


def token_file(tmp_path: Path, token: str = STRONG, mode: int = 0o600, name: str = "token") -> Path:
    path = tmp_path / name
    path.write_text(token + "\n")
    path.chmod(mode)
    return path


def status(port: int, path: str = "/api/snapshot", token: str | None = None, host: str | None = None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    if host is not None:
        headers["Host"] = host
    return http_get(port, path, headers)[0]


def serve(*flags: str, **variables: str):
    """gpuflow watch on a free port with the fake collector: (process, port)."""
    return start_gpuflow("watch", "--port", "0", *FAKE, *flags, env=env(**variables))


def refused(*flags: str, **variables: str) -> str:
    """Runs gpuflow watch, which must refuse at once: its one line on stderr."""
    result = gpuflow("watch", "--port", "0", *FAKE, *flags, env=env(**variables), timeout=30)
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuflow watch: error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_gpuflow_token_variable_protects_gpuflow_watch():
    proc, port = serve(GPUFLOW_TOKEN=STRONG)
    try:
        assert status(port) == 401
        assert status(port, token=STRONG) == 200
        assert status(port, token=STRONG + "x") == 401
    finally:
        out = stop_gpuflow(proc, signal.SIGTERM)
    assert STRONG not in out, "a token the user gave is never printed"
    assert "the page asks for the token (from GPUFLOW_TOKEN)" in out


def test_token_file_is_read_and_its_token_works(tmp_path):
    path = token_file(tmp_path)
    proc, port = serve("--token-file", str(path))
    try:
        assert status(port) == 401 and status(port, token=STRONG) == 200
    finally:
        out = stop_gpuflow(proc, signal.SIGTERM)
    assert STRONG not in out and "warning" not in out


def test_token_file_variable_is_read_too(tmp_path):
    path = token_file(tmp_path)
    proc, port = serve(GPUFLOW_TOKEN_FILE=str(path))
    try:
        assert status(port) == 401 and status(port, token=STRONG) == 200
    finally:
        stop_gpuflow(proc, signal.SIGTERM)


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620, 0o602, 0o610, 0o644], ids=lambda m: f"{m:04o}")
def test_token_file_other_users_can_reach_is_refused(tmp_path, mode):
    path = token_file(tmp_path, mode=mode)
    line = refused("--token-file", str(path))
    assert "--token-file" in line and "chmod 600" in line and f"{mode:04o}" in line
    assert STRONG not in line


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_token_file_owned_by_another_user_is_refused(tmp_path):
    path = token_file(tmp_path)
    os.chown(path, 65534, 65534)
    line = refused("--token-file", str(path))
    assert "owned by uid 65534" in line and STRONG not in line


def test_token_file_that_is_a_fifo_or_a_device_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    assert "not a regular file" in refused("--token-file", str(fifo))
    assert "not a regular file" in refused("--token-file", "/dev/zero")
    assert "not a regular file" in refused("--token-file", str(tmp_path))
    assert "No such file" in refused("--token-file", str(tmp_path / "missing"))


def test_token_file_too_large_or_holding_a_bad_token_is_refused(tmp_path):
    big = token_file(tmp_path, "x" * 5000)
    assert "larger than 4096 bytes" in refused("--token-file", str(big))
    spaced = token_file(tmp_path, "two words in a token file", name="spaced")
    line = refused("--token-file", str(spaced))
    assert "printable ASCII" in line and "two words" not in line


def test_token_on_the_command_line_works_and_warns_that_others_can_read_it():
    proc, port = serve("--token", STRONG)
    try:
        assert status(port, token=STRONG) == 200 and status(port) == 401
    finally:
        out = stop_gpuflow(proc, signal.SIGTERM)
    warning = [line for line in out.splitlines() if "--token is on the command line" in line]
    assert len(warning) == 1 and "--token-file" in warning[0]


def test_generated_token_is_printed_once_in_the_login_url_and_works():
    proc, port = serve("--token", "auto")
    try:
        m = re.search(r"http://\S+/#token=(\S+)", proc.printed)
        assert m, proc.printed
        token = unquote(m.group(1))
        assert len(token) >= 43 and token != "auto"
        assert status(port, token=token) == 200 and status(port, token="auto") == 401
    finally:
        out = stop_gpuflow(proc, signal.SIGTERM)
    assert out.count(token) == 1, "the generated token is printed exactly once"
    assert "--token is on the command line" not in out


WEAK = ["a", "password", "0123456789abcdef", "aaaaaaaaaaaaaaaaaaaaaaaa", "password12345678",
        "gpuflowgpuflowgpuflow", "P@ssw0rd!P@ssw0rd!", "Summer2024!Summer2024!", "hardening-" + "k" * 40]


@pytest.mark.parametrize("token", WEAK)
def test_weak_token_is_refused_on_a_bind_other_machines_can_reach(token):
    line = refused("--bind", "0.0.0.0", GPUFLOW_TOKEN=token)
    assert "too weak" in line and "0.0.0.0" in line
    assert len(token) < 4 or token not in line


def test_weak_token_on_loopback_serves_and_warns():
    proc, port = serve(GPUFLOW_TOKEN="password")
    try:
        assert status(port, token="password") == 200
    finally:
        out = stop_gpuflow(proc, signal.SIGTERM)
    assert "the token is weak" in out and "password" not in out


@pytest.mark.parametrize("token,why", [
    ("two words", "printable ASCII"), ("tab\there-and-more-text", "printable ASCII"),
    ("é" * 20, "printable ASCII"), ("x" * 1025, "longer than 1024"), ("", "must not be empty"),
])
def test_malformed_token_is_refused_on_any_bind(token, why):
    line = refused("--token", token)
    assert why in line
    if token:
        assert token not in line


def test_token_flag_and_file_together_are_refused(tmp_path):
    assert "not both" in refused("--token", STRONG, "--token-file", str(token_file(tmp_path)))
    assert "not both" in refused(GPUFLOW_TOKEN=STRONG, GPUFLOW_TOKEN_FILE=str(token_file(tmp_path)))


def test_a_public_bind_takes_a_strong_token_from_the_environment():
    proc, port = serve("--bind", "0.0.0.0", GPUFLOW_TOKEN=STRONG)
    try:
        assert status(port) == 401 and status(port, token=STRONG) == 200
    finally:
        stop_gpuflow(proc, signal.SIGTERM)


def test_flags_override_variables(tmp_path):
    other = secrets.token_urlsafe(24)
    proc, port = serve("--token-file", str(token_file(tmp_path)), "--allow-host", "flag-host",
                       GPUFLOW_TOKEN=other, GPUFLOW_ALLOW_HOSTS="variable-host")
    try:
        assert status(port, token=STRONG) == 200 and status(port, token=other) == 401
        assert status(port, token=STRONG, host="flag-host") == 200
        assert status(port, token=STRONG, host="variable-host") == 403
    finally:
        stop_gpuflow(proc, signal.SIGTERM)


def test_the_cli_reads_the_transport_variables_gunicorn_reads():
    proc, port = serve(GPUFLOW_ALLOW_HOSTS="gpu-node", GPUFLOW_MAX_STREAMS="1")
    first = None
    try:
        assert status(port, "/healthz", host="gpu-node:7717") == 200
        assert status(port, "/healthz", host="elsewhere") == 403
        first = SseClient(port)
        assert first.status == 200
        second = SseClient(port)
        assert second.status == 503, "GPUFLOW_MAX_STREAMS=1 holds under gpuflow watch"
        second.close()
    finally:
        if first is not None:
            first.close()
        stop_gpuflow(proc, signal.SIGTERM)


def test_token_file_permissions_are_judged_on_what_is_opened(tmp_path):
    """A symlink to a private file is the private file; a private link to a shared file is not."""
    private = token_file(tmp_path, name="private")
    link = tmp_path / "link"
    link.symlink_to(private)
    proc, port = serve("--token-file", str(link))
    try:
        assert status(port, token=STRONG) == 200
    finally:
        stop_gpuflow(proc, signal.SIGTERM)
    shared = token_file(tmp_path, mode=0o644, name="shared")
    (tmp_path / "link2").symlink_to(shared)
    assert stat.S_IMODE(os.lstat(tmp_path / "link2").st_mode) == 0o777
    assert "0644" in refused("--token-file", str(tmp_path / "link2"))


def test_the_program_gpuflow_run_launches_does_not_inherit_the_token():
    """A traced program is the user's, but it need not hold the agent's token: it may log its
    environment, or hand it to children and containers."""
    result = gpuflow("run", "--port", "0", "--no-summary", "--", "sh", "-c", 'echo "seen=${GPUFLOW_TOKEN-unset}"',
                     env=env(GPUFLOW_TOKEN=STRONG), timeout=60)
    assert result.returncode == 0, result.stderr
    assert "seen=unset" in result.stdout and STRONG not in result.stdout


SNOOP = r"""
import json, sys, urllib.request, urllib.error
pid, port = sys.argv[1], sys.argv[2]
found = {"cmdline": open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace").split("\0")}
try:
    found["environ"] = open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace")
except PermissionError:
    found["environ"] = None
opened = []
for word in found["cmdline"] + (found["environ"] or "").split("="):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/snapshot", headers={"Authorization": "Bearer " + word})
    try:
        urllib.request.urlopen(req, timeout=5)
        opened.append(word)
    except urllib.error.HTTPError:
        pass
print(json.dumps({"environ_readable": found["environ"] is not None, "opened_with": opened}))
"""


#: the system's interpreter: another user may not reach the one running the tests (SNOOP needs
#: only the standard library)
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")


def as_another_user(*argv: str) -> dict:
    """Runs SNOOP as uid/gid 65534, another local user."""
    def drop() -> None:
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    out = subprocess.run([SYSTEM_PYTHON, "-c", SNOOP, *argv], preexec_fn=drop, capture_output=True,
                         text=True, timeout=60, cwd="/", env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.skipif(os.geteuid() != 0 or SYSTEM_PYTHON is None,
                    reason="playing another local user needs root and a system python3")
@pytest.mark.parametrize("how", ["--token-file", "GPUFLOW_TOKEN", "--token"])
def test_what_another_local_user_can_read_of_the_token(tmp_path, how):
    if how == "--token-file":
        proc, port = serve("--token-file", str(token_file(tmp_path)))
    elif how == "GPUFLOW_TOKEN":
        proc, port = serve(GPUFLOW_TOKEN=STRONG)
    else:
        proc, port = serve("--token", STRONG)
    try:
        seen = as_another_user(str(proc.pid), str(port))
    finally:
        stop_gpuflow(proc, signal.SIGTERM)
    assert not seen["environ_readable"]
    if how == "--token":   # what the warning says: the command line gives it away
        assert seen["opened_with"] == [STRONG]
    else:
        assert seen["opened_with"] == []
