"""One run of a workload in one mode, and what it printed: the runner every cost benchmark shares.

A workload is a command that prints its own figures as ``name=<number>``; this runs it in one
of three modes — **bare** (no injection), **floor** (the minimal CUPTI collector,
bench/cost/cupti_floor.c, injected through CUDA_INJECTION64_PATH) or **gpuflow** (under
``gpuflow run``) — optionally through an exec shim that sets the program's CPUs and/or turns
address-space randomisation off, and returns the metric asked for with everything else it printed.
bench/overhead.py runs the three modes side by side, bench/cost/overhead_ab.py the gpuflow mode
with GPUFlow's work alternating, bench/cost/spread_probe.py the shim alone.

Constraints: standard library only and no import from bench/: bench/overhead.py imports it as
``cost.workload_run`` (from its own folder), the scripts here as ``workload_run``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from typing import Callable

#: sets the program's CPUs and/or turns address-space randomisation off, then becomes the
#: program (exec: same pid, nothing left in between; the personality flag survives the exec)
EXEC_SHIM = """import ctypes, os, sys
cpus, no_aslr = {cpus!r}, {no_aslr!r}
if cpus:
    os.sched_setaffinity(0, cpus)
if no_aslr:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.personality.restype = ctypes.c_int
    now = libc.personality(ctypes.c_ulong(0xffffffff))
    if now == -1 or libc.personality(ctypes.c_ulong(now | 0x0040000)) == -1:
        sys.exit("cannot turn address-space randomisation off: errno " + str(ctypes.get_errno()))
os.execvp(sys.argv[1], sys.argv[1:])
"""


def shimmed(cmd: list[str], cpus: set[int] | None = None, no_aslr: bool = False) -> list[str]:
    """``cmd`` started through EXEC_SHIM (ADDR_NO_RANDOMIZE = 0x0040000 from linux/personality.h)."""
    return [sys.executable, "-c", EXEC_SHIM.format(cpus=sorted(cpus or ()), no_aslr=no_aslr), *cmd]


def run_once(mode: str, cmd: list[str], metric: str, floor_lib: str,
             pin: tuple[set[int], set[int]] | None = None,
             extra_env: dict[str, str] | None = None,
             while_running: Callable[[subprocess.Popen], None] | None = None,
             no_aslr: bool = False,
             ) -> tuple[float, dict[str, float]]:
    """One run: the metric's value, and every ``name=<number>`` the program printed (plus the
    process wall time as ``wall``), so other measures of the same runs can be compared.
    ``extra_env`` reaches the program (through ``gpuflow run`` in that mode); ``while_running``
    is called on a thread with the started process (``gpuflow run`` itself in that mode) and
    must return once it has exited. ``no_aslr`` starts the program (not gpuflow's agent) with
    address-space randomisation off."""
    env = dict(os.environ)
    for var in ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "GPUFLOW_RING_SOCKET",
                "GPUFLOW_AB_PERIOD_MS", "PROGRESS_TRACE"):
        env.pop(var, None)
    env.update(extra_env or {})
    if mode == "floor":
        env["CUDA_INJECTION64_PATH"] = floor_lib
    argv = cmd
    preexec = None
    if pin is not None:
        program_cpus, agent_cpus = pin
        argv = shimmed(cmd, program_cpus, no_aslr)
        preexec = lambda: os.sched_setaffinity(0, agent_cpus)  # noqa: E731 - the agent's (or shim's) CPUs
    elif no_aslr:
        argv = shimmed(cmd, no_aslr=True)
    if mode == "gpuflow":
        argv = [sys.executable, "-m", "gpuflow", "run", "--port", "0", "--no-summary", "--", *argv]
    t0 = time.perf_counter()
    with subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          preexec_fn=preexec) as proc:
        watcher = threading.Thread(target=while_running, args=(proc,), daemon=True) if while_running else None
        if watcher:
            watcher.start()
        try:
            stdout, stderr = proc.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        finally:
            if watcher:
                watcher.join(timeout=5)
    result = subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
    wall = time.perf_counter() - t0
    if result.returncode != 0:
        raise RuntimeError(f"{mode} {cmd} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    printed = {"wall": wall}
    for name, value in re.findall(r"\b([A-Za-z_]\w*)=([0-9][0-9.eE+-]*)", result.stdout):
        try:
            printed[name] = float(value)
        except ValueError:
            pass
    if metric not in printed:
        raise RuntimeError(f"{mode}: no {metric}= in output:\n{result.stdout}")
    return printed[metric], printed
