# The flight recorder's records in the compiled decoder (included by _decoder_c.pyx).
#
# Every timed kernel, copy and memset the drain loop decodes is also written here, in the same pass
# and without the GIL, into its process's chunk being written: a 48-byte raw row, the record as
# the ring gave it (start, end, its payload bytes) with its seq, lane, type and direction, and
# nothing else (docs/recorder.md, "What is kept"; the numbers are _retain_layout's, which the
# Python twin uses too). A full chunk is sealed. After its pass, the drain thread *compacts* the
# sealed chunks (Retention.compact): 22 bytes a record in five columns, each record's shape (lane,
# name, grid y/z, block, launch id; or lane, kind, direction, bytes) interned per chunk. So the
# drain's pass copies and moves on; the interning, the costly part, runs once per chunk, in one
# tight loop, off that pass. All the decoders of an agent share one Retention: its byte budget,
# its list of chunks in the order they were made (the oldest, of any process, leaves first) and
# the mutex that guards the lists.
#
# Readers (window queries, on other threads) never stop the drain for long: under the mutex they
# only pin the chunks they need and copy each one's *published* count and form (raw rows, or
# columns); they then read without it. A chunk's records below its published count never change,
# and a compacted chunk never changes at all. The drain publishes at the end of each drain() call.
# A chunk evicted while pinned is freed by its last reader, and so are raw rows a reader was
# reading when their chunk was compacted.
#
# Constraints: one drain thread per Retention (the drain of one decoder may evict another's
# chunks, never its chunk being written; compaction runs on that thread too); every allocation
# that holds records is counted against the budget by _retain_layout's formulas, exactly as the
# Python twin counts it (compaction's intern table is its working memory while it runs).

from cpython cimport array as carray
import array as pyarray

from gpuflow.collectors.cupti import _retain_layout as RL

RETAIN_CONSTANTS = {"RECORD_BYTES": R_RECORD_BYTES, "RAW_ROW_BYTES": R_RAW_ROW_BYTES, "SHAPE_BYTES": R_SHAPE_BYTES,
                    "CHUNK_OVERHEAD": R_CHUNK_OVERHEAD, "LONG_BYTES": R_LONG_BYTES,
                    "FIRST_CHUNK_RECORDS": R_FIRST_CHUNK, "SEQ_GAP_MAX": R_SEQ_GAP_MAX,
                    "DUR_LONG": R_DUR_LONG, "TIME_LIMIT": R_TIME_LIMIT,
                    "sizeof_RawRow": sizeof(RawRow), "sizeof_Shape": sizeof(Shape),
                    "sizeof_LongDur": sizeof(LongDur), "sizeof_Chunk": sizeof(Chunk)}


cdef inline uint64_t r_raw_bytes(uint32_t capacity) noexcept nogil:
    return <uint64_t>R_CHUNK_OVERHEAD + <uint64_t>capacity * R_RAW_ROW_BYTES


cdef inline uint64_t r_compact_bytes(uint32_t records, uint32_t n_long, uint32_t n_shapes) noexcept nogil:
    return (<uint64_t>R_CHUNK_OVERHEAD + <uint64_t>records * R_RECORD_BYTES + <uint64_t>n_long * R_LONG_BYTES
            + <uint64_t>n_shapes * R_SHAPE_BYTES)


cdef void r_free_rows(RetState *R, RawRow *rows, uint32_t capacity) noexcept nogil:
    """Free a chunk's raw rows (the mutex held); a full-size chunk's are kept for the next chunk."""
    if rows == NULL:
        return
    if capacity == R.max_chunk and R.n_spare_raw < R_SPARES:
        R.spare_raw[R.n_spare_raw] = <char *>rows
        R.n_spare_raw += 1
    else:
        free(rows)


cdef void r_chunk_free(RetState *R, Chunk *c) noexcept nogil:
    """Free a chunk (the mutex held); a full-size one's memory is kept for the next chunks."""
    if c == NULL:
        return
    r_free_rows(R, c.rows, c.capacity)
    r_free_rows(R, c.retired, c.capacity)
    if c.start != NULL:
        if c.count == R.max_chunk and R.n_spare_cols < R_SPARES:
            R.spare_cols[R.n_spare_cols] = <char *>c.start
            R.n_spare_cols += 1
        else:
            free(c.start)
    free(c.shapes)
    free(c)


cdef uint64_t r_latest_start(const Chunk *c, uint32_t n) noexcept nogil:
    """The latest start among a chunk's first ``n`` records (a compacted chunk knows it; a raw one is
    read: the drain's path does not follow it)."""
    cdef uint64_t latest = 0
    cdef uint32_t i
    if c.rows == NULL:
        return c.max_start
    for i in range(n):
        if c.rows[i].start > latest:
            latest = c.rows[i].start
    return latest


