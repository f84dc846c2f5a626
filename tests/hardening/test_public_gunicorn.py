"""gunicorn bound where other machines can reach it, started as the README shows, with a real
gunicorn: without a token it does not serve, whatever Host header a client sends.

The Host allow-list stops DNS rebinding in browsers; a direct client sends ``Host: 127.0.0.1``
and used to get the full snapshot from a public bind. Now a worker listening on a non-loopback
address (``0.0.0.0``, or this machine's own LAN address) without a strong token logs one line and
exits before it serves, and gunicorn stops with status 4 ("App failed to load"); with a strong
token, or the explicit ``GPUFLOW_INSECURE_NO_AUTH=1`` (logged loudly), it serves. Under
``--preload`` the worker is judged by gunicorn_conf.py's hook the same way, and without that
file on every request (503 with the same line).
"""

from __future__ import annotations

import http.client
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from servers import FAKE_ENV, ROOT, free_port, http_get

STRONG = "Zq7-Lp2_xK9vW4tYb8NcE3uR"
APP_LOAD_ERROR = 4


def lan_address() -> str | None:
    """A non-loopback address of this machine (the route to a TEST-NET address; nothing is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
        except OSError:
            return None
        address = s.getsockname()[0]
    return None if ipaddress.ip_address(address).is_loopback or address == "0.0.0.0" else address


PUBLIC = ["0.0.0.0"] + ([lan_address()] if lan_address() else [])


class Gunicorn:
    """``gunicorn -c python:gpuflow.transport.gunicorn_conf 'gpuflow.transport.app:get_app()' -b ADDR:PORT``."""

    def __init__(self, bind: str, env: dict[str, str] | None = None, *extra: str, conf: bool = True) -> None:
        self.port = free_port()
        self.reach = "127.0.0.1" if bind == "0.0.0.0" else bind
        full = dict(os.environ, **FAKE_ENV, GPUFLOW_FAKE_RATE_HZ="10")
        full["PYTHONPATH"] = str(ROOT) + os.pathsep + full.get("PYTHONPATH", "")
        full.update(env or {})
        cmd = [sys.executable, "-m", "gunicorn", *(["-c", "python:gpuflow.transport.gunicorn_conf"] if conf else []),
               "gpuflow.transport.app:get_app()", "-k", "gthread", "--workers", "1", "--threads", "64",
               "--no-control-socket", "--log-level", "warning", "-b", f"{bind}:{self.port}", *extra]
        self.proc = subprocess.Popen(cmd, env=full, cwd=ROOT, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def get(self, path: str, token: str | None = None) -> tuple[int, bytes] | None:
        """A request with a loopback Host header, as an attacker sends it; None if not answered."""
        headers = {"Host": f"127.0.0.1:{self.port}"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        try:
            status, _, body = http_get(self.port, path, headers, host=self.reach, timeout=2)
        except (OSError, http.client.HTTPException):
            return None
        return status, body

    def answers(self, path: str = "/healthz", token: str | None = None, timeout: float = 20) -> tuple[int, bytes]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.output()
            got = self.get(path, token)
            if got is not None and got[0] != 503:
                return got
            time.sleep(0.1)
        raise AssertionError("gunicorn did not answer in time:\n" + self.stop())

    def exit_status_without_serving(self, timeout: float = 30) -> int:
        """Polls /api/snapshot until gunicorn exits: it must never have answered it with data."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            assert time.monotonic() < deadline, "gunicorn still running:\n" + self.stop()
            got = self.get("/api/snapshot")
            assert got is None or got[0] != 200, f"served the snapshot: {got}"
            time.sleep(0.05)
        return self.proc.returncode

    def output(self) -> str:
        return self.proc.stdout.read() if self.proc.poll() is not None else ""

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.stdout.read()


def refusal_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if "gpuflow: refusing to serve" in line]


