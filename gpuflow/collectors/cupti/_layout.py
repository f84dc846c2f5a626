"""The ring's wire format as Python sees it, and the header check both decoder twins share.

Mirrors cupti_src/gpuflow_ring.h (the compiled twin reads the header itself through _ring.pxd; a
test checks the two agree). Header problems are decided here, once, so both twins raise the same
:class:`RingFormatError` with the same message. Record decoding lives in the twins.

Constraints: no I/O, no state; called once per ring open and once per snapshot, never per record.
"""

from __future__ import annotations

import operator
import struct
from typing import Any, NamedTuple

from gpuflow.collectors.cupti.errors import RingFormatError, RingNotReady
from gpuflow.core.snapshot import TRANSFER_DIRECTIONS

# -- gpuflow_ring.h ------------------------------------------------------------------------
MAGIC = 0x31474E5257465047  # "GPFWRNG1" read little-endian
VERSION = 3
HEADER_SIZE = 4096
RECORD_SIZE = 64
SESSION_MAX = 32
DETAIL_MAX = 256
NAME_CHUNK_TEXT = 48
NAME_MAX = 4096
MIN_CAPACITY = 1024
MAX_CAPACITY = 1 << 26
HELLO_MAGIC = 0x314F444E48465047  # "GPFHNDO1": the handover's one message (GPUFLOW_HELLO_MAGIC)
HELLO_SIZE = 8

REC_KERNEL, REC_MEMCPY, REC_MEMSET, REC_NAME_CHUNK = 1, 2, 3, 4
REC_STREAM_NAME, REC_CONTEXT, REC_CLOCK_SYNC, REC_DEVICE = 5, 6, 7, 8
REC_LAUNCH = 9  # version 3: a kernel launch configuration, interned like a name
REC_TYPE_MAX = 9

FLAG_NAME_LAST = 0x0001
FLAG_NAME_TRUNCATED = 0x0002
FLAG_NAME_STREAM = 0x0004
FLAG_ASYNC = 0x0008
FLAG_NO_TIMING = 0x0010
FLAG_GRAPH = 0x0020
FLAG_CARVEOUT = 0x0040  # LAUNCH: a shared-memory carve-out was requested

#: gpuflow_status → the TracedProcess.cupti_status string (docs/snapshot.md).
STATUS_NAMES = ("starting", "ok", "cupti_missing", "cupti_version", "cupti_in_use",
                "unsupported", "cupti_error", "stolen")

# Header offsets (gpuflow_ring_header). The counters sit on their own cache lines.
OFF_HEAD = 512
OFF_TAIL = 576
OFF_DROPPED_RING = 640
OFF_DROPPED_CUPTI = 648
OFF_INCOMPLETE = 656
OFF_PRODUCER_EXITED = 664
OFF_BUFFERS_COMPLETED = 672
OFF_TRANSLATE_CPU_NS = 680   # version 2

#: magic, version, header_size, record_size, capacity, producer_pid, status, session,
#: clock_cupti_ns, clock_wall_ns, cupti_version, flush_ms, started_wall_ns, status_detail
HEADER_STRUCT = struct.Struct("<QIIIIiI32sqqIIq256s")
U64 = struct.Struct("<Q")
U32 = struct.Struct("<I")

# -- decoder semantics shared by both twins -------------------------------------------------
#: Transfer direction indices, in TRANSFER_DIRECTIONS order.
DIRECTIONS = TRANSFER_DIRECTIONS
DIR_H2D, DIR_D2H, DIR_D2D, DIR_P2P, DIR_H2H, DIR_MEMSET = range(6)
assert DIRECTIONS == ("h2d", "d2h", "d2d", "p2p", "h2h", "memset")

#: gpuflow_copy_kind (= CUpti_ActivityMemcpyKind) → direction index; -1: decide by memory kinds.
#: HTOD, HTOA → h2d; DTOH, ATOH → d2h; DTOD, ATOA, ATOD, DTOA → d2d (arrays are device memory),
#: or p2p when the record's source and destination devices differ; HTOH → h2h; PTOP → p2p.
#: Kinds above 10 are invalid records.
COPY_KIND_DIRECTION = (-1, DIR_H2D, DIR_D2H, DIR_H2D, DIR_D2H, DIR_D2D, DIR_D2D, DIR_D2D,
                       DIR_D2D, DIR_H2H, DIR_P2P)
#: CUpti_ActivityMemoryKind: 1 pageable, 2 pinned are host memory; 3 device, 4 array,
#: 6 device-static are device memory; 0 unknown and 5/7 managed say nothing about the direction.
HOST_MEMORY_KINDS = frozenset((1, 2))
DEVICE_MEMORY_KINDS = frozenset((3, 4, 6))


