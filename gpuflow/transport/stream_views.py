"""GET /api/stream's views: the whole snapshot or its summary, of every host or of one.

``/api/stream`` takes ``detail=full`` (the default: everything, lanes and spans included) or
``detail=summary``: devices, processes, traced processes with their complete aggregates
(kernels, transfers, counters) and retired roll-ups, but no lanes and so no spans. A hub takes
summaries from every agent it follows (a few kB/s per host instead of a busy program's hundreds),
and full detail only from a host a page is looking at. ``detail=hosts`` is the fleet's overview,
a tile per host, for a page of a thousand hosts (gpuflow.transport.hosts_view).

``host=<name>`` narrows the view to one host of the snapshot's ``hosts``: its devices, processes
and traced processes, with that host's own facts and problems as ``host`` and it alone in
``hosts``: the stream that host's own agent would send, so the page draws a host of a fleet as
it draws a single agent. On a hub, a full-detail stream of a host other than the hub's own is a
page watching it: the agent hears it (``Agent.watch_host``, counted per host, until the stream
ends), and the hub then takes that host's lanes and spans from its agent; nobody watching, only
its summary. A host the snapshot does not list is 404.

Any other value of ``detail``, a ``host`` that is no host name, or either given twice, is 400
with a one-line message that does not repeat it; other parameters are ignored, as before. The
Host, method and token checks run first (the security middleware), as on every route.

Each view has its own frame encoder, fed by a :class:`DerivedBoard` that makes the view's
snapshot once per snapshot of the agent, for all its streams: a view's frames are still encoded
once for all its clients. An encoder exists while some stream uses its view
(:class:`ViewFrames`); the default view uses the app's own. A view's streams wait on its
DerivedBoard, which the agent's board tells of each snapshot (``SnapshotBoard.listen``): it makes
the view's snapshot then, on the frame loop's thread, and wakes its streams only when that is a
new one. On a hub publishing up to 20 snapshots a second, each with some hosts' frames, a page
watching one host is woken when that host has something new, not at every snapshot (each wake-up
of 64 pages' threads at once cost the hub more than encoding their frames).

Every stream, whatever its view, sends a frame or a ``: ping`` at least every agent interval
(``host.interval_s``; the configured ping interval when that is shorter), so that a hub can tell
a silent agent (hung, partitioned) from a quiet one: it judges silence by that interval.

Constraints: a view's snapshot shares every object it does not change with the agent's (no copy
per stream, none of the spans); the encoders are created and dropped under one lock, a view's
listener stopped with its encoder; a stream whose view cannot be parsed takes no stream slot;
a view's streams are woken by its new snapshots and by the board's close, and wait at most their
ping interval (sse.py), so a host whose view does not change still gets its pings.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Any, Callable, NamedTuple

import falcon

from gpuflow.core.board import Listener, Listeners, SnapshotBoard, tell
from gpuflow.core.identity import check_host_name
from gpuflow.core.snapshot import Snapshot
from gpuflow.transport.frames import FrameEncoder, dumps
from gpuflow.transport.hosts_view import HOSTS, HostsFrames
from gpuflow.transport.settings import AppSettings
from gpuflow.transport.stream_push import PushedStream, StreamPusher
from gpuflow.transport.sse import (
    SseBody, bound_send_time, event_stream, stream_headers, unavailable,
)

log = logging.getLogger("gpuflow.transport.stream_views")

FULL, SUMMARY = "full", "summary"
DETAILS = (FULL, SUMMARY, HOSTS)


class BadView(ValueError):
    """A stream query that names no view; the message names the parameter, not its value."""


def parse_detail(req: falcon.Request) -> str:
    """``detail`` of the query: ``full`` when not given; BadView for anything but one known value."""
    raw = req.params.get("detail")
    if raw is None:
        return FULL
    if not isinstance(raw, str) or raw not in DETAILS:
        raise BadView(f"detail must be given once, as {' or '.join(DETAILS)}")
    return raw


def parse_host(req: falcon.Request) -> str | None:
    """``host`` of the query (None: every host); BadView unless it is one host name."""
    raw = req.params.get("host")
    if raw is None:
        return None
    try:
        return check_host_name(raw)
    except ValueError:
        raise BadView("host must be given once, as a host name of the snapshot's hosts") from None


#: one host's part of a snapshot: its entry, devices, processes, traced processes, roll-ups
HostItems = tuple[Any, tuple, tuple, tuple, tuple]


class HostIndex:
    """Every host's items of the latest snapshot, grouped once per snapshot for all host views
    (a hub's thousand hosts are not filtered once per view)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cached: tuple[Snapshot, dict[str, HostItems]] | None = None

    def of(self, snap: Snapshot) -> dict[str, HostItems]:
        cached = self._cached
        if cached is not None and cached[0] is snap:
            return cached[1]
        with self._lock:
            cached = self._cached
            if cached is None or cached[0] is not snap:
                groups: dict[str | None, tuple[list, list, list, list]] = {}
                for i, part in enumerate((snap.devices, snap.processes, snap.traced, snap.traced_retired)):
                    for item in part:
                        groups.setdefault(item.host, ([], [], [], []))[i].append(item)
                empty: tuple[list, list, list, list] = ([], [], [], [])
                index = {h.name: (h,) + tuple(tuple(g) for g in groups.get(h.name, empty)) for h in snap.hosts}
                cached = self._cached = (snap, index)  # type: ignore[assignment]
            return cached[1]


def host_view(snap: Snapshot, items: HostItems | None) -> Snapshot:
    """``snap`` narrowed to one host's ``items``: its facts and problems as the host's, itself
    alone in ``hosts`` (nothing of it when the snapshot no longer lists it)."""
    if items is None:
        return dataclasses.replace(snap, devices=(), processes=(), traced=(), traced_retired=(), hosts=())
    entry, devices, processes, traced, retired = items
    return Snapshot(seq=snap.seq, timestamp=snap.timestamp, host=entry.info, problems=entry.problems,
                    devices=devices, processes=processes, traced=traced, sources=snap.sources,
                    traced_retired=retired, hosts=(entry,))


class HostViewOf:
    """A host view's snapshot of each snapshot: the one before, the very object, while nothing of
    that host changed (on a hub, other hosts' frames make most snapshots), so the view encodes
    and sends a frame only when its host has something new."""

    def __init__(self, name: str, index: HostIndex, summary: bool) -> None:
        self.name, self.index, self.summary = name, index, summary
        self._last: tuple[HostItems | None, Snapshot] | None = None

    def __call__(self, snap: Snapshot) -> Snapshot:
        items = self.index.of(snap).get(self.name)
        last = self._last
        if last is not None and _same(last[0], items):
            return last[1]
        view = host_view(snap, items)
        view = summary_of(view) if self.summary else view
        self._last = (items, view)
        return view


def _same(a: HostItems | None, b: HostItems | None) -> bool:
    if a is None or b is None:
        return a is b
    return a[0] is b[0] and all(len(x) == len(y) and all(i is j for i, j in zip(x, y))
                                for x, y in zip(a[1:], b[1:]))


def summary_of(snap: Snapshot) -> Snapshot:
    """``snap`` without lanes: every traced process's aggregates and counters, no spans."""
    if not any(t.lanes for t in snap.traced):
        return snap
    return dataclasses.replace(snap, traced=tuple(
        dataclasses.replace(t, lanes=()) if t.lanes else t for t in snap.traced))


class DerivedBoard:
    """A view of a board's snapshots, read as a board: ``latest()`` is the view of the board's
    latest snapshot, made once per snapshot, so the encoder sees the same object until the board
    has a new one; the view's streams wait in :meth:`wait_newer`, woken only when the view's
    snapshot is a new object (a host view keeps its snapshot, and its seq, while its host has
    nothing new) or the board closes. ``stop_listening()`` ends that (its last stream gone)."""

    def __init__(self, board: SnapshotBoard, derive: Callable[[Snapshot], Snapshot]) -> None:
        self.board = board
        self.derive = derive
        self._lock = threading.Lock()
        self._cached: tuple[Snapshot, Snapshot] | None = None
        self._cond = threading.Condition()   # the view's streams wait on it
        self._told: Snapshot | None = None   # the view its streams were last woken for
        self._listeners = Listeners()
        #: no more of the board's snapshots (the view's last stream ended)
        self.stop_listening = board.listen(self._published)

    def listen(self, listener: Listener) -> Callable[[], None]:
        """As ``SnapshotBoard.listen``, for the view: ``listener`` is called (on the board's
        producer's thread) with each new view, and with None when the board closes."""
        return self._listeners.add(listener)

    @property
    def closed(self) -> bool:
        return self.board.closed

    def latest(self) -> Snapshot | None:
        snap = self.board.latest()
        if snap is None:
            return None
        cached = self._cached
        if cached is not None and cached[0] is snap:
            return cached[1]
        with self._lock:
            cached = self._cached
            if cached is None or cached[0] is not snap:
                cached = (snap, self.derive(snap))
                self._cached = cached
            return cached[1]

    def _published(self, snap: Snapshot | None) -> None:
        """The board's listener (its producer's thread): the view made now, its streams woken if
        it is new; woken too at the board's close, and where making it failed (they meet the
        error making it themselves, as a stream meets an encoder's)."""
        if snap is not None:
            try:
                view = self.latest()
            except Exception:  # noqa: BLE001 - the streams' own call raises it where it is handled
                view = None
            if view is not None and view is self._told:
                return
            self._told = view
        with self._cond:
            self._cond.notify_all()
        tell(self._listeners.now, None if snap is None else self._told)

    def wait_newer(self, seq: int, timeout: float) -> Snapshot | None:
        """The view's snapshot if its seq differs from ``seq``, waiting up to ``timeout`` seconds
        for one; None on timeout or once the board is closed."""
        with self._cond:
            self._cond.wait_for(lambda: self.board.closed or self._differs(seq), timeout=timeout)
            if self.board.closed:
                return None
            view = self.latest()
            return view if view is not None and view.seq != seq else None

    def _differs(self, seq: int) -> bool:
        view = self.latest()
        return view is not None and view.seq != seq

    def wait_first(self, timeout: float) -> Snapshot | None:
        self.board.wait_first(timeout)
        return self.latest()


class ViewUse(NamedTuple):
    """A stream's use of its view (ViewFrames.acquire)."""

    frames: Any   #: FrameEncoder, or HostsFrames for the overview
    pusher: StreamPusher
    release: Callable[[], None]


class ViewFrames:
    """The frame encoders of the views streams use now: one per view, while a stream uses it."""

    def __init__(self, board: SnapshotBoard, default: FrameEncoder) -> None:
        self.board = board
        self.default = default
        self._default_pusher: StreamPusher | None = None
        self._lock = threading.Lock()
        self._open: dict[tuple[str, str | None], list[Any]] = {}   # view -> [encoder, pusher, streams]
        self.index = HostIndex()

    def acquire(self, detail: str, host: str | None = None) -> ViewUse:
        """The encoder of the view, the writer of its frames to its streams' sockets
        (stream_push.py) and the call that gives them back (once, when the stream ends)."""
        if detail == FULL and host is None:
            with self._lock:
                if self._default_pusher is None:
                    self._default_pusher = StreamPusher(self.default)
                return ViewUse(self.default, self._default_pusher, lambda: None)
        view = (detail, host)
        with self._lock:
            entry = self._open.get(view)
            if entry is None:
                if detail == HOSTS:
                    encoder: Any = HostsFrames(self.board, self.default.boot_epoch)
                else:
                    derive = summary_of if host is None else HostViewOf(host, self.index, detail == SUMMARY)
                    derived: Any = DerivedBoard(self.board, derive)   # read as a board
                    encoder = FrameEncoder(derived, boot_epoch=self.default.boot_epoch,
                                           span_rate=self.default.span_rate)
                entry = self._open[view] = [encoder, StreamPusher(encoder), 0]
            entry[2] += 1
        released = []

        def release() -> None:
            if released:
                return
            released.append(True)
            with self._lock:
                entry[2] -= 1
                if entry[2] == 0 and self._open.get(view) is entry:
                    del self._open[view]
                    entry[1].stop_listening()
                    if isinstance(entry[0].board, DerivedBoard):
                        entry[0].board.stop_listening()
        return ViewUse(entry[0], entry[1], release)

    def open_views(self) -> dict[tuple[str, str | None], int]:
        """Each view in use and its number of streams (for tests and /healthz)."""
        with self._lock:
            return {view: entry[2] for view, entry in self._open.items()}


def heartbeat_settings(settings: AppSettings, interval_s: float | None) -> AppSettings:
    """``settings`` with streams pinging at least every ``interval_s`` (the agent's interval)."""
    if interval_s is None or not interval_s > 0 or interval_s >= settings.ping_interval_s:
        return settings
    return dataclasses.replace(settings, ping_interval_s=interval_s)


class ViewStreamResource:
    """Falcon resource for GET /api/stream, with its views (see the module's docstring)."""

    def __init__(self, state: Any) -> None:
        self.state = state
        self.views = ViewFrames(state.board, state.frames)
        agent = state.agent
        self.settings = heartbeat_settings(state.settings, agent.config.interval_s if agent else None)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        state, settings = self.state, self.settings
        try:
            detail, host = parse_detail(req), parse_host(req)
            if detail == HOSTS and host is not None:
                raise BadView("detail=hosts is every host's tile: it takes no host")
        except BadView as exc:
            _answer(resp, falcon.HTTP_400, str(exc))
            return
        if host is not None:
            snap = state.wait_first_snapshot()
            if snap is None or not any(h.name == host for h in snap.hosts):
                _answer(resp, falcon.HTTP_404, "no such host")
                return
        if state.stopping():
            unavailable(resp, settings, "shutting down")
            return
        if not state.slots.acquire():
            log.warning("stream refused: %d streams open (max_streams)", state.slots.limit)
            unavailable(resp, settings, "too many open streams")
            return
        frames, give_back, unwatch = None, None, None
        try:
            frames, pusher, give_back = self.views.acquire(detail, host)
            agent = state.agent
            if detail == FULL and host is not None and agent is not None and host != agent.identity.name:
                unwatch = agent.watch_host(host)
            # the board its encoder reads: the agent's, or the view's own, which wakes its
            # streams only when the view changed; on the embedded server's plain sockets the
            # view's listener writes the frames (stream_push.py)
            sock = req.env.get("gpuflow.socket")
            pushed = PushedStream(sock, pusher) if sock is not None else None
            events = event_stream(frames.board, frames, settings, state.stopping, pushed=pushed)
            body = SseBody(events, _all(state.slots.release, give_back, unwatch))
        except BaseException:
            state.slots.release()
            for release in (give_back, unwatch):
                if release is not None:
                    release()
            raise
        bound_send_time(req.env, settings.send_timeout_s, settings.send_buffer_bytes)
        stream_headers(resp)
        resp.stream = body

    def on_head(self, req: falcon.Request, resp: falcon.Response) -> None:
        """The stream's headers, without a body and without taking a slot."""
        stream_headers(resp)


def _answer(resp: falcon.Response, status: str, error: str) -> None:
    resp.status = status
    resp.content_type = falcon.MEDIA_JSON
    resp.data = dumps({"error": error})


def _all(*releases: Callable[[], None] | None) -> Callable[[], None]:
    """One call that makes every release once, each even when one before it raised."""
    todo = [r for r in releases if r is not None]

    def release() -> None:
        failed: BaseException | None = None
        while todo:
            try:
                todo.pop(0)()
            except BaseException as exc:   # noqa: BLE001 - the others are still released
                failed = failed or exc
        if failed is not None:
            raise failed
    return release
