"""Wrong values for every flag of ``gpuflow watch``, ``run`` and ``doctor``, and commands that
cannot run: one line on stderr, the right status, no traceback, no ring directory left behind.

tests/cli/test_flags.py has the first cases; these extend them to every flag. Values rejected
by the parser are checked in-process through ``parse_args`` (the first thing the console
script's ``main`` does; an escaping exception fails the test as a traceback would, and a value
wrongly accepted returns instead of starting an agent); values that only fail when the agent
starts, and ``gpuflow run``'s commands, run the real ``python -m gpuflow``.

Exit statuses of ``run`` follow the shell: 127 for a command that is not found (including an
empty or blank name), 126 for one that exists but cannot be executed.
"""

from __future__ import annotations

import re

import pytest

from gpuflow.cli.options import parse_args
from cli_process import gpuflow, gpuflow_env


ENV = gpuflow_env(GPUFLOW_DISABLED_PLUGINS="nvml,cupti")
#: for ``gpuflow run``: the CUPTI plugin prepares each launch (its session, its rings)
RUN_ENV = gpuflow_env(GPUFLOW_DISABLED_PLUGINS="nvml")
SERVING = ["watch", "run"]


def parser_cases() -> list[tuple[list[str], str]]:
    cases: list[tuple[list[str], str]] = []
    for cmd in SERVING:
        tail = ["--", "true"] if cmd == "run" else []
        bad = {
            "--bind": ["", "256.1.1.1", "localhost.evil.com", "gpu-node", "127.0.0.1:80",
                       "1.2.3", "::1::", "[::1", "::1]", "[[::1]]", "[]"],
            "--port": ["-1", "", "1.5", "65536", "99999999999999999999", "http", "1e3", "0x50"],
            "--interval": ["0", "-1", "abc", "1.5", "", "1e3", "nan"],
            "--ring-capacity": ["0", "-1", "1000", "16", str(1 << 27), "abc", "1e3", "3",
                                "0x7"],
        }
        for flag, values in bad.items():
            for v in values:
                cases.append(([cmd, flag, v, *tail], f"argument {flag}"))
        for flag in ("--bind", "--port", "--interval", "--ring-capacity", "--ui", "--token",
                     "--allow-host", "--plugin"):
            cases.append(([cmd, flag], f"argument {flag}: expected one argument"))
        for flag in ("--show-cmdline", "--metrics-per-process", "--insecure-no-auth"):
            cases.append(([cmd, f"{flag}=yes", *tail], f"argument {flag}: ignored explicit"))
        cases.append(([cmd, "--token-file"], "argument --token-file: expected one argument"))
    cases += [
        (["run", "--flush-ms", v, "--", "true"], "argument --flush-ms")
        for v in ("0", "-1", "abc", "", "1.5")
    ]
    cases += [
        (["run", "--flush-ms"], "argument --flush-ms: expected one argument"),
        (["run", "--summary-json"], "argument --summary-json: expected one argument"),
        (["run", "--linger=1", "--", "true"], "argument --linger: ignored explicit"),
        (["run", "--no-summary=0", "--", "true"], "argument --no-summary: ignored explicit"),
        (["run", "--no-summary"], "no command given"),
        (["doctor", "--port", "1"], "unrecognized arguments"),
        (["doctor", "--json"], "unrecognized arguments"),
        (["doctor", "now"], "unrecognized arguments"),
        (["watch", "extra"], "unrecognized arguments"),
        (["--bogus"], "unrecognized arguments"),
        (["--version=1"], "ignored explicit"),
        (["Watch"], "invalid choice"),
    ]
    return cases


PARSER_CASES = parser_cases()


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("argv,message", PARSER_CASES,
                         ids=[" ".join(a) or "-" for a, _ in PARSER_CASES])
def test_parser_rejects_with_one_line_and_status_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
    captured = capsys.readouterr()
    line = one_line(captured.err)
    assert line.startswith("gpuflow")
    assert message in line, line
    assert captured.out == ""


