"""Reading a sample ring a sampler handed over (cupti_src/pm_samples.h): check the descriptor, map
it, read the header's facts and drain its records, treating every byte as untrusted.

What a sampler writes is input to the agent like a traced program's ring: the helper is ours, but
a bug, a hostile process of the same user that got the socket, or a corrupted mapping must not
crash, hang or grow the agent. So:

* the descriptor is checked before it is mapped, as the kernel rings are: a regular, sealed
  memory file of ordinary pages, this user's or root's, open read-write, of a size between the
  smallest and the largest ring, equal to what its header says;
* a drain reads at most one ring's worth of records, never beyond what ``head`` says is written,
  and a ``head`` behind ``tail`` or more than a ring ahead of it ends the ring (``lying``);
* a record of an unknown kind, a sample that ends before it starts or lasts over
  :data:`~samples_layout.MAX_SAMPLE_NS`, starts before the previous one ended, has no clock pair
  to place it, or would start more than :data:`FUTURE_NS` ahead of the agent's clock, is counted
  and skipped; a value outside its slot's bounds, infinite or NaN is
  "not available" and counted; valid bits beyond the slots are ignored;
* a clock pair whose wall time is a day away from the agent's clock is ignored and counted;
* the header's texts are read up to their fixed sizes, cut at the first NUL, decoded with
  replacement and stripped of control characters; its numbers are what they are, bounded by
  their width.

Constraints: Linux; takes ownership of the descriptor (closed once mapped); a drain is O(records
read) with one struct unpack per record and no allocation beyond the samples it returns.
"""

from __future__ import annotations

import fcntl
import math
import mmap
import os
import stat
import struct
import time
from dataclasses import dataclass, field

from gpuflow.collectors.pmsampling import samples_layout as L

REQUIRED_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
#: a clock pair whose wall time is further than this from the agent's is not believed
CLOCK_TRUST_NS = 86_400 * 1_000_000_000
#: a sample that would start further than this ahead of the agent's clock is not placed
FUTURE_NS = 60 * 1_000_000_000
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U64 = struct.Struct("<Q")


class SampleRingRefused(Exception):
    """The descriptor or its header is not a sample ring this agent will read; the message says why."""


@dataclass
class HeaderFacts:
    """What a ring's header says now (re-read on every :meth:`SampleRing.facts`)."""

    status: int
    error: int
    device_index: int
    device_count: int
    sm_count: int
    slots_collected: int
    interval_ns: int
    flags: int
    uuid: str | None
    device_name: str
    chip_name: str
    detail: str
    samples_written: int
    samples_dropped: int
    hw_overflows: int
    decode_passes: int
    cpu_ns: int


@dataclass
class Drained:
    """One drain's samples (wall-clock seconds at their start and end; values NaN where not
    available) and what was refused while reading them."""

    starts: list[float] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)
    values: list[tuple[float, ...]] = field(default_factory=list)
    refused: dict[str, int] = field(default_factory=dict)

    def refuse(self, why: str, n: int = 1) -> None:
        self.refused[why] = self.refused.get(why, 0) + n


def _printable(raw: bytes) -> str:
    text = raw.split(b"\0", 1)[0].decode("utf-8", "replace")
    return "".join(c if c.isprintable() else "?" for c in text)


