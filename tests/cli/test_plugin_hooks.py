"""A third-party plugin takes part in the command line through hooks alone: its own flag and
variable, its variables in a launched program's environment, the program's exit status, and its
lines in ``gpuflow doctor`` — all through the real ``python -m gpuflow``."""

from __future__ import annotations

import sys
import textwrap

import pytest

from cli_process import gpuflow, gpuflow_env

PLUGIN = textwrap.dedent('''
    """A third-party plugin used by the CLI tests."""
    import gpuflow
    from gpuflow.core.doctor import DoctorCheck
    from gpuflow.core.errors import LaunchRefused
    from gpuflow.core.options import Option, PluginOptions

    def colour(value):
        if value not in ("red", "blue"):
            raise ValueError(f"must be red or blue, got {value!r}")
        return value

    OPTIONS = PluginOptions("thirdparty", (
        Option("colour", colour, "red", "the colour", flag="--tp-colour", env="TP_COLOUR",
               metavar="C", commands=("run",)),
        Option("exit_file", str, None, "where to write the exit status", env="TP_EXIT_FILE"),
    ))

    @gpuflow.hookimpl
    def declare_options():
        return OPTIONS

    @gpuflow.hookimpl
    def child_environment(context, session):
        colour = context.plugin_options(OPTIONS)["colour"]
        if colour == "blue":
            raise LaunchRefused("blue programs cannot be launched here")
        return {"TP_COLOUR_SEEN": colour, "TP_SESSION": session}

    @gpuflow.hookimpl
    def process_exited(context, pid, status):
        path = context.plugin_options(OPTIONS)["exit_file"]
        with open(path, "w") as fh:
            fh.write(f"{pid} {status}")

    @gpuflow.hookimpl
    def doctor_checks(context):
        return [DoctorCheck("third-party part", True, "answers", "run"),
                DoctorCheck("third-party speed", False, "slow today", "speed")]
''')

BROKEN_DOCTOR = textwrap.dedent('''
    import gpuflow

    @gpuflow.hookimpl
    def doctor_checks(context):
        raise RuntimeError("doctor probe exploded")
''')


@pytest.fixture
def plugin_env(tmp_path):
    (tmp_path / "tp_plugin.py").write_text(PLUGIN)
    (tmp_path / "tp_broken_doctor.py").write_text(BROKEN_DOCTOR)
    return gpuflow_env(GPUFLOW_DISABLED_PLUGINS="nvml,cupti", PYTHONPATH=str(tmp_path),
                       TP_EXIT_FILE=str(tmp_path / "exit"))


def test_its_flag_is_listed_and_checked_by_the_plugin(plugin_env):
    help_text = gpuflow("run", "--plugin", "tp_plugin", "--help", env=plugin_env).stdout
    assert "thirdparty collector" in help_text and "--tp-colour C" in help_text and "TP_COLOUR" in help_text
    assert "--tp-colour" not in gpuflow("watch", "--plugin", "tp_plugin", "--help", env=plugin_env).stdout
    bad = gpuflow("run", "--plugin", "tp_plugin", "--tp-colour", "green", "--", "true", env=plugin_env)
    assert bad.returncode == 2
    assert bad.stderr.strip() == ("gpuflow run: error: argument --tp-colour: must be red or blue, got "
                                  "'green' (see gpuflow run --help)")
    bad_env = gpuflow("run", "--port", "0", "--plugin", "tp_plugin", "--", "true",
                      env={**plugin_env, "TP_COLOUR": "green"})
    assert bad_env.returncode == 2
    assert bad_env.stderr.strip() == "gpuflow run: error: TP_COLOUR: must be red or blue, got 'green'"


def test_the_launched_program_gets_its_variables_and_it_hears_the_exit(plugin_env, tmp_path):
    result = gpuflow("run", "--port", "0", "--no-summary", "--plugin", "tp_plugin", "--", sys.executable,
                     "-c", "import os, sys; print(os.environ['TP_COLOUR_SEEN'], os.environ['TP_SESSION']); "
                     "sys.exit(4)", env={**plugin_env, "TP_COLOUR": "red"})
    assert result.returncode == 4, result.stderr
    colour, session = result.stdout.split()
    assert colour == "red" and f"tracing session {session}:" in result.stderr
    pid, status = (tmp_path / "exit").read_text().split()
    assert int(pid) > 0 and status == "4"


def test_a_plugin_refusing_the_launch_stops_gpuflow_run_before_anything_starts(plugin_env, tmp_path):
    marker = tmp_path / "ran"
    result = gpuflow("run", "--port", "0", "--plugin", "tp_plugin", "--tp-colour", "blue", "--",
                     "touch", str(marker), env=plugin_env)
    assert result.returncode == 2
    assert result.stderr.strip() == "gpuflow run: error: blue programs cannot be launched here"
    assert not marker.exists()


def test_without_any_plugin_preparing_launches_the_program_runs_untraced_and_says_so(plugin_env):
    result = gpuflow("run", "--port", "0", "--no-summary", "--", sys.executable, "-c",
                     "import os; print('CUDA_INJECTION64_PATH' in os.environ)", env=plugin_env)
    assert result.returncode == 0 and result.stdout.strip() == "False"
    assert "running untraced" in result.stderr


def test_doctor_prints_each_plugins_lines_and_survives_a_broken_one(plugin_env, tmp_path):
    """Installed plugins (entry points) speak in doctor; one whose checks raise is one FAIL line."""
    env = {**plugin_env, "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "0"}
    info = tmp_path / "tp_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tp-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[gpuflow.collectors]\nthirdparty = tp_plugin\n"
                                           "brokendoctor = tp_broken_doctor\n")
    result = gpuflow("doctor", env=env, timeout=60)
    lines = result.stdout.splitlines()
    assert "[ ok ] third-party part   answers" in lines
    assert "[warn] third-party speed  slow today" in lines
    assert any(line.startswith("[FAIL] brokendoctor") and "doctor probe exploded" in line for line in lines)
    assert result.returncode == 1 and "Traceback" not in result.stderr
