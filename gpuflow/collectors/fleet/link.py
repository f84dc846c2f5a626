"""One followed agent: its stream, read on the hub's network thread, and what the hub makes of it.

A :class:`Link` holds at most one ``GET /api/stream?detail=summary`` (``full`` while a page
watches its host) and publishes its host's :class:`~gpuflow.collectors.fleet.host_table.HostView`
whenever something changed:

* **up** from the first frame of a connection; every later byte (a frame, a ``: ping``, part of
  a line) counts as a sign of life;
* **stale** once nothing came for 3 of the agent's intervals (``host.interval_s``; the agent pings
  at least that often), found by the hub's sweep (every 100 ms); up again at the next byte;
* **down** the moment its connection fails or ends (an agent that exits closes it: down well
  within a second), or once it has been silent for 10 intervals (at least 10 s): the hub then
  drops the connection and dials again. A down or stale host keeps its last state, shown as such.

**Restarts** are told by the boot epoch (``host.boot_epoch``, else the event id's): a new one
counts a restart. **A stream that ends in order after frames and at least a second** (an agent ends
each after 10 minutes; a page's watching switches a host's detail) is dialled again at once, the host staying
up meanwhile: an agent that is gone refuses that dial, and is down then. **Reconnecting** after a
failure waits ``retry × 2^failures`` (``retry:`` as the agent last
sent it, else 1 s), at most 30 s, times a random factor between 1 and 1.5 (so that a hub's
agents do not all come back at the same instant, and never sooner than the agent asked); a 503's
``Retry-After`` is waited at least (up to 30 s). Failures start again at 0 after a frame.

**What an agent cannot do** (it is untrusted): make the hub follow a redirect (refused), send a
line or an event over the frame bound (the connection is dropped, the host gets a problem saying
so), hold a connection slot (the answer's head must come within 15 s of dialling), put items
under another host's name (each item is tagged by the hub, parse.py), list an item twice (its
frame is refused; the hub keeps each host's items in the snapshot's order, host_order.py), take
another target's name (HostTable.claim), or put text of its own into the hub's problem lines
(they say what was wrong, never what was sent).

Constraints: runs on the hub's event loop only; the published views are immutable; every await
is bounded or cancellable.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import aiohttp
import orjson

from gpuflow.collectors.fleet import host_order, parse
from gpuflow.collectors.fleet.host_table import SOURCE, HostView
from gpuflow.collectors.fleet.kernel_tables import CheckedTables
from gpuflow.collectors.fleet.lane_columns import read_rows
from gpuflow.collectors.fleet.lane_keeper import LaneKeeper
from gpuflow.collectors.fleet.parse import FrameRefused
from gpuflow.collectors.fleet.sse_events import SseEvent, SseParser, StreamTooLarge
from gpuflow.collectors.fleet.targets import Target
from gpuflow.core.identity import check_host_name
from gpuflow.core.snapshot import FleetHost, HostInfo, Problem
from gpuflow.transport.wire import StreamReader

if TYPE_CHECKING:
    from gpuflow.collectors.fleet.hub_loop import HubLoop

#: dialling, TLS and the answer's head, at most (a hung agent accepts and never answers)
ANSWER_S = 15.0
DEFAULT_RETRY_MS = 1000
#: a stream that ended in order after lasting this long is dialled again at once (see above)
RESUME_AFTER_S = 1.0
MAX_BACKOFF_S = 30.0
#: silent for this many intervals: stale; for DROP_INTERVALS (and at least DROP_S): dropped
STALE_INTERVALS, DROP_INTERVALS, DROP_S = 3, 10, 10.0
DEFAULT_INTERVAL_S = 1.0
INTERVAL_RANGE = (0.05, 60.0)
SUMMARY, FULL = "summary", "full"
_EVENT_ID = re.compile(r"(\d{1,16})-(\d{1,19})")
READ_ERRORS = (ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError)
#: the parts of a frame the hub keeps as objects only: once taken, the reader's copy of each (which
#: a delta that leaves the part out would be filled from) is this marker, "as the frame before"
#: (a summary's devices are most of its bytes: some 100 kB of Python objects a host otherwise; its
#: host part is a few kB more, with the agent's problem lines)
KEPT_AS_OBJECTS = ("host", "hosts", "sources", "devices", "processes", "traced_retired")
KEPT: list = []


class LinkError(Exception):
    """Why a connection ended, in words of the hub's own (never the agent's)."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


