"""The CUPTI collector as a pluggy plugin, registered under the name ``cupti``.

Active only when the agent runs a ``gpuflow run`` session (``context.config.session`` set): then
``start_collecting`` starts a :class:`~gpuflow.collectors.cupti.collector.CuptiCollector` (its
drain thread) and keeps it in ``context.slots["cupti"]``; otherwise nothing starts and
``produce_snapshot`` returns None. The CLI reaches the collector with :func:`get_collector` (to
report its child's exit status and print the end-of-run summary).

Constraints: module-level hook implementations, per-agent state only in ``context.slots``; never
imports the NVML collector; nothing happens at import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuflow.core.hookspecs import hookimpl

if TYPE_CHECKING:
    from gpuflow.collectors.cupti.collector import CuptiCollector
    from gpuflow.core.context import CollectorContext
    from gpuflow.core.snapshot import SnapshotPart

SLOT = "cupti"


def get_collector(context: CollectorContext) -> CuptiCollector | None:
    """The running CUPTI collector of an agent, or None (no session, or not started)."""
    return context.slots.get(SLOT)


@hookimpl
def start_collecting(context: CollectorContext) -> None:
    session = context.config.session
    if not session or SLOT in context.slots:
        return
    from gpuflow.collectors.cupti.collector import CuptiCollector

    collector = CuptiCollector(
        session, context.notify,
        lane_span_cap=context.config.lane_span_cap,
        exit_statuses=getattr(context, "exit_statuses", None),
        **context.config.options.get("cupti", {}),
    )
    context.slots[SLOT] = collector
    collector.start()


@hookimpl
def produce_snapshot(context: CollectorContext) -> SnapshotPart | None:
    collector = get_collector(context)
    return None if collector is None else collector.part()


@hookimpl
def stop_collecting(context: CollectorContext) -> None:
    collector = get_collector(context)
    if collector is not None:
        collector.stop()
