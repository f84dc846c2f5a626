"""Bad input to the CLI: one clear line on stderr and exit status 2, nothing started."""

from __future__ import annotations

import socket

import pytest

from cli_process import gpuflow

BAD = [
    (["watch", "--bogus"], "unrecognized arguments: --bogus"),
    (["watch", "--interval", "abc"], "whole number of milliseconds"),
    (["watch", "--interval", "0"], "positive number of milliseconds"),
    (["watch", "--interval", "-5"], "positive number of milliseconds"),
    (["watch", "--port", "65536"], "out of range"),
    (["watch", "--port", "http"], "expected a port number"),
    (["watch", "--ring-capacity", "1000"], "power of two"),
    (["watch", "--ring-capacity", "16"], "between"),
    (["watch", "--bind", "not an address"], "bind address"),
    (["watch", "--bind", "0.0.0.0"], "--token"),
    (["watch", "--plugin", "no_such_collector_module"], "cannot import collector module"),
    (["watch", "--ui", "/nonexistent/index.html"], "--ui /nonexistent/index.html"),
    (["run"], "no command given"),
    (["run", "--"], "no command given"),
    (["run", "--flush-ms", "0", "--", "true"], "positive number of milliseconds"),
    (["doctor", "--verbose"], "unrecognized arguments"),
    (["frobnicate"], "invalid choice"),
    ([], "a command is needed"),
]


@pytest.mark.parametrize("argv,message", BAD, ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_bad_input_is_one_line_and_status_2(argv, message):
    result = gpuflow(*argv, timeout=30)
    assert result.returncode == 2, result.stderr
    if message is not None:
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert message in lines[0]
        assert lines[0].startswith("gpuflow")
        assert "Traceback" not in result.stderr


def test_port_in_use_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        result = gpuflow("watch", "--port", str(port), timeout=30)
    assert result.returncode == 2
    assert f"{port}" in result.stderr and "in use" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_version_and_help():
    from gpuflow import __version__

    assert gpuflow("--version").stdout.strip() == f"gpuflow {__version__}"
    for sub in ("watch", "run", "doctor"):
        out = gpuflow(sub, "--help")
        assert out.returncode == 0 and "usage:" in out.stdout


def test_allow_host_star_without_token_is_refused():
    result = gpuflow("watch", "--port", "0", "--allow-host", "*", timeout=30)
    assert result.returncode == 2
    assert "token" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_non_loopback_bind_hosts(monkeypatch):
    from gpuflow.cli.serving import allowed_hosts

    assert allowed_hosts("127.0.0.1", (), None) == ()
    assert allowed_hosts("0.0.0.0", (), "t") == ("*",)
    hosts = allowed_hosts("10.1.2.3", ("proxy.example",), "t")
    assert hosts[0] == "proxy.example" and "10.1.2.3" in hosts
    assert "*" not in hosts
    hosts = allowed_hosts("10.1.2.3", (), None)
    assert "10.1.2.3" in hosts and "*" not in hosts


@pytest.mark.parametrize("argv,message", [
    (["watch", "--interval", "3600001"], "at most 3600000 milliseconds"),
    (["run", "--flush-ms", "4", "--", "true"], "at least 5 milliseconds"),
    (["run", "--flush-ms", "10001", "--", "true"], "at most 10000 milliseconds"),
    (["run", "--summary-json", "/nonexistent-dir/x.json", "--", "true"], "does not exist"),
    (["run", "--summary-json", "/", "--", "true"], "is a directory"),
])
def test_bounds_and_files_checked_before_anything_starts(argv, message):
    result = gpuflow(*argv, timeout=30)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_bracketed_ipv6_bind_is_the_address_inside():
    from gpuflow.cli.options import bind_address
    assert bind_address("[::1]") == "::1" and bind_address("::1") == "::1"
