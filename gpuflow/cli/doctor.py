"""``gpuflow doctor``: what works on this machine and, for what does not, why and what to do.

Each plugin says its own part through the ``doctor_checks`` hook (the NVML collector: NVML, the
driver and the GPUs; the CUPTI collector: the injection library, libcupti, the ring decoder and
shared memory); this module adds the web stack the agent serves with, prints every check, and
exits 0 when ``watch`` and ``run`` can both work, 1 otherwise. A plugin whose checks raise is
reported as one failed check, and the others are still printed.

Constraints: never initialises CUDA, never needs a GPU, finishes in about a second; reaches the
collectors only through the plugin manager.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

import pluggy

from gpuflow.core.context import AgentConfig, CollectorContext
from gpuflow.core.doctor import DoctorCheck

WEB_MODULES = ("falcon", "gunicorn", "prometheus_client")


def web_checks() -> list[DoctorCheck]:
    out = []
    for module in WEB_MODULES:
        try:
            mod = __import__(module)
            out.append(DoctorCheck(module, True, getattr(mod, "__version__", "installed"), "watch"))
        except ImportError:
            out.append(DoctorCheck(module, False, f"not installed (pip install {module.replace('_', '-')})",
                                   "watch"))
    return out


def plugin_checks(pm: pluggy.PluginManager, context: CollectorContext) -> list[DoctorCheck]:
    """Every plugin's checks, plugins in registration order (entry points, the built-ins, then
    ``--plugin`` modules); a plugin that fails is one failed check."""
    results: list[DoctorCheck] = []
    for impl in pm.hook.doctor_checks.get_hookimpls():
        try:
            checks = list(impl.function(context=context) or ())
            if not all(isinstance(c, DoctorCheck) for c in checks):
                raise TypeError("doctor_checks must return DoctorCheck objects")
        except Exception as exc:  # noqa: BLE001 - a broken check must not hide the others
            checks = [DoctorCheck(impl.plugin_name, False, f"its checks failed: {exc!r}", "watch")]
        results.extend(checks)
    return results


def run_checks(pm: pluggy.PluginManager, options: dict | None = None) -> list[DoctorCheck]:
    context = CollectorContext(AgentConfig(options=options or {}))
    return plugin_checks(pm, context) + web_checks()


def _first_failure(results: list[DoctorCheck], *needed_for: str) -> DoctorCheck | None:
    return next((c for c in results if not c.ok and c.needed_for in needed_for), None)


def verdicts(results: list[DoctorCheck]) -> tuple[str, str]:
    """The last two lines: whether ``watch`` and ``run`` work, and if not, the first reason why."""
    cannot_start = _first_failure(results, "watch")
    no_gpus = _first_failure(results, "gpus")
    cannot_trace = _first_failure(results, "watch", "gpus", "run")
    if cannot_start is not None:
        watch = f"cannot start: {cannot_start.name}: {cannot_start.detail}"
    elif no_gpus is not None:
        watch = f"works, without GPUs: {no_gpus.name}: {no_gpus.detail}"
    else:
        watch = "works"
    run = ("can trace CUDA programs" if cannot_trace is None
           else f"cannot trace: {cannot_trace.name}: {cannot_trace.detail}")
    return watch, run


def print_checks(results: list[DoctorCheck], out: TextIO) -> None:
    for c in results:
        mark = " ok " if c.ok else ("warn" if c.needed_for == "speed" else "FAIL")
        out.write(f"[{mark}] {c.name:<18} {c.detail}\n")
    watch, run = verdicts(results)
    out.write(f"\ngpuflow watch: {watch}\ngpuflow run:   {run}\n")


def cmd_doctor(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    results = run_checks(args.plugin_manager, args.plugin_options)
    print_checks(results, out)
    return 0 if all(c.ok for c in results if c.needed_for != "speed") else 1
