"""The injection library as the tests build and load it: where the CUDA headers are, what
setup.py compiles and with which flags, the fake libcupti's source, and a runner for a child
process that loads the library.

Constraints: standard library only, importable without pytest plugins (tests/inject/conftest.py
builds its fixtures from it).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: a stand-in libcupti that replays scripted records (built by tests/inject/conftest.py)
FAKE_CUPTI_C = Path(__file__).resolve().with_name("fake_cupti.c")

# The exact flags setup.py's BuildNative uses for libgpuflow_inject.so.
INJECT_CFLAGS = ["-std=c11", "-O2", "-fPIC", "-fvisibility=hidden", "-pthread", "-Wall",
                 "-Wextra", "-Werror=implicit-function-declaration"]
INJECT_LDFLAGS = ["-ldl", "-lrt", "-pthread", "-Wl,--as-needed", "-Wl,-z,defs"]


def cuda_include_dir() -> Path | None:
    candidates = [Path(os.environ[v]) / "include" for v in ("CUDA_HOME", "CUDA_PATH")
                  if os.environ.get(v)]
    candidates += [Path("/usr/local/cuda/include"), Path("/opt/cuda/include")]
    for c in candidates:
        if (c / "cupti_activity.h").exists() and (c / "cuda.h").exists():
            return c
    return None


def inject_sources() -> list[str]:
    """INJECT_SOURCES as setup.py declares it (read, not imported: importing runs setup())."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "INJECT_SOURCES" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise AssertionError("setup.py has no INJECT_SOURCES")


INJECTED_CHILD = r"""
import ctypes, json, os, sys, time
lib = ctypes.CDLL(sys.argv[1])
rc = [lib.InitializeInjection(), lib.InitializeInjection()]
print(json.dumps({"pid": os.getpid(), "rc": rc}), flush=True)
exec(sys.argv[2])
"""


def run_injected(lib: str, env_extra: dict, body: str = "", timeout: float = 30) -> tuple:
    """Run a Python child that loads `lib` and calls InitializeInjection twice, then `body`.

    Returns (completed_process, first_json_line). The child's environment is this one minus any
    GPUFLOW_*/CUDA_INJECTION variables, plus `env_extra`.
    """
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GPUFLOW_", "FAKE_CUPTI_", "NVTX_INJECTION", "CUDA_INJECTION"))}
    env.update(env_extra)
    proc = subprocess.run([sys.executable, "-c", INJECTED_CHILD, lib, body], env=env,
                          capture_output=True, text=True, timeout=timeout)
    first = proc.stdout.splitlines()[0] if proc.stdout else "{}"
    return proc, json.loads(first)
