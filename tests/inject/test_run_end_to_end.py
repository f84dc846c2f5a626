"""The whole `gpuflow run` chain without a GPU: the CLI, the child's environment, the packaged
libgpuflow_inject.so, a scripted fake libcupti, the ring, the CUPTI collector, the summary.

A traced "program" here is a Python child that does what the CUDA driver does at cuInit: it loads
the library named by CUDA_INJECTION64_PATH and calls InitializeInjection. The fake libcupti then
delivers its scripted records (tests/support/fake_cupti.c): per process 13 kernel launches
(`_Z6kernelPf` 7, `_Z7softmaxIfLi128EEvPT_ii` 5, `_Z4latev` 1 at the exit flush) and one copy of
each kind. Counts must come out exact, also when more processes exit than the snapshot keeps
whole (the older ones are folded into `traced_retired`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PER_PROCESS = {"_Z6kernelPf": 7, "_Z7softmaxIfLi128EEvPT_ii": 5, "_Z4latev": 1}
CHILD = ("import ctypes, os, time; ctypes.CDLL(os.environ['CUDA_INJECTION64_PATH']).InitializeInjection(); "
         "print('socket', os.environ['GPUFLOW_RING_SOCKET'], flush=True); time.sleep(0.05)")


@pytest.fixture
def packaged_injection(fake_cupti):
    from gpuflow.collectors.cupti.injection import InjectionUnavailable, find_injection_paths
    try:
        return find_injection_paths({**os.environ, "GPUFLOW_CUPTI_PATH": fake_cupti})
    except InjectionUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must build the packaged injection library: {exc}")
        pytest.skip(str(exc))


def gpuflow_run(fake_cupti, tmp_path, *cmd, extra_env=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUFLOW_", "FAKE_CUPTI_"))}
    env.update({"GPUFLOW_CUPTI_PATH": fake_cupti, "GPUFLOW_DISABLED_PLUGINS": "nvml",
                "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1", "FAKE_CUPTI_KERNELS": "10", **(extra_env or {})})
    summary = tmp_path / "summary.json"
    done = subprocess.run([sys.executable, "-m", "gpuflow", "run", "--port", "0", "--flush-ms", "10",
                           "--summary-json", str(summary), "--", *cmd], env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    if not summary.exists():
        pytest.fail(f"gpuflow run wrote no summary (exit {done.returncode}); it printed:\n{done.stderr[-4000:]}")
    doc = json.loads(summary.read_text())
    return done, doc, socket_directories_left(done.stdout)


def socket_directories_left(stdout: str) -> list[str]:
    """The private ring socket directories the traced processes named (they print it) that are
    still there: the agent removes its own when it stops."""
    dirs = {os.path.dirname(line.split()[1]) for line in stdout.splitlines() if line.startswith("socket ")}
    assert dirs, "the traced program printed no ring socket"
    return sorted(d for d in dirs if os.path.exists(d))


def launches(doc):
    counts: dict[str, int] = {}
    for t in doc["traced"] + doc["traced_retired"]:
        for k in t["kernels"]:
            counts[k["mangled"]] = counts.get(k["mangled"], 0) + k["count"]
    return counts


def test_one_traced_process_comes_out_exact(packaged_injection, fake_cupti, tmp_path):
    done, doc, left = gpuflow_run(fake_cupti, tmp_path, sys.executable, "-c", CHILD)
    assert done.returncode == 0, done.stderr
    (t,) = doc["traced"]
    assert (t["state"], t["exit_status"], t["truncated"], t["cupti_status"]) == ("exited", 0, False, "ok")
    assert launches(doc) == PER_PROCESS and doc["traced_retired"] == []
    assert {x["direction"]: x["bytes"] for x in t["transfers"]} == {
        "h2d": 4096, "d2h": 8192, "d2d": 100, "p2p": 1 << 20, "memset": 256}
    assert (t["dropped_ring"], t["dropped_cupti"], t["complete"]) == (0, 0, True)
    assert "13 kernel launches" in done.stderr and not left
    # GPUFlow's own cost in the process travels from the ring header to the summary
    assert 0 < t["translate_cpu_ns"] < 1_000_000_000
    assert "GPUFlow inside the process: " in done.stderr and " ns a record" in done.stderr


def test_an_ab_benchmark_run_says_its_counts_are_partial(packaged_injection, fake_cupti, tmp_path):
    done, doc, _ = gpuflow_run(fake_cupti, tmp_path, sys.executable, "-c", CHILD,
                               extra_env={"GPUFLOW_AB_PERIOD_MS": "250"})
    assert done.returncode == 0, done.stderr
    assert "GPUFLOW_AB_PERIOD_MS=250 (benchmarking)" in done.stderr
    assert "partial" in done.stderr
    (t,) = doc["traced"]
    assert "every other 250 ms not recorded" in json.dumps(t)


def test_forty_processes_fold_beyond_the_kept_ones_and_stay_exact(packaged_injection, fake_cupti, tmp_path):
    parent = ("import subprocess, sys\n"
              "for _ in range(40):\n"
              f"    subprocess.run([sys.executable, '-c', {CHILD!r}], check=True)\n")
    done, doc, left = gpuflow_run(fake_cupti, tmp_path, sys.executable, "-c", parent)
    assert done.returncode == 0, done.stderr
    (retired,) = doc["traced_retired"]
    assert len(doc["traced"]) == 32 and retired["processes"] == 8 and retired["complete"]
    assert retired["translate_cpu_ns"] > 0   # the folded processes' own costs, summed
    assert launches(doc) == {name: 40 * n for name, n in PER_PROCESS.items()}
    assert "8 earlier exited processes, folded together" in done.stderr and not left


@pytest.mark.parametrize("how, signum", [("segv", 11), ("abort", 6), ("kill", 9)])
def test_a_program_that_dies_is_reported_truncated_and_leaves_no_ring(packaged_injection, fake_cupti,
                                                                      tmp_path, how, signum):
    die = {"segv": "ctypes.string_at(0)", "abort": "os.abort()", "kill": "os.kill(os.getpid(), 9)"}[how]
    child = CHILD.replace("time.sleep(0.05)", f"time.sleep(0.3); {die}")   # after a few flushes
    done, doc, left = gpuflow_run(fake_cupti, tmp_path, sys.executable, "-c", child)
    assert done.returncode == 128 + signum, done.stderr
    (t,) = doc["traced"]
    assert (t["state"], t["exit_status"], t["truncated"]) == ("exited", 128 + signum, True)
    # what was flushed before the death is there; the exit flush's late kernel is not
    assert launches(doc) == {k: n for k, n in PER_PROCESS.items() if k != "_Z4latev"}
    assert "TRUNCATED" in done.stderr and not left


AGENT_KILLER = r"""
import ctypes, json, os, signal, subprocess, sys, time
libc = ctypes.CDLL(None)
assert libc.prctl(36, 1, 0, 0, 0) == 0          # PR_SET_CHILD_SUBREAPER: orphans come to us
argv, env = json.loads(sys.argv[1]), json.loads(sys.argv[2])
out = open(sys.argv[3], "w")
agent = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
deadline = time.monotonic() + 30
program = None
while program is None and time.monotonic() < deadline:   # the program, not a helper gpuflow ran
    try:
        kids = open(f"/proc/{agent.pid}/task/{agent.pid}/children").read().split()
    except OSError:
        kids = []
    for kid in kids:
        try:
            if b"program done" in open(f"/proc/{kid}/cmdline", "rb").read():
                program = int(kid)
        except OSError:
            pass
    time.sleep(0.01)
