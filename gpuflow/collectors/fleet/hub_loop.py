"""The hub's network thread: one asyncio loop holding one stream per followed agent.

:class:`HubLoop` runs an event loop on a thread of its own (``gpuflow-fleet``) with one aiohttp
session: one :class:`~gpuflow.collectors.fleet.link.Link` task per target, at most
``max_connecting`` of them dialling at once (a restarted hub with a thousand agents does not
dial them all in the same instant), a sweep every 100 ms (stale and silent connections), and,
with a targets file, a look at the file every second: when it changed (size, time or inode) it is
read again and the targets it adds are dialled, those it drops forgotten. A file that cannot be
read or parsed then keeps the targets read before, and says so as a problem of the hub. DNS SRV
names (``--srv``) are followed as their TTLs say (:mod:`~gpuflow.collectors.fleet.srv`), and the
credentials file is looked at every second too, a changed one read again for the next dials.

The session dials only the configured targets: no proxy from the environment
(``trust_env=False``), no redirect followed, no cookie kept, answers' heads bounded by aiohttp
(8 KiB lines, 128 headers); https targets are checked against the system's CAs or ``--ca-file``.

A page's question to a followed host's recorder (``/api/window``, ``/api/history`` with
``host=``) is relayed on the same session (:meth:`HubLoop.answer`): to that host's target only,
with its token, at most :data:`MAX_RELAYS` at once (the next is a 503 at once), within
:data:`RELAY_S`, the answer read up to :data:`MAX_RELAY_BYTES` (beyond: a 502). The hub keeps
nothing of it.

New state reaches the agent's frame loop through ``notify``: at once for a change of a host's
state and for a watched host's frames, otherwise at most every ``publish_ms`` (a thousand agents
at 1 Hz would otherwise ask for a hub frame every millisecond).

Constraints: everything but :meth:`start`, :meth:`stop` and the thread-safe readers runs on the
loop's thread; :meth:`stop` returns within a few seconds whatever the agents do.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import ssl
import threading
from typing import Any, Callable, Mapping

import aiohttp

from gpuflow.collectors.fleet.credentials import Credentials, CredentialsFile
from gpuflow.collectors.fleet.host_table import SOURCE, HostTable
from gpuflow.collectors.fleet.link import FULL, SUMMARY, Link
from gpuflow.collectors.fleet.srv import SrvFollower
from gpuflow.collectors.fleet.targets import Target, TargetError, read_targets_file, unique
from gpuflow.core.host_answer import HostAnswer
from gpuflow.core.snapshot import Problem, SnapshotPart

log = logging.getLogger("gpuflow.fleet")

SWEEP_S = 0.1
#: what aiohttp buffers of one stream before it stops reading the socket (its default, 256 KiB,
#: is up to 0.5 MiB a connection when the hub falls behind: 0.5 GiB for a thousand agents)
READ_BUFFER = 64 * 1024
#: relayed recorder questions: at most this many at once, each within RELAY_S, its answer at most
#: MAX_RELAY_BYTES (a 100 k-span window is about 6 MB)
MAX_RELAYS = 4
RELAY_S = 30.0
MAX_RELAY_BYTES = 64 * 1024 * 1024
FILE_CHECK_S = 1.0
CONNECT_S = 5.0
MIB = 1024 * 1024


class HubLoop:
    """The fleet's connections; ``options`` are the fleet plugin's resolved options."""

    def __init__(self, options: Mapping[str, Any], notify: Callable[[], None]) -> None:
        self.options = options
        self.notify = notify
        self.table = HostTable()
        self.credentials: Credentials | CredentialsFile | None = options["credentials"]
        self.srv = SrvFollower(options["srv"], options["srv_resolver"], self._apply)
        self.max_hosts: int = options["max_hosts"]
        self.session: aiohttp.ClientSession | None = None
        self.connect_slots: asyncio.Semaphore | None = None
        self.links: dict[Target, tuple[Link, asyncio.Task]] = {}
        self._watched: frozenset[str] = frozenset()
        self._file_targets: tuple[Target, ...] = ()
        self._file_stamp: tuple[int, int, int] | None = None
        self._file_problem: Problem | None = None
        self._cut_problem: Problem | None = None
        self._publish_pending = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._relays = threading.BoundedSemaphore(MAX_RELAYS)

    # -- the agent's thread --------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="gpuflow-fleet", daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def stop(self, timeout: float = 5.0) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:   # the loop ended meanwhile
                pass
        if self._thread is not None:
            self._thread.join(timeout)

    def part(self) -> SnapshotPart:
        return self.table.part()

    def set_watched(self, names: frozenset[str]) -> None:
        """The hosts pages watch now (full detail); thread-safe."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._watch, frozenset(names))

    def answer(self, host: str, route: str, query: str) -> HostAnswer | None:
        """``route?query`` asked of the agent of ``host`` (None: the hub follows no such host);
        thread-safe, called from a web server thread."""
        target = self.table.target_of(host)
        loop = self._loop
        if target is None or loop is None or loop.is_closed():
            return None
        if not self._relays.acquire(blocking=False):
            return _error(503, f"{MAX_RELAYS} questions to hosts are running; try again shortly")
        try:
            future = asyncio.run_coroutine_threadsafe(self._relay(target, route, query), loop)
            try:
                return future.result(RELAY_S + 5)
            except Exception:   # noqa: BLE001 - the loop stopped, or the relay overran
                future.cancel()
                return _error(504, f"host {host} did not answer in time")
        finally:
            self._relays.release()

    async def _relay(self, target: Target, route: str, query: str) -> HostAnswer:
        headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
        token = self.credentials.token_for(target) if self.credentials is not None else None
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        url = f"{target.url}{route.lstrip('/')}?{query}"
        try:
            async with asyncio.timeout(RELAY_S):
                async with self.session.get(url, headers=headers, allow_redirects=False) as resp:
                    if 300 <= resp.status < 400:
                        return _error(502, f"{target.url}: answered with a redirect, which the hub does not follow")
                    body = bytearray()
                    async for chunk in resp.content.iter_any():
                        body += chunk
                        if len(body) > MAX_RELAY_BYTES:
                            return _error(502, f"{target.url}: answered more than {MAX_RELAY_BYTES} bytes")
                    return HostAnswer(resp.status, resp.content_type, bytes(body))
        except TimeoutError:
            return _error(504, f"{target.url}: no answer within {RELAY_S:.0f} s")
        except (aiohttp.ClientError, OSError) as exc:
            return _error(502, f"{target.url}: the question failed ({type(exc).__name__})")

    # -- what links ask ------------------------------------------------------------------------
    def detail_for(self, name: str) -> str:
        return FULL if name in self._watched else SUMMARY

    def watched(self, name: str) -> bool:
        return name in self._watched

    def frame_bytes(self, detail: str) -> int:
        key = "detail_frame_mb" if detail == FULL else "summary_frame_mb"
        return int(self.options[key]) * MIB

    def changed(self, urgent: bool) -> None:
        """A host's view changed: tell the frame loop now, or within ``publish_ms``."""
        if urgent:
            self.notify()
        elif not self._publish_pending and self._loop is not None:
            self._publish_pending = True
            self._loop.call_later(self.options["publish_ms"] / 1000.0, self._publish)

    def _publish(self) -> None:
        self._publish_pending = False
        self.notify()

    # -- the loop --------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except Exception:   # noqa: BLE001 - logged; the part says the hub stopped following
            log.exception("the fleet's network thread failed")
            self.table.set_problems((Problem(SOURCE, "the hub's network thread failed: see its log", "error"),))
            self.notify()
        finally:
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        context = ssl.create_default_context(cafile=self.options["ca_file"])
        connector = aiohttp.TCPConnector(limit=0, ssl=context, ttl_dns_cache=60, force_close=True)
        timeout = aiohttp.ClientTimeout(total=None, connect=CONNECT_S, sock_connect=CONNECT_S)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout, trust_env=False,
                                         auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar(),
                                         raise_for_status=False, read_bufsize=READ_BUFFER) as session:
            self.session = session
            self.connect_slots = asyncio.Semaphore(self.options["max_connecting"])
            if self.options["targets_file"] is not None:
                self._read_file()
            self._apply()
            chores = [asyncio.create_task(self._sweep())]
            if self.options["targets_file"] is not None:
                chores.append(asyncio.create_task(self._watch_file()))
            if self.srv.names:
                chores.append(asyncio.create_task(self.srv.run()))
            if isinstance(self.credentials, CredentialsFile):
                chores.append(asyncio.create_task(self._watch_credentials()))
            self._ready.set()
            await self._stop.wait()
            tasks = chores + [task for _, task in self.links.values()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def _apply(self) -> None:
        """Follow exactly the configured targets (the flags' and the file's), at most max_hosts."""
        wanted = unique(tuple(self.options["targets"]) + self._file_targets + self.srv.targets)
        if len(wanted) > self.max_hosts:
            self._cut_problem = Problem(SOURCE, f"{len(wanted)} targets are configured; the hub follows "
                                        f"the first {self.max_hosts} (GPUFLOW_HUB_MAX_HOSTS)", "error")
            wanted = wanted[:self.max_hosts]
        else:
            self._cut_problem = None
        for target in [t for t in self.links if t not in wanted]:
            _, task = self.links.pop(target)
            task.cancel()
            self.table.forget(target)
        for target in wanted:
            if target not in self.links:
                link = Link(target, self)
                self.links[target] = (link, asyncio.create_task(link.run(), name=f"fleet {target.url}"))
        lines = self.srv.problems() + (getattr(self.credentials, "problem", None),)
        self.table.set_problems(tuple(p for p in (self._file_problem, self._cut_problem) if p is not None)
                                + tuple(Problem(SOURCE, line, "error") for line in lines if line))
        self.notify()

    async def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(SWEEP_S)
            now = loop.time()
            for link, _ in self.links.values():
                link.sweep(now)

    async def _watch_file(self) -> None:
        while True:
            await asyncio.sleep(FILE_CHECK_S)
            if self._read_file():
                self._apply()

    async def _watch_credentials(self) -> None:
        while True:
            await asyncio.sleep(FILE_CHECK_S)
            if self.credentials.check():
                self._apply()

    def _read_file(self) -> bool:
        """Read the targets file if it changed; whether the targets (or its problem) changed."""
        path = self.options["targets_file"]
        try:
            st = os.stat(path)
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError as exc:
            stamp, error = None, f"targets file {path}: {exc.strerror}"
        else:
            if stamp == self._file_stamp:
                return False
            try:
                targets = read_targets_file(path, self.max_hosts)
                error = None
            except TargetError as exc:
                error = str(exc)
        self._file_stamp = stamp
        if error is not None:
            problem = Problem(SOURCE, f"{error}; following the {len(self._file_targets)} targets read before",
                              "error")
            changed = problem != self._file_problem
            self._file_problem = problem
            return changed
        self._file_problem = None
        self._file_targets = targets
        return True

    def _watch(self, names: frozenset[str]) -> None:
        """Pages watch ``names`` now: their links switch to full detail, the others back."""
        before, self._watched = self._watched, names
        for link, _ in self.links.values():
            if (link.name in names) != (link.name in before):
                link.switch()


def _error(status: int, message: str) -> HostAnswer:
    return HostAnswer(status, "application/json", json.dumps({"error": message}).encode())