cdef void r_evict(RetState *R, Chunk *c) noexcept nogil:
    """Take a chunk out of the lists and the budget (the mutex held); freed now or by its last reader."""
    cdef Store *o = c.owner
    cdef uint64_t latest
    if c.gprev != NULL:
        c.gprev.gnext = c.gnext
    else:
        R.first = c.gnext
    if c.gnext != NULL:
        c.gnext.gprev = c.gprev
    else:
        R.last = c.gprev
    if c.oprev != NULL:
        c.oprev.onext = c.onext
    else:
        o.first = c.onext
    if c.onext != NULL:
        c.onext.oprev = c.oprev
    else:
        o.last = c.oprev
    R.used -= c.bytes
    R.chunks -= 1
    R.evicted_chunks += 1
    if c.sealed and c.rows != NULL:
        R.sealed_raw -= 1
    o.records -= c.published
    o.evicted_records += c.published
    if c.published:
        latest = r_latest_start(c, c.published)
        if not o.have_evicted or latest > o.evicted_through:
            o.evicted_through = latest
            o.have_evicted = 1
    if o.cur == c:
        o.cur = NULL
        o.next_capacity = R_FIRST_CHUNK if R_FIRST_CHUNK < R.max_chunk else R.max_chunk
    c.owner = NULL
    c.gprev = c.gnext = c.oprev = c.onext = NULL
    if c.pins == 0:
        r_chunk_free(R, c)


cdef inline int r_evictable(const Chunk *c) noexcept nogil:
    """Not the chunk a running drain is writing."""
    return not (c.owner.cur == c and c.owner.writing)


cdef void r_trim(RetState *R) noexcept nogil:
    """Evict the oldest chunks until the budget holds (the mutex held)."""
    cdef Chunk *c = R.first
    cdef Chunk *following
    while R.used > R.budget and c != NULL:
        following = c.gnext
        if r_evictable(c):
            r_evict(R, c)
        c = following


cdef void r_show(RetState *R, Store *o, Chunk *c) noexcept nogil:
    """Make the records written to a chunk readable."""
    pthread_mutex_lock(&R.lock)
    o.records += c.count - c.published
    c.published = c.count
    c.pub_min_start = c.min_start
    c.pub_max_end = c.max_end
    pthread_mutex_unlock(&R.lock)


cdef void r_publish(Store *o) noexcept nogil:
    """The end of a drain: what the chunk being written holds becomes readable."""
    if o.ret != NULL and o.cur != NULL:
        r_show(o.ret, o, o.cur)


cdef void r_seal(State *s) noexcept nogil:
    """The chunk being written takes no more records (full, a seq jump, or its process gone): its
    rows join their lanes' spans, it is published and waits for compaction."""
    cdef Store *o = &s.store
    cdef Chunk *c = o.cur
    cdef RetState *R = o.ret
    cdef uint32_t cap
    lanes_sync(s, c)
    r_show(R, o, c)
    pthread_mutex_lock(&R.lock)
    c.sealed = 1
    R.sealed_raw += 1
    o.cur = NULL
    cap = 2 * c.count
    if cap < R_FIRST_CHUNK:
        cap = R_FIRST_CHUNK
    if cap > R.max_chunk:
        cap = R.max_chunk
    o.next_capacity = cap
    pthread_mutex_unlock(&R.lock)


cdef Chunk *r_chunk_new(Store *o, uint64_t seq, uint64_t start) noexcept nogil:
    cdef RetState *R = o.ret
    cdef uint32_t cap = o.next_capacity
    cdef Chunk *c = <Chunk *>calloc(1, sizeof(Chunk))
    cdef char *rows = NULL
    if c == NULL:
        return NULL
    if cap == R.max_chunk:
        pthread_mutex_lock(&R.lock)
        if R.n_spare_raw:
            R.n_spare_raw -= 1
            rows = R.spare_raw[R.n_spare_raw]
        pthread_mutex_unlock(&R.lock)
    if rows == NULL:
        rows = <char *>malloc(<size_t>cap * sizeof(RawRow))
        if rows == NULL:
            free(c)
            return NULL
    c.rows = <RawRow *>rows
    c.capacity = cap
    c.base_seq = seq
    c.last_seq = seq
    c.min_start = c.max_end = start
    c.pub_min_start = c.pub_max_end = start
    c.bytes = r_raw_bytes(cap)
    c.owner = o
    pthread_mutex_lock(&R.lock)
    c.gprev = R.last
    if R.last != NULL:
        R.last.gnext = c
    else:
        R.first = c
    R.last = c
    c.oprev = o.last
    if o.last != NULL:
        o.last.onext = c
    else:
        o.first = c
    o.last = c
    o.cur = c
    R.chunks += 1
    R.used += c.bytes
    r_trim(R)
    pthread_mutex_unlock(&R.lock)
    return c


cdef Chunk *r_next_chunk(State *s, uint64_t seq, uint64_t start, uint64_t end) noexcept nogil:
    """The drain's way off its path: a record not placeable in time (NULL), or the first record of a
    process, or one a seq jump away from the previous (that chunk is sealed): a new chunk."""
    cdef Store *o = &s.store
    cdef Chunk *c
    if end > R_TIME_LIMIT:                          # start <= end: not placeable in time
        o.unplaced += 1
        return NULL
    if o.cur != NULL:
        if seq - o.cur.last_seq <= R_SEQ_GAP_MAX:
            return o.cur
        r_seal(s)
    c = r_chunk_new(o, seq, start)
    if c == NULL:
        s.oom = 1
    return c


