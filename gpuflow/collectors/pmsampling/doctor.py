"""The PM-sampling collector's lines in ``gpuflow doctor``: is the helper built, may this user read
the GPU's counters, and, when ``--gpu-metrics`` is on (``GPUFLOW_GPU_METRICS=1``), does GPU 0
actually sample.

The privilege is read where the driver says it (``RmProfilingAdminOnly`` in
/proc/driver/nvidia/params, the module option ``NVreg_RestrictProfilingToAdminUsers``) against
this process's effective uid and capabilities (``CAP_SYS_ADMIN`` in /proc/self/status). The probe
runs the helper itself with ``--probe`` (it starts sampling, says how it went, stops), in its own
process: doctor loads no CUDA. It is opt-in because it initialises the driver (about a second) and
takes the counters for that moment.

Every check is needed for ``speed`` only: GPU-metric rows are an extra, and a refusal leaves
``gpuflow watch`` and ``run`` working (a warning, never a failure).

Constraints: at most :data:`PROBE_TIMEOUT_S` for the probe, under a second without it.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any, Mapping

from gpuflow.collectors.pmsampling import paths
from gpuflow.collectors.pmsampling.samplers import helper_environment
from gpuflow.core.doctor import DoctorCheck

PROBE_TIMEOUT_S = 20.0
CAP_SYS_ADMIN = 21
PARAMS = "/proc/driver/nvidia/params"


def admin_only(params_path: str = PARAMS) -> bool | None:
    """Whether the driver keeps the counters for administrators; None without an NVIDIA driver."""
    try:
        with open(params_path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "RmProfilingAdminOnly":
                    return value.strip() != "0"
    except OSError:
        return None
    return None


def privileged(status_path: str = "/proc/self/status") -> bool:
    """Root, or CAP_SYS_ADMIN in the effective set."""
    if os.geteuid() == 0:
        return True
    try:
        with open(status_path, encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> CAP_SYS_ADMIN & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def privilege_check(restricted: bool | None, allowed: bool) -> DoctorCheck:
    if restricted is None:
        return DoctorCheck("GPU counters", False, f"no NVIDIA driver ({PARAMS} not found): no GPU metrics", "speed")
    if not restricted:
        return DoctorCheck("GPU counters", True, "open to every user (NVreg_RestrictProfilingToAdminUsers=0)", "speed")
    if allowed:
        return DoctorCheck("GPU counters", True, "for administrators only, and this user is one (root or "
                           "CAP_SYS_ADMIN)", "speed")
    return DoctorCheck("GPU counters", False, "for administrators only (NVreg_RestrictProfilingToAdminUsers=1): "
                       "--gpu-metrics needs root or CAP_SYS_ADMIN, or that module option set to 0", "speed")


def probe(binary: str, options: Mapping[str, Any], environ: Mapping[str, str]) -> DoctorCheck:
    """Run the helper's --probe on GPU 0: sampling starts, or why not, in its words."""
    cmd = [binary, "--probe", "--device", "0", "--interval-us", str(options["interval_us"])]
    cupti = options["cupti_lib"] or paths.cupti_library(environ)
    if options["cuda_lib"]:
        cmd += ["--cuda-lib", options["cuda_lib"]]
    if cupti:
        cmd += ["--cupti-lib", cupti]
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL,
                              env=helper_environment(environ))
    except subprocess.TimeoutExpired:
        return DoctorCheck("PM sampling", False, f"the probe of GPU 0 did not finish in {PROBE_TIMEOUT_S:g} s", "speed")
    except OSError as exc:
        return DoctorCheck("PM sampling", False, f"the helper could not be run: {exc.strerror}", "speed")
    lines = done.stdout.decode("utf-8", "replace").splitlines()[:16]
    head = "".join(c if c.isprintable() else "?" for c in (lines[0] if lines else ""))[:600]
    fields = dict(part.split("=", 1) for part in head.split(" ") if "=" in part)
    if done.returncode == 0 and fields.get("status") == "ok":
        chosen = sum(1 for line in lines[1:] if line.startswith("slot ") and not line.endswith(" -"))
        return DoctorCheck("PM sampling", True, f"GPU 0 samples: {head.split('detail=', 1)[-1]} "
                           f"({chosen} metrics)", "speed")
    said = head.split("detail=", 1)[-1] if "detail=" in head else (
        done.stderr.decode("utf-8", "replace").strip()[:300] or f"exit status {done.returncode}")
    return DoctorCheck("PM sampling", False, f"GPU 0: {fields.get('status', 'failed')}: {said}", "speed")


def checks(options: Mapping[str, Any], environ: Mapping[str, str]) -> list[DoctorCheck]:
    binary = paths.helper_path(options["sampler"])
    out = [DoctorCheck("PM sampler", binary is not None,
                       f"{paths.HELPER_NAME} built" if binary else
                       f"{paths.HELPER_NAME} was not built (CUPTI headers missing at install time): no --gpu-metrics",
                       "speed"),
           privilege_check(admin_only(), privileged())]
    if options["gpu_metrics"] and binary is not None:
        out.append(probe(str(binary), options, environ))
    return out