def copy_direction(copy_kind: int, src_kind: int, dst_kind: int, src_dev: int, dst_dev: int) -> int:
    """Direction index of a MEMCPY record, or -1 if it cannot be classified (an invalid record).

    ``COPY_UNKNOWN`` is classified by the source and destination memory kinds when both are
    plainly host or device memory; otherwise the record is invalid rather than guessed. A
    device-to-device copy between two different devices is peer-to-peer.
    """
    if copy_kind > 10:
        return -1
    d = COPY_KIND_DIRECTION[copy_kind]
    if d < 0:
        d = _by_memory_kinds(src_kind, dst_kind)
    if d == DIR_D2D and src_dev != dst_dev:
        return DIR_P2P
    return d


def _by_memory_kinds(src_kind: int, dst_kind: int) -> int:
    src_host, dst_host = src_kind in HOST_MEMORY_KINDS, dst_kind in HOST_MEMORY_KINDS
    src_dev, dst_dev = src_kind in DEVICE_MEMORY_KINDS, dst_kind in DEVICE_MEMORY_KINDS
    if src_host and dst_dev:
        return DIR_H2D
    if src_dev and dst_host:
        return DIR_D2H
    if src_dev and dst_dev:
        return DIR_D2D
    if src_host and dst_host:
        return DIR_H2H
    return -1


#: Why a record was rejected; the twins count each reason separately (index = code).
INVALID_REASONS = (
    "bad_type",          # type 0 (a torn, zeroed slot) or above GPUFLOW_REC_TYPE_MAX
    "end_before_start",  # a timed kernel/copy/memset whose end precedes its start
    "undefined_name",    # a name id that was never (completely) defined
    "bad_name_chunk",    # id 0 or too large, total_len > NAME_MAX, offset not where the text left off
    "incomplete_name",   # the final chunk arrived but earlier text is missing
    "name_conflict",     # a name id defined again with different text or kind
    "bad_copy_kind",     # a copy kind above PTOP, or UNKNOWN with unclassifiable memory kinds
    "table_full",        # a stream name / context / device beyond the decoder's table limits
    "undefined_launch",  # a kernel whose launch id (not 0) was never defined by a LAUNCH record
    "bad_launch",        # a LAUNCH record for id 0 or beyond LAUNCH_ID_LIMIT, or redefining one differently
)
(INV_BAD_TYPE, INV_END_BEFORE_START, INV_UNDEFINED_NAME, INV_BAD_NAME_CHUNK, INV_INCOMPLETE_NAME,
 INV_NAME_CONFLICT, INV_BAD_COPY_KIND, INV_TABLE_FULL, INV_UNDEFINED_LAUNCH,
 INV_BAD_LAUNCH) = range(len(INVALID_REASONS))
#: Launch ids are dense from 1 (a producer interns a few hundred configurations); ids above are invalid.
LAUNCH_ID_LIMIT = 1 << 16
#: A LAUNCH record after its 8-byte common part: static, dynamic and executed shared memory, cluster
#: x/y/z, shared-memory config, shmem limit config, carve-out requested (percent), cache config.
LAUNCH_PAYLOAD = struct.Struct("<IIIIIIBBBB")

#: Names are kept in tables indexed by id; a producer numbers them 1, 2, 3 ... so this is generous.
NAME_ID_LIMIT = 1 << 24
#: At most this many (device, context, stream) lanes, contexts and devices per ring. Executions on
#: lanes beyond the limit still count in every aggregate; they are counted in ``lane_overflow``.
MAX_LANES = 1 << 16
MAX_CONTEXTS = 1 << 16
MAX_DEVICES = 1 << 16
#: Sums saturate here (and set the ``saturated`` counter) rather than wrap or diverge between twins.
U64_MAX = (1 << 64) - 1
#: The most spans a lane may keep (``lane_span_cap``); the compiled twin counts spans in 32 bits.
MAX_LANE_SPAN_CAP = 1 << 20
#: spans kept per lane unless the collector is told otherwise (the ``lane_span_cap`` option)
DEFAULT_LANE_SPAN_CAP = 512