def check_descriptor(fd: int, trusted_uids: frozenset[int]) -> int:
    """The ring's size, or SampleRingRefused saying what the descriptor is instead."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise SampleRingRefused("the descriptor is not a regular file")
    if st.st_uid not in trusted_uids:
        raise SampleRingRefused(f"the ring belongs to uid {st.st_uid}")
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError:
        raise SampleRingRefused("the descriptor is not a sealable memory file") from None
    if seals & REQUIRED_SEALS != REQUIRED_SEALS:
        raise SampleRingRefused(f"the ring is not sealed against shrinking, growing and further seals "
                                f"(seals 0x{seals:x})")
    if st.st_blksize != mmap.PAGESIZE:
        raise SampleRingRefused(f"the ring is not backed by ordinary pages (block size {st.st_blksize})")
    if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDWR:
        raise SampleRingRefused("the descriptor is not open for reading and writing")
    if not L.MIN_RING_BYTES <= st.st_size <= L.MAX_RING_BYTES:
        raise SampleRingRefused(f"the ring is {st.st_size} bytes, outside [{L.MIN_RING_BYTES}, {L.MAX_RING_BYTES}]")
    return st.st_size


class SampleRing:
    """One sample ring, checked, mapped read-write (the consumer stores ``tail``), header validated.

    Takes ownership of ``fd``. :raises SampleRingRefused: not a ring to read.
    """

    def __init__(self, fd: int, trusted_uids: frozenset[int], clock=time.time) -> None:
        self._clock = clock
        self.mmap: mmap.mmap | None = None
        try:
            size = check_descriptor(fd, trusted_uids)
            self.mmap = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        m = self.mmap
        try:
            magic = _U64.unpack_from(m, L.OFF_MAGIC)[0]
            version = _U32.unpack_from(m, L.OFF_VERSION)[0]
            header, record = _U32.unpack_from(m, L.OFF_HEADER_SIZE)[0], _U32.unpack_from(m, L.OFF_RECORD_SIZE)[0]
            capacity = _U32.unpack_from(m, L.OFF_CAPACITY)[0]
            if magic != L.MAGIC:
                raise SampleRingRefused(f"not a sample ring (magic 0x{magic:016x})")
            if version != L.VERSION or header != L.HEADER_SIZE or record != L.RECORD_SIZE:
                raise SampleRingRefused(f"a sample ring of another format (version {version}, header {header}, "
                                        f"record {record})")
            if capacity & (capacity - 1) or not L.MIN_CAPACITY <= capacity <= L.MAX_CAPACITY:
                raise SampleRingRefused(f"the ring's capacity of {capacity} records is not a power of two "
                                        f"in [{L.MIN_CAPACITY}, {L.MAX_CAPACITY}]")
            if size != L.HEADER_SIZE + capacity * L.RECORD_SIZE:
                raise SampleRingRefused(f"the ring is {size} bytes but its capacity of {capacity} records "
                                        f"needs {L.HEADER_SIZE + capacity * L.RECORD_SIZE}")
        except BaseException:
            m.close()
            self.mmap = None
            raise
        self.capacity = capacity
        self.lying = False          #: head behind tail or a ring ahead: nothing more is read
        self._offset_ns: int | None = None   # wall - CUPTI, from the latest clock pair
        self._last_end = 0

    def facts(self) -> HeaderFacts:
        """The header as it reads now."""
        m = self.mmap
        assert m is not None
        u32 = lambda off: _U32.unpack_from(m, off)[0]   # noqa: E731
        u64 = lambda off: _U64.unpack_from(m, off)[0]   # noqa: E731
        return HeaderFacts(
            status=u32(L.OFF_STATUS), error=_I32.unpack_from(m, L.OFF_ERROR)[0],
            device_index=u32(L.OFF_DEVICE_INDEX), device_count=u32(L.OFF_DEVICE_COUNT),
            sm_count=u32(L.OFF_SM_COUNT), slots_collected=u32(L.OFF_SLOTS_COLLECTED),
            interval_ns=u64(L.OFF_INTERVAL_NS), flags=u32(L.OFF_FLAGS),
            uuid=L.uuid_text(bytes(m[L.OFF_UUID:L.OFF_UUID + 16])),
            device_name=_printable(bytes(m[L.OFF_DEVICE_NAME:L.OFF_DEVICE_NAME + L.TEXT_MAX])),
            chip_name=_printable(bytes(m[L.OFF_CHIP_NAME:L.OFF_CHIP_NAME + L.CHIP_MAX])),
            detail=_printable(bytes(m[L.OFF_DETAIL:L.OFF_DETAIL + L.DETAIL_MAX])),
            samples_written=u64(L.OFF_SAMPLES_WRITTEN), samples_dropped=u64(L.OFF_SAMPLES_DROPPED),
            hw_overflows=u64(L.OFF_HW_OVERFLOWS), decode_passes=u64(L.OFF_DECODE_PASSES), cpu_ns=u64(L.OFF_CPU_NS))

    def drain(self) -> Drained:
        """Every record written since the last drain (at most a ring's worth), as wall-clock
        samples; ``tail`` is released past them."""
        out = Drained()
        m = self.mmap
        if m is None or self.lying:
            return out
        head = _U64.unpack_from(m, L.OFF_HEAD)[0]
        tail = _U64.unpack_from(m, L.OFF_TAIL)[0]
        if head < tail or head - tail > self.capacity:
            self.lying = True
            out.refuse("lying_head")
            return out
        mask, unpack, base = self.capacity - 1, L.RECORD.unpack_from, L.HEADER_SIZE
        now_ns = int(self._clock() * 1e9)
        for n in range(tail, head):
            kind, valid, _r, start, end, *vals = unpack(m, base + (n & mask) * L.RECORD_SIZE)
            if kind == L.KIND_CLOCK:
                if abs(end - now_ns) > CLOCK_TRUST_NS:
                    out.refuse("clock_untrusted")
                else:
                    self._offset_ns = end - start
                continue
            if kind != L.KIND_SAMPLE:
                out.refuse("unknown_kind")
                continue
            if end <= start or end - start > L.MAX_SAMPLE_NS:
                out.refuse("bad_duration")
                continue
            if start < self._last_end:
                out.refuse("out_of_order")
                continue
            if self._offset_ns is None:
                out.refuse("no_clock")
                continue
            if start + self._offset_ns > now_ns + FUTURE_NS:
                out.refuse("in_the_future")
                continue
            self._last_end = end
            out.starts.append((start + self._offset_ns) / 1e9)
            out.ends.append((end + self._offset_ns) / 1e9)
            out.values.append(self._values(valid, vals, out))
        _U64.pack_into(m, L.OFF_TAIL, head)
        return out

    @staticmethod
    def _values(valid: int, vals: list[float], out: Drained) -> tuple[float, ...]:
        row = []
        for i, (_metric, _unit, (low, high)) in enumerate(L.SLOT_METRICS):
            v = vals[i]
            if not valid >> i & 1:
                row.append(math.nan)
            elif not (low <= v <= high):    # NaN and infinities fail too
                out.refuse("value_out_of_bounds")
                row.append(math.nan)
            else:
                row.append(v)
        return tuple(row)

    def close(self) -> None:
        if self.mmap is not None:
            self.mmap.close()
            self.mmap = None
