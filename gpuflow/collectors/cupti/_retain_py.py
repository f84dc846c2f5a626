"""The flight recorder's columns in the pure-Python decoder twin: the readable statement of the rules.

Same chunks, same shapes, same bytes counted, same chunks evicted at the same moments and the same
answers as the compiled twin's ``_retain.pxi`` (the tests compare them); the layout and the
numbers are ``_retain_layout``'s. Where the compiled twin packs a record into 18 bytes, this one
keeps plain lists, and counts what the compiled twin allocates.

Constraints: one drain thread per Retention; window queries may come from any thread (a lock
guards the lists; a query copies what it reads under it).
"""

from __future__ import annotations

import threading
from array import array
from typing import Any

from gpuflow.collectors.cupti import _layout as L
from gpuflow.collectors.cupti import _retain_layout as RL

_NO_COLUMN = -1
_INT64_MAX = (1 << 63) - 1
_KIND = {L.REC_KERNEL: RL.KIND_KERNEL, L.REC_MEMCPY: RL.KIND_MEMCPY, L.REC_MEMSET: RL.KIND_MEMSET}


class _Chunk:
    """A run of one process's records: columns, its shapes, time bounds, what is published."""

    __slots__ = ("owner", "capacity", "base_seq", "last_seq", "start", "dur", "shape",
                 "seq", "grid_x",
                 "shapes", "index", "hash_slots", "blocks", "longs", "bytes", "min_start", "max_start",
                 "max_end", "published", "pub")

    def __init__(self, owner: Store, capacity: int, seq: int, start: int) -> None:
        self.owner: Store | None = owner
        self.capacity = capacity
        self.base_seq = self.last_seq = seq
        self.start: list[int] = []   # CUPTI ns
        self.dur: list[int] = []
        self.shape: list[int] = []
        self.grid_x: list[int] = []  # kernels' (copies: 0)
        self.seq: list[int] = []     # seq - the previous record's (the first: 0)
        self.shapes: list[tuple[int, ...]] = []
        self.index: dict[tuple[int, ...], int] | None = {}
        self.hash_slots = RL.HASH_FIRST_SLOTS
        self.blocks = 0
        self.longs: dict[int, int] = {}
        self.bytes = RL.chunk_bytes(capacity, 0, self.hash_slots)
        self.min_start = self.max_start = self.max_end = start
        self.published = 0
        self.pub = (start, start, start)  # min start, max start, max end over the published records

    @property
    def count(self) -> int:
        return len(self.start)


class Retention:
    """The retention budget all the decoders of an agent share (see the compiled twin's)."""

    def __init__(self, budget_bytes: int, max_chunk_records: int = RL.MAX_CHUNK_RECORDS) -> None:
        self._budget, self._max_chunk = RL.check_retention(budget_bytes, max_chunk_records)
        self.lock = threading.Lock()
        self.chunks: list[_Chunk] = []  # every chunk of every process, oldest first
        self.used = 0
        self.evicted_chunks = 0

    @property
    def budget_bytes(self) -> int:
        return self._budget

    @property
    def max_chunk_records(self) -> int:
        return self._max_chunk

    def figures(self) -> dict[str, int]:
        with self.lock:
            return {"used_bytes": self.used, "chunks": len(self.chunks), "evicted_chunks": self.evicted_chunks,
                    "budget_bytes": self._budget}

    def evict_older_than(self, cutoff_wall_ns: int) -> int:
        """Evict every chunk whose records all ended before ``cutoff_wall_ns`` (each process's
        latest clock pair); return how many went."""
        cutoff = max(-RL.TIME_LIMIT, min(RL.TIME_LIMIT, int(cutoff_wall_ns)))
        n = 0
        with self.lock:
            for c in list(self.chunks):
                o = c.owner
                assert o is not None
                if (self._evictable(c) and o.offset is not None and c.published == c.count and c.count
                        and c.pub[2] + o.offset < cutoff):
                    self._evict(c)
                    n += 1
        return n

    # -- the drain's (the lock held) ----------------------------------------------------------
    @staticmethod
    def _evictable(c: _Chunk) -> bool:
        o = c.owner
        return not (o is not None and o.cur is c and o.writing)

    def _evict(self, c: _Chunk, counted: bool = True) -> None:
        o = c.owner
        assert o is not None
        self.chunks.remove(c)
        o.chunks.remove(c)
        self.used -= c.bytes
        self.evicted_chunks += counted
        o.records -= c.count
        o.evicted_records += c.count
        if c.count and (o.evicted_through is None or c.max_start > o.evicted_through):
            o.evicted_through = c.max_start
        if o.cur is c:
            o.cur = None
            o.next_capacity = RL.first_capacity(self._max_chunk)
        c.owner = None

    def _trim(self) -> None:
        for c in list(self.chunks):
            if self.used <= self._budget:
                return
            if self._evictable(c):
                self._evict(c)

    def _account(self, c: _Chunk, more: int) -> None:
        with self.lock:
            c.bytes += more
            self.used += more
            self._trim()