cdef Chunk *r_chunk_for(State *s, const gpuflow_record *r, uint64_t seq, uint32_t li,
                        int direction) noexcept nogil:
    """r_retain's way off its path (r_next_chunk): the chunk a timed execution goes into, or NULL.
    Its lane counted its row as pending (r_retain): a chunk sealed here must not wait for that row,
    and one not placeable in time is kept on its lane as without retention, after the rows before
    it joined theirs."""
    cdef Lane *lane = &s.lanes[li]
    cdef Chunk *c
    lane.pending -= 1
    c = r_next_chunk(s, seq, r.body.act.start, r.body.act.end)
    if c != NULL:
        if s.n_dirty == 0:          # the chunk before was sealed, its rows joined their lanes
            s.dirty[0] = li
            s.n_dirty = 1
        lane.pending += 1
        return c
    if lane.pending == 0 and s.n_dirty and s.dirty[s.n_dirty - 1] == li:
        s.n_dirty -= 1              # r_retain listed the lane for this row alone: a lane is listed
                                    # once, and only while it has pending rows
    if not s.oom and s.cap != 0:
        if s.store.cur != NULL:
            lanes_sync(s, s.store.cur)
        span_keep(s, lane, r, seq, direction)
    return NULL


#: r_retain calls r_chunk_for through this pointer, set at import, so that the compiler cannot
#: inline that rare path (a span's copy in it) into r_retain: r_retain must stay small enough to be
#: inlined into the drain loop, which measured ~8 % slower with it called (docs/recorder.md,
#: "Each execution written once")
cdef Chunk *(*r_chunk_for_call)(State *, const gpuflow_record *, uint64_t, uint32_t, int) noexcept nogil
r_chunk_for_call = r_chunk_for


cdef inline void r_retain(State *s, const gpuflow_record *r, uint64_t seq, uint32_t li, int direction) noexcept nogil:
    """Copy one timed execution into its process's chunk being written: a raw row, its time
    bounds, its lane's count of rows pending (lanes_sync); nothing else on the drain's path."""
    cdef Chunk *c = s.store.cur
    cdef RawRow *row
    cdef uint64_t start = r.body.act.start, end = r.body.act.end
    cdef uint32_t i
    cdef Lane *lane = &s.lanes[li]
    if lane.pending == 0:           # its row joins the lane's spans at lanes_sync
        s.dirty[s.n_dirty] = li
        s.n_dirty += 1
    lane.pending += 1
    if c == NULL or seq - c.last_seq > R_SEQ_GAP_MAX or end > R_TIME_LIMIT:
        c = r_chunk_for_call(s, r, seq, li, direction)
        if c == NULL:
            return
    i = c.count
    row = &c.rows[i]
    memcpy(row, &r.body.act.start, 16)
    memcpy(row.payload, &r.body.act.u.kernel.name_id, 24)
    row.meta = (seq & 0xFFFFFFFFULL) | (<uint64_t>li << 32) | (<uint64_t><uint8_t>r.type << 48)
    if start < c.min_start:                         # rarely: a chunk's records mostly follow its first
        c.min_start = start
    if end > c.max_end:
        c.max_end = end
    c.last_seq = seq
    c.count = i + 1
    if i + 1 == c.capacity:
        r_seal(s)


cdef inline int r_raw_direction(const RawRow *row, uint64_t rtype) noexcept nogil:
    """A raw copy's or memset's direction, from its payload as the drain found it (a copy's kinds
    and devices were checked then: an unclassifiable one was never retained)."""
    cdef gpuflow_copy_payload copy
    if rtype == GPUFLOW_REC_MEMSET:
        return DIR_MEMSET
    memcpy((<char *>&copy) + 4, row.payload, 24)
    return copy_direction(&copy)


cdef inline uint64_t r_raw_seq(const Chunk *c, const RawRow *row) noexcept nogil:
    """A raw row's seq: its low 32 bits are kept, and a chunk spans less than 2^32 of them."""
    return c.base_seq + ((row.meta - c.base_seq) & 0xFFFFFFFFULL)


cdef inline uint32_t r_raw_shape(const RawRow *row, Shape *x) noexcept nogil:
    """A raw row's shape (built word by word, as the Shape's fields); returns its grid x."""
    cdef uint64_t *w = <uint64_t *>x
    cdef uint64_t p0, p1, p2
    cdef uint64_t meta = row.meta
    cdef uint64_t rtype = (meta >> 48) & 0xFF
    memcpy(&p0, &row.payload[0], 8)
    memcpy(&p1, &row.payload[8], 8)
    if rtype == GPUFLOW_REC_KERNEL:                 # name id, grid x | grid y, z, block x, y | block z, registers, launch id
        memcpy(&p2, &row.payload[16], 8)
        w[0] = p0 & 0xFFFFFFFFULL
        w[1] = (rtype << R_TAG_SHIFT) | (p2 >> 32) | (p1 << 32)
        w[2] = (p1 >> 32) | ((p2 & 0xFFFFULL) << 32) | (meta & 0xFFFF00000000ULL) << 16
        return <uint32_t>(p0 >> 32)
    w[0] = (p0 >> 32) | (p1 << 32)                  # kinds | bytes
    w[1] = (rtype << R_TAG_SHIFT) | <uint64_t>r_raw_direction(row, rtype)
    w[2] = (meta & 0xFFFF00000000ULL) << 16
    return 0


