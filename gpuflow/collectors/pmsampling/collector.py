"""The PM-sampling collector's thread: its samplers, their rings, the samples kept, what it says.

Every :data:`PASS_S` it takes the rings its samplers handed over (handover.py: only its own
helpers' pids), drains each (sample_ring.py) into the store (store.py), starts the helpers of the
GPUs beyond the first once the first has said how many CUDA devices there are, and notices helpers
that ended. What it has to say is its snapshot part's problems, one line per GPU: sampling (info:
the interval, the metrics, the samples, the helper's CPU), or why not (a warning with the
helper's own words: no driver, no privilege, counters held by another tool, an unsupported
device, a helper that could not start). The part is a new object only when a line changes, and
the running counts are refreshed every :data:`STATUS_EVERY_S`, so a steady run sends no frames.

Constraints: nothing here holds a CUDA context or loads CUDA; a helper's trouble is a line in the
part, never an exception out of the thread; stop() returns within the helpers' stop bound and the
samples stay answerable afterwards (``gpuflow run --trace-out``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from gpuflow.collectors.pmsampling import samplers as S
from gpuflow.collectors.pmsampling import samples_layout as L
from gpuflow.collectors.pmsampling.handover import Handover, SamplerSocket, SocketSetupError, private_directory, trusted_uids
from gpuflow.collectors.pmsampling.sample_ring import HeaderFacts, SampleRing, SampleRingRefused
from gpuflow.collectors.pmsampling.store import MAX_DEVICES, SampleStore
from gpuflow.core.snapshot import Problem, SnapshotPart

SOURCE = "pmsampling"
PASS_S = 0.02
STATUS_EVERY_S = 10.0


@dataclass
class _Feed:
    """One GPU's helper and its ring once handed over."""

    sampler: S.Sampler
    ring: SampleRing | None = None
    handover: Handover | None = None
    facts: HeaderFacts | None = None
    ended: bool = False
    refused_ring: str | None = None


