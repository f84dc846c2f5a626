"""The built-in NVML collector as a pluggy plugin (registered under the name "nvml").

An ordinary plugin, registered the way third-party collectors are (``DEFAULT_PLUGINS`` in
:mod:`gpuflow.core.plugins`); disable it with ``GPUFLOW_DISABLED_PLUGINS=nvml``. Per-agent state
lives in ``context.slots["nvml"]`` (several agents may share a process in tests). Its options
(the fake backend, nvmlInit's retry period) are :data:`~gpuflow.collectors.nvml.options.OPTIONS`;
its ``gpuflow doctor`` lines come from :mod:`gpuflow.collectors.nvml.doctor`. It answers
``query_history`` from the collector's history (:mod:`gpuflow.collectors.nvml.history`), also
after ``stop_collecting``, as a recorder's window is (``gpuflow run --trace-out`` asks then).

Constraints: importing this module does nothing (no NVML, no threads); ``start_collecting``
returns at once (NVML is initialized on the collector's thread) and never raises for an
environmental problem: a missing driver becomes a Problem in the part.
"""

from __future__ import annotations

from typing import Sequence

from gpuflow.collectors.nvml.collector import SOURCE
from gpuflow.collectors.nvml.factory import build_collector
from gpuflow.collectors.nvml.options import OPTIONS
from gpuflow.core.context import CollectorContext
from gpuflow.core.doctor import DoctorCheck
from gpuflow.core.hookspecs import hookimpl
from gpuflow.core.options import PluginOptions
from gpuflow.core.recorded import HistoryPart
from gpuflow.core.snapshot import Problem, SnapshotPart

SLOT = "nvml"
#: the history once the collector has stopped: its readings stay answerable (gpuflow run --trace-out)
HISTORY_SLOT = "nvml.history"


class _Misconfigured:
    """Stands in for the collector when its settings are wrong: reports why, collects nothing."""

    def __init__(self, message: str) -> None:
        self._part = SnapshotPart(source=SOURCE, problems=(Problem(SOURCE, message, "error"),))

    def latest(self) -> SnapshotPart:
        return self._part

    def stop(self) -> None:
        pass


@hookimpl
def declare_options() -> PluginOptions:
    return OPTIONS


@hookimpl
def start_collecting(context: CollectorContext) -> None:
    context.slots.pop(HISTORY_SLOT, None)
    try:
        collector = build_collector(context, context.plugin_options(OPTIONS))
    except ValueError as exc:  # e.g. an unknown fake scenario name
        context.slots[SLOT] = _Misconfigured(f"NVML collector not started: {exc}")
        return
    context.slots[SLOT] = collector
    collector.start()


@hookimpl
def produce_snapshot(context: CollectorContext) -> SnapshotPart | None:
    collector = context.slots.get(SLOT)
    return None if collector is None else collector.latest()


@hookimpl
def query_history(context: CollectorContext, start_s: float, end_s: float) -> HistoryPart | None:
    collector = context.slots.get(SLOT)
    history = context.slots.get(HISTORY_SLOT) if collector is None else getattr(collector, "history", None)
    return None if history is None else history.query(start_s, end_s, SOURCE)


@hookimpl
def stop_collecting(context: CollectorContext) -> None:
    collector = context.slots.pop(SLOT, None)
    if collector is not None:
        collector.stop()
        if getattr(collector, "history", None) is not None:   # still answerable: gpuflow run --trace-out
            context.slots[HISTORY_SLOT] = collector.history


@hookimpl
def doctor_checks(context: CollectorContext) -> Sequence[DoctorCheck]:
    from gpuflow.collectors.nvml.doctor import nvml_checks
    from gpuflow.collectors.nvml.pynvml_backend import PynvmlBackend

    return nvml_checks(PynvmlBackend())