cdef inline uint32_t r_shape_hash(const Shape *x) noexcept nogil:
    cdef const uint64_t *w = <const uint64_t *>x
    cdef uint64_t h = (w[0] * 0x9E3779B97F4A7C15ULL) ^ (w[1] * 0xC2B2AE3D27D4EB4FULL) \
        ^ (w[2] * 0x165667B19E3779F9ULL)
    return <uint32_t>(h ^ (h >> 29) ^ (h >> 47))


cdef inline int r_same(const Shape *a, const Shape *b) noexcept nogil:
    cdef const uint64_t *x = <const uint64_t *>a
    cdef const uint64_t *y = <const uint64_t *>b
    return ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2])) == 0


cdef struct Interner:           # compaction's working memory: the distinct shapes so far and their table
    Shape *shapes
    uint32_t n
    uint32_t alloc
    uint32_t *hash              # shape index + 1, 0 empty; at most half full
    uint32_t size


cdef inline int64_t r_intern(Interner *t, const Shape *x) noexcept nogil:
    """The index of a shape among the chunk's, added if new; -1 when out of memory."""
    cdef uint32_t mask = t.size - 1
    cdef uint32_t h = r_shape_hash(x) & mask
    cdef uint32_t e
    while True:
        e = t.hash[h]
        if e == 0:
            return r_intern_new(t, x, h)
        if r_same(&t.shapes[e - 1], x):
            return e - 1
        h = (h + 1) & mask


cdef int64_t r_intern_new(Interner *t, const Shape *x, uint32_t h) noexcept nogil:
    """Add a shape the table does not hold (``h``: its empty slot); -1 when out of memory."""
    cdef uint32_t i = t.n, j, size, mask
    cdef uint32_t *fresh
    cdef void *p
    if i == t.alloc:
        p = realloc(t.shapes, <size_t>t.alloc * 2 * sizeof(Shape))
        if p == NULL:
            return -1
        t.shapes = <Shape *>p
        t.alloc *= 2
    t.shapes[i] = x[0]
    t.n = i + 1
    t.hash[h] = i + 1
    if (i + 1) * 2 > t.size:
        size = t.size * 2
        fresh = <uint32_t *>calloc(size, sizeof(uint32_t))
        if fresh == NULL:
            return -1
        mask = size - 1
        for j in range(t.n):
            h = r_shape_hash(&t.shapes[j]) & mask
            while fresh[h] != 0:
                h = (h + 1) & mask
            fresh[h] = j + 1
        free(t.hash)
        t.hash = fresh
        t.size = size
    return i


