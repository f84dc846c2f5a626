"""``gpuflow run`` with programs that never touch CUDA: exit status, signals, missing commands."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from cli_process import gpuflow, gpuflow_env, signal_another_thread

NO_NVML = gpuflow_env(GPUFLOW_DISABLED_PLUGINS="nvml")


def run(*cmd: str, **kw):
    return gpuflow("run", "--port", "0", "--", *cmd, env=NO_NVML, **kw)


def test_exit_status_is_the_childs(injection_built):
    result = run("sh", "-c", "echo out-from-child; exit 3")
    assert result.returncode == 3
    assert result.stdout == "out-from-child\n"  # the program's stdout is untouched
    assert "no CUDA activity was seen" in result.stderr


def test_signal_death_is_128_plus_n(injection_built):
    assert run("sh", "-c", "kill -TERM $$").returncode == 128 + signal.SIGTERM
    assert run("sh", "-c", "kill -KILL $$").returncode == 128 + signal.SIGKILL


def test_missing_command_is_127(injection_built):
    result = run("definitely-not-a-command-gpuflow")
    assert result.returncode == 127
    assert "command not found: definitely-not-a-command-gpuflow" in result.stderr


def test_directory_is_126(injection_built, tmp_path):
    result = run(str(tmp_path))
    assert result.returncode == 126
    assert "is a directory" in result.stderr


def test_not_executable_is_126(injection_built, tmp_path):
    script = tmp_path / "script.sh"
    script.write_text("echo hi\n")
    result = run(str(script))
    assert result.returncode == 126
    assert "permission denied" in result.stderr


def test_a_non_executable_file_found_on_path_is_126_as_in_bash(injection_built, tmp_path):
    (tmp_path / "gpuflow-noexec-tool").write_text("echo hi\n")
    env = {**NO_NVML, "PATH": f"{tmp_path}{os.pathsep}{NO_NVML.get('PATH', os.defpath)}"}
    result = gpuflow("run", "--port", "0", "--", "gpuflow-noexec-tool", env=env)
    shell = subprocess.run(["bash", "-c", "gpuflow-noexec-tool"], env=env, capture_output=True)
    assert result.returncode == shell.returncode == 126
    assert "not executable" in result.stderr


def test_a_script_whose_interpreter_is_missing_is_127_as_in_bash_and_says_why(injection_built, tmp_path):
    script = tmp_path / "script"
    script.write_text("#!/nonexistent/interpreter-gpuflow\necho hi\n")
    script.chmod(0o755)
    result = run(str(script))
    shell = subprocess.run(["bash", "-c", str(script)], capture_output=True)
    assert result.returncode == shell.returncode == 127
    assert "interpreter (the #! line) was not found" in result.stderr


@pytest.mark.parametrize("send, within_s", [(os.kill, 10), (signal_another_thread, 3)],
                         ids=["to-the-process", "to-another-thread"])
def test_sigterm_and_sigint_to_gpuflow_are_forwarded_to_the_child(injection_built, tmp_path, send, within_s):
    # the kernel delivers a process's signal to any of its threads; gpuflow's main thread, waiting
    # for the program, must forward it at once whichever got it (with the signal sent to another
    # thread than the main one, it once did only after the program had ended by itself)
    for sig in (signal.SIGTERM, signal.SIGINT):
        marker = tmp_path / f"started-{sig}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpuflow", "run", "--port", "0", "--", "sh", "-c",
             f"touch {marker}; exec sleep 30"],
            env=NO_NVML, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        try:
            deadline = time.monotonic() + 20
            while not marker.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert marker.exists()
            t0 = time.monotonic()
            send(proc.pid, sig)
            out, err = proc.communicate(timeout=20)
        finally:
            proc.kill()
        assert proc.returncode == 128 + sig, err
        assert time.monotonic() - t0 < within_s


def test_child_gets_the_injection_environment(injection_built):
    result = run(sys.executable, "-c",
                 "import os; print(os.environ['CUDA_INJECTION64_PATH']); print(os.environ['NVTX_INJECTION64_PATH']);"
                 "print(os.environ['GPUFLOW_RING_SOCKET']); print(os.environ['GPUFLOW_RING_CAPACITY'])")
    assert result.returncode == 0, result.stderr
    inject, nvtx, ring_socket, capacity = result.stdout.split()
    assert inject == str(injection_built.inject_library)
    assert nvtx == str(injection_built.cupti_library)
    assert ring_socket.endswith("/ring.sock") and os.path.basename(os.path.dirname(ring_socket)).startswith("gpuflow-")
    assert not os.path.exists(os.path.dirname(ring_socket))   # the agent removed it when it stopped
    assert capacity == "65536"


def test_child_stdin_is_passed_through(injection_built):
    result = subprocess.run([sys.executable, "-m", "gpuflow", "run", "--port", "0", "--", "cat"],
                            input="hello through gpuflow\n", env=NO_NVML, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0
    assert result.stdout == "hello through gpuflow\n"


def test_linger_keeps_serving_the_final_state_until_ctrl_c(injection_built):
    import json
    import urllib.request

    from cli_process import URL_RE

    proc = subprocess.Popen([sys.executable, "-m", "gpuflow", "run", "--port", "0", "--linger", "--",
                             "sh", "-c", "exit 5"], env=NO_NVML, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    port = None
    lines = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        lines.append(line)
        m = URL_RE.search(line)
        if m and port is None:
            port = int(m.group(1))
        if "--linger" in line:
            break
    assert port is not None and "exited with status 5" in "".join(lines), "".join(lines)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/snapshot", timeout=5) as resp:
        assert json.load(resp)["schema"] == 3  # still serving after the program ended
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=15) == 5


def test_empty_command_name_is_127(injection_built):
    result = run("")
    assert result.returncode == 127
    assert "the command name is empty" in result.stderr


def test_a_stop_signal_caught_before_forwarding_began_reaches_the_program(tmp_path):
    # gpuflow run catches stop signals from its start; one that lands between starting the
    # program and forwarding must still reach the program, not be swallowed
    from gpuflow.cli.child import TracedChild
    from gpuflow.cli.watch import StopSignals

    marker = tmp_path / "started"
    with StopSignals() as stop:
        child = TracedChild(["sh", "-c", f"trap 'exit 7' TERM; touch {marker}; sleep 30 & wait"], dict(os.environ))
        deadline = time.monotonic() + 20
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGTERM)   # caught by StopSignals: forwarding has not begun
        assert stop.received == signal.SIGTERM
        t0 = time.monotonic()
        status = child.wait(missed=stop.take)
    assert status == 7 and time.monotonic() - t0 < 10
    assert stop.received is None   # passed on, so a --linger wait after it is not cut short
