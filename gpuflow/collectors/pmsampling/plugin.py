"""The PM-sampling collector as a pluggy plugin, registered under the name ``pmsampling``.

Hooks, each the only way the rest of GPUFlow reaches it:

* ``declare_options`` — :data:`~gpuflow.collectors.pmsampling.options.OPTIONS` (``--gpu-metrics``,
  ``--gpu-metrics-interval-us``, ``--gpu-metrics-retain-mb``);
* ``start_collecting`` — with ``--gpu-metrics``, a :class:`~gpuflow.collectors.pmsampling.collector.PmCollector`
  (its helpers and its thread); without it, nothing (``produce_snapshot`` returns None, the page
  draws no rows);
* ``produce_snapshot`` — one line per GPU: sampling, or why not;
* ``query_history`` — the samples kept, as series (store.py), also after ``stop_collecting``;
* ``stop_collecting`` — stops the helpers, keeps the samples;
* ``doctor_checks`` — the helper, the counters' privilege, and with ``--gpu-metrics`` on
  (``GPUFLOW_GPU_METRICS=1``) a probe of GPU 0 (doctor.py).

Constraints: module-level hook implementations, per-agent state in ``context.slots``; imports no
other collector; nothing happens at import.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from gpuflow.collectors.pmsampling.options import OPTIONS
from gpuflow.core.hookspecs import hookimpl

if TYPE_CHECKING:
    from gpuflow.collectors.pmsampling.collector import PmCollector
    from gpuflow.core.context import CollectorContext
    from gpuflow.core.doctor import DoctorCheck
    from gpuflow.core.options import PluginOptions
    from gpuflow.core.recorded import HistoryPart
    from gpuflow.core.snapshot import SnapshotPart

SLOT = "pmsampling"


def get_collector(context: CollectorContext) -> PmCollector | None:
    return context.slots.get(SLOT)


@hookimpl
def declare_options() -> PluginOptions:
    return OPTIONS


@hookimpl
def start_collecting(context: CollectorContext) -> None:
    options = context.plugin_options(OPTIONS)
    if not options["gpu_metrics"] or get_collector(context) is not None:
        return
    from gpuflow.collectors.pmsampling import paths
    from gpuflow.collectors.pmsampling.collector import PmCollector
    from gpuflow.collectors.pmsampling.samplers import SamplerSettings

    binary = paths.helper_path(options["sampler"])
    cupti = options["cupti_lib"] or paths.cupti_library(os.environ)

    def settings(socket_path: Path) -> SamplerSettings:
        assert binary is not None
        return SamplerSettings(binary, socket_path, options["interval_us"], options["ring_records"],
                               options["decode_ms"], cuda_lib=options["cuda_lib"], cupti_lib=cupti)

    collector = PmCollector(settings if binary is not None else None, options["retain_mb"] << 20,
                            context.notify, os.environ)
    context.slots[SLOT] = collector
    collector.start()


@hookimpl
def produce_snapshot(context: CollectorContext) -> SnapshotPart | None:
    collector = get_collector(context)
    return None if collector is None else collector.part()


@hookimpl
def query_history(context: CollectorContext, start_s: float, end_s: float) -> HistoryPart | None:
    collector = get_collector(context)
    return None if collector is None else collector.store.query(start_s, end_s, "pmsampling")


@hookimpl
def stop_collecting(context: CollectorContext) -> None:
    collector = get_collector(context)
    if collector is not None:
        collector.stop()


@hookimpl
def doctor_checks(context: CollectorContext) -> Sequence[DoctorCheck]:
    from gpuflow.collectors.pmsampling import doctor

    options = context.plugin_options(OPTIONS)
    return doctor.checks(options, os.environ)