# -- caps: what one ring can make the agent hold (docs/decoder.md, "Caps") -------------------------
#: distinct names kept (kernel, stream and device names together: the ids given a slot); the
#: kernels of names beyond it are counted together under OTHER_NAME_ID
DEFAULT_MAX_NAMES = 4096
#: bytes of a name kept; a longer name is cut there and flagged NAME_TRUNCATED. The format's own
#: limit: real mangled names reach a few KB (CUTLASS, flash-attention templates), and 4,096 names of
#: 4 KiB cost a ring's decoder 16 MiB of text
DEFAULT_MAX_NAME_BYTES = NAME_MAX
#: lanes, and as many contexts and devices; executions beyond count in ``lane_overflow``
DEFAULT_MAX_LANES = 256
#: names being reassembled from their chunks at one time; beyond it, the one continued least
#: recently is dropped (and one announced a ring's worth of records ago)
DEFAULT_MAX_PENDING_NAMES = 16
#: what each cap may be set to (the upper ends are the format's and the tables' own limits)
CAP_RANGES = {"max_names": (0, 1 << 20), "max_name_bytes": (1, NAME_MAX), "max_lanes": (1, MAX_LANES),
              "max_pending_names": (1, 1 << 16)}
#: ``kernels()`` and span name id of the kernels whose names are beyond ``max_names``
OTHER_NAME_ID = NAME_ID_LIMIT


class Caps(NamedTuple):
    """The caps of one decoder (docs/decoder.md, "Caps")."""

    max_names: int = DEFAULT_MAX_NAMES
    max_name_bytes: int = DEFAULT_MAX_NAME_BYTES
    max_lanes: int = DEFAULT_MAX_LANES
    max_pending_names: int = DEFAULT_MAX_PENDING_NAMES


#: the largest caps (the tables' own limits): what the tests of the format's own rules decode with
LIMIT_CAPS = Caps(*(high for _low, high in CAP_RANGES.values()))


def check_caps(max_names: Any, max_name_bytes: Any, max_lanes: Any, max_pending_names: Any) -> Caps:
    """The caps as ints, the same for both twins: TypeError if one is not an integer, ValueError
    outside :data:`CAP_RANGES`."""
    caps = Caps(operator.index(max_names), operator.index(max_name_bytes), operator.index(max_lanes),
                operator.index(max_pending_names))
    for name, value in caps._asdict().items():
        low, high = CAP_RANGES[name]
        if not low <= value <= high:
            raise ValueError(f"{name} must be in [{low}, {high}], not {value}")
    return caps


def name_text(raw: bytes, flags: int) -> str:
    """A name's text for display: UTF-8, invalid bytes replaced; a cut name (NAME_TRUNCATED) loses
    the incomplete character its cut may have left at the end."""
    if flags & FLAG_NAME_TRUNCATED:
        return raw.decode("utf-8", "replace") if _complete_utf8_tail(raw) else \
            raw[:_last_lead(raw)].decode("utf-8", "replace")
    return raw.decode("utf-8", "replace")


def _last_lead(raw: bytes) -> int:
    i = len(raw) - 1
    while i > 0 and len(raw) - i < 4 and raw[i] & 0xC0 == 0x80:
        i -= 1
    return i


def _complete_utf8_tail(raw: bytes) -> bool:
    """Whether ``raw`` does not end inside a multi-byte UTF-8 character."""
    if not raw or raw[-1] < 0x80:
        return True
    lead = _last_lead(raw)
    b = raw[lead]
    need = 2 if b >> 5 == 0b110 else 3 if b >> 4 == 0b1110 else 4 if b >> 3 == 0b11110 else 1
    return len(raw) - lead >= need


def check_lane_span_cap(value: Any) -> int:
    """``lane_span_cap`` as an int, the same for both twins: TypeError if it is not an integer
    (a float is not silently truncated), ValueError outside [0, MAX_LANE_SPAN_CAP]."""
    cap = operator.index(value)
    if not 0 <= cap <= MAX_LANE_SPAN_CAP:
        raise ValueError(f"lane_span_cap must be in [0, {MAX_LANE_SPAN_CAP}], not {cap}")
    return cap


def check_max_records(value: Any) -> int | None:
    """``drain``'s ``max_records``: None (everything) or an int (TypeError otherwise); <= 0 drains nothing."""
    return None if value is None else operator.index(value)


def check_newest(value: Any) -> int | None:
    """``lanes``'s ``newest``: None (every new span) or an int (TypeError otherwise); <= 0 lists none."""
    return None if value is None else operator.index(value)

SPAN_KINDS = {REC_KERNEL: "kernel", REC_MEMCPY: "memcpy", REC_MEMSET: "memset"}


class HeaderInfo(NamedTuple):
    """The immutable part of a validated header."""

    capacity: int
    producer_pid: int
    session: str
    head: int
    tail: int


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def validate_header(buf: Any) -> HeaderInfo:
    """Check a ring mapping's header; raise RingNotReady / RingFormatError saying what is wrong.

    ``buf`` is anything the buffer protocol reads (mmap, bytearray, memoryview). The views taken
    here are released before returning or raising, so the caller can close an mmap at once.
    """
    with memoryview(buf) as raw, raw.cast("B") as mv:
        return _validate(mv)


