"""Finding, mapping and cleaning up the rings of a session in /dev/shm.

A ring is the POSIX shared-memory segment ``/gpuflow-<session>-<pid>`` that libgpuflow_inject.so
creates in each traced process (``shm_open`` names live in /dev/shm on Linux). The consumer maps it
read-write (it stores ``tail``) with ``os.open`` + ``mmap``: no posix_ipc dependency.

Ownership: a consumer holds an exclusive ``flock`` on every ring it has open, so a ring has exactly
one consumer and other agents can tell a live session's rings from a dead one's. A ring is unlinked

* by its consumer, once the producer has exited and the ring was fully drained (after the final
  snapshot): :meth:`MappedRing.unlink`;
* by any agent's sweep (:func:`remove_stale_rings`), when its producer pid is gone, no consumer
  holds its lock, and it is older than a grace period (so a ring created a moment ago by a
  short-lived process, not yet opened by its own consumer, is left alone).

Residency: the segment's pages belong to /dev/shm, but every page the consumer reads stays mapped
in the consumer's page tables and counts in its RSS (16 MiB per busy ring at the default size);
after each drain the collector drops its mapping of the pages it has finished reading
(:meth:`MappedRing.release_consumed`, ``MADV_DONTNEED``: the data stays in the segment).

Constraints: Linux (/proc, /dev/shm, flock). Never raises for another user's or a vanished file
during discovery or sweeping; opening our own ring reports what went wrong.
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from gpuflow.collectors.cupti import _layout as L
from gpuflow.collectors.cupti.errors import RingError, RingNotReady

SHM_DIR = Path("/dev/shm")
#: Sessions are 1..31 characters of [A-Za-z0-9_-] (rp_valid_session); the pid follows the last '-'.
_RING_RE = re.compile(r"^gpuflow-([A-Za-z0-9_-]{1,31})-([0-9]{1,10})$")
#: A ring younger than this is never swept, whatever its pid says.
STALE_GRACE_S = 60.0


class RingBusy(RingError):
    """Another consumer (another GPUFlow agent) holds this ring."""


@dataclass(frozen=True)
class RingFile:
    """A ring segment found in the shared-memory directory."""

    session: str
    pid: int
    path: Path


def ring_path(session: str, pid: int, shm_dir: Path = SHM_DIR) -> Path:
    """Where ``shm_open(GPUFLOW_RING_NAME_FMT(session, pid))`` puts the segment."""
    return Path(shm_dir) / f"{L.RING_PREFIX}{session}-{pid}"


def parse_ring_name(filename: str) -> tuple[str, int] | None:
    """``(session, pid)`` of a ring's file name, or None if it is not one."""
    m = _RING_RE.match(filename)
    if m is None:
        return None
    return m.group(1), int(m.group(2))