cdef int r_compact(RetState *R, Chunk *c) noexcept nogil:
    """Compact one sealed raw chunk into its columns and distinct shapes, then swap them in (the
    drain thread's; readers may read its raw rows meanwhile, and keep them until they are done).
    -1 when out of memory (the chunk stays raw, and whole); 1 when it left the budget meanwhile."""
    cdef uint32_t n = c.count, i, n_long = 0, long_alloc = 16
    cdef const RawRow *rows = c.rows
    cdef char *cols = NULL
    cdef char *tail
    cdef uint64_t *start
    cdef uint32_t *durs
    cdef uint32_t *shape
    cdef uint32_t *grid_x
    cdef uint16_t *seq
    cdef LongDur *longs = <LongDur *>malloc(long_alloc * sizeof(LongDur))
    cdef void *p
    cdef Interner t
    cdef Shape x
    cdef uint64_t d, off, prev = c.base_seq, bytes_now, latest = 0
    cdef int64_t index
    cdef int failed = 0
    t.n = 0
    t.alloc = R_HASH_FIRST // 2
    t.size = R_HASH_FIRST
    t.shapes = <Shape *>malloc(t.alloc * sizeof(Shape))
    t.hash = <uint32_t *>calloc(t.size, sizeof(uint32_t))
    if n == R.max_chunk:
        pthread_mutex_lock(&R.lock)
        if R.n_spare_cols:
            R.n_spare_cols -= 1
            cols = R.spare_cols[R.n_spare_cols]
        pthread_mutex_unlock(&R.lock)
    if cols == NULL:
        cols = <char *>malloc(<size_t>n * R_RECORD_BYTES)
    if cols == NULL or longs == NULL or t.shapes == NULL or t.hash == NULL:
        failed = 1
    else:
        start = <uint64_t *>cols                    # the columns, one block: 8 + 4 + 4 + 4 + 2
        durs = <uint32_t *>(cols + <size_t>n * 8)
        shape = <uint32_t *>(cols + <size_t>n * 12)
        grid_x = <uint32_t *>(cols + <size_t>n * 16)
        seq = <uint16_t *>(cols + <size_t>n * 20)
        for i in range(n):
            start[i] = rows[i].start
            latest = rows[i].start if rows[i].start > latest else latest
            d = rows[i].end - rows[i].start
            if d >= R_DUR_LONG:
                if n_long == long_alloc:
                    p = realloc(longs, <size_t>long_alloc * 2 * sizeof(LongDur))
                    if p == NULL:
                        failed = 1
                        break
                    longs = <LongDur *>p
                    long_alloc *= 2
                longs[n_long].index = i
                longs[n_long].dur = d
                n_long += 1
                durs[i] = <uint32_t>R_DUR_LONG
            else:
                durs[i] = <uint32_t>d
            off = rows[i].meta
            seq[i] = <uint16_t>(off - prev)       # the gap: the drain seals before 16 bits would not hold it (the
                                                  # lane and type above the seq's 32 bits never reach them)
            prev = off
            grid_x[i] = r_raw_shape(&rows[i], &x)
            index = r_intern(&t, &x)
            if index < 0:
                failed = 1
                break
            shape[i] = <uint32_t>index
    tail = NULL
    if not failed:                                  # the shapes and the long durations, exactly
        tail = <char *>malloc(<size_t>t.n * sizeof(Shape) + <size_t>n_long * sizeof(LongDur) + 1)
        if tail == NULL:
            failed = 1
        else:
            memcpy(tail, t.shapes, <size_t>t.n * sizeof(Shape))
            memcpy(tail + <size_t>t.n * sizeof(Shape), longs, <size_t>n_long * sizeof(LongDur))
    free(t.shapes)
    free(t.hash)
    free(longs)
    pthread_mutex_lock(&R.lock)
    if c.owner == NULL and not failed:              # evicted meanwhile (its decoder freed on another
        free(tail)                                  # thread): left as it is, for its last reader
        failed = 2
    if failed:
        if cols != NULL:
            if n == R.max_chunk and R.n_spare_cols < R_SPARES:
                R.spare_cols[R.n_spare_cols] = cols
                R.n_spare_cols += 1
            else:
                free(cols)
        pthread_mutex_unlock(&R.lock)
        return 1 if failed == 2 else -1
    c.start = start
    c.dur = durs
    c.shape = shape
    c.grid_x = grid_x
    c.seq = seq
    c.shapes = <Shape *>tail
    c.longs = <LongDur *>(tail + <size_t>t.n * sizeof(Shape))
    c.n_shapes = t.n
    c.n_long = n_long
    c.max_start = latest
    if c.pins:
        c.retired = c.rows
    else:
        r_free_rows(R, c.rows, c.capacity)
    c.rows = NULL
    R.sealed_raw -= 1
    bytes_now = r_compact_bytes(n, n_long, t.n)
    R.used = R.used - c.bytes + bytes_now
    c.bytes = bytes_now
    pthread_mutex_unlock(&R.lock)
    return 0


cdef void r_set_offset(Store *o, uint64_t cupti, uint64_t wall) noexcept nogil:
    if o.ret != NULL and cupti <= R_TIME_LIMIT and wall <= R_TIME_LIMIT:
        o.have_offset = 1
        o.offset = <int64_t>wall - <int64_t>cupti


cdef void r_store_free(Store *o) noexcept nogil:
    """The decoder goes: its chunks leave the budget (not counted as evicted)."""
    cdef RetState *R = o.ret
    cdef uint64_t n = 0
    if R == NULL:
        return
    pthread_mutex_lock(&R.lock)
    o.writing = 0
    while o.first != NULL:
        r_evict(R, o.first)
        n += 1
    R.evicted_chunks -= n
    pthread_mutex_unlock(&R.lock)
    o.ret = NULL


cdef inline uint64_t r_dur(const Chunk *c, uint32_t i) noexcept nogil:
    """A compacted record's duration: from the longs (in index order: a binary search) when it is
    DUR_LONG."""
    cdef uint32_t lo = 0, hi = c.n_long, mid
    if c.dur[i] != <uint32_t>R_DUR_LONG:
        return c.dur[i]
    while lo < hi:
        mid = (lo + hi) // 2
        if c.longs[mid].index < i:
            lo = mid + 1
        else:
            hi = mid
    if lo < c.n_long and c.longs[lo].index == i:
        return c.longs[lo].dur
    return c.dur[i]


cdef void r_unpin(RetState *R, Chunk *c) noexcept nogil:
    """A reader (or the compaction) is done with a chunk (the mutex held): the last one frees what
    was let go meanwhile."""
    c.pins -= 1
    if c.pins == 0:
        if c.owner == NULL:
            r_chunk_free(R, c)
        elif c.retired != NULL:
            r_free_rows(R, c.retired, c.capacity)
            c.retired = NULL


