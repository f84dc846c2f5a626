"""Builds the NVML collector for an agent: the real NVML, or a fake scenario when asked for one.

The fake backend is chosen by the ``fake`` option (``GPUFLOW_NVML_FAKE``, or
``AgentConfig.options["nvml"]["fake"]``; :mod:`gpuflow.collectors.nvml.options`), naming a
scenario of :mod:`gpuflow.collectors.nvml.fake_scenarios`; ``fake_seed`` picks the seed,
``fake_slow_s`` overrides how long the scenario's slow calls take (the ``hang`` scenario) and
``init_retry_s`` how often a failed nvmlInit is retried. The ``history*`` options give the
history's budget (:mod:`gpuflow.collectors.nvml.history`), or none with ``history`` off.

Constraints: called from ``start_collecting`` inside the serving process; creates objects only
(NVML is initialized later, on the collector's own thread); pynvml's library is not loaded here.
"""

from __future__ import annotations

from typing import Any, Mapping

from gpuflow.collectors.nvml.collector import MIN_GAP_S, SOURCE, NvmlCollector
from gpuflow.collectors.nvml.fake_backend import FakeBackend, describe
from gpuflow.collectors.nvml.history import HistoryBudget, HistoryStore
from gpuflow.core.context import AgentConfig, CollectorContext
from gpuflow.core.snapshot import Problem


def build_history(config: AgentConfig, options: Mapping[str, Any]) -> HistoryStore | None:
    """The history store the options ask for (None: history off)."""
    if not options["history"]:
        return None
    return HistoryStore(HistoryBudget(
        interval_s=config.interval_s, fine_s=options["history_fine_s"],
        coarse_s=options["history_coarse_s"], processes=options["history_processes"],
        min_tick_s=MIN_GAP_S))


def build_collector(context: CollectorContext, options: Mapping[str, Any]) -> NvmlCollector:
    """The collector this agent should run. Raises ValueError for an unknown fake scenario."""
    retry_s = options["init_retry_s"]
    history = build_history(context.config, options)
    scenario = options["fake"]
    if scenario:
        backend = FakeBackend(scenario, seed=options["fake_seed"])
        if options["fake_slow_s"] is not None:
            backend.slow = {name: options["fake_slow_s"] for name in backend.slow}
        notice = Problem(SOURCE, severity="info", message=(
            f"simulated GPUs (fake NVML scenario {describe(backend.scenario)}): nothing shown "
            "here is a real reading"))
        return NvmlCollector(backend, context.config, proc_reader=backend.proc_reader,
                             notify=context.notify, init_retry_s=retry_s, extra_problems=(notice,),
                             history=history)
    from gpuflow.collectors.nvml.pynvml_backend import PynvmlBackend

    return NvmlCollector(PynvmlBackend(), context.config, notify=context.notify, init_retry_s=retry_s,
                         history=history)
