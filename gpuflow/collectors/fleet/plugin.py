"""The fleet collector as a pluggy plugin (registered under the name "fleet").

Idle unless targets are given (``--targets``/``--target`` to ``gpuflow hub``, or
``GPUFLOW_HUB_TARGETS_FILE``/``GPUFLOW_HUB_TARGETS``): it then starts the hub's network thread
(:class:`~gpuflow.collectors.fleet.hub_loop.HubLoop`) in ``start_collecting`` and answers
``produce_snapshot`` with every followed host's latest state (the same part object while nothing
changed). Per-agent state lives in ``context.slots["fleet"]``.

Constraints: importing this module starts nothing and imports no network library (aiohttp is
imported when a hub starts); ``stop_collecting`` returns within a few seconds.
"""

from __future__ import annotations

from gpuflow.collectors.fleet.options import KEY, OPTIONS
from gpuflow.core.context import CollectorContext
from gpuflow.core.hookspecs import hookimpl
from gpuflow.core.options import PluginOptions
from gpuflow.core.snapshot import SnapshotPart

SLOT = KEY


@hookimpl
def declare_options() -> PluginOptions:
    return OPTIONS


@hookimpl
def start_collecting(context: CollectorContext) -> None:
    options = context.plugin_options(OPTIONS)
    if not options["targets"] and options["targets_file"] is None:
        return
    from gpuflow.collectors.fleet.hub_loop import HubLoop

    hub = HubLoop(options, context.notify)
    context.slots[SLOT] = hub
    hub.start()


@hookimpl
def produce_snapshot(context: CollectorContext) -> SnapshotPart | None:
    hub = context.slots.get(SLOT)
    return hub.part() if hub is not None else None


@hookimpl
def stop_collecting(context: CollectorContext) -> None:
    hub = context.slots.get(SLOT)
    if hub is not None:
        hub.stop()