@pytest.mark.parametrize("bind", PUBLIC)
def test_public_bind_without_a_token_exits_before_serving(bind):
    g = Gunicorn(bind)
    assert g.exit_status_without_serving() == APP_LOAD_ERROR
    out = g.output()
    lines = refusal_lines(out)
    assert len(lines) == 1, out
    assert bind in lines[0] and "GPUFLOW_TOKEN" in lines[0] and "GPUFLOW_INSECURE_NO_AUTH=1" in lines[0]
    assert "Traceback" not in out


@pytest.mark.parametrize("token", ["password", "abcdefabcdefabcdef", "gpuflow-gpuflow-gpuflow"])
def test_public_bind_with_a_weak_token_exits_before_serving(token):
    g = Gunicorn("0.0.0.0", {"GPUFLOW_TOKEN": token})
    assert g.exit_status_without_serving() == APP_LOAD_ERROR
    lines = refusal_lines(g.output())
    assert len(lines) == 1 and "too weak" in lines[0] and token not in lines[0]


@pytest.mark.parametrize("bind", PUBLIC)
def test_public_bind_with_a_strong_token_serves_only_with_it(bind):
    g = Gunicorn(bind, {"GPUFLOW_TOKEN": STRONG})
    try:
        assert g.answers("/healthz", STRONG)[0] == 200
        assert g.get("/api/snapshot")[0] == 401
        status, body = g.get("/api/snapshot", STRONG)
        assert status == 200 and b'"devices"' in body
    finally:
        out = g.stop()
    assert not refusal_lines(out)


def test_a_token_file_works_under_gunicorn_too(tmp_path):
    path = tmp_path / "token"
    path.write_text(STRONG + "\n")
    path.chmod(0o600)
    g = Gunicorn("0.0.0.0", {"GPUFLOW_TOKEN_FILE": str(path)})
    try:
        assert g.answers("/healthz", STRONG)[0] == 200 and g.get("/api/snapshot")[0] == 401
    finally:
        g.stop()


def test_the_insecure_opt_out_serves_and_says_so_loudly():
    g = Gunicorn("0.0.0.0", {"GPUFLOW_INSECURE_NO_AUTH": "1"})
    try:
        assert g.answers("/api/snapshot")[0] == 200
    finally:
        out = g.stop()
    warnings = [line for line in out.splitlines() if "WITHOUT AUTHENTICATION" in line]
    assert len(warnings) == 1 and "[ERROR]" in warnings[0] and "0.0.0.0" in warnings[0], out


def test_loopback_bind_without_a_token_still_serves():
    g = Gunicorn("127.0.0.1")
    try:
        assert g.answers("/api/snapshot")[0] == 200
    finally:
        out = g.stop()
    assert not refusal_lines(out)


def test_preload_with_the_config_file_refuses_at_worker_start():
    g = Gunicorn("0.0.0.0", {}, "--preload")
    assert g.exit_status_without_serving() == APP_LOAD_ERROR
    assert len(refusal_lines(g.output())) == 1


def test_preload_without_the_config_file_answers_503_with_the_reason():
    g = Gunicorn("0.0.0.0", {}, "--preload", conf=False)
    try:
        deadline = time.monotonic() + 20
        got = None
        while time.monotonic() < deadline and got is None:
            got = g.get("/api/snapshot")
            time.sleep(0.1)
        assert got is not None and got[0] == 503, got
        assert b"refusing to serve" in got[1] and b"GPUFLOW_INSECURE_NO_AUTH=1" in got[1]
        assert g.get("/healthz")[0] == 503 and g.get("/")[0] == 503
    finally:
        out = g.stop()
    assert len(refusal_lines(out)) == 1, out


def test_a_ui_file_that_is_not_a_regular_file_stops_gunicorn(tmp_path):
    fifo = tmp_path / "page.html"
    os.mkfifo(fifo)
    g = Gunicorn("127.0.0.1", {"GPUFLOW_UI": str(fifo)})
    assert g.exit_status_without_serving() == APP_LOAD_ERROR
    lines = refusal_lines(g.output())
    assert len(lines) == 1 and "GPUFLOW_UI" in lines[0] and "not a regular file" in lines[0]
