"""The fleet collector as a pluggy plugin (registered under the name "fleet").

Idle unless targets are given (``--targets``/``--target``/``--srv`` to ``gpuflow hub``, or
``GPUFLOW_HUB_TARGETS_FILE``/``GPUFLOW_HUB_TARGETS``/``GPUFLOW_HUB_SRV``): it then starts the hub's network thread
(:class:`~gpuflow.collectors.fleet.hub_loop.HubLoop`) in ``start_collecting`` and answers
``produce_snapshot`` with every followed host's latest state (the same part object while nothing
changed). ``watch_hosts`` switches the hosts pages watch to full detail (and back);
``answer_for_host`` relays the recorder's routes to a followed host's agent. Per-agent state
lives in ``context.slots["fleet"]``.

Constraints: importing this module starts nothing and imports no network library (aiohttp is
imported when a hub starts); ``stop_collecting`` returns within a few seconds.
"""

from __future__ import annotations

from gpuflow.collectors.fleet.options import KEY, OPTIONS
from gpuflow.core.context import CollectorContext
from gpuflow.core.hookspecs import hookimpl
from gpuflow.core.host_answer import HostAnswer
from gpuflow.core.options import PluginOptions
from gpuflow.core.snapshot import SnapshotPart

SLOT = KEY


@hookimpl
def declare_options() -> PluginOptions:
    return OPTIONS


@hookimpl
def start_collecting(context: CollectorContext) -> None:
    options = context.plugin_options(OPTIONS)
    if not options["targets"] and options["targets_file"] is None and not options["srv"]:
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


@hookimpl
def watch_hosts(context: CollectorContext, hosts: frozenset[str]) -> None:
    hub = context.slots.get(SLOT)
    if hub is not None:
        hub.set_watched(hosts)


@hookimpl
def answer_for_host(context: CollectorContext, host: str, route: str, query: str) -> HostAnswer | None:
    hub = context.slots.get(SLOT)
    return hub.answer(host, route, query) if hub is not None else None