def _validate(mv: memoryview) -> HeaderInfo:
    size = mv.nbytes
    if size == 0:
        raise RingNotReady("ring is empty: its producer has not sized it yet")
    if size < HEADER_SIZE:
        raise RingFormatError(f"ring is {size} bytes, smaller than its {HEADER_SIZE}-byte header")
    (magic, version, header_size, record_size, capacity, pid, _status, session, *_rest) = (
        HEADER_STRUCT.unpack_from(mv, 0))
    if magic == 0:
        raise RingNotReady("ring header not written yet (magic is 0)")
    if magic != MAGIC:
        raise RingFormatError(f"bad magic 0x{magic:016x} (expected 0x{MAGIC:016x}): not a GPUFlow ring")
    if version != VERSION:
        raise RingFormatError(f"unsupported ring version {version} (this decoder reads version {VERSION}: "
                              "the traced program loaded another GPUFlow's injection library)")
    if header_size != HEADER_SIZE:
        raise RingFormatError(f"header_size is {header_size}, expected {HEADER_SIZE}")
    if record_size != RECORD_SIZE:
        raise RingFormatError(f"record_size is {record_size}, expected {RECORD_SIZE}")
    if not _is_power_of_two(capacity) or not MIN_CAPACITY <= capacity <= MAX_CAPACITY:
        raise RingFormatError(f"capacity {capacity} is not a power of two in "
                              f"[{MIN_CAPACITY}, {MAX_CAPACITY}]")
    needed = HEADER_SIZE + capacity * RECORD_SIZE
    if size < needed:
        raise RingFormatError(f"ring is {size} bytes, too small for {capacity} records ({needed} bytes)")
    head = U64.unpack_from(mv, OFF_HEAD)[0]
    tail = U64.unpack_from(mv, OFF_TAIL)[0]
    check_counters(head, tail, capacity)
    return HeaderInfo(capacity, pid, _cstr(session), head, tail)


def check_counters(head: int, tail: int, capacity: int) -> None:
    """Raise RingFormatError for torn or impossible head/tail counters."""
    if head < tail:
        raise RingFormatError(f"torn counters: head {head} is behind tail {tail}")
    if head - tail > capacity:
        raise RingFormatError(f"torn counters: head {head} - tail {tail} exceeds capacity {capacity}")


def check_unchanged(buf: Any, capacity: int) -> None:
    """Raise RingFormatError if the header's fixed fields changed since the ring was opened."""
    with memoryview(buf) as raw, raw.cast("B") as mv:
        magic, version, header_size, record_size, cap = struct.unpack_from("<QIIII", mv, 0)
    if (magic, version, header_size, record_size, cap) != (MAGIC, VERSION, HEADER_SIZE, RECORD_SIZE, capacity):
        raise RingFormatError(
            f"ring header changed under the decoder (magic 0x{magic:016x}, version {version}, "
            f"header_size {header_size}, record_size {record_size}, capacity {cap})")


def read_header(buf: Any) -> dict[str, Any]:
    """Every header field as plain Python data (live values for the counters)."""
    with memoryview(buf) as raw, raw.cast("B") as mv:
        return _read_header(mv)


def _read_header(mv: memoryview) -> dict[str, Any]:
    (_magic, version, _hs, _rs, capacity, pid, status, session, clock_cupti, clock_wall,
     cupti_version, flush_ms, started, detail) = HEADER_STRUCT.unpack_from(mv, 0)
    return {
        "version": version,
        "capacity": capacity,
        "producer_pid": pid,
        "status": status,
        "status_name": STATUS_NAMES[status] if status < len(STATUS_NAMES) else f"unknown_{status}",
        "status_detail": _cstr(detail) or None,
        "session": _cstr(session),
        "clock_cupti_ns": clock_cupti,
        "clock_wall_ns": clock_wall,
        "cupti_version": cupti_version,
        "flush_ms": flush_ms,
        "started_wall_ns": started,
        "head": U64.unpack_from(mv, OFF_HEAD)[0],
        "tail": U64.unpack_from(mv, OFF_TAIL)[0],
        "dropped_ring": U64.unpack_from(mv, OFF_DROPPED_RING)[0],
        "dropped_cupti": U64.unpack_from(mv, OFF_DROPPED_CUPTI)[0],
        "incomplete": U64.unpack_from(mv, OFF_INCOMPLETE)[0],
        "producer_exited": U32.unpack_from(mv, OFF_PRODUCER_EXITED)[0],
        "buffers_completed": U64.unpack_from(mv, OFF_BUFFERS_COMPLETED)[0],
        "translate_cpu_ns": U64.unpack_from(mv, OFF_TRANSLATE_CPU_NS)[0],
    }
