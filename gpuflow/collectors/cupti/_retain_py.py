"""The flight recorder's records in the pure-Python decoder twin: the readable statement of the rules.

Same chunks, same forms, same bytes counted, same chunks evicted at the same moments and the same
answers as the compiled twin's ``_retain.pxi`` (the tests compare them); the layout and the
numbers are ``_retain_layout``'s. A chunk is *raw* while it is written and until the drain thread
compacts it (:meth:`Retention.compact`, after its pass): each record as the drain gave it. Then it
is *compacted*: columns and the chunk's distinct shapes, each once. Where the compiled twin packs a
raw record into 48 bytes and a compacted one into 22, this one keeps plain lists, and counts what
the compiled twin allocates.

Constraints: one drain thread per Retention (it writes, seals, compacts and evicts); window queries
may come from any thread (a lock guards the lists and each chunk's form; a query copies what it
reads under it).
"""

from __future__ import annotations

import threading
from array import array
from typing import Any, Iterator

from gpuflow.collectors.cupti import _layout as L
from gpuflow.collectors.cupti import _retain_layout as RL

_INT64_MAX = (1 << 63) - 1
_KIND = {L.REC_KERNEL: RL.KIND_KERNEL, L.REC_MEMCPY: RL.KIND_MEMCPY, L.REC_MEMSET: RL.KIND_MEMSET}
#: a record's shape: (word: a kernel's name id or a copy's bytes, launch id, grid y, grid z, block
#: x, y, z, lane, record type, direction), as the compiled twin's Shape holds it
Shape = tuple[int, int, int, int, int, int, int, int, int, int]
#: a raw record: (start, end, seq, grid x, shape)
RawRow = tuple[int, int, int, int, Shape]


class _Chunk:
    """A run of one process's records, raw (``rows``) or compacted (the columns and ``shapes``), its
    time bounds and what is published."""

    __slots__ = ("owner", "capacity", "base_seq", "last_seq", "rows", "start", "dur", "shape", "grid_x",
                 "seq", "shapes", "longs", "bytes", "min_start", "max_start", "max_end", "sealed", "published",
                 "pub")

    def __init__(self, owner: Store, capacity: int, seq: int, start: int) -> None:
        self.owner: Store | None = owner
        self.capacity = capacity
        self.base_seq = self.last_seq = seq
        self.rows: list[RawRow] | None = []
        self.start: list[int] = []   # compacted: CUPTI ns
        self.dur: list[int] = []     # DUR_LONG: in longs
        self.shape: list[int] = []   # an index into shapes
        self.grid_x: list[int] = []  # kernels' (copies: 0)
        self.seq: list[int] = []     # seq - the previous record's (the first: 0)
        self.shapes: list[Shape] = []
        self.longs: dict[int, int] = {}
        self.bytes = RL.raw_chunk_bytes(capacity)
        self.min_start = self.max_start = self.max_end = start
        self.sealed = False
        self.published = 0
        self.pub = (start, start, start)  # min start, max start, max end over the published records

    @property
    def count(self) -> int:
        return len(self.rows) if self.rows is not None else len(self.start)

    def records(self, rows: list[RawRow] | None, n: int) -> Iterator[tuple[int, int, int, int, Shape]]:
        """The first ``n`` records, each (seq, start, duration, grid x, shape), from the raw rows a
        reader took (None: the columns)."""
        if rows is not None:
            for start, end, seq, grid_x, shape in rows[:n]:
                yield seq, start, end - start, grid_x, shape
            return
        seq = self.base_seq
        for i in range(n):
            seq += self.seq[i]
            yield seq, self.start[i], self.longs.get(i, self.dur[i]), self.grid_x[i], self.shapes[self.shape[i]]


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
                    "budget_bytes": self._budget,
                    "raw_chunks": sum(c.sealed and c.rows is not None for c in self.chunks)}

    def compact(self) -> int:
        """Compact every sealed chunk, oldest first; return how many (the drain thread's, after its
        pass)."""
        with self.lock:
            sealed = [c for c in self.chunks if c.sealed and c.rows is not None]
        for c in sealed:
            self._compact(c)
        return len(sealed)

    def _compact(self, c: _Chunk) -> None:
        """The columns and the distinct shapes of a sealed raw chunk, in record order, swapped in; what
        it counts follows (the rows go: a reader reading them keeps its own reference)."""
        assert c.rows is not None
        index: dict[Shape, int] = {}
        start, dur, shape, grid_x, seq, shapes, longs = [], [], [], [], [], [], {}
        previous = c.base_seq
        for i, (s, end, q, gx, x) in enumerate(c.rows):
            start.append(s)
            d = end - s
            if d >= RL.DUR_LONG:
                longs[i] = d
            dur.append(min(d, RL.DUR_LONG))
            seq.append(q - previous)
            previous = q
            grid_x.append(gx)
            known = index.get(x)
            if known is None:
                known = index[x] = len(shapes)
                shapes.append(x)
            shape.append(known)
        with self.lock:
            c.start, c.dur, c.shape, c.grid_x, c.seq, c.shapes, c.longs = start, dur, shape, grid_x, seq, shapes, longs
            c.rows = None
            compacted = RL.compact_chunk_bytes(len(start), len(longs), len(shapes))
            self.used += compacted - c.bytes
            c.bytes = compacted

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
        o.records -= c.published
        o.evicted_records += c.published
        if c.published and (o.evicted_through is None or c.pub[1] > o.evicted_through):
            o.evicted_through = c.pub[1]
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


