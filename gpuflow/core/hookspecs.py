"""Hook specifications: the contract between GPUFlow's core and its collector plugins.

A collector is any module or object with ``@gpuflow.hookimpl`` functions named after the specs
below. The built-in NVML and CUPTI collectors are ordinary plugins registered exactly the way
third-party ones are; third-party collectors are found through the entry-point group
``gpuflow.collectors``::

    # pyproject.toml of a third-party collector
    [project.entry-points."gpuflow.collectors"]
    mycollector = "mycollector.plugin"

    # mycollector/plugin.py
    import gpuflow
    from gpuflow.core.snapshot import SnapshotPart, Problem

    @gpuflow.hookimpl
    def produce_snapshot(context):
        return SnapshotPart(source="mycollector", problems=(Problem("mycollector", "hello"),))

Only ``produce_snapshot`` carries data; the two lifecycle hooks let a collector run its own
thread at its own pace (NVML at ``--interval``, CUPTI at its drain rate), so that
``produce_snapshot`` can answer from a cache without blocking the frame loop.

Constraints: hooks are called from the agent's frame thread (``produce_snapshot``) and from the
thread that starts/stops the agent — inside the gunicorn worker, never at import and never
before a fork. Implementations must be thread-safe against their own background threads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from gpuflow.core.context import CollectorContext
    from gpuflow.core.snapshot import SnapshotPart

PROJECT_NAME = "gpuflow"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def start_collecting(context: CollectorContext) -> None:
    """Called once when the agent starts, in the process that will serve requests.

    Start background threads, open libraries (nvmlInit), and keep per-agent state in
    ``context.slots[<your plugin name>]`` rather than in module globals: several agents may run
    in one process (tests), each with its own context. Call ``context.notify()`` whenever new
    data is ready, so the core sends a frame promptly (at most every 50 ms).

    Must not raise for an environmental problem (no driver, no GPU): record it and report it
    as a :class:`~gpuflow.core.snapshot.Problem` from :func:`produce_snapshot` instead. An
    exception here is treated as a bug: the agent logs it, reports it as a problem and runs on
    without this collector.

    :param context: The agent's collector context (configuration, ``notify``, ``slots``).
    :returns: Nothing; any return value is ignored.
    """


@hookspec
def produce_snapshot(context: CollectorContext) -> SnapshotPart | None:
    """Return this collector's latest contribution to the snapshot, or None if it has nothing.

    Called by the agent's frame loop whenever a collector has notified (at most every 50 ms)
    and at least once per ``--interval``. Must return quickly (a cached value): slow work belongs
    in the collector's own thread, started in :func:`start_collecting`. Return the *same object*
    while nothing changed: the agent sends a new frame only when some part is a new object.

    Merging: the results of all collectors are gathered (``None`` dropped), sorted by
    ``SnapshotPart.source`` (pluggy calls implementations in LIFO registration order, so the
    order of calls is not relied on) and merged by :func:`gpuflow.core.merge.merge_parts`:

    * ``host``: fields are taken from the first part (in source order) that knows them;
    * ``devices``: keyed by ``uuid``; the first part to report a uuid wins;
    * ``processes``: keyed by ``pid``; attachments are unioned by device uuid, and name / user /
      cmdline come from the first part that knows them;
    * ``traced``: keyed by ``(session, pid)``, the first part wins;
    * ``traced_retired``: keyed by ``session``, the first part wins;
    * ``problems``: concatenated in source order.

    The result is therefore the same whatever order the plugins were registered in.

    :param context: The agent's collector context.
    :returns: A :class:`~gpuflow.core.snapshot.SnapshotPart` whose ``source`` names the collector,
        or None.
    """


@hookspec
def stop_collecting(context: CollectorContext) -> None:
    """Called once when the agent stops (Ctrl-C, gunicorn worker exit, end of ``gpuflow run``).

    Stop threads, drain what is left (the CUPTI collector drains its rings here), release
    libraries (nvmlShutdown). Must return within a few seconds; must not raise.

    :param context: The agent's collector context.
    :returns: Nothing; any return value is ignored.
    """
