"""The NVML collector's options: the fake backend for tests and demos, and nvmlInit's retry period.

Declared through the ``declare_options`` hook (gpuflow.core.options): ``GPUFLOW_NVML_FAKE`` names
a scenario of :mod:`gpuflow.collectors.nvml.fake_scenarios` (simulated GPUs, labelled as such in
the snapshot), ``GPUFLOW_NVML_FAKE_SEED`` its seed; ``fake_slow_s`` (how long the scenario's slow
calls take, the ``hang`` scenario) and ``init_retry_s`` are given in code by tests. An unknown
scenario name is not refused here: the collector reports it as a Problem and runs without GPUs,
so ``gpuflow watch`` still starts and says why.

Constraints: pure; importing it loads no NVML.
"""

from __future__ import annotations

import math
from typing import Any

from gpuflow.core.options import Option, PluginOptions

KEY = "nvml"
DEFAULT_INIT_RETRY_S = 30.0


def scenario_name(value: Any) -> str | None:
    """A fake scenario's name (checked when the collector starts), or None for the real NVML."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"expected a scenario name, got {value!r}")
    return value.strip() or None


def seed(value: Any) -> int:
    """The fake scenario's seed, a whole number."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"expected a whole number, got {value!r}")
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"expected a whole number, got {value!r}") from None


def seconds(value: Any) -> float:
    """A finite, non-negative number of seconds."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number of seconds, got {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"expected a finite number of seconds >= 0, got {value!r}")
    return number


def positive_seconds(value: Any) -> float:
    """A finite number of seconds above 0."""
    number = seconds(value)
    if number == 0:
        raise ValueError(f"expected a number of seconds above 0, got {value!r}")
    return number


OPTIONS = PluginOptions(KEY, (
    Option("fake", scenario_name, None,
           "play a scripted fake-GPU scenario instead of the real NVML (tests, demos)",
           env="GPUFLOW_NVML_FAKE"),
    Option("fake_seed", seed, 0, "the fake scenario's seed", env="GPUFLOW_NVML_FAKE_SEED"),
    Option("fake_slow_s", seconds, None, "how long the fake scenario's slow NVML calls take"),
    Option("init_retry_s", positive_seconds, DEFAULT_INIT_RETRY_S, "how often a failed nvmlInit is retried"),
))
