"""Builds the NVML collector for an agent: the real NVML, or a fake scenario when asked for one.

The fake backend is chosen by ``AgentConfig.options["nvml_fake"]`` or the environment variable
``GPUFLOW_NVML_FAKE`` (the option wins), naming a scenario of
:mod:`gpuflow.collectors.nvml.fake_scenarios`; ``nvml_fake_seed`` / ``GPUFLOW_NVML_FAKE_SEED``
pick the seed, ``nvml_fake_slow_s`` overrides how long the scenario's slow calls take (the
``hang`` scenario) and ``nvml_init_retry_s`` how often a failed nvmlInit is retried.

Constraints: called from ``start_collecting`` inside the serving process; creates objects only
(NVML is initialized later, on the collector's own thread); pynvml's library is not loaded here.
"""

from __future__ import annotations

import os
from typing import Mapping

from gpuflow.collectors.nvml.collector import DEFAULT_INIT_RETRY_S, SOURCE, NvmlCollector
from gpuflow.collectors.nvml.fake_backend import FakeBackend, describe
from gpuflow.core.context import CollectorContext
from gpuflow.core.snapshot import Problem

FAKE_ENV = "GPUFLOW_NVML_FAKE"
FAKE_SEED_ENV = "GPUFLOW_NVML_FAKE_SEED"


def fake_scenario_name(context: CollectorContext, environ: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if environ is None else environ
    return context.config.options.get("nvml_fake") or env.get(FAKE_ENV) or None


def build_collector(context: CollectorContext, environ: Mapping[str, str] | None = None) -> NvmlCollector:
    """The collector this agent should run. Raises ValueError for an unknown fake scenario."""
    env = os.environ if environ is None else environ
    options = context.config.options
    retry_s = float(options.get("nvml_init_retry_s", DEFAULT_INIT_RETRY_S))
    scenario = fake_scenario_name(context, env)
    if scenario:
        seed = int(options.get("nvml_fake_seed", env.get(FAKE_SEED_ENV, 0)))
        backend = FakeBackend(scenario, seed=seed)
        if "nvml_fake_slow_s" in options:
            backend.slow = {name: float(options["nvml_fake_slow_s"]) for name in backend.slow}
        notice = Problem(SOURCE, severity="info", message=(
            f"simulated GPUs (fake NVML scenario {describe(backend.scenario)}): nothing shown "
            "here is a real reading"))
        return NvmlCollector(backend, context.config, proc_reader=backend.proc_reader,
                             notify=context.notify, init_retry_s=retry_s, extra_problems=(notice,))
    from gpuflow.collectors.nvml.pynvml_backend import PynvmlBackend

    return NvmlCollector(PynvmlBackend(), context.config, notify=context.notify, init_retry_s=retry_s)