cdef class Retention:
    """The retention budget all the decoders of an agent share (docs/recorder.md, "What is kept").

    :param budget_bytes: what the retained chunks may hold in all; the oldest chunk (of any process)
        leaves first when a new one would pass it.
    :param max_chunk_records: the most records a chunk holds (a power of two, 16 .. 65,536).
    """

    cdef RetState R
    cdef int ready

    def __cinit__(self):
        memset(&self.R, 0, sizeof(RetState))
        self.ready = 0

    def __init__(self, budget_bytes, max_chunk_records=RL.MAX_CHUNK_RECORDS):
        budget, chunk = RL.check_retention(budget_bytes, max_chunk_records)
        if self.ready:
            raise RuntimeError("Retention.__init__ called twice")
        pthread_mutex_init(&self.R.lock, NULL)
        self.ready = 1
        self.R.budget = budget
        self.R.max_chunk = chunk

    def __dealloc__(self):
        cdef uint32_t i
        for i in range(self.R.n_spare_raw):
            free(self.R.spare_raw[i])
        for i in range(self.R.n_spare_cols):
            free(self.R.spare_cols[i])
        self.R.n_spare_raw = self.R.n_spare_cols = 0
        if self.ready:
            pthread_mutex_destroy(&self.R.lock)

    cdef RetState *state(self):
        return &self.R

    @property
    def budget_bytes(self):
        return self.R.budget

    @property
    def max_chunk_records(self):
        return self.R.max_chunk

    def figures(self):
        """``{"used_bytes", "chunks", "evicted_chunks", "budget_bytes", "raw_chunks"}`` now
        (``raw_chunks``: sealed and not compacted yet)."""
        pthread_mutex_lock(&self.R.lock)
        out = {"used_bytes": self.R.used, "chunks": self.R.chunks, "evicted_chunks": self.R.evicted_chunks,
               "budget_bytes": self.R.budget, "raw_chunks": self.R.sealed_raw}
        pthread_mutex_unlock(&self.R.lock)
        return out

    def compact(self):
        """Compact every sealed chunk, oldest first; return how many (the drain thread's, after its
        pass). :raises MemoryError: one could not be (it stays raw, and whole)."""
        cdef Chunk *c
        cdef uint64_t n = 0
        cdef int failed = 0
        with nogil:
            while True:
                pthread_mutex_lock(&self.R.lock)
                c = NULL
                if self.R.sealed_raw:
                    c = self.R.first
                    while c != NULL and not (c.sealed and c.rows != NULL):
                        c = c.gnext
                if c != NULL:
                    c.pins += 1
                pthread_mutex_unlock(&self.R.lock)
                if c == NULL:
                    break
                failed = r_compact(&self.R, c)
                pthread_mutex_lock(&self.R.lock)
                r_unpin(&self.R, c)
                pthread_mutex_unlock(&self.R.lock)
                if failed < 0:
                    break
                n += failed == 0
        if failed < 0:
            raise MemoryError("the flight recorder ran out of memory compacting a chunk")
        return n

    def evict_older_than(self, cutoff_wall_ns):
        """Evict every chunk whose records all ended before ``cutoff_wall_ns`` (wall clock, by
        each process's latest clock pair); return how many went. The drain thread's (--retain-s)."""
        cdef int64_t cutoff = max(-(1 << 62), min(1 << 62, operator.index(cutoff_wall_ns)))
        cdef Chunk *c
        cdef Chunk *following
        cdef uint64_t n = 0
        with nogil:
            pthread_mutex_lock(&self.R.lock)
            c = self.R.first
            while c != NULL:
                following = c.gnext
                if (r_evictable(c) and c.owner.have_offset and c.published == c.count and c.count
                        and <int64_t>c.pub_max_end + c.owner.offset < cutoff):
                    r_evict(&self.R, c)
                    n += 1
                c = following
            pthread_mutex_unlock(&self.R.lock)
        return n


cdef struct Pin:
    Chunk *c
    const RawRow *rows          # the raw rows read (NULL: the chunk is compacted)
    uint32_t n                  # its published records then


cdef struct LaneOut:
    int64_t *cols[14]           # exact: SpanColumns' columns and the launch id
    int64_t *count              # reduced: per bucket
    int64_t *busy
    uint64_t pos
    uint32_t n_names