# Values that pass the parser and fail while the agent starts: real processes.
START_CASES = [
    (["--ui", "/nonexistent/page.html"], "--ui /nonexistent/page.html"),
    (["--ui", "/"], "not a regular file"),
    (["--ui", ""], "--ui"),
    (["--token", ""], "token must not be empty"),
    (["--token-file", ""], "--token-file: the file name is empty"),
    (["--token-file", "/nonexistent/token"], "--token-file /nonexistent/token"),
    # a bind other machines can reach needs a token (flag or variable: known only at start)
    (["--bind", "0.0.0.0"], "--token"),
    (["--bind", "::"], "--token"),
    (["--bind", "10.1.2.3"], "--token"),
    (["--bind", "0.0.0.0", "--token", ""], "--token"),
    (["--allow-host", "[::1"], "not a host name"),
    (["--allow-host", "*."], "not a host pattern"),
    (["--allow-host", "*.example.com:8080"], "not a host pattern"),
    (["--allow-host", "*.*.example.com"], "not a host pattern"),
    (["--allow-host", "*"], "token"),
    (["--plugin", ""], "cannot import collector module"),
    (["--plugin", "a..b"], "cannot import collector module"),
    (["--plugin", "gpuflow.no_such_collector"], "cannot import collector module"),
    (["--bind", "192.0.2.1", "--insecure-no-auth"], "cannot listen on 192.0.2.1"),
]


@pytest.mark.parametrize("flags,message", START_CASES, ids=[" ".join(f) for f, _ in START_CASES])
def test_watch_start_failures_are_one_line_and_status_2(flags, message):
    result = gpuflow("watch", "--port", "0", *flags, env=ENV, timeout=30)
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr)
    assert line.startswith("gpuflow watch: error:") and message in line, line


@pytest.mark.parametrize("flags,message", [(["--allow-host", "[::1"], "not a host name"),
                                           (["--bind", "0.0.0.0"], "--token")])
def test_run_start_failure_is_one_line_and_status_2(flags, message):
    result = gpuflow("run", "--port", "0", *flags, "--", "true", env=ENV, timeout=30)
    assert result.returncode == 2
    assert message in one_line(result.stderr)


AGENT_DIRECTORY = re.compile(r"gpuflow-[0-9a-f]{16}")


def private_run_env(base) -> dict[str, str]:
    """RUN_ENV with the agent's private directory made under ``base`` (TMPDIR; no
    XDG_RUNTIME_DIR), so that what a run leaves behind is there to be seen, and only its own."""
    env = {k: v for k, v in RUN_ENV.items() if k != "XDG_RUNTIME_DIR"}
    env["TMPDIR"] = str(base)
    return env


def agent_directories(base) -> set[str]:
    return {p.name for p in base.iterdir() if AGENT_DIRECTORY.fullmatch(p.name)}


@pytest.fixture
def files(tmp_path):
    plain = tmp_path / "plain.sh"
    plain.write_text("#!/bin/sh\necho hi\n")
    plain.chmod(0o644)
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"\x00\x01\x02not an executable")
    garbage.chmod(0o755)
    (tmp_path / "adir").mkdir()
    return tmp_path


RUN_CASES = [
    ("no-such-command", lambda d: ["gpuflow-no-such-command-xyz"], 127, "command not found"),
    ("no-such-path", lambda d: [str(d / "missing")], 127, "command not found"),
    ("relative-missing", lambda d: ["./missing-too"], 127, "command not found"),
    ("directory", lambda d: [str(d / "adir")], 126, "is a directory"),
    ("root-directory", lambda d: ["/"], 126, "is a directory"),
    ("not-executable", lambda d: [str(d / "plain.sh")], 126, "not executable"),
    ("dev-null", lambda d: ["/dev/null"], 126, "not executable"),
    ("exec-format", lambda d: [str(d / "garbage.bin")], 126, "cannot run"),
    ("empty-string", lambda d: [""], 127, "command not found"),
    ("only-spaces", lambda d: ["   "], 127, "command not found"),
    ("tab-newline", lambda d: ["\t\n"], 127, "command not found"),
]


