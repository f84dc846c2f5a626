"""The flight recorder's storage rules, shared by both decoder twins (docs/recorder.md, "What is kept").

Every timed kernel, copy and memset a decoder drains is also written, in the same pass, into the
retained records of its process: chunks of records (the first of a process small, each next one
twice the previous one's records, up to ``max_chunk_records``) in one of two forms.

* **Raw**, while the chunk is written and until the drain thread *compacts* it after its pass
  (``Retention.compact``): each record as the drain copied it, ``RAW_ROW_BYTES`` a record of the
  chunk's capacity (start and end, the ring record's 24 payload bytes, the seq as an offset, the
  lane, the record type, the direction). The drain's pass does nothing else per record.
* **Compact**, once sealed and compacted: ``RECORD_BYTES`` a record (its start, 64 bits of CUPTI
  ns; its duration, 32 bits, the longer ones beside, 16 bytes each; a shape id; a kernel's grid x;
  the seq as a 16-bit delta from the previous record's) and the chunk's distinct *shapes* (the
  lane and a kernel's name, grid y/z, block and launch id; or the lane and a copy's kind,
  direction and bytes) once, ``SHAPE_BYTES`` each. Grid x is a
  column of its own because it varies the most (it is the problem size); the rest of a kernel's
  launch repeats.

What a chunk counts against the agent's budget is given by the formulas below, the same in both
twins, so that both evict the same chunks at the same moment: the compiled twin allocates exactly
that, and the Python twin counts it.

Constraints: no I/O, no state; the compiled twin mirrors these numbers (a test checks them).
"""

from __future__ import annotations

import operator
from typing import Any

#: bytes per compacted record: start (8), duration (4), shape id (4), grid x (4), seq delta (2)
RECORD_BYTES = 22
#: bytes per raw record: start and end (16), the ring record's payload bytes 36..59 (24), seq
#: offset, lane, record type and direction (8)
RAW_ROW_BYTES = 48
#: bytes per distinct shape of a compacted chunk
SHAPE_BYTES = 24
#: a chunk's fixed bytes (its header)
CHUNK_OVERHEAD = 1024
#: durations of at least this many ns (4.3 s) are kept beside the duration column of a compacted
#: chunk, ``LONG_BYTES`` each
DUR_LONG = 0xFFFFFFFF
LONG_BYTES = 16
#: the most a seq may jump between two records of one chunk (its 16-bit delta)
SEQ_GAP_MAX = 0xFFFF
#: records per chunk: the first of a process, and the most (the default of max_chunk_records)
FIRST_CHUNK_RECORDS = 1024
MAX_CHUNK_RECORDS = 1 << 16
#: the least and the most a chunk may hold (tests use small chunks to see eviction)
CHUNK_RECORDS_RANGE = (16, 1 << 16)
#: CUPTI and wall-clock times beyond this (146 years of nanoseconds) are not placed in time: a
#: record with a start or end beyond it is not retained, a clock pair beyond it maps nothing
TIME_LIMIT = 1 << 62
#: the budget's bounds in bytes (the option is in MiB)
BUDGET_RANGE = (1 << 14, 1 << 44)
#: kind codes of the retained columns (SPAN_KINDS' order)
KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET = 0, 1, 2


def raw_chunk_bytes(capacity: int) -> int:
    """What a raw chunk (written, or sealed and not compacted yet) counts against the budget."""
    return CHUNK_OVERHEAD + capacity * RAW_ROW_BYTES


def compact_chunk_bytes(records: int, long_durations: int, shapes: int) -> int:
    """What a compacted chunk counts against the budget: its records, its long durations and its
    distinct shapes, exactly."""
    return CHUNK_OVERHEAD + records * RECORD_BYTES + long_durations * LONG_BYTES + shapes * SHAPE_BYTES


def next_capacity(previous_records: int, max_chunk_records: int) -> int:
    """The records of a process's next chunk: twice what its previous one held, within bounds."""
    return min(max_chunk_records, max(FIRST_CHUNK_RECORDS if max_chunk_records >= FIRST_CHUNK_RECORDS
                                      else max_chunk_records, 2 * previous_records))


def first_capacity(max_chunk_records: int) -> int:
    return min(FIRST_CHUNK_RECORDS, max_chunk_records)


def header_pair(header: dict[str, Any]) -> tuple[int, int] | None:
    """The header's clock pair as the retention's first offset (None: none, or not placeable)."""
    cupti, wall = header["clock_cupti_ns"], header["clock_wall_ns"]
    if wall == 0 or not 0 <= cupti <= TIME_LIMIT or not 0 <= wall <= TIME_LIMIT:
        return None
    return cupti, wall


def check_retention(budget_bytes: Any, max_chunk_records: Any) -> tuple[int, int]:
    """The retention's parameters, checked alike for both twins (TypeError / ValueError)."""
    budget = operator.index(budget_bytes)
    chunk = operator.index(max_chunk_records)
    if not BUDGET_RANGE[0] <= budget <= BUDGET_RANGE[1]:
        raise ValueError(f"the retention budget must be between {BUDGET_RANGE[0]:,} and "
                         f"{BUDGET_RANGE[1]:,} bytes, got {budget:,}")
    low, high = CHUNK_RECORDS_RANGE
    if not low <= chunk <= high or chunk & (chunk - 1):
        raise ValueError(f"max_chunk_records must be a power of two between {low} and {high}, got {chunk}")
    return budget, chunk


def check_offset(offset_ns: Any) -> int:
    """A clock offset (wall - CUPTI ns) the columns map with: within TIME_LIMIT either way."""
    offset = operator.index(offset_ns)
    if not -TIME_LIMIT < offset < TIME_LIMIT:
        raise ValueError("the clock offset is out of range")
    return offset


def check_window(lo_us: Any, hi_us: Any, offset_ns: Any, width: Any) -> tuple[int, int, int, int | None]:
    """A window query's arguments (wall-clock microseconds, the clock offset, pixels or None)."""
    lo, hi, offset = operator.index(lo_us), operator.index(hi_us), operator.index(offset_ns)
    if width is not None:
        width = operator.index(width)
        if not 1 <= width <= 1 << 20:
            raise ValueError(f"width must be between 1 and {1 << 20}, got {width}")
    if not 0 <= lo < hi <= TIME_LIMIT // 1000:
        raise ValueError(f"the window must be 0 <= from < to <= {TIME_LIMIT // 1000} us")
    if not -TIME_LIMIT <= offset <= TIME_LIMIT:
        raise ValueError("the clock offset is out of range")
    if (hi - lo) * 1000 * (width or 1) >= 1 << 64:
        raise ValueError("the window is too long for that many buckets")
    return lo, hi, offset, width
