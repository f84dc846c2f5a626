"""The NVML collector's options: the fake backend for tests and demos, nvmlInit's retry period, and
the history's budget.

Declared through the ``declare_options`` hook (gpuflow.core.options): ``GPUFLOW_NVML_FAKE`` names
a scenario of :mod:`gpuflow.collectors.nvml.fake_scenarios` (simulated GPUs, labelled as such in
the snapshot), ``GPUFLOW_NVML_FAKE_SEED`` its seed; ``fake_slow_s`` (how long the scenario's slow
calls take, the ``hang`` scenario) and ``init_retry_s`` are given in code by tests. An unknown
scenario name is not refused here: the collector reports it as a Problem and runs without GPUs,
so ``gpuflow watch`` still starts and says why. The history (docs/recorder.md, "History") is on
unless ``GPUFLOW_NVML_HISTORY=0``; ``GPUFLOW_NVML_HISTORY_FINE_S`` (how long samples are kept at
the polling rate), ``_COARSE_S`` (how long the minute roll-ups are) and ``_PROCESSES`` (process
series kept) bound it; environment only, no flags: they are rarely changed.

Who a process belongs to (gpuflow.workload; docs/fleet.md): ``GPUFLOW_K8S_API`` (``auto``: the
API server a pod sees, with its service account; ``off``; or a URL, https unless loopback) with
``GPUFLOW_K8S_TOKEN_FILE``/``_CA_FILE`` names pods, of the node ``NODE_NAME`` names (the Downward
API); ``GPUFLOW_POD_RESOURCES_SOCKET`` (``auto``: the kubelet's socket when it is there; ``off``;
or a path) says which GPUs each container was allocated. Environment only: a DaemonSet sets them.

Constraints: pure; importing it loads no NVML.
"""

from __future__ import annotations

import math
from typing import Any

from gpuflow.core.options import Option, PluginOptions, boolean

KEY = "nvml"
DEFAULT_INIT_RETRY_S = 30.0
DEFAULT_HISTORY_FINE_S = 3600.0  #: an hour at the polling rate
DEFAULT_HISTORY_COARSE_S = 86_400.0  #: a day of minute roll-ups
DEFAULT_HISTORY_PROCESSES = 32  #: (process, GPU) series
HISTORY_FINE_S_RANGE = (300.0, 86_400.0)
HISTORY_COARSE_S_RANGE = (60.0, 7 * 86_400.0)  #: at most a week: the longest range /api/history takes
HISTORY_PROCESSES_RANGE = (0, 256)  #: 256 slots hold 31 MiB at a 1 s interval


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


def _within(convert: Any, low: float, high: float, unit: str) -> Any:
    def checked(value: Any) -> Any:
        number = convert(value)
        if not low <= number <= high:
            raise ValueError(f"expected {low:g} to {high:g} {unit}, got {value!r}")
        return number
    checked.__doc__ = f"{convert.__doc__} Between {low:g} and {high:g}."
    return checked


def count(value: Any) -> int:
    """A whole number >= 0."""
    number = seed(value)
    if number < 0:
        raise ValueError(f"expected a whole number >= 0, got {value!r}")
    return number


def switch_or_url(value: Any) -> str:
    """``auto``, ``off``, or the Kubernetes API server's URL (https, or http to loopback)."""
    text = str(value).strip()
    if text in ("auto", "off"):
        return text
    from gpuflow.workload.kube_api import ApiConfig

    ApiConfig(text, None, None)  # ValueError with the reason
    return text


def switch_or_path(value: Any) -> str:
    """``auto``, ``off``, or a path."""
    text = str(value).strip()
    if not text:
        raise ValueError("expected auto, off or a path")
    return text


def node_name(value: Any) -> str | None:
    """A Kubernetes node name (a DNS subdomain), or None."""
    text = str(value).strip()
    if not text:
        return None
    if len(text) > 253 or not all(c.isalnum() and c.isascii() or c in "-." for c in text):
        raise ValueError(f"expected a Kubernetes node name, got {text[:64]!r}")
    return text


OPTIONS = PluginOptions(KEY, (
    Option("fake", scenario_name, None,
           "play a scripted fake-GPU scenario instead of the real NVML (tests, demos)",
           env="GPUFLOW_NVML_FAKE"),
    Option("fake_seed", seed, 0, "the fake scenario's seed", env="GPUFLOW_NVML_FAKE_SEED"),
    Option("fake_slow_s", seconds, None, "how long the fake scenario's slow NVML calls take"),
    Option("init_retry_s", positive_seconds, DEFAULT_INIT_RETRY_S, "how often a failed nvmlInit is retried"),
    Option("history", boolean, True, "keep the GPUs' and GPU processes' readings over time",
           env="GPUFLOW_NVML_HISTORY"),
    Option("history_fine_s", _within(seconds, *HISTORY_FINE_S_RANGE, "seconds"), DEFAULT_HISTORY_FINE_S,
           "how long readings are kept at the polling rate", env="GPUFLOW_NVML_HISTORY_FINE_S"),
    Option("history_coarse_s", _within(seconds, *HISTORY_COARSE_S_RANGE, "seconds"),
           DEFAULT_HISTORY_COARSE_S, "how long their one-a-minute roll-ups are kept",
           env="GPUFLOW_NVML_HISTORY_COARSE_S"),
    Option("history_processes", _within(count, *HISTORY_PROCESSES_RANGE, "series"),
           DEFAULT_HISTORY_PROCESSES, "GPU process series kept (one per process and GPU it holds)",
           env="GPUFLOW_NVML_HISTORY_PROCESSES"),
    Option("k8s_api", switch_or_url, "auto", "the Kubernetes API server that names pods: auto (in a "
           "pod), off, or its URL", env="GPUFLOW_K8S_API"),
    Option("k8s_token_file", switch_or_path, None, "the token presented to the Kubernetes API server",
           env="GPUFLOW_K8S_TOKEN_FILE"),
    Option("k8s_ca_file", switch_or_path, None, "the CA the Kubernetes API server's certificate is "
           "checked against", env="GPUFLOW_K8S_CA_FILE"),
    Option("k8s_node", node_name, None, "this node's name (the Downward API's spec.nodeName)",
           env="NODE_NAME"),
    Option("pod_resources", switch_or_path, "auto", "the kubelet's pod-resources socket: auto, off, "
           "or its path", env="GPUFLOW_POD_RESOURCES_SOCKET"),
))
