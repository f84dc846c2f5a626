"""Fault runs on a real GPU for scripts/gpu-check (stage ``faults``): what happens to the traced
program and to gpuflow when either side dies, or when CUPTI is taken by someone else.

Checks (each prints ``fault_<name>=yes|no`` and its figures; the last line is
``faults_ok=yes|no``):

* ``agent_sigkill`` — gpuflow is SIGKILLed while it traces ``demo_workload`` with a small ring:
  the program's output (less its own ``elapsed_ms=`` timing line) and exit status equal those of an
  untraced run; its elapsed time with nobody draining the ring (full ring, records dropped and
  counted in the ring header, which goes with the program) is compared with a traced run whose
  agent stays alive. The program is reaped here: this script is a child subreaper, so the orphaned
  program is reparented to it. The killed agent's private socket directory stays until the next
  agent of the user starts (``dirs_left``).
* ``crash_segv`` / ``crash_abort`` / ``crash_kill`` — ``crash`` (bench/workloads/crash.cu) does 1,000
  kernels, then dies: gpuflow exits 128+N, the summary has the 1,000 flushed kernels, marks the
  session truncated, and no private socket directory of that run is left. ``crash_exit`` is the
  control (status 3, not truncated).
* ``cupti_held_first`` — ``holder subscribe`` (bench/workloads/cupti_holder.cu) takes CUPTI before
  CUDA starts: its output and status are those of an untraced run, and gpuflow's summary says
  ``cupti_in_use`` instead of reporting an empty trace as complete.
* ``cupti_stolen`` — ``holder steal`` re-registers the activity callbacks after GPUFlow started,
  as Kineto does: program untouched, gpuflow's summary says ``stolen`` (counts incomplete).
* ``torch_profiler_inside`` — a PyTorch loop running torch.profiler itself, under gpuflow run:
  the program exits 0 and writes its profile; the statuses and Kineto's own warnings are recorded
  (GPUFlow subscribes at CUDA initialisation, before the profiler starts).

Usage: ``python3 scripts/gpu_faults.py BIN_DIR OUT_DIR`` (BIN_DIR holds demo_workload, crash and
holder, built by scripts/gpu-check).
Constraints: Linux, standard library only, run from the repository root with gpuflow installed.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
PY = sys.executable
GPUFLOW = [PY, "-m", "gpuflow", "run", "--port", "0"]
RESULTS: dict[str, bool] = {}


def verdict(name: str, ok: bool, **figures) -> None:
    RESULTS[name] = ok
    details = " ".join(f"{k}={v}" for k, v in figures.items())
    print(f"fault_{name}={'yes' if ok else 'no'} {details}", flush=True)


def socket_dirs() -> set[str]:
    """The agents' private ring socket directories (gpuflow-<16 hex digits>) where gpuflow run
    makes them: $XDG_RUNTIME_DIR when it is private, else the temporary directory."""
    import re
    import tempfile
    found = set()
    for base in {os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir(), tempfile.gettempdir(), "/tmp"}:
        try:
            found |= {os.path.join(base, e) for e in os.listdir(base) if re.fullmatch(r"gpuflow-[0-9a-f]{16}", e)}
        except OSError:
            pass
    return found


def without_timing(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith("elapsed_ms=")]


def elapsed_ms(text: str) -> float:
    for line in text.splitlines():
        if line.startswith("elapsed_ms="):
            return float(line.split("=", 1)[1].split()[0])
    return float("nan")


def children_of(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(x) for x in fh.read().split()]
    except OSError:
        return []


def agent_sigkill(bin_dir: str, out_dir: str, iterations: int = 3000) -> None:
    demo = os.path.join(bin_dir, "demo_workload")
    bare = subprocess.run([demo, str(iterations)], capture_output=True, text=True)
    live = subprocess.run([*GPUFLOW, "--no-summary", "--", demo, str(iterations)],
                          capture_output=True, text=True)
    before = socket_dirs()
    stdout_path = os.path.join(out_dir, "agent_sigkill.stdout")
    with open(stdout_path, "w") as out, open(os.path.join(out_dir, "agent_sigkill.stderr"), "w") as err:
        agent = subprocess.Popen([*GPUFLOW, "--no-summary", "--ring-capacity", "1024", "--", demo,
                                  str(iterations)], stdout=out, stderr=err)
        program = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and program is None:
            for pid in children_of(agent.pid):   # the program, not a helper gpuflow may have run
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as fh:
                        if os.path.basename(demo).encode() in fh.read():
                            program = pid
                except OSError:
                    pass
            time.sleep(0.02)
        time.sleep(0.5)
        killed_at = time.monotonic()
        agent.send_signal(signal.SIGKILL)
        agent.wait()
    status = None
    if program is not None:
        _, raw = os.waitpid(program, 0)  # reparented to us (subreaper)
        status = os.waitstatus_to_exitcode(raw)
    program_after_kill_s = time.monotonic() - killed_at
    with open(stdout_path) as fh:
        killed_out = fh.read()
    left = sorted(socket_dirs() - before)
    same_output = without_timing(killed_out) == without_timing(bare.stdout)
    same_status = status == bare.returncode
    slow = elapsed_ms(killed_out) / elapsed_ms(live.stdout)
    verdict("agent_sigkill", same_output and same_status and program is not None and slow < 1.10,
            same_output=same_output, bare_status=bare.returncode, program_status=status,
            bare_ms=elapsed_ms(bare.stdout), traced_live_ms=elapsed_ms(live.stdout),
            traced_agent_killed_ms=elapsed_ms(killed_out), killed_vs_live=f"{slow:.3f}",
            program_ran_on_s=f"{program_after_kill_s:.2f}", dirs_left=len(left))


def crash(bin_dir: str, out_dir: str, how: str, expected_status: int, kernels: int = 1000) -> None:
    before = socket_dirs()
    summary_path = os.path.join(out_dir, f"summary_crash_{how}.json")
    done = subprocess.run([*GPUFLOW, "--no-summary", "--summary-json", summary_path, "--",
                           os.path.join(bin_dir, "crash"), how, str(kernels)],
                          capture_output=True, text=True)
    try:
        with open(summary_path) as fh:
            summary = json.load(fh)
    except (OSError, ValueError):
        summary = {"traced": []}
    traced = summary["traced"]
    seen = sum(k["count"] for t in traced for k in t["kernels"])
    truncated = [t.get("truncated") for t in traced]
    left = sorted(socket_dirs() - before)
    should_truncate = how != "exit"
    ok = (done.returncode == expected_status and seen == kernels and not left
          and len(traced) == 1 and truncated == [should_truncate])
    verdict(f"crash_{how}", ok, gpuflow_status=done.returncode, expected=expected_status,
            kernels_seen=seen, kernels_launched=kernels, truncated=truncated, dirs_left=len(left),
            stderr_tail=repr(done.stderr.strip().splitlines()[-1:]))


def traced_statuses(summary_path: str) -> list[tuple[str, str]]:
    try:
        with open(summary_path) as fh:
            traced = json.load(fh)["traced"]
    except (OSError, ValueError, KeyError):
        return []
    return [(t.get("cupti_status"), t.get("cupti_detail")) for t in traced]


def cupti_holder(bin_dir: str, out_dir: str, mode: str, expected_status: str) -> None:
    holder = os.path.join(bin_dir, "holder")
    bare = subprocess.run([holder, mode], capture_output=True, text=True)
    summary_path = os.path.join(out_dir, f"summary_holder_{mode}.json")
    traced = subprocess.run([*GPUFLOW, "--summary-json", summary_path, "--", holder, mode],
                            capture_output=True, text=True)
    with open(os.path.join(out_dir, f"holder_{mode}.log"), "w") as fh:
        fh.write(f"bare {bare.returncode}\n{bare.stdout}{bare.stderr}\n----- traced {traced.returncode}\n"
                 f"{traced.stdout}{traced.stderr}")
    statuses = traced_statuses(summary_path)
    said = [s for s, _ in statuses] == [expected_status]
    summary_lines = [ln.strip() for ln in traced.stderr.splitlines() if "CUPTI" in ln]
    name = "cupti_held_first" if mode == "subscribe" else "cupti_stolen"
    verdict(name, said and bare.stdout == traced.stdout and bare.returncode == traced.returncode,
            same_output=bare.stdout == traced.stdout, bare_status=bare.returncode,
            traced_status=traced.returncode, program_stdout=repr(traced.stdout.strip()),
            statuses=repr(statuses), summary=repr(summary_lines[:1]))


def torch_profiler_inside(out_dir: str) -> None:
    summary_path = os.path.join(out_dir, "summary_torch_profiler_inside.json")
    profile = os.path.join(out_dir, "profile_in_use.json")
    done = subprocess.run([*GPUFLOW, "--summary-json", summary_path, "--", PY,
                           "bench/workloads/torch_train.py", "--steps", "5", "--profile-out", profile],
                          capture_output=True, text=True)
    with open(os.path.join(out_dir, "torch_profiler_inside.log"), "w") as fh:
        fh.write(done.stdout + "\n----- stderr\n" + done.stderr)
    statuses = traced_statuses(summary_path)
    profiled = os.path.exists(profile)
    try:
        with open(profile) as fh:
            profiled_kernels = sum(json.load(fh)["kernels"].values())
    except (OSError, ValueError, KeyError):
        profiled_kernels = None
    kineto = [ln.strip()[-110:] for ln in done.stderr.splitlines() if "CUPTI" in ln and "WARNING" in ln]
    verdict("torch_profiler_inside", done.returncode == 0 and profiled, program_status=done.returncode,
            profile_written=profiled, profiler_kernels=profiled_kernels,
            statuses=repr([s for s, _ in statuses]), kineto=repr(kineto[:2]))


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__)
        return 2
    bin_dir, out_dir = argv[1], argv[2]
    os.makedirs(out_dir, exist_ok=True)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("cannot become a child subreaper", file=sys.stderr)
        return 1
    checks = [lambda: agent_sigkill(bin_dir, out_dir),
              lambda: crash(bin_dir, out_dir, "segv", 128 + signal.SIGSEGV),
              lambda: crash(bin_dir, out_dir, "abort", 128 + signal.SIGABRT),
              lambda: crash(bin_dir, out_dir, "kill", 128 + signal.SIGKILL),
              lambda: crash(bin_dir, out_dir, "exit", 3),
              lambda: cupti_holder(bin_dir, out_dir, "subscribe", "cupti_in_use"),
              lambda: cupti_holder(bin_dir, out_dir, "steal", "stolen"),
              lambda: torch_profiler_inside(out_dir)]
    for check in checks:
        try:
            check()
        except Exception as exc:  # report and go on: one broken check must not hide the others
            print(f"fault check failed to run: {type(exc).__name__}: {exc}", flush=True)
            RESULTS[f"error{len(RESULTS)}"] = False
    print(f"faults_ok={'yes' if RESULTS and all(RESULTS.values()) else 'no'}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
