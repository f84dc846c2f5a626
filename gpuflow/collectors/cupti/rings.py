"""Mapping a ring a traced process handed over, after checking what its descriptor is.

A ring arrives as a descriptor (gpuflow.collectors.cupti.handover), never as a name. Before it is
mapped read-write (the consumer stores ``tail``), :class:`MappedRing` checks the descriptor itself,
with ``fstat`` and ``fcntl`` on it, so that no ring can crash, hang or fool the agent:

* a regular file (a FIFO, socket or device is refused without ever being read: nothing blocks);
* owned by this user or root;
* sealed against shrinking and growing (``F_GET_SEALS``): its size cannot change under the
  mapping, so no read of it can ever raise SIGBUS; and against further seals, so no one can take
  back the right to write ``tail``;
* backed by ordinary pages (a hugetlb file can SIGBUS when huge pages run out);
* its size between a header plus the smallest ring and a header plus the largest, and exactly what
  its header's capacity says.

Residency: every page the consumer reads stays mapped in its page tables and counts in its RSS
(16 MiB per busy ring at the default size); after each drain the collector drops its mapping of
the pages it has finished reading (:meth:`MappedRing.release_consumed`, ``MADV_DONTNEED``: the data
stays in the ring).

Constraints: Linux (memfd seals, /proc). Takes ownership of the descriptor it is given and closes
it once mapped (the mapping needs no descriptor).
"""

from __future__ import annotations

import fcntl
import mmap
import os
import stat

from gpuflow.collectors.cupti import _layout as L
from gpuflow.collectors.cupti.errors import RingFormatError

#: The seals a ring must carry: its size is fixed for good.
REQUIRED_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
MIN_RING_BYTES = L.HEADER_SIZE + L.MIN_CAPACITY * L.RECORD_SIZE
MAX_RING_BYTES = L.HEADER_SIZE + L.MAX_CAPACITY * L.RECORD_SIZE


class RingRefused(RingFormatError):
    """The descriptor is not a ring this agent will map; the message says what it is instead."""


def process_name(pid: int) -> str | None:
    """/proc/<pid>/comm, or None once the process is gone (read it early)."""
    try:
        with open(f"/proc/{pid}/comm", "rb") as f:
            return f.read().rstrip(b"\n").decode("utf-8", "replace") or None
    except OSError:
        return None


def check_descriptor(fd: int, trusted_uids: frozenset[int]) -> int:
    """The size of the ring behind ``fd``, or RingRefused saying why it is not one to map."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise RingRefused(f"the descriptor is not a regular file but a {_kind(st.st_mode)}")
    if st.st_uid not in trusted_uids:
        raise RingRefused(f"the ring belongs to uid {st.st_uid}")
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError:
        raise RingRefused("the descriptor is not a sealable memory file") from None
    if seals & REQUIRED_SEALS != REQUIRED_SEALS:
        raise RingRefused(f"the ring is not sealed against shrinking, growing and further seals "
                          f"(seals 0x{seals:x})")
    if st.st_blksize != mmap.PAGESIZE:
        raise RingRefused(f"the ring is not backed by ordinary pages (block size {st.st_blksize})")
    if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDWR:
        raise RingRefused("the descriptor is not open for reading and writing")
    if not MIN_RING_BYTES <= st.st_size <= MAX_RING_BYTES:
        raise RingRefused(f"the ring is {st.st_size} bytes, outside [{MIN_RING_BYTES}, {MAX_RING_BYTES}]")
    return st.st_size


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device"), (stat.S_ISDIR, "directory"), (stat.S_ISLNK, "symbolic link")):
        if test(mode):
            return name
    return f"file of mode 0o{mode:o}"


class MappedRing:
    """One ring, checked (:func:`check_descriptor`), mapped read-write, its header validated.

    Takes ownership of ``fd`` (closed before this returns or raises).

    :raises RingRefused: the descriptor is not a ring to map.
    :raises RingFormatError: its header is not one this decoder reads, or disagrees with its size.
    :raises OSError: it cannot be mapped (say, sealed against writing).
    """

    def __init__(self, fd: int, trusted_uids: frozenset[int]) -> None:
        self.mmap: mmap.mmap | None = None
        try:
            size = check_descriptor(fd, trusted_uids)
            self.mmap = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        try:
            self.info = L.validate_header(self.mmap)
            expected = L.HEADER_SIZE + self.info.capacity * L.RECORD_SIZE
            if size != expected:
                raise RingFormatError(f"the ring is {size} bytes but its header's capacity of "
                                      f"{self.info.capacity} records needs {expected}")
        except BaseException:
            self.mmap.close()
            self.mmap = None
            raise
        self._released = self.info.tail  # records below this are not resident on our account

    def release_consumed(self, tail: int) -> int:
        """Drop this process's resident pages of records already decoded (below ``tail``); return
        how many bytes were released.

        ``MADV_DONTNEED`` on our shared mapping removes only our page-table entries: the data stays
        in the ring's memory file, and the page comes back (a minor fault) when the decoder reads
        it after the producer wraps around. Without it every page of every ring the agent has read
        stays in the agent's RSS (RssShmem): 16 MiB per traced process at the default capacity,
        128 MB for 8 busy ones. Only whole pages are released; a page that still holds undecoded
        records waits for the next call. Call it after ``drain`` with the decoder's tail.
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
        """Unmap. The decoder must have been detached first."""
        if self.mmap is not None:
            self.mmap.close()
            self.mmap = None