def retry_after(resp: aiohttp.ClientResponse) -> float | None:
    raw = resp.headers.get("Retry-After", "")
    return float(min(int(raw), MAX_BACKOFF_S)) if raw.isdigit() and len(raw) <= 6 else None


class Link:
    def __init__(self, target: Target, hub: HubLoop) -> None:
        self.target = target
        self.hub = hub
        self.name = target.fallback_name
        self.state = "down"
        self.note: str | None = "not connected yet"
        self.info = HostInfo(name=self.name)
        self.agent_problems: tuple[Problem, ...] = ()
        self.seen: float | None = None
        self.lag_ms: float | None = None   # the latest frame's age when it was taken
        self.boot_epoch: int | None = None
        self.restarts = 0
        self.interval_s = DEFAULT_INTERVAL_S
        self.retry_ms: int | None = None
        self.failures = 0
        self.detail: str | None = None   # of the open connection
        self.frames = 0   # read on the open connection
        self.connected_at = 0.0   # when its answer came (the event loop's clock)
        self.last_bytes = 0.0
        self.devices: tuple = ()
        self.processes: tuple = ()
        self.traced: tuple = ()
        self.retired: tuple = ()
        self._raw: dict[str, Any] = {}
        self.lanes = LaneKeeper()   # while a page watches the host: its lanes' samples
        self._response: aiohttp.ClientResponse | None = None
        self._dropped: str | None = None
        self._switching = False
        self._wake = asyncio.Event()

    # -- the view ------------------------------------------------------------------------------
    def publish(self, urgent: bool) -> None:
        problems = self.agent_problems
        if self.note is not None:
            severity = "info" if self.state == "up" else "error" if self.state == "down" else "warning"
            problems = problems + (Problem(SOURCE, f"{self.target.url}: {self.note}", severity),)
        host = FleetHost(info=self.info, state=self.state, problems=problems, seen=self.seen,
                         restarts=self.restarts, address=self.target.url, detail=self.detail,
                         lag_ms=self.lag_ms)
        self.hub.table.publish(self.target, HostView(host, self.devices, self.processes, self.traced,
                                                     self.retired))
        self.hub.changed(urgent)

    # -- the connection ------------------------------------------------------------------------
    async def run(self) -> None:
        """Follow the agent until cancelled."""
        self.publish(True)
        while True:
            self.frames = 0
            try:
                await self._follow(self.hub.detail_for(self.name))
                reason, wait_at_least, orderly = "the agent ended the stream", None, True
            except LinkError as exc:
                reason, wait_at_least, orderly = str(exc), exc.retry_after_s, False
            except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
                reason, wait_at_least, orderly = self._dropped or _describe(exc), None, self._dropped is None
            switched, self._switching, self._dropped = self._switching, False, None
            lasted = asyncio.get_running_loop().time() - self.connected_at
            self.detail = None
            if switched or (orderly and self.frames and lasted >= RESUME_AFTER_S):
                # a page began or stopped watching the host, or the agent ended a stream that ran
                # (it does every 10 minutes): dial again at once; a gone agent refuses that dial
                continue
            delay = self.delay(wait_at_least)
            self.state, self.note = "down", f"{reason}; dialling again in {delay:.1f} s"
            self.publish(True)
            self.failures += 1
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), delay)
            except asyncio.TimeoutError:
                pass

    def delay(self, wait_at_least: float | None = None) -> float:
        """Seconds to wait before dialling again (see the module's docstring)."""
        base = (self.retry_ms if self.retry_ms is not None else DEFAULT_RETRY_MS) / 1000.0
        delay = min(MAX_BACKOFF_S, max(0.05, base) * 2 ** min(self.failures, 16))
        delay = min(MAX_BACKOFF_S, delay * random.uniform(1.0, 1.5))
        return max(delay, wait_at_least or 0.0)

    def wake(self) -> None:
        """Dial again now (a page began watching this host)."""
        self._wake.set()

    def drop(self, why: str) -> None:
        """End the open connection (it is dialled again); ``why`` becomes the host's note."""
        if self._response is not None:
            self._dropped = why
            self._response.close()

    def switch(self) -> None:
        """Dial again at once for the other detail (a page began or stopped watching the host)."""
        if self._response is not None:
            self._switching = True
            self._response.close()
        else:
            self.wake()

    async def _follow(self, detail: str) -> None:
        hub = self.hub
        headers = {"Accept": "text/event-stream", "Accept-Encoding": "identity"}
        token = hub.credentials.token_for(self.target) if hub.credentials is not None else None
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        url = f"{self.target.url}api/stream?detail={detail}"
        async with hub.connect_slots:
            try:
                resp = await asyncio.wait_for(
                    hub.session.get(url, headers=headers, allow_redirects=False), ANSWER_S)
            except asyncio.TimeoutError:
                raise LinkError(f"no answer within {ANSWER_S:.0f} s") from None
        try:
            _check_answer(resp)
            parser = SseParser(hub.frame_bytes(detail))
            reader = self.new_reader()
            self._response, self.detail = resp, detail
            loop = asyncio.get_running_loop()
            self.last_bytes = self.connected_at = loop.time()
            async for chunk in resp.content.iter_any():
                self.last_bytes = loop.time()
                if self.state == "stale":
                    self.state, self.note = "up", None
                    self.publish(True)
                self._on_bytes(chunk, parser, reader, detail)
                # neither the chunk nor the frames read from it are held while the next bytes are
                # awaited (they were, as this coroutine's locals: some 50 kB a connection, 50 MB
                # for a thousand agents)
                del chunk
        finally:
            self._response = None
            resp.close()

    # -- frames ----------------------------------------------------------------------------------
    def new_reader(self) -> StreamReader:
        """A connection's reader: lanes read into columns, kernel tables kept checked."""
        return StreamReader(fallback_host=self.target.fallback_name, spans=read_rows, tables=CheckedTables())

    def _on_bytes(self, chunk: bytes, parser: SseParser, reader: StreamReader, detail: str) -> None:
        """The frames ``chunk`` completes, taken (its events live no longer than this call)."""
        try:
            events = parser.feed(chunk)
        except StreamTooLarge as exc:
            raise LinkError(f"sent {exc} (the hub's bound); dropped") from None
        if parser.retry_ms is not None:
            self.retry_ms = parser.retry_ms
        for event in events:
            self._on_event(event, reader, detail)

    def _on_event(self, event: SseEvent, reader: StreamReader, detail: str) -> None:
        if event.event != "snapshot":
            return
        try:
            doc = orjson.loads(event.data)   # ~3.5x json.loads: parsing is most of a hub's work
        except (ValueError, RecursionError):
            raise LinkError("sent a frame that is not JSON; dropped") from None
        if type(doc) is not dict:
            raise LinkError("sent a frame that is not a snapshot; dropped")
        try:
            plain = reader.read(doc)
        except FrameRefused as exc:   # a kernel table's entry (kernel_tables.py checks them as they come)
            raise LinkError(f"sent a frame the hub refuses ({exc}); dropped") from None
        except READ_ERRORS:
            raise LinkError("sent a frame that cannot be read (out of step or malformed); dropped") from None
        try:
            self._take(plain, event.id, detail)
        except FrameRefused as exc:
            raise LinkError(f"sent a frame the hub refuses ({exc}); dropped") from None

    def _take(self, plain: dict[str, Any], event_id: str | None, detail: str) -> None:
        """Take a frame read into the plain form: all of it, or (FrameRefused) none of it."""
        raw = self._raw
        name, info, agent_problems, note = self.name, self.info, self.agent_problems, self.note
        epoch, interval = self.boot_epoch, self.interval_s
        if plain.get("host") is not raw.get("host"):
            info, agent_problems = parse.host_info(plain)
            name, note = self._name_for(info.name)
            given = info.boot_epoch if info.boot_epoch is not None else _epoch(event_id)
            epoch = given if given is not None else epoch
            interval = info.interval_s if info.interval_s is not None else DEFAULT_INTERVAL_S
            interval = min(max(interval, INTERVAL_RANGE[0]), INTERVAL_RANGE[1])
            info = replace(info, name=name, boot_epoch=epoch)
        renamed = name != self.name
        parts = {}
        for key, convert, ordered, made in (("devices", parse.devices, host_order.devices, self.devices),
                                            ("processes", parse.processes, host_order.processes, self.processes),
                                            ("traced_retired", parse.retired, host_order.retired, self.retired)):
            if renamed or plain.get(key) is not raw.get(key):
                value = plain.get(key, [])
                if value is KEPT:   # renamed, and the part left out: the objects, under the new name
                    parts[key] = tuple(replace(o, host=name) for o in made)
                else:   # in the snapshot's order, each key once (host_order.py)
                    parts[key] = ordered(convert(value, name))
        traced = host_order.traced(parse.traced(plain.get("traced", []), name))
        # every part read: the frame is taken whole
        if detail == SUMMARY:
            self.lanes.clear()
            traced = tuple(replace(t, lanes=()) if t.lanes else t for t in traced)
        else:
            traced = self.lanes.apply(traced, plain.get("frame") != "delta", plain)
        if epoch is not None and self.boot_epoch is not None and epoch != self.boot_epoch:
            self.restarts += 1
        self.name, self.info, self.agent_problems, self.note = name, info, agent_problems, note
        self.boot_epoch, self.interval_s = epoch, interval
        self.devices = parts.get("devices", self.devices)
        self.processes = parts.get("processes", self.processes)
        self.retired = parts.get("traced_retired", self.retired)
        self.traced = traced
        for key in KEPT_AS_OBJECTS:   # held as objects now: the plain values need not stay
            if key in plain:
                plain[key] = KEPT
        self._raw = plain
        self.frames += 1
        was_up = self.state == "up"
        self.state, self.seen, self.failures = "up", time.time(), 0
        stamp = plain.get("timestamp")
        if type(stamp) in (int, float) and math.isfinite(stamp):
            self.lag_ms = round((self.seen - stamp) * 1000.0, 3)
        self.publish(urgent=not was_up or renamed or self.hub.watched(name))

    def _name_for(self, given: str | None) -> tuple[str, str | None]:
        """The name this host shows as, and a note when it is not the one the agent gave."""
        fallback = self.target.fallback_name
        try:
            name = check_host_name(given)
        except ValueError:
            self.hub.table.claim(self.target, fallback)
            return fallback, "names no usable host name: shown by its address"
        if self.hub.table.claim(self.target, name):
            return name, None
        self.hub.table.claim(self.target, fallback)
        return fallback, f"says it is {name}, which another target is: shown by its address"

    # -- the sweep -----------------------------------------------------------------------------
    def sweep(self, now: float) -> None:
        """Stale after 3 silent intervals, dropped after 10 (at least 10 s)."""
        if self._response is None:
            return
        silent = now - self.last_bytes
        if silent > max(DROP_S, DROP_INTERVALS * self.interval_s):
            self.drop(f"silent for {silent:.0f} s")
        elif self.state == "up" and silent > STALE_INTERVALS * self.interval_s:
            self.state, self.note = "stale", f"silent for {silent:.1f} s (3 intervals or more)"
            self.publish(True)