class Store:
    """One process's retained records (a decoder's)."""

    def __init__(self, retention: Retention, header: dict[str, Any]) -> None:
        self.ret = retention
        self.chunks: list[_Chunk] = []
        self.cur: _Chunk | None = None
        self.next_capacity = RL.first_capacity(retention.max_chunk_records)
        self.writing = False
        self.records = 0   # published
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

    def _show(self, c: _Chunk) -> None:
        with self.ret.lock:
            self.records += c.count - c.published
            c.published = c.count
            c.pub = (c.min_start, c.max_start, c.max_end)

    def publish(self) -> None:
        """The end of a drain: what the chunk being written holds becomes readable."""
        if self.cur is not None:
            self._show(self.cur)

    def seal(self) -> None:
        """The chunk being written takes no more records (full, a seq jump, or its process gone)."""
        c = self.cur
        if c is None:
            return
        self._show(c)
        with self.ret.lock:
            c.sealed = True
            self.cur = None
            self.next_capacity = RL.next_capacity(c.count, self.ret.max_chunk_records)

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

    def retain(self, seq: int, start: int, end: int, grid_x: int, shape: Shape) -> None:
        """One timed execution, as a raw row: ``shape`` is (word: a kernel's name id or a copy's bytes,
        launch id, grid y, grid z, block x, y, z, lane, record type, direction)."""
        c = self.cur
        if c is None or seq - c.last_seq > RL.SEQ_GAP_MAX or end > RL.TIME_LIMIT:
            if end > RL.TIME_LIMIT:   # start <= end: not placeable in time
                self.unplaced += 1
                return
            if c is not None:         # a seq jump the chunk's 16-bit deltas cannot hold
                self.seal()
            c = self._new_chunk(seq, start)
        assert c.rows is not None
        c.rows.append((start, end, seq, grid_x, shape))
        c.min_start = min(c.min_start, start)
        c.max_start = max(c.max_start, start)
        c.max_end = max(c.max_end, end)
        c.last_seq = seq
        if len(c.rows) == c.capacity:
            self.seal()

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
        with self.ret.lock:   # each chunk's form as it is now: raw rows a compaction replaces stay ours
            pins = [(c, c.rows, c.published) for c in self.chunks
                    if c.published and c.pub[0] - c_lo < W and c.pub[2] - c_lo >= 0]
            keys = list(lane_keys)
        counts: dict[int, int] = {}
        for c, rows, n in pins:
            for _seq, start, _dur, _gx, shape in c.records(rows, n):
                if 0 <= start - c_lo < W:
                    counts[shape[7]] = counts.get(shape[7], 0) + 1
        exact = {li: [array("q") for _ in range(14)] for li, n in counts.items() if width is None or n <= width}
        size = 8 * (width or 0)   # reduced lanes exist only with a width
        reduced = {li: (array("q", bytes(size)), array("q", bytes(size))) for li in counts if li not in exact}
        names: dict[int, dict[int, int]] = {li: {} for li in exact}
        for c, rows, n in pins:
            for seq, start, dur, grid_x, shape in c.records(rows, n):
                word, launch, gy, gz, bx, by, bz, li, rtype, direction = shape
                d = start - c_lo
                if li in exact:
                    if not 0 <= d < W:
                        continue
                    row: tuple[int, ...]
                    if rtype == L.REC_KERNEL:
                        local = names[li].setdefault(word, len(names[li]))
                        row = (RL.KIND_KERNEL, local, grid_x, gy, gz, bx, by, bz, -1, -1, launch)
                    else:
                        row = (_KIND[rtype], -1, -1, -1, -1, -1, -1, -1, min(word, _INT64_MAX), direction, -1)
                    for column, value in zip(exact[li], (_signed(seq), (start + offset) // 1000, dur, *row)):
                        column.append(value)
                elif li in reduced:
                    if d >= W:
                        continue
                    assert width is not None
                    count, busy = reduced[li]
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