time.sleep(0.3)
agent.send_signal(signal.SIGKILL)
agent.wait()
_, raw = os.waitpid(program, 0)
print(json.dumps({"status": os.waitstatus_to_exitcode(raw), "pid": program}))
"""


def test_the_agent_sigkilled_leaves_the_program_its_output_and_status(packaged_injection, fake_cupti, tmp_path):
    child = CHILD.replace("print('socket', os.environ['GPUFLOW_RING_SOCKET'], flush=True); time.sleep(0.05)",
                          "time.sleep(1.0); print('program done', flush=True); raise SystemExit(7)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUFLOW_", "FAKE_CUPTI_"))}
    env.update({"GPUFLOW_CUPTI_PATH": fake_cupti, "GPUFLOW_DISABLED_PLUGINS": "nvml",
                "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1", "FAKE_CUPTI_STEAL": "0"})
    argv = [sys.executable, "-m", "gpuflow", "run", "--port", "0", "--flush-ms", "10", "--",
            sys.executable, "-c", child]
    out = tmp_path / "program.out"
    harness = subprocess.run([sys.executable, "-c", AGENT_KILLER, json.dumps(argv), json.dumps(env), str(out)],
                             capture_output=True, text=True, timeout=60)
    assert harness.returncode == 0, harness.stderr
    reported = json.loads(harness.stdout)
    assert reported["status"] == 7
    assert out.read_text() == "program done\n"   # it ran on, traced into a ring no one reads any more
