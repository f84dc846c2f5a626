"""The agent: starts the collectors, merges their parts into snapshots, publishes them.

One agent per serving process (``gpuflow watch``/``run``, or one gunicorn worker), so the GPU is
polled once and each ring has exactly one consumer. The frame loop runs in its own daemon thread:
it sleeps until a collector calls ``context.notify()`` (or ``interval`` passes), waits out the
50 ms minimum gap between frames, asks every collector for its cached part, and publishes a new
snapshot only when some part changed.

It is also the one way the command line and the web app reach the plugins once they are loaded:
:meth:`child_environment` and :meth:`process_exited` for ``gpuflow run``, :meth:`query_window`
and :meth:`query_history` for the recorder's routes, each calling the hook of the same name on
every plugin; for a hub's pages, :meth:`watch_host` (counted per host: the ``watch_hosts`` hook
hears the set whenever it changes) and :meth:`answer_for_host`.

Constraints: never started at import or before a fork (``start`` records the pid it ran in);
a collector that raises loses only its own part, reported as a Problem; ``stop`` returns within
a few seconds whatever the collectors do. Made with a wrong option value (or a ``NODE_NAME``
that is no host name) it raises :class:`~gpuflow.core.options.OptionError`, with a plugin that
cannot declare its options :class:`~gpuflow.core.plugins.PluginLoadError`, at once (nothing has
started).

Its snapshots name their host (:mod:`gpuflow.core.identity`: ``NODE_NAME`` or the hostname, and
the boot epoch the stream's event ids carry): every item of its own collectors' parts is tagged
with it, once per part object (a part returned again is not tagged again).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import Any, Callable, Mapping

import pluggy

from gpuflow.core.board import SnapshotBoard
from gpuflow.core.context import AgentConfig, CollectorContext
from gpuflow.core.errors import LaunchRefused
from gpuflow.core.host_answer import HostAnswer
from gpuflow.core import gc_policy
from gpuflow.core.gil import restore as restore_switch_interval, share_the_gil
from gpuflow.core.identity import Identity, new_identity
from gpuflow.core.merge import merge_parts, tag_part
from gpuflow.core.plugins import declared_options
from gpuflow.core.recorded import HistoryPart, WindowPart
from gpuflow.core.snapshot import Problem, Snapshot, SnapshotPart

log = logging.getLogger("gpuflow.agent")

MIN_FRAME_GAP_S = 0.050


class Agent:
    def __init__(
        self,
        config: AgentConfig,
        plugin_manager: pluggy.PluginManager,
        board: SnapshotBoard | None = None,
        clock: Callable[[], float] = time.time,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.config = config
        self.pm = plugin_manager
        self.board = board if board is not None else SnapshotBoard()
        self.context = CollectorContext(config, environ=environ)
        self.identity: Identity = new_identity(os.environ if environ is None else environ, clock)
        self._clock = clock
        #: per part object of the last frame (by id): the part and its tagged copy
        self._tagged: dict[int, tuple[SnapshotPart, SnapshotPart]] = {}
        #: per host pages watch in full detail, how many of them; the hook is called under the lock
        self._watchers: dict[str, int] = {}
        self._watch_lock = threading.Lock()
        self._seq = 0
        self._last_parts: list[Any] | None = None
        self._plugin_errors: dict[str, Problem] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._started_pid: int | None = None
        #: the interpreter's switch interval before start (gpuflow.core.gil)
        self._switch_interval_before: float | None = None
        #: whether start applied the garbage collector's serving policy (gpuflow.core.gc_policy)
        self._gc_settled = False
        self._check_options()

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start collectors and the frame loop; idempotent and thread-safe."""
        with self._lock:
            if self._started_pid == os.getpid():
                return
            self._started_pid = os.getpid()
            self._switch_interval_before = share_the_gil(self.config.switch_interval_s)
            self._gc_settled = gc_policy.settle(self.config.gc_young_threshold)
            self._stop.clear()
            self._call_each("start_collecting")
            self.collect_once()
            self._thread = threading.Thread(target=self._frame_loop, name="gpuflow-frames", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop collectors (they drain), publish a final snapshot, release every waiting reader."""
        with self._lock:
            if self._started_pid != os.getpid():
                return
            self._stop.set()
            self.context.notify()
            if self._thread is not None:
                self._thread.join(timeout=5)
            self._call_each("stop_collecting")
            self.collect_once(force=True)
            self._started_pid = None
            if self._switch_interval_before is not None:
                restore_switch_interval(self._switch_interval_before, self.config.switch_interval_s)
                self._switch_interval_before = None
            if self._gc_settled:
                gc_policy.restore()
                self._gc_settled = False

    # -- frames ----------------------------------------------------------------------------
    def collect_once(self, force: bool = False) -> Snapshot | None:
        """Gather every collector's part; publish a snapshot if anything changed (or ``force``)."""
        parts: list[SnapshotPart] = []
        for name, impl in self._impls("produce_snapshot"):
            try:
                part = impl.function(context=self.context)
            except Exception as exc:  # noqa: BLE001 - a broken collector must not stop the agent
                self._record_error(name, "produce_snapshot", exc)
                continue
            if part is not None:
                parts.append(part)
        if self._plugin_errors:
            parts.append(SnapshotPart(source="gpuflow", problems=tuple(self._plugin_errors.values())))
        if not force and self._last_parts is not None and _same_parts(parts, self._last_parts):
            return None
        self._last_parts = parts
        self._seq += 1
        snapshot = merge_parts(self._tag(parts), seq=self._seq, timestamp=self._clock(),
                               identity=self.identity, interval_s=self.config.interval_s)
        self.board.publish(snapshot)
        return snapshot

    @property
    def boot_epoch(self) -> int:
        """When this agent was made, ms since the epoch: the stream's event ids carry it."""
        return self.identity.boot_epoch

    def _tag(self, parts: list[SnapshotPart]) -> list[SnapshotPart]:
        """Each part with its items tagged with this host's name, reusing the last frame's copies."""
        tagged, out = {}, []
        for part in parts:
            known = self._tagged.get(id(part))
            copy = known[1] if known is not None and known[0] is part else tag_part(part, self.identity.name)
            tagged[id(part)] = (part, copy)
            out.append(copy)
        self._tagged = tagged
        return out

    def _frame_loop(self) -> None:
        wake = self.context.wake_event
        last_frame = 0.0
        while not self._stop.is_set():
            wake.wait(timeout=self.config.interval_s)
            if self._stop.is_set():
                break
            gap = MIN_FRAME_GAP_S - (time.monotonic() - last_frame)
            if gap > 0:
                self._stop.wait(gap)
            wake.clear()
            if self._gc_settled:
                gc_policy.tick()
            try:
                if self.collect_once() is not None:
                    last_frame = time.monotonic()
            except Exception:  # noqa: BLE001 - keep the loop alive; merge bugs are logged
                log.exception("building a snapshot failed")

    # -- the command line's calls -----------------------------------------------------------
    def child_environment(self, session: str) -> dict[str, str]:
        """The variables every plugin wants in the environment of a program ``gpuflow run`` launches
        in ``session``; call it before :meth:`start`.

        Raises :class:`~gpuflow.core.errors.LaunchRefused` when a plugin refuses the launch, returns
        something other than text variables, or sets a variable another plugin set differently.
        """
        merged: dict[str, tuple[str, str]] = {}
        for name, impl in self._impls("child_environment"):
            wanted = impl.function(context=self.context, session=session)
            if wanted is None:
                continue
            if not isinstance(wanted, Mapping) or not all(
                    isinstance(k, str) and k and isinstance(v, str) for k, v in wanted.items()):
                raise LaunchRefused(f"collector {name!r} gave a child environment that is not "
                                    "variable names mapped to text")
            for key, value in wanted.items():
                other = merged.get(key)
                if other is not None and other[1] != value:
                    raise LaunchRefused(f"collectors {other[0]!r} and {name!r} both set {key} "
                                        f"({other[1]!r} and {value!r})")
                merged[key] = (name, value)
        return {key: value for key, (_, value) in merged.items()}

    def process_exited(self, pid: int, status: int) -> None:
        """Tell every plugin that the launched program ``pid`` ended with shell-style ``status``."""
        self._call_each("process_exited", pid=pid, status=status)
        self.context.notify()

    # -- the recorder's queries (the web app's calls) ------------------------------------------
    def query_window(self, start_s: float, end_s: float, pid: int | None = None,
                     width_px: int | None = None) -> tuple[WindowPart, ...]:
        """Every plugin's answer to a window query, in source order; a plugin that fails answers
        with a Problem naming it (the others still answer)."""
        return self._query("query_window", WindowPart, start_s=start_s, end_s=end_s, pid=pid,
                           width_px=width_px)

    def query_history(self, start_s: float, end_s: float) -> tuple[HistoryPart, ...]:
        """Every plugin's answer to a history query, in source order (as :meth:`query_window`)."""
        return self._query("query_history", HistoryPart, start_s=start_s, end_s=end_s)

    def _query(self, hook_name: str, part_type: type, **kwargs: Any) -> tuple[Any, ...]:
        parts = []
        for name, impl in self._impls(hook_name):
            try:
                part = impl.function(context=self.context, **kwargs)
                if part is not None and not isinstance(part, part_type):
                    raise TypeError(f"{hook_name} returned a {type(part).__name__}, not {part_type.__name__}")
            except Exception as exc:  # noqa: BLE001 - one broken plugin must not take the others' answers
                log.error("collector %s failed in %s: %r", name, hook_name, exc, exc_info=exc)
                part = part_type(source=name, problems=(Problem(
                    source=name, severity="error",
                    message=f"collector {name!r} failed in {hook_name}: {type(exc).__name__}: {exc}"),))
            if part is not None:
                parts.append(part)
        return tuple(sorted(parts, key=lambda p: p.source))

    # -- a hub's pages --------------------------------------------------------------------------
    def watch_host(self, name: str) -> Callable[[], None]:
        """A page watches ``name`` in full detail until it calls the function returned (once)."""
        with self._watch_lock:
            self._watchers[name] = self._watchers.get(name, 0) + 1
            if self._watchers[name] == 1:
                self._call_each("watch_hosts", hosts=frozenset(self._watchers))
        released = []

        def release() -> None:
            with self._watch_lock:
                if released:
                    return
                released.append(True)
                self._watchers[name] -= 1
                if self._watchers[name] == 0:
                    del self._watchers[name]
                    self._call_each("watch_hosts", hosts=frozenset(self._watchers))
        return release

    def watched_hosts(self) -> frozenset[str]:
        with self._watch_lock:
            return frozenset(self._watchers)

    def answer_for_host(self, host: str, route: str, query: str) -> HostAnswer | None:
        """The first plugin's answer (in name order) to a recorder route for another host, or None
        when no plugin follows it; a plugin that fails answers 502 with one line naming it."""
        for name, impl in self._impls("answer_for_host"):
            try:
                answer = impl.function(context=self.context, host=host, route=route, query=query)
                if answer is not None and not isinstance(answer, HostAnswer):
                    raise TypeError(f"answer_for_host returned a {type(answer).__name__}, not HostAnswer")
            except Exception as exc:  # noqa: BLE001 - one line for the page, the rest in the log
                log.error("collector %s failed in answer_for_host: %r", name, exc, exc_info=exc)
                return HostAnswer(502, "application/json", json.dumps(
                    {"error": f"collector {name} failed to answer for the host"}).encode())
            if answer is not None:
                return answer
        return None

    # -- plugin calls ----------------------------------------------------------------------
    def _check_options(self) -> None:
        """Resolve every plugin's options now, so a wrong value stops the agent before it starts."""
        for declared in declared_options(self.pm):
            self.context.plugin_options(declared)

    def _impls(self, hook_name: str) -> list[tuple[str, Any]]:
        caller = getattr(self.pm.hook, hook_name)
        impls = [(impl.plugin_name, impl) for impl in caller.get_hookimpls()]
        return sorted(impls, key=lambda item: item[0])

    def _call_each(self, hook_name: str, **kwargs: Any) -> None:
        for name, impl in self._impls(hook_name):
            try:
                impl.function(context=self.context, **kwargs)
            except Exception as exc:  # noqa: BLE001
                self._record_error(name, hook_name, exc)

    def _record_error(self, plugin: str, hook: str, exc: BaseException) -> None:
        log.error("collector %s failed in %s: %r", plugin, hook, exc, exc_info=exc)
        self._plugin_errors[plugin] = Problem(
            source=plugin, severity="error",
            message=f"collector {plugin!r} failed in {hook}: {type(exc).__name__}: {exc}",
        )


def _same_parts(a: list[SnapshotPart], b: list[SnapshotPart]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))