@pytest.mark.parametrize("case", RUN_CASES, ids=[c[0] for c in RUN_CASES])
def test_run_commands_that_cannot_run(case, files, injection_built):
    _, argv, status, message = case
    base = files / "private"
    base.mkdir()
    result = gpuflow("run", "--port", "0", "--no-summary", "--", *argv(files), env=private_run_env(base),
                     timeout=30, cwd=files)
    assert result.returncode == status, result.stderr
    err = result.stderr.strip()
    assert "Traceback" not in err
    last = err.splitlines()[-1]
    assert last.startswith("gpuflow run: ") and message in last, err
    assert not agent_directories(base)   # the agent's private directory went with it
    if status in (126, 127) and message != "cannot run":
        assert len(err.splitlines()) == 1, err  # refused before anything started


@pytest.mark.parametrize("code,status", [
    ("exit 1", 1),
    ("exit 3", 3),
    ("kill -9 $$", 137),
])
def test_run_exit_statuses_and_no_ring_directory_left(code, status, injection_built, tmp_path):
    """The program sees where its ring would be handed over (the agent's private directory under
    TMPDIR); once the run has ended, with whatever status, that directory is gone."""
    result = gpuflow("run", "--port", "0", "--no-summary", "--", "sh", "-c",
                     f'echo "socket $GPUFLOW_RING_SOCKET"; {code}', env=private_run_env(tmp_path), timeout=30)
    assert result.returncode == status, result.stderr
    assert "Traceback" not in result.stderr
    assert re.findall(r"tracing session ([0-9a-f]+)", result.stderr)
    (socket_path,) = re.findall(r"^socket (\S+)$", result.stdout, re.M)
    directory = socket_path.rsplit("/", 2)[-2]
    assert socket_path.startswith(str(tmp_path) + "/") and AGENT_DIRECTORY.fullmatch(directory)
    assert not agent_directories(tmp_path)


def test_interval_beyond_what_a_wait_can_take_is_refused(capsys):
    for flag in ("--interval", "--flush-ms"):
        with pytest.raises(SystemExit) as exc:
            parse_args(["run", flag, "99999999999999999999999", "--", "true"])
        assert exc.value.code == 2


def test_summary_json_in_a_missing_directory_is_refused_before_the_run(injection_built):
    result = gpuflow("run", "--port", "0", "--no-summary", "--summary-json",
                     "/nonexistent/dir/out.json", "--", "true", env=ENV, timeout=30)
    assert result.returncode == 2
    assert "--summary-json" in one_line(result.stderr)


def test_doctor_takes_no_flags_and_still_runs():
    result = gpuflow("doctor", env=ENV, timeout=30)
    assert result.returncode in (0, 1)
    assert "Traceback" not in result.stderr + result.stdout
    assert "gpuflow watch:" in result.stdout


def test_bad_environment_values_stop_gunicorn_with_a_message_naming_them():
    """get_app()'s variables: a bad value names itself (settings.py), a huge one is refused."""
    from gpuflow.transport.settings import from_environ

    for name, value in [("GPUFLOW_INTERVAL_MS", "1e30"), ("GPUFLOW_PING_S", "nan"),
                        ("GPUFLOW_SEND_TIMEOUT_S", "inf"), ("GPUFLOW_HEADER_TIMEOUT_S", "0"),
                        ("GPUFLOW_SEND_BUFFER_BYTES", "12"), ("GPUFLOW_MAX_STREAMS", "x"),
                        ("GPUFLOW_ALLOW_HOSTS", "*.:80"), ("GPUFLOW_SHOW_CMDLINE", "maybe")]:
        with pytest.raises(ValueError) as exc:
            from_environ({name: value})
        assert name in str(exc.value) or "host" in str(exc.value), (name, exc.value)