class PmCollector:
    """``settings`` without ``socket_path`` (the collector makes its socket); ``binary`` None: the
    helper was not built, which the part says."""

    def __init__(self, settings: Callable[[Path], S.SamplerSettings] | None, budget_bytes: int,
                 notify: Callable[[], None], environ: Mapping[str, str], clock=time.time) -> None:
        self._settings_for = settings
        self.store = SampleStore(budget_bytes)
        self._notify = notify
        self._environ = environ
        self._clock = clock
        self._feeds: dict[int, _Feed] = {}
        self._socket: SamplerSocket | None = None
        self._settings: S.SamplerSettings | None = None
        self._setup_problem: str | None = None
        self._refused: dict[str, int] = {}
        self._rest_started = False
        self._part = SnapshotPart(source=SOURCE)
        self._lines: tuple[Problem, ...] = ()
        self._shape: tuple[Problem, ...] = ()
        self._status_at = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        if self._settings_for is None:
            self._setup_problem = ("--gpu-metrics: the PM sampler helper (gpuflow-pm-sampler) was not built: "
                                   "install the CUDA toolkit (its CUPTI headers), set CUDA_HOME, reinstall GPUFlow")
        else:
            try:
                directory = private_directory(self._environ)
                self._socket = SamplerSocket(directory, self._expected)
                self._settings = self._settings_for(self._socket.path)
                self._launch(0)
            except (SocketSetupError, OSError) as exc:
                self._setup_problem = f"--gpu-metrics: the PM samplers could not be started: {exc}"
        self._publish(force=True)
        self._thread = threading.Thread(target=self._run, name="gpuflow-pmsampling", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for feed in self._feeds.values():   # closing its connection tells a helper to stop
            if feed.handover is not None:
                feed.handover.connection.close()
        S.stop_all([f.sampler for f in self._feeds.values()])
        self._pass()   # what the helpers decoded last
        for feed in self._feeds.values():
            if feed.ring is not None:
                feed.ring.close()
                feed.ring = None
            if feed.handover is not None:
                feed.handover.connection.close()
        if self._socket is not None:
            self._socket.close()
        self._publish(force=True)

    def part(self) -> SnapshotPart:
        return self._part

    # -- the pass ----------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.wait(PASS_S):
            self._pass()

    def _expected(self, pid: int) -> bool:
        return any(f.sampler.pid == pid and f.handover is None for f in self._feeds.values())

    def _launch(self, device: int) -> None:
        assert self._settings is not None
        self._feeds[device] = _Feed(S.start(self._settings, device, self._environ))

    def _pass(self) -> None:
        if self._socket is not None:
            for h in self._socket.receive():
                self._take(h)
        fresh = False
        for feed in self._feeds.values():
            feed.sampler.poll()
            if feed.ring is None:
                continue
            feed.facts = feed.ring.facts()
            drained = feed.ring.drain()
            for why, n in drained.refused.items():
                self._refused[why] = self._refused.get(why, 0) + n
            if drained.starts:
                uuid = feed.facts.uuid or f"cuda:{feed.sampler.device}"
                self.store.add(uuid, feed.facts.device_count, feed.facts.interval_ns, feed.facts.slots_collected,
                               drained.starts, drained.values)
                fresh = True
            if feed.handover is not None and not feed.ended and feed.handover.ended():
                feed.ended = True
        first = self._feeds.get(0)
        if not self._rest_started and first is not None and first.facts is not None and first.facts.device_count:
            self._rest_started = True
            for device in range(1, min(first.facts.device_count, MAX_DEVICES)):
                try:
                    self._launch(device)
                except OSError as exc:
                    self._setup_problem = f"--gpu-metrics: the PM sampler of GPU {device} could not be started: {exc}"
        self._publish()
        if fresh:
            self._notify()

    def _take(self, h: Handover) -> None:
        feed = next((f for f in self._feeds.values() if f.sampler.pid == h.pid and f.handover is None), None)
        if feed is None:   # the socket checked the pid: only a race with our own bookkeeping lands here
            h.connection.close()
            return
        feed.handover = h
        feed.sampler.handed_over = True
        try:
            feed.ring = SampleRing(h.ring_fd, trusted_uids(), clock=self._clock)
        except (SampleRingRefused, OSError) as exc:
            feed.refused_ring = str(exc)

    # -- what it says ------------------------------------------------------------------------
    def _publish(self, force: bool = False) -> None:
        """A new part when a line says something new, or its counts are STATUS_EVERY_S old."""
        now = self._clock()
        shape = self._lines_now(counts=False)
        if not force and shape == self._shape and now - self._status_at < STATUS_EVERY_S:
            return
        self._shape, self._status_at = shape, now
        lines = self._lines_now(counts=True)
        if lines != self._lines:
            self._lines = lines
            self._part = SnapshotPart(source=SOURCE, problems=lines)
            self._notify()

    def _lines_now(self, counts: bool) -> tuple[Problem, ...]:
        out: list[Problem] = []
        if self._setup_problem:
            out.append(Problem(SOURCE, self._setup_problem, "warning"))
        for device, feed in sorted(self._feeds.items()):
            out.append(self._line(device, feed, counts))
        if self._socket is not None:
            for why, n in self._socket.refused.items():
                self._refused[why] = self._refused.get(why, 0) + n
            self._socket.refused.clear()
        if self._refused:
            said = ", ".join(f"{n:,} {why.replace('_', ' ')}" for why, n in sorted(self._refused.items()))
            out.append(Problem(SOURCE, f"the PM samplers' rings held what the agent does not believe, left out: {said}",
                               "warning"))
        return tuple(out)

    def _line(self, device: int, feed: _Feed, counts: bool) -> Problem:
        s, f = feed.sampler, feed.facts
        if feed.refused_ring is not None:
            return Problem(SOURCE, f"GPU {device}: no GPU metrics: the sampler's ring was refused: {feed.refused_ring}",
                           "warning")
        if f is None:
            if s.exit_status is not None:
                said = s.said()
                return Problem(SOURCE, f"GPU {device}: no GPU metrics: the PM sampler exited with status "
                               f"{s.exit_status} before handing its samples over" + (f": {said}" if said else ""),
                               "warning")
            return Problem(SOURCE, f"GPU {device}: the PM sampler is starting", "info")
        name = f" ({f.device_name})" if f.device_name else ""
        status = L.status_name(f.status)
        if f.status not in (L.OK, L.STOPPED, L.STARTING):
            return Problem(SOURCE, f"GPU {device}{name}: no GPU metrics ({status}): {f.detail}", "warning")
        if f.status == L.STARTING:
            if s.exit_status is not None:
                return Problem(SOURCE, f"GPU {device}{name}: no GPU metrics: the PM sampler exited with status "
                               f"{s.exit_status} while starting", "warning")
            return Problem(SOURCE, f"GPU {device}{name}: the PM sampler is starting", "info")
        collected = [i for i in range(L.SLOT_COUNT) if f.slots_collected >> i & 1]
        missing = [L.SLOT_WORDS[i] for i in range(L.SLOT_COUNT) if i not in collected]
        text = (f"GPU {device}{name}: PM sampling {'stopped' if f.status == L.STOPPED else 'every'}"
                f"{'' if f.status == L.STOPPED else f' {f.interval_ns / 1e6:g} ms'}, {len(collected)} of "
                f"{L.SLOT_COUNT} metrics" + (f" (not in one pass: {', '.join(missing)})" if missing else ""))
        if f.flags & L.FLAG_CONTEXT_HELD:
            text += ", holding a CUDA context on the GPU"
        if counts:
            alive = max(1e-3, time.monotonic() - s.started)
            text += (f"; {f.samples_written:,} samples, the sampler's CPU {f.cpu_ns / 1e9:.2f} s "
                     f"({100 * f.cpu_ns / 1e9 / alive:.2f} % of a core)")
            if f.hw_overflows:
                text += (f"; the GPU's buffer overflowed {f.hw_overflows:,} time{'s' if f.hw_overflows != 1 else ''} "
                         "(samples lost there)")
            if f.samples_dropped:
                text += f"; {f.samples_dropped:,} samples dropped (the agent read too slowly)"
        if f.flags & L.FLAG_CLOCK_SUSPECT:
            text += "; sample times were far from CUPTI's clock: their placement is suspect"
        return Problem(SOURCE, text, "info")