class Store:
    """One process's retained records (a decoder's)."""

    def __init__(self, retention: Retention, header: dict[str, Any]) -> None:
        self.ret = retention
        self.chunks: list[_Chunk] = []
        self.cur: _Chunk | None = None
        self.next_capacity = RL.first_capacity(retention.max_chunk_records)
        self.writing = False
        self.records = 0
        self.evicted_records = 0
        self.evicted_through: int | None = None
        self.unplaced = 0
        self.offset: int | None = None
        pair = RL.header_pair(header)
        if pair is not None:
            self.set_offset(*pair)

    # -- the drain's ----------------------------------------------------------------------------
    def set_offset(self, cupti: int, wall: int) -> None:
        if cupti <= RL.TIME_LIMIT and wall <= RL.TIME_LIMIT:
            self.offset = wall - cupti

    def publish(self) -> None:
        c = self.cur
        if c is None:
            return
        with self.ret.lock:
            c.published = c.count
            c.pub = (c.min_start, c.max_start, c.max_end)

    def _seal(self) -> None:
        c = self.cur
        assert c is not None
        self.publish()
        R = self.ret
        with R.lock:
            freed = c.hash_slots * RL.HASH_SLOT_BYTES
            c.index, c.hash_slots = None, 0
            c.bytes -= freed
            R.used -= freed
            self.cur = None
            self.next_capacity = RL.next_capacity(c.count, R.max_chunk_records)

    def _new_chunk(self, seq: int, start: int) -> _Chunk:
        R = self.ret
        c = _Chunk(self, self.next_capacity, seq, start)
        with R.lock:
            R.chunks.append(c)
            self.chunks.append(c)
            self.cur = c
            R.used += c.bytes
            R._trim()
        return c

    def _intern(self, c: _Chunk, shape: tuple[int, ...]) -> int:
        assert c.index is not None
        known = c.index.get(shape)
        if known is not None:
            return known
        i = len(c.shapes)
        if i % RL.SHAPE_BLOCK == 0:
            c.blocks += 1
            self.ret._account(c, RL.SHAPE_BLOCK * RL.SHAPE_BYTES)
        c.shapes.append(shape)
        c.index[shape] = i
        if (i + 1) * 2 > c.hash_slots:
            self.ret._account(c, c.hash_slots * RL.HASH_SLOT_BYTES)
            c.hash_slots *= 2
        return i

    def retain(self, seq: int, start: int, end: int, grid_x: int, shape: tuple[int, ...]) -> None:
        """One timed execution: ``shape`` is (word: a kernel's name id or a copy's bytes, launch id,
        grid y, grid z, block x, y, z, lane, record type, direction) as the compiled twin packs it."""
        if end > RL.TIME_LIMIT:
            self.unplaced += 1
            return
        dur = end - start
        c = self.cur
        if c is not None:
            if (c.count == c.capacity or seq - c.last_seq > 0xFFFF
                    or (dur >= RL.DUR_LONG and len(c.longs) == RL.long_slots(c.capacity))):
                self._seal()
                c = None
        if c is None:
            c = self._new_chunk(seq, start)
        index = self._intern(c, shape)
        i = c.count
        if dur >= RL.DUR_LONG:
            c.longs[i] = dur
        c.start.append(start)
        c.dur.append(dur)
        c.shape.append(index)
        c.grid_x.append(grid_x)
        c.seq.append(seq - c.last_seq)
        c.last_seq = seq
        c.min_start = min(c.min_start, start)
        c.max_start = max(c.max_start, start)
        c.max_end = max(c.max_end, end)
        self.records += 1

    def free(self) -> None:
        with self.ret.lock:
            self.writing = False
            for c in list(self.chunks):
                self.ret._evict(c, counted=False)

    # -- any thread -----------------------------------------------------------------------------
    def figures(self) -> dict[str, Any]:
        with self.ret.lock:
            published = [c for c in self.chunks if c.published]
            return {"records": self.records, "chunks": len(self.chunks), "bytes": sum(c.bytes for c in self.chunks),
                    "from_ns": min(c.pub[0] for c in published) if published else None,
                    "to_ns": max(c.pub[2] for c in published) if published else None,
                    "evicted_records": self.evicted_records, "evicted_through_ns": self.evicted_through,
                    "unplaced": self.unplaced}

    def window(self, lo_us: Any, hi_us: Any, offset_ns: Any, width_px: Any,
               lane_keys: list[tuple[int, int, int]]) -> list[tuple[Any, ...]]:
        """Per lane with executions starting in [lo_us, hi_us) (wall: CUPTI + ``offset_ns``), sorted
        by key: ``(device, context, stream, executions, columns, name_ids, buckets)``.

        ``columns`` (when the lane has at most ``width_px`` of them, or ``width_px`` is None): 14
        ``array('q')`` — SpanColumns' seq, start_us, dur_ns, kind, name (an index into
        ``name_ids``, the lane's kernel name ids in order of first appearance), grid x/y/z, block
        x/y/z, bytes, direction, then the kernel's launch id (0: none); -1 where a field does not
        apply. ``buckets`` otherwise: (count, busy_ns), ``width_px`` each: bucket j covers
        [edge(j), edge(j+1)) with edge(j) = lo + j * W // width_px in ns (W the window's length);
        an execution counts where it starts, and its time inside each bucket is that bucket's busy
        time (executions that started before the window included), at most the bucket's width.
        """
        lo, hi, offset, width = RL.check_window(lo_us, hi_us, offset_ns, width_px)
        c_lo = lo * 1000 - offset
        W = (hi - lo) * 1000
        if c_lo + W <= 0 or c_lo >= RL.TIME_LIMIT:
            return []
        with self.ret.lock:
            pins = [(c, c.published) for c in self.chunks
                    if c.published and c.pub[0] - c_lo < W and c.pub[2] - c_lo >= 0]
            keys = list(lane_keys)
        counts: dict[int, int] = {}
        for c, n in pins:
            for i in range(n):
                if 0 <= c.start[i] - c_lo < W:
                    lane = c.shapes[c.shape[i]][7]
                    counts[lane] = counts.get(lane, 0) + 1
        exact = {li: [array("q") for _ in range(14)] for li, n in counts.items() if width is None or n <= width}
        size = 8 * (width or 0)   # reduced lanes exist only with a width
        reduced = {li: (array("q", bytes(size)), array("q", bytes(size))) for li in counts if li not in exact}
        names: dict[int, dict[int, int]] = {li: {} for li in exact}
        for c, n in pins:
            seq = c.base_seq
            for i in range(n):
                seq += c.seq[i]
                word, launch, gy, gz, bx, by, bz, li, rtype, direction = c.shapes[c.shape[i]]
                d = c.start[i] - c_lo
                if li in exact:
                    if not 0 <= d < W:
                        continue
                    dur = c.longs.get(i, c.dur[i])
                    row: tuple[int, ...]
                    if rtype == L.REC_KERNEL:
                        local = names[li].setdefault(word, len(names[li]))
                        row = (RL.KIND_KERNEL, local, c.grid_x[i], gy, gz, bx, by, bz, -1, -1, launch)
                    else:
                        row = (_KIND[rtype], -1, -1, -1, -1, -1, -1, -1, min(word, _INT64_MAX), direction, -1)
                    for column, value in zip(exact[li], (_signed(seq), (c.start[i] + offset)
                                                         // 1000, dur, *row)):
                        column.append(value)
                elif li in reduced:
                    if d >= W:
                        continue
                    assert width is not None
                    count, busy = reduced[li]
                    dur = c.longs.get(i, c.dur[i])
                    if d >= 0:
                        count[_bucket(d, W, width)] += 1
                    e = d + dur
                    if e <= 0 or dur == 0:
                        continue
                    a, b = max(d, 0), min(e, W)
                    j = _bucket(a, W, width)
                    while a < b:
                        edge = min(b, (j + 1) * W // width)
                        busy[j] += edge - a
                        a, j = edge, j + 1
        for count, busy in reduced.values():
            assert width is not None
            for j in range(width):
                busy[j] = min(busy[j], (j + 1) * W // width - j * W // width)
        out: list[tuple[Any, ...]] = []
        for li in sorted(counts, key=lambda li: keys[li]):
            if li in exact:
                out.append((*keys[li], counts[li], tuple(exact[li]), tuple(names[li]), None))
            else:
                out.append((*keys[li], counts[li], None, (), reduced[li]))
        return out


def _signed(seq: int) -> int:
    """A ring position (a 64-bit counter) as the int64 column holds it (beyond 2^63: negative)."""
    return seq - (1 << 64) if seq >= 1 << 63 else seq


def _bucket(d: int, W: int, width: int) -> int:
    """The bucket j with edge(j) <= d < edge(j + 1), edge(j) = j * W // width."""
    j = d * width // W
    while j + 1 < width and (j + 1) * W // width <= d:
        j += 1
    return j