cdef inline uint32_t r_bucket(uint64_t d, uint64_t W, uint32_t width) noexcept nogil:
    """The bucket of an offset ``d`` in [0, W) from the window's start: edge(j) <= d < edge(j + 1),
    edge(j) = j * W // width."""
    cdef uint32_t j = <uint32_t>((d * width) // W)
    while j + 1 < width and ((<uint64_t>(j + 1)) * W) // width <= d:
        j += 1
    return j


cdef carray.array _INT64 = pyarray.array("q")


cdef extern from "Python.h":
    void PyObject_GC_UnTrack(void *op)


cdef carray.array r_column(Py_ssize_t n):
    """An array('q') of ``n`` values to fill. Left to reference counting alone: an array holds no
    Python object, so it can be in no reference cycle, and a build makes hundreds of them (13 a
    lane) that the cyclic garbage collector would otherwise go over at every collection."""
    cdef carray.array column = carray.clone(_INT64, n, False)
    PyObject_GC_UnTrack(<void *>column)
    return column


cdef object r_figures(State *s):
    """What one process retains: records, chunks and bytes, the CUPTI range of what is retained
    (None: nothing), what left (records, and the latest start among them) and what was never placed."""
    cdef Store *o = &s.store
    cdef Chunk *c
    cdef uint64_t chunks = 0, nbytes = 0, lo = 0, hi = 0
    cdef int any_ = 0
    cdef RetState *R = o.ret        # read once: a drain may forget this process's chunks meanwhile
    if R == NULL:
        return None
    pthread_mutex_lock(&R.lock)
    c = o.first
    while c != NULL:
        chunks += 1
        nbytes += c.bytes
        if c.published:
            if not any_ or c.pub_min_start < lo:
                lo = c.pub_min_start
            if not any_ or c.pub_max_end > hi:
                hi = c.pub_max_end
            any_ = 1
        c = c.onext
    out = {"records": o.records, "chunks": chunks, "bytes": nbytes,
           "from_ns": lo if any_ else None, "to_ns": hi if any_ else None,
           "evicted_records": o.evicted_records,
           "evicted_through_ns": o.evicted_through if o.have_evicted else None, "unplaced": o.unplaced}
    pthread_mutex_unlock(&R.lock)
    return out


cdef object r_window(State *s, lo_us, hi_us, offset_ns, width_px):
    """The executions of one process starting in [lo_us, hi_us) (wall clock, by ``offset_ns``),
    per lane: exact columns, or ``width_px`` buckets where a lane has more (see the Python twin)."""
    cdef Store *o = &s.store
    cdef int64_t c_lo
    cdef uint64_t W
    cdef uint32_t width = 0
    cdef int64_t offset
    cdef Pin *pins = NULL
    cdef Pin *grown
    cdef int short = 0
    cdef uint32_t n_pins = 0, p_alloc = 0, n_lanes, li, k, j, local
    cdef Chunk *c
    cdef uint64_t *counts = NULL
    cdef LaneOut *outs = NULL
    cdef uint8_t *mode = NULL          # per lane: 0 none, 1 exact, 2 buckets
    cdef Map names
    cdef uint32_t i, n
    cdef int64_t d, dd, a, b, e
    cdef uint64_t dur, pos, wj, seq_at, start
    cdef const Shape *x
    cdef const RawRow *rows
    cdef Shape raw_shape
    cdef uint32_t grid_x
    cdef int64_t **cols
    cdef int32_t hit
    cdef carray.array arr
    cdef RetState *R = o.ret        # read once: a drain may forget this process's chunks meanwhile
    lo, hi, offset_py, width_opt = RL.check_window(lo_us, hi_us, offset_ns, width_px)
    if R == NULL:
        return []
    c_lo_py = lo * 1000 - offset_py
    if lo * 1000 + (hi - lo) * 1000 - offset_py <= 0 or c_lo_py >= R_TIME_LIMIT:
        return []
    c_lo = c_lo_py
    W = (hi - lo) * 1000
    offset = offset_py
    if width_opt is not None:
        width = width_opt
    names.slots = NULL
    try:
        pthread_mutex_lock(&R.lock)
        n_lanes = s.n_lanes
        c = o.first
        while c != NULL:
            if (c.published and <int64_t>c.pub_min_start - c_lo < <int64_t>W
                    and <int64_t>c.pub_max_end - c_lo >= 0):
                if n_pins == p_alloc:
                    grown = <Pin *>realloc(pins, (p_alloc * 2 if p_alloc else 16) * sizeof(Pin))
                    if grown == NULL:
                        short = 1
                        break
                    pins = grown
                    p_alloc = p_alloc * 2 if p_alloc else 16
                c.pins += 1
                pins[n_pins].c = c
                pins[n_pins].rows = c.rows
                pins[n_pins].n = c.published
                n_pins += 1
            c = c.onext
        pthread_mutex_unlock(&R.lock)
        if short:
            raise MemoryError()
        counts = <uint64_t *>calloc(n_lanes + 1, sizeof(uint64_t))
        outs = <LaneOut *>calloc(n_lanes + 1, sizeof(LaneOut))
        mode = <uint8_t *>calloc(n_lanes + 1, 1)
        if counts == NULL or outs == NULL or mode == NULL or map_init(&names) != 0:
            raise MemoryError()
        with nogil:                         # pass 1: executions per lane
            for k in range(n_pins):
                c = pins[k].c
                rows = pins[k].rows
                if rows != NULL:
                    for i in range(pins[k].n):
                        d = <int64_t>rows[i].start - c_lo
                        if d >= 0 and <uint64_t>d < W:
                            counts[(rows[i].meta >> 32) & 0xFFFF] += 1
                else:
                    for i in range(pins[k].n):
                        d = <int64_t>c.start[i] - c_lo
                        if d >= 0 and <uint64_t>d < W:
                            counts[c.shapes[c.shape[i]].lane] += 1
        lanes = []
        arrays = {}
        pthread_mutex_lock(&R.lock)     # the lanes' keys (their table may grow meanwhile)
        keys = {}
        for li in range(n_lanes):
            if counts[li]:
                keys[li] = (s.lanes[li].device, s.lanes[li].context, s.lanes[li].stream)
        pthread_mutex_unlock(&R.lock)
        for li in range(n_lanes):
            if not counts[li]:
                continue
            if width_opt is None or counts[li] <= width:
                mode[li] = 1
                columns = [r_column(counts[li]) for j in range(N_COLUMNS)]
                for j in range(N_COLUMNS):
                    arr = columns[j]
                    outs[li].cols[j] = <int64_t *>arr.data.as_longlongs
                arrays[li] = (columns, None)
            else:
                mode[li] = 2
                count_arr = carray.clone(_INT64, width, True)
                busy_arr = carray.clone(_INT64, width, True)
                arr = count_arr
                outs[li].count = <int64_t *>arr.data.as_longlongs
                arr = busy_arr
                outs[li].busy = <int64_t *>arr.data.as_longlongs
                arrays[li] = (None, (count_arr, busy_arr))
        with nogil:                         # pass 2: the columns and buckets
            for k in range(n_pins):
                c = pins[k].c
                rows = pins[k].rows
                seq_at = c.base_seq
                for i in range(pins[k].n):
                    if rows != NULL:            # a raw row: each field as the drain copied it
                        li = (rows[i].meta >> 32) & 0xFFFF
                        seq_at = r_raw_seq(c, &rows[i])
                        start = rows[i].start
                    else:
                        seq_at += c.seq[i]
                        li = c.shapes[c.shape[i]].lane
                        start = c.start[i]
                    if mode[li] == 0:
                        continue
                    d = <int64_t>start - c_lo
                    if mode[li] == 1:
                        if d < 0 or <uint64_t>d >= W:
                            continue
                        if rows != NULL:
                            grid_x = r_raw_shape(&rows[i], &raw_shape)
                            x = &raw_shape
                            dur = rows[i].end - rows[i].start
                        else:
                            grid_x = c.grid_x[i]
                            x = &c.shapes[c.shape[i]]
                            dur = r_dur(c, i)
                        cols = outs[li].cols
                        pos = outs[li].pos
                        outs[li].pos = pos + 1
                        cols[0][pos] = <int64_t>seq_at
                        cols[1][pos] = (<int64_t>start + offset) // 1000
                        cols[2][pos] = <int64_t>dur
                        if (x.tag >> R_TAG_SHIFT) == GPUFLOW_REC_KERNEL:
                            hit = map_find(&names, li, <uint32_t>x.word, 0)
                            if hit < 0:
                                hit = <int32_t>outs[li].n_names
                                outs[li].n_names += 1
                                if map_insert(&names, li, <uint32_t>x.word, 0, hit) != 0:
                                    s.oom = 1
                            cols[3][pos] = 0
                            cols[4][pos] = hit
                            cols[5][pos] = grid_x
                            cols[6][pos] = x.grid_y
                            cols[7][pos] = x.grid_z
                            cols[8][pos] = x.block_x
                            cols[9][pos] = x.block_y
                            cols[10][pos] = x.block_z
                            cols[11][pos] = -1
                            cols[12][pos] = -1
                            cols[13][pos] = x.tag & R_TAG_LOW
                        else:
                            cols[3][pos] = 2 if (x.tag >> R_TAG_SHIFT) == GPUFLOW_REC_MEMSET else 1
                            for j in range(4, 11):
                                cols[j][pos] = -1
                            cols[11][pos] = <int64_t>x.word if x.word < 0x7FFFFFFFFFFFFFFFULL else 0x7FFFFFFFFFFFFFFFLL
                            cols[12][pos] = x.tag & R_TAG_LOW
                            cols[13][pos] = -1
                    else:
                        if d >= <int64_t>W:
                            continue
                        dur = rows[i].end - rows[i].start if rows != NULL else r_dur(c, i)
                        e = d + <int64_t>dur
                        if d >= 0:
                            outs[li].count[r_bucket(<uint64_t>d, W, width)] += 1
                        if e <= 0 or dur == 0:
                            continue
                        a = d if d > 0 else 0
                        b = e if e < <int64_t>W else <int64_t>W
                        j = r_bucket(<uint64_t>a, W, width)
                        while a < b:
                            dd = <int64_t>(((<uint64_t>(j + 1)) * W) // width)
                            if dd > b:
                                dd = b
                            outs[li].busy[j] += dd - a
                            a = dd
                            j += 1
            for li in range(n_lanes):       # busy time is at most the bucket's width
                if mode[li] == 2:
                    for j in range(width):
                        wj = ((<uint64_t>(j + 1)) * W) // width - ((<uint64_t>j) * W) // width
                        if <uint64_t>outs[li].busy[j] > wj:
                            outs[li].busy[j] = <int64_t>wj
        if s.oom:
            s.oom = 0
            raise MemoryError()
        lane_names = {}
        for i in range(names.size):
            if names.slots[i].idx >= 0:
                lane_names.setdefault(names.slots[i].a, {})[names.slots[i].idx] = names.slots[i].b
        for li in range(n_lanes):
            if mode[li] == 0:
                continue
            columns, buckets = arrays[li]
            ids = lane_names.get(li, {})
            lanes.append((*keys[li], counts[li], tuple(columns) if columns is not None else None,
                          tuple(ids[j] for j in range(len(ids))), buckets))
        lanes.sort(key=lambda lane: lane[:3])
        return lanes
    finally:
        if n_pins:
            pthread_mutex_lock(&R.lock)
            for k in range(n_pins):
                r_unpin(R, pins[k].c)
            pthread_mutex_unlock(&R.lock)
        free(pins)
        free(counts)
        free(outs)
        free(mode)
        free(names.slots)