def _check_answer(resp: aiohttp.ClientResponse) -> None:
    status = resp.status
    if status == 200 and resp.content_type == "text/event-stream":
        return
    if status == 200:
        raise LinkError("answered with something other than an event stream")
    if status == 503:
        raise LinkError("answered 503 (busy or stopping)", retry_after(resp))
    if status in (401, 403):
        raise LinkError(f"refused the hub ({status}): check its token in the credentials file and "
                        "that the agent allows the Host the hub dials")
    if 300 <= status < 400:
        raise LinkError(f"answered with a redirect ({status}), which the hub does not follow")
    raise LinkError(f"answered {status}")


def _epoch(event_id: str | None) -> int | None:
    m = _EVENT_ID.fullmatch(event_id or "")
    return int(m.group(1)) if m else None


def _describe(exc: BaseException) -> str:
    """A connection error in the hub's words (the OS's reason, never the agent's bytes)."""
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return "its TLS certificate is not trusted (see --ca-file)"
    if isinstance(exc, aiohttp.ClientSSLError):
        return "the TLS handshake failed"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"cannot connect ({exc.os_error.strerror or type(exc.os_error).__name__})"
    if isinstance(exc, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError)):
        return "the connection ended"
    if isinstance(exc, aiohttp.ClientResponseError):
        return f"sent an answer the hub cannot read ({exc.status})"
    return f"the connection failed ({type(exc).__name__})"
