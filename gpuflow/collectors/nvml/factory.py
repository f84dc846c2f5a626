"""Builds the NVML collector for an agent: the real NVML, or a fake scenario when asked for one.

The fake backend is chosen by the ``fake`` option (``GPUFLOW_NVML_FAKE``, or
``AgentConfig.options["nvml"]["fake"]``; :mod:`gpuflow.collectors.nvml.options`), naming a
scenario of :mod:`gpuflow.collectors.nvml.fake_scenarios`; ``fake_seed`` picks the seed,
``fake_slow_s`` overrides how long the scenario's slow calls take (the ``hang`` scenario) and
``init_retry_s`` how often a failed nvmlInit is retried. The ``history*`` options give the
history's budget (:mod:`gpuflow.collectors.nvml.history`), or none with ``history`` off. The
``k8s_*`` and ``pod_resources`` options give the sources of pod names and GPU allocations
(:func:`build_workloads`), where the agent runs in Kubernetes.

Constraints: called from ``start_collecting`` inside the serving process; creates objects only
(NVML is initialized later, on the collector's own thread); pynvml's library is not loaded here.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping

from gpuflow.collectors.nvml.collector import MIN_GAP_S, SOURCE, NvmlCollector
from gpuflow.collectors.nvml.fake_backend import FakeBackend, describe
from gpuflow.collectors.nvml.history import HistoryBudget, HistoryStore
from gpuflow.collectors.nvml.procinfo import LinuxProcReader
from gpuflow.core.context import AgentConfig, CollectorContext
from gpuflow.core.snapshot import Problem
from gpuflow.workload.resolver import WorkloadResolver


def build_history(config: AgentConfig, options: Mapping[str, Any]) -> HistoryStore | None:
    """The history store the options ask for (None: history off)."""
    if not options["history"]:
        return None
    return HistoryStore(HistoryBudget(
        interval_s=config.interval_s, fine_s=options["history_fine_s"],
        coarse_s=options["history_coarse_s"], processes=options["history_processes"],
        min_tick_s=MIN_GAP_S))


def build_workloads(options: Mapping[str, Any], read_cgroup: Callable[[int], bytes | None],
                    environ: Mapping[str, str] | None = None) -> tuple[WorkloadResolver, tuple[Problem, ...]]:
    """Who each process belongs to: the cgroup reader with the pod names of the Kubernetes API
    and the kubelet's allocations where the options and the machine give them; and what to tell
    the user about a source that was asked for and cannot be had."""
    from gpuflow.workload import kube_api, pod_resources

    environ = os.environ if environ is None else environ
    notes: list[Problem] = []
    names = None
    api = options["k8s_api"]
    config = (None if api == "off" else kube_api.in_cluster(environ) if api == "auto"
              else kube_api.ApiConfig(api, options["k8s_token_file"], options["k8s_ca_file"]))
    if config is not None:
        if options["k8s_node"] is None:
            notes.append(Problem(SOURCE, severity="warning", message=(
                "pods are not named: set NODE_NAME to this node's name (the Downward API's "
                "spec.nodeName) so the agent can list its pods")))
        else:
            names = kube_api.KubeApiNames(config, options["k8s_node"])
    allocations = None
    wanted = options["pod_resources"]
    path = pod_resources.DEFAULT_SOCKET if wanted == "auto" else wanted
    missing = pod_resources.available()
    # auto: the kubelet's socket where it is (a Kubernetes node with the agent allowed to see it)
    asked = wanted != "off" and (wanted != "auto" or os.path.exists(path))
    if asked and missing:
        notes.append(Problem(SOURCE, severity="warning", message=(
            f"GPU allocations are not checked: {missing}")))
    elif asked:
        allocations = pod_resources.PodResourcesAllocations(path)
    return WorkloadResolver(read_cgroup, names=names, allocations=allocations), tuple(notes)


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
        workloads, notes = build_workloads(options, backend.proc_reader.cgroup)
        return NvmlCollector(backend, context.config, proc_reader=backend.proc_reader,
                             notify=context.notify, init_retry_s=retry_s,
                             extra_problems=(notice,) + notes, history=history, workloads=workloads)
    from gpuflow.collectors.nvml.pynvml_backend import PynvmlBackend

    proc_reader = LinuxProcReader()
    workloads, notes = build_workloads(options, proc_reader.cgroup)
    return NvmlCollector(PynvmlBackend(), context.config, proc_reader=proc_reader, notify=context.notify,
                         init_retry_s=retry_s, history=history, workloads=workloads, extra_problems=notes)
