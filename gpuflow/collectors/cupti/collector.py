"""The CUPTI collector: takes the rings a ``gpuflow run`` session's processes hand over, drains them
and keeps its snapshot part.

One daemon thread, every ``DRAIN_INTERVAL_S`` (20 ms, so at least 20 Hz):

1. take the rings handed over on the session's socket (gpuflow.collectors.cupti.handover: peers of
   this user only, one sealed memory file each, checked before it is mapped by
   gpuflow.collectors.cupti.rings); what was refused becomes a Problem, one per reason, counted;
   remember the process name (/proc/<pid>/comm of the peer's pid, from the kernel);
2. for each ring: if its connection has ended (the kernel closes it when the process dies: the
   process, and with it every write to the ring, is gone), this is the final drain; drain
   everything published; a producer gone without setting ``producer_exited`` is marked truncated
   (it died without its exit flush);
3. rebuild the part (at most every 50 ms, at once when a process exits) and ``notify`` the agent;
   the part is the *same object* while nothing changed; a running process's kernel table is
   brought up to date at most every ``KERNEL_TABLE_GAP_S`` (traced_builder), and a build is made for
   it alone when a process gone quiet has a table that old, so a table is never further behind;
4. a finished ring is detached, unmapped and its connection closed after its final TracedProcess
   was built; its decoder is dropped (the TracedProcess holds everything the snapshot needs), or,
   with the flight recorder on, kept by its recorder entry (gpuflow.collectors.cupti.recorder)
   until its last retained chunk is evicted;
5. once more than ``EXITED_KEPT`` processes have exited, the oldest exited ones are folded into the
   session's RetiredTraced roll-up (gpuflow.collectors.cupti.retire): their complete totals stay in the
   snapshot, their lanes leave it. Memory and the per-frame cost stay bounded however many CUDA
   processes a long session starts (a soak on the H200 started 1,145 of them). A pid that comes
   back (pid reuse, or a process that exec'ed) with a new ring folds its predecessor first.

:meth:`record_exit` takes the shell-style status ``gpuflow run`` saw for the program it launched
(the plugin's ``process_exited`` hook). :meth:`stop` drains everything one last time, publishes
the final part and closes the socket. The end-of-run text is gpuflow.cli.summary, built from the
final snapshot.

Constraints: never imports the NVML collector; the decoders are touched only by this thread (and
by :meth:`stop` after the thread has ended); the part is swapped in with one assignment, so
:meth:`part` is safe from any thread. A ring that turns out malformed stops being drained and is
reported as a Problem; nothing a peer sends can take the collector down, block it, or grow its
problems beyond one per refusal reason and per process.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from gpuflow.collectors.cupti import caps
from gpuflow.collectors.cupti import decoder as decoder_mod
from gpuflow.collectors.cupti import rings
from gpuflow.collectors.cupti._layout import Caps
from gpuflow.collectors.cupti.handover import Handover, Refusal, RingSocket, trusted_uids
from gpuflow.collectors.cupti.protocol import RingDecoder
from gpuflow.collectors.cupti.traced_builder import KERNEL_TABLE_GAP_S, TracedBuilder
from gpuflow.collectors.cupti.errors import RingError, RingFormatError
from gpuflow.collectors.cupti.options import DEFAULT_LANE_SPAN_CAP, DEFAULT_RETAIN_MB
from gpuflow.collectors.cupti.recorder import Recorded, Recorder, retention_for
from gpuflow.collectors.cupti.retire import fold
from gpuflow.core.recorded import WindowPart
from gpuflow.core.snapshot import Problem, RetiredTraced, SnapshotPart, TracedProcess

log = logging.getLogger("gpuflow.cupti")

SOURCE = "cupti"
DRAIN_INTERVAL_S = 0.020
MIN_BUILD_GAP_S = 0.050
#: A running process whose lanes show spans gets its behind-live figure refreshed this often.
REFRESH_IDLE_S = 1.0
#: A running process's name (it may rename itself) is read again at most this often.
NAME_REFRESH_S = 1.0
#: Traced processes with a ring open at once; a ring beyond it is refused (and said so).
MAX_OPEN_RINGS = 1024
#: Exited traced processes kept whole (with their lanes) in the snapshot; older ones are folded.
EXITED_KEPT = 32
_FOLDED_KEY = "folded"
_SEVERITY = {"info": 0, "warning": 1, "error": 2}


@dataclass
class _Ring:
    """One traced process: its ring, decoder, builder and what we know about its life."""

    pid: int
    handover: Handover
    name: str | None
    mapped: rings.MappedRing | None = None
    decoder: RingDecoder | None = None
    builder: TracedBuilder | None = None
    state: str = "running"
    truncated: bool = False
    error: str | None = None
    finished: bool = False  # final drain done, ring released
    traced: TracedProcess | None = None
    counters: dict[str, Any] = field(default_factory=dict)
    header_key: tuple[Any, ...] = ()
    recorded: Recorded | None = None  # its flight recorder entry (None: retention off)
    name_read_at: float = float("-inf")  # when the build last read its name (time.monotonic)


class CuptiCollector:
    """Drains the rings handed over on ``ring_socket`` and produces the ``cupti`` SnapshotPart.

    :param session: the id the snapshot gives this session's traced processes.
    :param ring_socket: where the session's processes hand their rings over; the collector closes
        it when it stops.
    :param notify: called (from the drain thread) whenever the part changed.
    :param lane_span_cap: spans kept per lane.
    :param caps: the decoders' caps (docs/decoder.md, "Caps"); each one a ring reaches is a Problem.
    :param drain_max_records: the most records one pass takes from one ring (None: all published).
    :param decoder_class: defaults to the selected decoder (compiled when available).
    :param retain_bytes: the flight recorder's budget, all traced processes together (0: off).
    :param retain_s: the most seconds it keeps (None: what the budget holds).
    :param kernel_table_gap_s: a running process's kernel table is brought up to date at most this
        often (0: at every build).
    """

    def __init__(self, session: str, ring_socket: RingSocket, notify: Callable[[], None] = lambda: None, *,
                 lane_span_cap: int = DEFAULT_LANE_SPAN_CAP, caps: Caps = Caps(),
                 drain_max_records: int | None = None,
                 decoder_class: type[RingDecoder] | None = None,
                 clock_ns: Callable[[], int] = time.time_ns,
                 drain_interval_s: float = DRAIN_INTERVAL_S,
                 retain_bytes: int = DEFAULT_RETAIN_MB << 20, retain_s: float | None = None,
                 kernel_table_gap_s: float = KERNEL_TABLE_GAP_S) -> None:
        self.session = session
        self._kernel_table_gap_s = kernel_table_gap_s
        self.ring_socket = ring_socket
        self._trusted = trusted_uids()
        self._notify = notify
        self._cap = lane_span_cap
        self._caps = caps
        self._drain_max = drain_max_records
        self._decoder_class = decoder_class or decoder_mod.RingDecoder
        self._exits: dict[int, int] = {}
        self._exits_lock = threading.Lock()
        self._clock_ns = clock_ns
        self._interval = drain_interval_s
        self._rings: dict[int, _Ring] = {}
        self._deferred: list[Handover] = []  # a pid's new ring, taken once its ended one is released
        self._released_order: list[int] = []  # pids of released (finished) rings, oldest first
        self._retired: RetiredTraced | None = None
        self._folded_with_problems = 0
        self._refused: dict[str, int] = {}  # refusal reason -> connections refused for it
        self._problems: dict[str, Problem] = {}
        self._part = SnapshotPart(source=SOURCE)
        self._dirty = False
        self._last_build = 0.0
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._poll_lock = threading.Lock()
        self._stopped = False
        self.rings_seen = 0
        #: the flight recorder (None: retention off); its window answers take the poll lock only to
        #: look up a name defined since the last build
        self.recorder = (Recorder(SOURCE, retention_for(self._decoder_class, retain_bytes), retain_s, self._poll_lock)
                         if retain_bytes else None)

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        """Start the drain thread (idempotent)."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="gpuflow-cupti", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread, drain everything one last time, publish the final part, release rings,
        close the socket.

        Idempotent; after it the collector keeps answering :meth:`part`.
        """
        if self._stopped:
            return
        self._stopped = True
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        try:
            self.poll(final=True)
        finally:
            for ring in self._rings.values():
                self._release(ring)
            if self.recorder is not None:
                self.recorder.stop()
            for handover in self._deferred:
                handover.close()
            self._deferred = []
            self.ring_socket.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - keep draining; a bug here must not stop tracing
                log.exception("CUPTI collector pass failed")
            self._wake.wait(self._interval)
            self._wake.clear()

    # -- the CLI's side ------------------------------------------------------------------------
    def record_exit(self, pid: int, status: int) -> None:
        """Record the shell-style exit status (128+N for signal N) of a launched program; any thread."""
        with self._exits_lock:
            self._exits[pid] = status
        self._wake.set()

    def part(self) -> SnapshotPart:
        """The latest part: the same object until something changes."""
        return self._part

    def window(self, start_s: float, end_s: float, pid: int | None, width_px: int | None) -> WindowPart | None:
        """The retained executions in [start_s, end_s) (any thread; the ``query_window`` hook)."""
        return None if self.recorder is None else self.recorder.window(start_s, end_s, pid, width_px)

    @property
    def saw_cuda(self) -> bool:
        """Whether any traced process handed a ring over."""
        return self.rings_seen > 0

    # -- one pass ------------------------------------------------------------------------------
    def poll(self, final: bool = False) -> bool:
        """Discover, drain, finish exited processes, rebuild the part if due; True if it changed.

        ``final``: the agent is stopping; drain everything and build now.
        """
        with self._poll_lock:
            if self._stopped and not final:
                return False
            changed = self._accept()
            now = time.monotonic()
            for ring in list(self._rings.values()):
                if not ring.finished and ring.mapped is not None:
                    changed |= self._drain(ring, final)
            changed |= self._apply_exit_statuses()
            if changed:
                self._dirty = True
            due = self._dirty and (final or now - self._last_build >= MIN_BUILD_GAP_S
                                   or any(r.finished and r.mapped is not None for r in self._rings.values()))
            idle_refresh = (not self._dirty and now - self._last_build >= REFRESH_IDLE_S and any(
                r.state == "running" and r.traced is not None and r.traced.window_end_us is not None
                for r in self._rings.values()))
            # a process gone quiet since its kernel table was last brought up to date (while records
            # come, the builds they make bring it up to date, at most every MIN_BUILD_GAP_S)
            tables_due = not self._dirty and any(r.builder is not None and r.mapped is not None
                                                 and r.builder.kernels_due(exact=final) for r in self._rings.values())
            if due or idle_refresh or tables_due or (final and self._dirty):
                self._build(exact=final)
                self._last_build = now
                self._dirty = False
                self._notify()
                changed = True
            if self.recorder is not None:
                self.recorder.after_pass(self._clock_ns())
            return changed

    def _accept(self) -> bool:
        """Take the rings handed over since the last pass; a Problem for each reason to refuse one."""
        changed = False
        arrived, self._deferred = self._deferred, []
        for item in arrived + self.ring_socket.receive():
            if isinstance(item, Refusal):
                changed |= self._refuse(item)
                continue
            known = self._rings.get(item.pid)
            if known is not None and not (known.finished and known.mapped is None):
                if known.handover.ended():   # the pid exec'ed: take the new ring once the old one is released
                    self._deferred.append(item)
                else:
                    item.close()
                    changed |= self._refuse(Refusal("second_ring", f"pid {item.pid} sent a second ring while "
                                                    "its first is still open", item.pid, item.uid))
                continue
            if known is None and sum(not r.finished for r in self._rings.values()) >= MAX_OPEN_RINGS:
                item.close()
                changed |= self._refuse(Refusal("too_many_rings", f"more than {MAX_OPEN_RINGS} traced "
                                                "processes had a ring open at once", item.pid, item.uid))
                continue
            changed |= self._open(item, known)
        return changed

    def _open(self, handover: Handover, known: _Ring | None) -> bool:
        """Map and start decoding one ring; a ring that is not one to map is refused."""
        name = rings.process_name(handover.pid)
        fd, handover.ring_fd = handover.ring_fd, -1   # MappedRing closes it
        try:
            mapped = rings.MappedRing(fd, self._trusted)
        except (RingError, OSError) as exc:
            handover.close()
            return self._refuse(Refusal("not_a_ring", f"pid {handover.pid}: its ring was refused: {exc}",
                                        handover.pid, handover.uid))
        retention = {} if self.recorder is None else {"retention": self.recorder.retention}
        try:
            dec = self._decoder_class(mapped.mmap, lane_span_cap=self._cap, **self._caps._asdict(), **retention)
        except RingError as exc:
            mapped.close()
            handover.close()
            return self._refuse(Refusal("not_a_ring", f"pid {handover.pid}: its ring was refused: {exc}",
                                        handover.pid, handover.uid))
        if known is not None:
            self._fold(handover.pid)   # the pid came back: ours was released when it finished
        builder = TracedBuilder(handover.pid, self.session, self._cap, kernel_table_gap_s=self._kernel_table_gap_s)
        ring = self._rings[handover.pid] = _Ring(pid=handover.pid, handover=handover, name=name, mapped=mapped,
                                                 decoder=dec, builder=builder)
        if self.recorder is not None:
            ring.recorded = self.recorder.track(handover.pid, self.session, name, dec, builder)
        self.rings_seen += 1
        return True

    def _refuse(self, refusal: Refusal) -> bool:
        """Count a refused connection under its reason; one Problem per reason (bounded)."""
        count = self._refused[refusal.reason] = self._refused.get(refusal.reason, 0) + 1
        if count & (count - 1) == 0:   # the 1st, 2nd, 4th, 8th ...: a flood costs a few log lines
            log.warning("refused a ring (%d so far for this reason): %s", count, refusal.detail)
        self._problem(f"refused:{refusal.reason}", f"{count} ring handover(s) refused ({refusal.reason}); "
                      f"the last: {refusal.detail}")
        return True

    def _passes(self, capacity: int) -> int:
        """The most passes that drain a ring of ``capacity`` records to its head."""
        return 1 if self._drain_max is None else -(-capacity // self._drain_max) + 1

    def _drain(self, ring: _Ring, final: bool = False) -> bool:
        """Drain one ring; finish it if its producer is gone. True if anything changed.
        ``final``: the agent is stopping; everything published is drained.

        A ring that turned unreadable is no longer drained but still watched: the process may
        run on, and its exit still ends the ring.
        """
        # decided before draining: a connection ends when its process has gone, and with it every
        # write to the ring, so this drain takes everything there will ever be
        gone = ring.handover.ended()
        dec, mapped = ring.decoder, ring.mapped
        assert dec is not None and mapped is not None  # poll() drains only mapped rings
        changed = False
        if ring.error is None:
            try:
                # one call takes everything published so far (head - tail <= capacity), up to
                # drain_max_records (a ring far larger than ours would hold that much resident per
                # pass); records published meanwhile wait for the next pass, 20 ms later. A ring
                # whose process is gone, or drained by an agent stopping, has no next pass: it is
                # drained to its head, pass after pass, at most its capacity and a pass more in
                # all (a process the ring was shared with cannot keep this drain going)
                for _ in range(self._passes(dec.capacity) if gone or final else 1):
                    taken = dec.drain(self._drain_max)
                    if taken:
                        changed = True
                        mapped.release_consumed(dec.tail)
                    if self._drain_max is None or taken < self._drain_max:
                        break
                if ring.recorded is not None:
                    Recorder.note_clock(ring.recorded, dec.clock())
            except RingFormatError as exc:
                ring.error = str(exc)
                ring.truncated = True
                self._problem(f"format:{ring.pid}", f"pid {ring.pid}: its ring became unreadable ({exc}); "
                              "tracing of this process stopped, its figures stop here", "error")
                changed = True
        header = dec.header()
        key = (header["status"], header["status_detail"], header["dropped_ring"], header["dropped_cupti"],
               header["producer_exited"])
        if key != ring.header_key:
            ring.header_key = key
            changed = True
        self._note_counters(ring, dec.counters())
        if gone:
            ring.state = "exited"
            if not header["producer_exited"]:
                ring.truncated = True
            ring.finished = True  # the final TracedProcess is built next, then the ring is released
            changed = True
        return changed

    def _note_counters(self, ring: _Ring, counters: dict[str, Any]) -> None:
        counters = {**counters, "caps": caps.figures(counters, ring.builder)}
        if counters == ring.counters:
            return
        ring.counters = counters
        if counters["invalid_records"]:
            reasons = ", ".join(f"{n} {why}" for why, n in sorted(counters["invalid"].items()))
            self._problem(f"invalid:{ring.pid}", f"pid {ring.pid}: {counters['invalid_records']} malformed "
                          f"ring records were skipped ({reasons}); its figures may be incomplete")
        for key, message, severity in caps.problems(ring.pid, counters["caps"], self._caps):
            self._problem(f"{key}:{ring.pid}", message, severity)
        if counters["saturated"]:
            self._problem(f"saturated:{ring.pid}", f"pid {ring.pid}: a byte or time total reached 2^64-1 "
                          "and stopped growing")

    def _apply_exit_statuses(self) -> bool:
        with self._exits_lock:
            statuses = dict(self._exits)
        changed = False
        for pid, status in statuses.items():
            ring = self._rings.get(pid)
            if (ring is not None and ring.state == "exited" and ring.traced is not None
                    and ring.traced.exit_status != status):
                changed = True
        return changed

    def _exit_status(self, pid: int) -> int | None:
        with self._exits_lock:
            return self._exits.get(pid)

    def _build(self, exact: bool = False) -> None:
        """The part from every ring; ``exact``: every kernel table brought up to date (the agent
        stopping)."""
        now_ns = self._clock_ns()
        now = time.monotonic()
        for pid in sorted(self._rings):
            ring = self._rings[pid]
            if ring.state == "running" and now - ring.name_read_at >= NAME_REFRESH_S:
                # programs rename themselves (prctl, setproctitle): read again once a second, not
                # at every build (opening /proc/<pid>/comm was ~0.1 ms of each process's build)
                ring.name_read_at = now
                ring.name = rings.process_name(pid) or ring.name
                if ring.recorded is not None:
                    ring.recorded.name = ring.name
            status = self._exit_status(pid) if ring.state == "exited" else None
            if ring.mapped is not None or ring.traced is None:
                builder, dec = ring.builder, ring.decoder
                assert builder is not None and dec is not None  # dropped only once released and built
                ring.traced = builder.build(dec, name=ring.name, state=ring.state, exit_status=status,
                                            truncated=ring.truncated, now_ns=now_ns, exact=exact)
            elif ring.traced.exit_status != status:
                # a released ring cannot change any more, except for the exit status the CLI reports
                ring.traced = replace(ring.traced, exit_status=status)
            if ring.finished and ring.mapped is not None:
                self._release(ring)  # after its final TracedProcess was built
                ring.decoder = ring.builder = None   # its flight recorder entry keeps them while it retains
                if ring.recorded is not None:
                    ring.recorded.running = False
                self._released_order.append(pid)
        while len(self._released_order) > EXITED_KEPT:
            self._fold(self._released_order[0])
        self._part = SnapshotPart(
            source=SOURCE, traced=tuple(t for pid in sorted(self._rings) if (t := self._rings[pid].traced)),
            traced_retired=(self._retired,) if self._retired is not None else (),
            problems=tuple(self._problems[k] for k in sorted(self._problems)))

    def _fold(self, pid: int) -> None:
        """Fold the released ring of ``pid`` into the session's roll-up and forget it.

        Its own problems (malformed records, lanes beyond the limit, …) are folded too, into one
        counted Problem, so the host's list stays bounded as well.
        """
        ring = self._rings.pop(pid)
        self._released_order.remove(pid)
        if ring.traced is not None:
            self._retired = fold(self._retired, ring.traced)
        mine = [k for k in self._problems if k.rsplit(":", 1)[-1] == str(pid)]
        if mine:
            rank = lambda problem: _SEVERITY.get(problem.severity, 0)  # noqa: E731
            worst = max((self._problems.pop(k) for k in mine), key=rank)
            self._folded_with_problems += 1
            severity = max(worst, self._problems.get(_FOLDED_KEY, worst), key=rank).severity
            self._problem(_FOLDED_KEY, f"{self._folded_with_problems} earlier traced process(es), now folded into "
                          "the session's roll-up, had problems (the last: "
                          f"{worst.message}); the roll-up's totals include them", severity)

    def _release(self, ring: _Ring) -> None:
        """Detach the decoder (it keeps its figures), unmap, and close the connection."""
        if ring.mapped is None:
            return
        try:
            if ring.decoder is not None:
                ring.decoder.detach()
            ring.mapped.close()
        finally:
            ring.handover.close()
            ring.mapped = None

    def _problem(self, key: str, message: str, severity: str = "warning") -> None:
        problem = Problem(source=SOURCE, message=message, severity=severity)
        if self._problems.get(key) != problem:
            self._problems[key] = problem
            self._dirty = True
