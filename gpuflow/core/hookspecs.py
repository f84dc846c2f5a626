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

Only ``produce_snapshot`` carries data. The lifecycle hooks let a collector run its own thread
at its own pace (NVML at ``--interval``, CUPTI at its drain rate), so that ``produce_snapshot``
can answer from a cache without blocking the frame loop. The others let a plugin take part in
what the command line does without the command line knowing it: its own options and flags
(``declare_options``), what a program launched by ``gpuflow run`` needs in its environment
(``child_environment``) and learns when it ends (``process_exited``), and its lines in
``gpuflow doctor`` (``doctor_checks``). A plugin that keeps what it saw beyond "now" answers the
recorder's queries (``query_window``, ``query_history``; docs/recorder.md), which the web app asks
for ``/api/window`` and ``/api/history`` without knowing which collector holds the data. A plugin
that shows other hosts (a hub's fleet collector, docs/fleet.md) learns which of them pages watch
in full detail (``watch_hosts``) and answers the recorder's routes for them
(``answer_for_host``).

Why the agent calls each implementation itself (``get_hookimpls()`` one by one, in plugin-name
order) instead of ``pm.hook.<name>(...)``: pluggy's call loop stops at the first exception, and
one broken plugin must not take the others' data, start or stop with it. The agent catches an
exception per plugin, reports it as a Problem naming that plugin, and goes on. What that gives
up: hookwrappers (``wrapper=True``/``hookwrapper=True``) and the ``tryfirst``/``trylast`` order
are not honoured, and ``firstresult`` is not used; an implementation must not rely on them.

Constraints: hooks are called from the agent's frame thread (``produce_snapshot``), from the
thread that starts/stops the agent (inside the gunicorn worker, never at import and never before
a fork) and from the command line (``declare_options`` before any agent exists,
``child_environment``, ``process_exited``, ``doctor_checks``). Implementations must be
thread-safe against their own background threads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

import pluggy

if TYPE_CHECKING:
    from gpuflow.core.context import CollectorContext
    from gpuflow.core.doctor import DoctorCheck
    from gpuflow.core.host_answer import HostAnswer
    from gpuflow.core.options import PluginOptions
    from gpuflow.core.recorded import HistoryPart, WindowPart
    from gpuflow.core.snapshot import SnapshotPart

PROJECT_NAME = "gpuflow"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def declare_options() -> PluginOptions | None:
    """Declare this plugin's options, as pytest's ``pytest_addoption`` does.

    Called once when the command line is built (so ``gpuflow watch --help`` lists the flags) and
    once when an agent is made (so a wrong value stops it at start-up with a message naming the
    flag or variable). Return the same :class:`~gpuflow.core.options.PluginOptions` every time;
    read the values in the other hooks with ``context.plugin_options(<that object>)``.

    :returns: The plugin's options under a key of its own (``PluginOptions("cupti", (...))``),
        or None if it has none.
    """


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

    :param context: The agent's collector context (configuration, options, ``notify``, ``slots``).
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
    * ``problems``: concatenated in source order;
    * every key above includes the item's ``host``: the agent tags the items of a part that lists
      no ``hosts`` with its own host's name; a part that lists ``hosts`` (a hub's fleet
      collector) tags its items itself, and its hosts join the snapshot's ``hosts``;
    * a part that sets ``in_merge_order`` promises its items are already as these rules leave them
      (each key once, in the snapshot's order: devices by host, index, uuid; processes by host,
      pid, their attachments by device index, uuid; traced by host, pid, session; roll-ups by
      host, session): when no other part has items, they are taken as they are (a hub's fleet).

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


@hookspec
def child_environment(context: CollectorContext, session: str) -> Mapping[str, str] | None:
    """What a program that ``gpuflow run`` is about to launch needs in its environment.

    Called once per launch, before the agent starts (so that :func:`start_collecting` already
    knows what was prepared: the CUPTI collector drains the rings named after ``session``). The
    variables of every plugin are
    added to the program's environment (its descendants inherit them); two plugins setting one
    variable to different values is an error.

    Raise :class:`~gpuflow.core.errors.LaunchRefused` with a sentence for the user when the
    program cannot be launched as asked (e.g. the injection library was not built); ``gpuflow
    run`` then stops before anything starts. Any other exception is a bug and stops it too.

    :param context: The agent's collector context.
    :param session: The id of this ``gpuflow run`` session (16 hex digits), which the snapshot
        carries as ``TracedProcess.session``.
    :returns: The variables to set, or None for none.
    """


@hookspec
def process_exited(context: CollectorContext, pid: int, status: int) -> None:
    """A program the command line launched has ended.

    Only the process that started a program can learn its exit status; ``gpuflow run`` calls this
    once its program has been waited for. ``status`` is shell-style: the exit code, or 128+N for
    signal N. Called from the command line's thread: hand it to your own thread safely.

    :param context: The agent's collector context.
    :param pid: The program's process id.
    :param status: Its shell-style exit status.
    :returns: Nothing; any return value is ignored.
    """


@hookspec
def doctor_checks(context: CollectorContext) -> Sequence[DoctorCheck] | None:
    """What ``gpuflow doctor`` should say about this plugin on this machine.

    Called without a running agent (``context`` carries the configuration and options only);
    must not start threads or initialise CUDA, and should finish in well under a second. Each
    check is independent; one that raises is reported as a failed check of this plugin.

    :param context: A collector context for reading options.
    :returns: The plugin's checks, in the order to print them, or None.
    """


@hookspec
def query_window(context: CollectorContext, start_s: float, end_s: float, pid: int | None,
                 width_px: int | None) -> WindowPart | None:
    """The traced executions this plugin retains in ``[start_s, end_s)``.

    Called from a web server thread for ``/api/window`` (and exports), concurrently with the
    plugin's own threads: answer from what is retained, without blocking on them for long and
    without a Python object per execution (:class:`~gpuflow.core.recorded.SpanColumns`). When
    ``width_px`` is given and a lane holds more executions in the window than it has pixels, reduce
    that lane to ``width_px`` buckets (:class:`~gpuflow.core.recorded.SpanBuckets`); otherwise
    answer every execution exactly. Say for each process what is retained at all, and whether the
    window is complete for it. A window outside what is retained is an empty answer, not an error.

    :param context: The agent's collector context.
    :param start_s: The window's start, seconds since the epoch.
    :param end_s: Its end (after ``start_s``).
    :param pid: Only this traced process, or None for every one.
    :param width_px: The pixel width the answer is for, or None for every execution.
    :returns: A :class:`~gpuflow.core.recorded.WindowPart` whose ``source`` names the collector,
        or None if it retains no executions.
    """


@hookspec
def query_history(context: CollectorContext, start_s: float, end_s: float) -> HistoryPart | None:
    """The readings this plugin keeps over time, in ``[start_s, end_s)``.

    Called from a web server thread for ``/api/history``, concurrently with the plugin's own
    threads: answer from what is kept, at the finest resolution kept for that stretch of time
    (the last hour at the polling rate, coarser roll-ups beyond), never blocking on the devices.

    :param context: The agent's collector context.
    :param start_s: The range's start, seconds since the epoch.
    :param end_s: Its end (after ``start_s``).
    :returns: A :class:`~gpuflow.core.recorded.HistoryPart` whose ``source`` names the collector,
        or None if it keeps no readings over time.
    """


@hookspec
def watch_hosts(context: CollectorContext, hosts: frozenset[str]) -> None:
    """The hosts that pages watch in full detail now (``/api/stream?host=<name>``), by name.

    Called whenever that set changes: when the first page of a host opens its stream and when
    the last one closes it (the empty set when nobody watches any). A plugin that shows other
    hosts (the fleet collector) takes their lanes and spans only while they are watched, and
    summaries otherwise. Called from a web server thread: return at once (hand the set to your
    own thread); must not raise.

    :param context: The agent's collector context.
    :param hosts: The names of the hosts watched now.
    :returns: Nothing; any return value is ignored.
    """


@hookspec
def answer_for_host(context: CollectorContext, host: str, route: str, query: str) -> HostAnswer | None:
    """Answer a recorder route (``/api/window``, ``/api/history``) for another host.

    The web app asks when a request names a ``host`` that is not this agent's own; the plugin that
    follows that host (the fleet collector) asks its agent, with that agent's credentials, and
    relays the answer. Called from a web server thread; return within the route's time (at most
    30 s), with a body of bounded size. The first plugin (in name order) that answers wins.

    :param context: The agent's collector context.
    :param host: The host's name (checked: a host name, not this agent's own).
    :param route: One of :data:`gpuflow.core.host_answer.HOST_ROUTES`.
    :param query: The query string to send, already checked and rebuilt by the web app.
    :returns: A :class:`~gpuflow.core.host_answer.HostAnswer`, or None if this plugin does not
        follow that host.
    """
