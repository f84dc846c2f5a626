"""The CUPTI collector as a pluggy plugin, registered under the name ``cupti``.

Hooks, each the only way the rest of GPUFlow reaches this collector:

* ``declare_options`` — :data:`~gpuflow.collectors.cupti.options.OPTIONS` (``--ring-capacity``,
  ``--flush-ms``, the spans kept per lane, ``GPUFLOW_RING_SOCKET``);
* ``child_environment`` — for a program ``gpuflow run`` launches: the injection library, the
  libcupti it must load, the ring socket its CUDA processes hand their rings to (in a private
  directory whose fresh name is chosen here and which ``start_collecting`` creates), ring capacity
  and flush period (:mod:`~gpuflow.collectors.cupti.injection`);
* ``start_collecting`` — creates the ring socket and starts a
  :class:`~gpuflow.collectors.cupti.collector.CuptiCollector` (its drain thread) when there is a
  session to take rings for (a launch's, or the ``ring_socket`` option's); otherwise nothing starts
  and ``produce_snapshot`` returns None;
* ``process_exited`` — the launched program's exit status, shown on its traced process;
* ``query_window`` — the traced executions the flight recorder retains in a window
  (gpuflow.collectors.cupti.recorder; ``--retain-mb``, ``--retain-s``), also after ``stop_collecting``;
* ``doctor_checks`` — injection library, libcupti, decoder, the ring transport.

Constraints: module-level hook implementations, per-agent state only in ``context.slots``; never
imports the NVML collector; nothing happens at import (the collector, the decoder and libcupti
are loaded by the hooks that need them).
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from gpuflow.collectors.cupti.options import OPTIONS, caps
from gpuflow.core.errors import LaunchRefused
from gpuflow.core.hookspecs import hookimpl

if TYPE_CHECKING:
    from gpuflow.collectors.cupti.collector import CuptiCollector
    from gpuflow.core.context import CollectorContext
    from gpuflow.core.doctor import DoctorCheck
    from gpuflow.core.options import PluginOptions
    from gpuflow.core.recorded import WindowPart
    from gpuflow.core.snapshot import SnapshotPart

SLOT = "cupti"


@dataclass
class _State:
    """This plugin's per-agent state: what a launch prepared (its session and the private directory
    of its ring socket, not created yet), and the running collector."""

    launch_session: str | None = None
    launch_directory: Path | None = None
    collector: CuptiCollector | None = None


def _state(context: CollectorContext) -> _State:
    return context.slots.setdefault(SLOT, _State())


def get_collector(context: CollectorContext) -> CuptiCollector | None:
    """The running CUPTI collector of an agent, or None (no session, or not started)."""
    state = context.slots.get(SLOT)
    return None if state is None else state.collector


@hookimpl
def declare_options() -> PluginOptions:
    return OPTIONS


@hookimpl
def child_environment(context: CollectorContext, session: str) -> Mapping[str, str]:
    from gpuflow.collectors.cupti import handover, injection

    options = context.plugin_options(OPTIONS)
    try:
        paths = injection.find_injection_paths()
    except injection.InjectionUnavailable as exc:
        raise LaunchRefused(f"cannot trace: {exc}") from None
    state = _state(context)
    state.launch_session = session
    state.launch_directory = handover.plan_private_directory(os.environ)
    return injection.child_environment(paths, state.launch_directory / handover.SOCKET_NAME,
                                       options["ring_capacity"], options["flush_ms"], base={})


@hookimpl
def start_collecting(context: CollectorContext) -> None:
    options = context.plugin_options(OPTIONS)
    state = _state(context)
    if state.collector is not None or not (state.launch_directory or options["ring_socket"]):
        return
    from gpuflow.collectors.cupti.collector import CuptiCollector
    from gpuflow.collectors.cupti.handover import RingSocket

    if state.launch_directory is not None:
        session = state.launch_session or secrets.token_hex(8)
        ring_socket = RingSocket.in_private_directory(state.launch_directory)
    else:   # beside programs started with the injection environment by hand
        session = secrets.token_hex(8)
        ring_socket = RingSocket.at(Path(options["ring_socket"]))
    state.collector = CuptiCollector(session, ring_socket, context.notify, lane_span_cap=options["lane_span_cap"],
                                     caps=caps(options), drain_max_records=options["ring_capacity"],
                                     retain_bytes=options["retain_mb"] << 20, retain_s=options["retain_s"])
    state.collector.start()


@hookimpl
def produce_snapshot(context: CollectorContext) -> SnapshotPart | None:
    collector = get_collector(context)
    return None if collector is None else collector.part()


@hookimpl
def query_window(context: CollectorContext, start_s: float, end_s: float, pid: int | None,
                 width_px: int | None) -> WindowPart | None:
    collector = get_collector(context)
    return None if collector is None else collector.window(start_s, end_s, pid, width_px)


@hookimpl
def process_exited(context: CollectorContext, pid: int, status: int) -> None:
    collector = get_collector(context)
    if collector is not None:
        collector.record_exit(pid, status)


@hookimpl
def stop_collecting(context: CollectorContext) -> None:
    collector = get_collector(context)
    if collector is not None:
        collector.stop()


@hookimpl
def doctor_checks(context: CollectorContext) -> Sequence[DoctorCheck]:
    from gpuflow.collectors.cupti import doctor

    ring_capacity = context.plugin_options(OPTIONS)["ring_capacity"]
    return [*doctor.injection_checks(), doctor.decoder_check(), doctor.ring_transport_check(ring_capacity)]