def list_rings(shm_dir: Path = SHM_DIR, session: str | None = None) -> list[RingFile]:
    """Every ring in ``shm_dir`` (of ``session`` only, if given), sorted by pid."""
    found = []
    try:
        names = os.listdir(shm_dir)
    except OSError:
        return []
    for filename in names:
        if not filename.startswith(L.RING_PREFIX):
            continue
        parsed = parse_ring_name(filename)
        if parsed is None or (session is not None and parsed[0] != session):
            continue
        found.append(RingFile(parsed[0], parsed[1], Path(shm_dir) / filename))
    found.sort(key=lambda r: (r.pid, r.session))
    return found


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (exited, not yet reaped) counts as gone."""
    if pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    # "pid (comm) S ..." — comm may hold spaces and parentheses: the state follows the last ')'.
    state = stat[stat.rfind(b")") + 2: stat.rfind(b")") + 3]
    return state not in (b"Z", b"X", b"x")


def process_name(pid: int) -> str | None:
    """/proc/<pid>/comm, or None once the process is gone (read it early)."""
    try:
        with open(f"/proc/{pid}/comm", "rb") as f:
            return f.read().rstrip(b"\n").decode("utf-8", "replace") or None
    except OSError:
        return None


class MappedRing:
    """One ring, opened read-write, exclusively locked and mapped; its header validated.

    :raises RingNotReady: the producer has not finished creating it; try again later.
    :raises RingBusy: another consumer holds it.
    :raises RingFormatError: its header is not one this decoder reads.
    :raises OSError: it vanished or cannot be opened (permissions).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.mmap: mmap.mmap | None = None
        fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RingBusy(f"{self.path} is held by another consumer") from None
            size = os.fstat(fd).st_size
            if size == 0:
                raise RingNotReady(f"{self.path} has not been sized yet")
            self.mmap = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            try:
                self.info = L.validate_header(self.mmap)
            except BaseException:
                self.mmap.close()
                self.mmap = None
                raise
        except BaseException:
            os.close(fd)
            raise
        self._fd: int | None = fd
        st = os.fstat(fd)
        self._identity = (st.st_dev, st.st_ino)  # unlink only this segment, never a successor
        self._released = self.info.tail  # records below this are not resident on our account

    def release_consumed(self, tail: int) -> int:
        """Drop this process's resident pages of records already decoded (below ``tail``); return
        how many bytes were released.

        The ring is a /dev/shm segment that its producer created and fills; ``MADV_DONTNEED`` on
        our shared mapping removes only our page-table entries: the data stays in the segment, and
        the page comes back (a minor fault) when the decoder reads it after the producer wraps
        around. Without it every page of every ring the agent has read stays in the agent's RSS
        (RssShmem): 16 MiB per traced process at the default capacity, 128 MB for 8 busy ones.
        Only whole pages are released; a page that still holds undecoded records waits for the
        next call. Call it after ``drain`` with the decoder's tail.
        """
        if self.mmap is None or tail <= self._released:
            return 0
        cap, size, page = self.info.capacity, L.RECORD_SIZE, mmap.PAGESIZE
        first = max(self._released, tail - cap)
        slot = first % cap
        segments = [(slot, min(cap, slot + tail - first))]
        if slot + tail - first > cap:  # the range wraps: its end is at the ring's start
            segments.append((0, slot + tail - first - cap))
        released = 0
        for lo_slot, hi_slot in segments:
            lo = L.HEADER_SIZE + lo_slot * size
            hi = L.HEADER_SIZE + hi_slot * size
            start, end = -(-lo // page) * page, hi // page * page
            if start < end:
                self.mmap.madvise(mmap.MADV_DONTNEED, start, end - start)
                released += end - start
        # the records of the last, partial page stay counted until a later call covers its page
        lo_slot, hi_slot = segments[-1]
        kept_from = max(L.HEADER_SIZE + lo_slot * size, (L.HEADER_SIZE + hi_slot * size) // page * page)
        self._released = tail - (L.HEADER_SIZE + hi_slot * size - kept_from) // size
        return released

    def close(self) -> None:
        """Unmap and release the lock. The decoder must have been detached first."""
        if self.mmap is not None:
            self.mmap.close()
            self.mmap = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def unlink(self) -> None:
        """Remove the segment's name (the mapping, if still open, stays valid).

        Only if the name still is this segment: a new process that got the same pid may already
        have replaced a dead producer's ring under the same name, and that ring is not ours.
        """
        try:
            st = os.stat(self.path, follow_symlinks=False)
            if (st.st_dev, st.st_ino) == self._identity:
                os.unlink(self.path)
        except FileNotFoundError:
            pass


def remove_stale_rings(shm_dir: Path = SHM_DIR, *, keep_session: str | None = None,
                       grace_s: float = STALE_GRACE_S, now: float | None = None) -> list[Path]:
    """Unlink rings whose producer is gone and that no consumer holds; return what was removed.

    Rings of ``keep_session`` (our own, drained and unlinked by us) and rings younger than
    ``grace_s`` are left alone.
    """
    removed = []
    now = time.time() if now is None else now
    for ring in list_rings(shm_dir):
        if ring.session == keep_session or pid_alive(ring.pid):
            continue
        try:
            fd = os.open(ring.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if now - max(st.st_mtime, st.st_ctime) < grace_s:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    continue  # a live consumer holds it
                raise
            try:
                os.unlink(ring.path)
            except OSError:
                continue
            removed.append(ring.path)
        finally:
            os.close(fd)
    return removed
