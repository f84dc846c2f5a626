"""The newcomer's rough edges (issue 16): the no-driver explanation said once and the same way
everywhere, doctor ending with the real reason, the run summary saying why nothing was traced, a
text file that is not a program, bare ``gpuflow``, and the README's commands agreeing with what
the scripts do."""

from __future__ import annotations

import logging
import re
import signal
from pathlib import Path

from cli_process import gpuflow, gpuflow_env, start_gpuflow, stop_gpuflow

from gpuflow.cli.doctor import verdicts
from gpuflow.cli.logs import BannerDedup
from gpuflow.cli.report import DOCTOR_HINT
from gpuflow.core.doctor import DoctorCheck
from gpuflow.core.problem_log import restates

ROOT = Path(__file__).resolve().parents[2]
NO_DRIVER = "NVIDIA driver not found (libnvidia-ml.so.1 could not be loaded): GPUFlow shows no GPUs"
NO_DRIVER_ENV = gpuflow_env(GPUFLOW_NVML_FAKE="nodriver")


def test_the_no_driver_explanation_appears_once_then_the_doctor_pointer():
    proc, _port = start_gpuflow("watch", "--port", "0", env=NO_DRIVER_ENV)
    output = stop_gpuflow(proc, signal.SIGINT)
    assert output.count(NO_DRIVER) == 1, output
    assert output.count(DOCTOR_HINT) == 1, output
    assert output.index(NO_DRIVER) < output.index(DOCTOR_HINT)


def test_the_page_and_the_cli_say_the_same_doctor_sentence():
    page = (ROOT / "gpuflow" / "ui" / "geometry.js").read_text()
    assert f"DOCTOR_HINT = '{DOCTOR_HINT}'" in page


def test_doctor_ends_with_the_reason_not_see_above():
    checks = [DoctorCheck("falcon", True, "4", "watch"),
              DoctorCheck("NVML", False, NO_DRIVER, "gpus"),
              DoctorCheck("libcupti", False, "not found", "run")]
    watch, run = verdicts(checks)
    assert watch == f"works, without GPUs: NVML: {NO_DRIVER}"
    assert run == f"cannot trace: NVML: {NO_DRIVER}"
    assert verdicts(checks[:1] + checks[2:]) == ("works", "cannot trace: libcupti: not found")
    assert verdicts([DoctorCheck("falcon", False, "not installed", "watch")])[0] == \
        "cannot start: falcon: not installed"
    out = gpuflow("doctor", env=gpuflow_env(GPUFLOW_DISABLED_PLUGINS="cupti"), timeout=60).stdout
    assert "see above" not in out
    assert re.search(r"^gpuflow run: +(can trace CUDA programs|cannot trace: \S)", out, re.M), out


def test_the_run_summary_says_why_nothing_was_traced(injection_built):
    result = gpuflow("run", "--port", "0", "--", "true", env=NO_DRIVER_ENV, timeout=60)
    assert result.returncode == 0, result.stderr
    summary = result.stderr[result.stderr.index("end-of-run summary"):]
    assert "no CUDA activity was seen" in summary
    assert "the agent reported, which may be why:" in summary and NO_DRIVER in summary


def test_a_text_file_with_the_x_bit_is_refused_before_anything_starts(tmp_path, injection_built):
    notes = tmp_path / "notes.txt"
    notes.write_text("echo hi\n")
    notes.chmod(0o755)
    marker = tmp_path / "hi"
    result = gpuflow("run", "--port", "0", "--", str(notes), env=NO_DRIVER_ENV, timeout=60, cwd=tmp_path)
    assert result.returncode == 126
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "text file without a #! line" in lines[0] and "sh " in lines[0]
    assert not marker.exists()
    script = tmp_path / "script"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(0o755)
    assert gpuflow("run", "--port", "0", "--", str(script), env=NO_DRIVER_ENV, timeout=60).returncode == 0
    assert marker.exists()


def test_bare_gpuflow_is_one_line_and_status_2():
    result = gpuflow()
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "watch" in result.stderr


def test_the_readme_commands_agree_with_the_scripts():
    readme = (ROOT / "README.md").read_text()
    install = re.search(r"python3 -m venv (\S+) && (\S+)/bin/pip install \. && (\S+)/bin/gpuflow watch", readme)
    assert install and install.group(1) == install.group(2) == install.group(3)
    venv = install.group(1)
    test_script = (ROOT / "scripts" / "test").read_text()
    test_venv = re.search(r'VENV=\$\{TEST_VENV:-([^}]+)\}', test_script).group(1)
    assert test_venv != venv, "the tests must not reinstall into the environment a running agent uses"
    assert f"{venv}/bin/gunicorn 'gpuflow.transport.app:get_app()'" in readme


def test_problem_log_records_are_held_until_the_banner_and_dropped_if_it_showed_them():
    written = []

    class Collect(logging.Handler):
        def emit(self, record):
            written.append(record.getMessage())

    dedup = BannerDedup(Collect())
    logger = logging.getLogger("gpuflow.test.dedup")

    def log(message, problem=None):
        record = logger.makeRecord(logger.name, logging.WARNING, __file__, 1, message, (), None,
                                   extra=restates(problem) if problem else None)
        if dedup.filter(record):
            written.append(record.getMessage())

    log("shown problem (retrying)", "shown problem")
    log("other problem", "other problem")
    log("plain line")
    assert written == ["plain line"]
    dedup.banner_shown(["shown problem"])
    assert written == ["plain line", "other problem"]
    log("shown problem again", "shown problem")
    log("a new problem", "a new problem")
    assert written == ["plain line", "other problem", "a new problem"]
