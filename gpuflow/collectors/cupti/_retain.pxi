# The flight recorder's columns in the compiled decoder (included by _decoder_c.pyx).
#
# Every timed kernel, copy and memset the drain loop decodes is also written here, in the same pass
# and without the GIL, into its process's chunks (docs/recorder.md, "What is kept"; the numbers are
# _retain_layout's, which the Python twin uses too): 18 bytes a record in five columns, the
# record's shape (lane, name, grid y/z, block, launch id; or lane, kind, direction, bytes) interned
# per chunk. All
# the decoders of an agent share one Retention: its byte budget, its list of chunks in the order
# they were made (the oldest, of any process, leaves first) and the mutex that guards the lists.
#
# Readers (window queries, on other threads) never stop the drain for long: under the mutex they
# only pin the chunks they need and copy each one's *published* counts; they then read without
# it. A chunk's records below its published count never change (a full chunk never changes at
# all), and its shape blocks never move. The drain publishes at the end of each drain() call. A
# chunk evicted while pinned is freed by its last reader.
#
# Constraints: one drain thread per Retention (the drain of one decoder may evict another's
# chunks, never its chunk being written); every allocation is counted against the budget by
# _retain_layout.chunk_bytes, exactly as the Python twin counts it.

from cpython cimport array as carray
import array as pyarray

from gpuflow.collectors.cupti import _retain_layout as RL

RETAIN_CONSTANTS = {"RECORD_BYTES": R_RECORD_BYTES, "SHAPE_BYTES": R_SHAPE_BYTES, "SHAPE_BLOCK": R_SHAPE_BLOCK,
                    "CHUNK_OVERHEAD": R_CHUNK_OVERHEAD, "HASH_FIRST_SLOTS": R_HASH_FIRST,
                    "HASH_SLOT_BYTES": R_HASH_SLOT_BYTES, "LONG_BYTES": R_LONG_BYTES, "LONG_EVERY": R_LONG_EVERY,
                    "FIRST_CHUNK_RECORDS": R_FIRST_CHUNK, "DUR_LONG": R_DUR_LONG, "TIME_LIMIT": R_TIME_LIMIT}




cdef inline uint32_t r_long_slots(uint32_t capacity) noexcept nogil:
    return capacity // R_LONG_EVERY + 8


cdef inline uint64_t r_chunk_bytes(uint32_t capacity, uint32_t blocks, uint32_t hash_slots) noexcept nogil:
    return (<uint64_t>R_CHUNK_OVERHEAD + <uint64_t>capacity * R_RECORD_BYTES
            + <uint64_t>r_long_slots(capacity) * R_LONG_BYTES
            + <uint64_t>blocks * R_SHAPE_BLOCK * R_SHAPE_BYTES + <uint64_t>hash_slots * R_HASH_SLOT_BYTES)


cdef void r_chunk_free(RetState *R, Chunk *c) noexcept nogil:
    """Free a chunk (the mutex held); a full-size one's columns are kept for the next chunk."""
    cdef uint32_t i
    if c == NULL:
        return
    for i in range(c.n_blocks):
        free(c.blocks[i])
    free(c.blocks)
    free(c.hash)
    if c.capacity == R.max_chunk and R.n_spare < 4:
        R.spare[R.n_spare] = <char *>c.start
        R.n_spare += 1
    else:
        free(c.start)
    free(c)


cdef void r_evict(RetState *R, Chunk *c) noexcept nogil:
    """Take a chunk out of the lists and the budget (the mutex held); freed now or by its last reader."""
    cdef Store *o = c.owner
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
    o.records -= c.count
    o.evicted_records += c.count
    if c.count and (not o.have_evicted or c.max_start > o.evicted_through):
        o.evicted_through = c.max_start
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


cdef void r_account(RetState *R, Chunk *c, uint64_t more) noexcept nogil:
    pthread_mutex_lock(&R.lock)
    c.bytes += more
    R.used += more
    r_trim(R)
    pthread_mutex_unlock(&R.lock)


cdef void r_publish(Store *o) noexcept nogil:
    cdef Chunk *c = o.cur
    if o.ret == NULL or c == NULL:
        return
    pthread_mutex_lock(&o.ret.lock)
    c.published = c.count
    c.published_shapes = c.n_shapes
    c.published_long = c.n_long
    c.pub_min_start = c.min_start
    c.pub_max_start = c.max_start
    c.pub_max_end = c.max_end
    pthread_mutex_unlock(&o.ret.lock)


cdef void r_seal(Store *o) noexcept nogil:
    """The chunk being written is full (or cannot take the next record): publish it, free its hash."""
    cdef Chunk *c = o.cur
    cdef RetState *R = o.ret
    cdef uint64_t freed
    cdef uint32_t cap
    r_publish(o)
    pthread_mutex_lock(&R.lock)
    freed = <uint64_t>c.hash_size * R_HASH_SLOT_BYTES
    free(c.hash)
    c.hash = NULL
    c.hash_size = 0
    c.bytes -= freed
    R.used -= freed
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
    cdef char *cols = NULL
    if c == NULL:
        return NULL
    if cap == R.max_chunk:
        pthread_mutex_lock(&R.lock)
        if R.n_spare:
            R.n_spare -= 1
            cols = R.spare[R.n_spare]
        pthread_mutex_unlock(&R.lock)
    if cols == NULL:
        cols = <char *>malloc(<size_t>cap * R_RECORD_BYTES + <size_t>r_long_slots(cap) * sizeof(LongDur))
    c.blocks = <Shape **>calloc(cap // R_SHAPE_BLOCK + 1, sizeof(Shape *))
    c.hash = <uint32_t *>calloc(R_HASH_FIRST, sizeof(uint32_t))
    if cols == NULL or c.blocks == NULL or c.hash == NULL:
        free(cols)
        free(c.blocks)
        free(c.hash)
        free(c)
        return NULL
    c.start = <uint64_t *>cols                      # the columns, one block: 8 + 4 + 4 + 4 + 2, the longs
    c.dur = <uint32_t *>(cols + <size_t>cap * 8)
    c.shape = <uint32_t *>(cols + <size_t>cap * 12)
    c.grid_x = <uint32_t *>(cols + <size_t>cap * 16)
    c.seq = <uint16_t *>(cols + <size_t>cap * 20)
    c.longs = <LongDur *>(cols + <size_t>cap * 22)
    c.long_slots = r_long_slots(cap)
    c.capacity = cap
    c.hash_size = R_HASH_FIRST
    c.base_seq = seq
    c.last_seq = seq
    c.min_start = c.max_start = start
    c.max_end = start
    c.bytes = r_chunk_bytes(cap, 0, R_HASH_FIRST)
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


cdef inline uint32_t r_shape_hash(const Shape *x) noexcept nogil:
    cdef const uint64_t *w = <const uint64_t *>x
    cdef uint64_t h = (w[0] * 0x9E3779B97F4A7C15ULL) ^ (w[1] * 0xC2B2AE3D27D4EB4FULL) \
        ^ (w[2] * 0x165667B19E3779F9ULL) ^ w[3]
    return <uint32_t>(h ^ (h >> 29) ^ (h >> 47))


cdef inline int r_same(const Shape *a, const Shape *b) noexcept nogil:
    cdef const uint64_t *x = <const uint64_t *>a
    cdef const uint64_t *y = <const uint64_t *>b
    return ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2]) | (x[3] ^ y[3])) == 0


cdef inline Shape *r_shape_at(const Chunk *c, uint32_t i) noexcept nogil:
    return &c.blocks[i >> R_SHAPE_BLOCK_BITS][i & (R_SHAPE_BLOCK - 1)]


cdef int64_t r_intern(Store *o, Chunk *c, const Shape *x, uint32_t hx) noexcept nogil:
    """The chunk's index of a shape (``hx``: its hash), added if new; -1 when out of memory."""
    cdef uint32_t mask = c.hash_size - 1
    cdef uint32_t h = hx & mask
    cdef uint32_t e, i, j, size
    cdef uint32_t *fresh
    cdef Shape *y
    while True:
        e = c.hash[h]
        if e == 0:
            break
        if r_same(r_shape_at(c, e - 1), x):
            return e - 1
        h = (h + 1) & mask
    i = c.n_shapes
    if (i & (R_SHAPE_BLOCK - 1)) == 0:              # a new block: never moved once made
        c.blocks[i >> R_SHAPE_BLOCK_BITS] = <Shape *>malloc(R_SHAPE_BLOCK * sizeof(Shape))
        if c.blocks[i >> R_SHAPE_BLOCK_BITS] == NULL:
            return -1
        c.n_blocks += 1
        r_account(o.ret, c, <uint64_t>R_SHAPE_BLOCK * R_SHAPE_BYTES)
    y = r_shape_at(c, i)
    y[0] = x[0]
    c.n_shapes = i + 1
    c.hash[h] = i + 1
    if (i + 1) * 2 > c.hash_size:                   # the writer's alone: grown in place
        size = c.hash_size * 2
        fresh = <uint32_t *>calloc(size, sizeof(uint32_t))
        if fresh == NULL:
            return -1
        mask = size - 1
        for j in range(c.n_shapes):
            h = r_shape_hash(r_shape_at(c, j)) & mask
            while fresh[h] != 0:
                h = (h + 1) & mask
            fresh[h] = j + 1
        free(c.hash)
        c.hash = fresh
        r_account(o.ret, c, <uint64_t>(size - c.hash_size) * R_HASH_SLOT_BYTES)
        c.hash_size = size
    return i


cdef void r_retain(State *s, const gpuflow_record *r, uint64_t seq, uint32_t li, int direction) noexcept nogil:
    """Write one timed execution into its process's chunk being written."""
    cdef Store *o = &s.store
    cdef Chunk *c = o.cur
    cdef uint64_t start = r.body.act.start, end = r.body.act.end, dur
    cdef int64_t shape
    cdef uint32_t i
    cdef Shape x
    cdef uint64_t *w = <uint64_t *>&x
    if end > R_TIME_LIMIT:                          # start <= end: not placeable in time
        o.unplaced += 1
        return
    dur = end - start
    if c != NULL:
        if (c.count == c.capacity or seq - c.last_seq > 0xFFFFULL
                or (dur >= R_DUR_LONG and c.n_long == c.long_slots)):
            r_seal(o)
            c = NULL
    if c == NULL:
        c = r_chunk_new(o, seq, start)
        if c == NULL:
            s.oom = 1
            return
    w[3] = <uint64_t>r.type | (<uint64_t><uint8_t>direction << 8)   # the Shape's fields, word by word
    if r.type == GPUFLOW_REC_KERNEL:
        w[0] = r.body.act.u.kernel.name_id
        w[1] = (<uint64_t>r.body.act.u.kernel.launch_id | (<uint64_t>r.body.act.u.kernel.grid_y << 32)
                | (<uint64_t>r.body.act.u.kernel.grid_z << 48))
        w[2] = (<uint64_t>r.body.act.u.kernel.block_x | (<uint64_t>r.body.act.u.kernel.block_y << 16)
                | (<uint64_t>r.body.act.u.kernel.block_z << 32) | (<uint64_t>li << 48))
    else:
        w[0] = r.body.act.u.copy.bytes
        w[1] = 0
        w[2] = <uint64_t>li << 48
    shape = r_intern(o, c, &x, r_shape_hash(&x))
    if shape < 0:
        s.oom = 1
        return
    if o.cur != c:                                  # the budget is smaller than this chunk's shapes
        return
    i = c.count
    c.start[i] = start
    if dur >= R_DUR_LONG:
        c.dur[i] = <uint32_t>R_DUR_LONG
        c.longs[c.n_long].index = i
        c.longs[c.n_long].dur = dur
        c.n_long += 1
    else:
        c.dur[i] = <uint32_t>dur
    c.shape[i] = <uint32_t>shape
    c.grid_x[i] = r.body.act.u.kernel.grid_x if r.type == GPUFLOW_REC_KERNEL else 0
    c.seq[i] = <uint16_t>(seq - c.last_seq)
    c.last_seq = seq
    if start < c.min_start:
        c.min_start = start
    if start > c.max_start:
        c.max_start = start
    if end > c.max_end:
        c.max_end = end
    c.count = i + 1
    o.records += 1


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


cdef inline uint64_t r_dur(const Chunk *c, uint32_t i, uint32_t n_long) noexcept nogil:
    """A record's duration: from the longs (in index order: a binary search) when it is DUR_LONG."""
    cdef uint32_t lo = 0, hi = n_long, mid
    if c.dur[i] != <uint32_t>R_DUR_LONG:
        return c.dur[i]
    while lo < hi:
        mid = (lo + hi) // 2
        if c.longs[mid].index < i:
            lo = mid + 1
        else:
            hi = mid
    if lo < n_long and c.longs[lo].index == i:
        return c.longs[lo].dur
    return c.dur[i]


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
        for i in range(self.R.n_spare):
            free(self.R.spare[i])
        self.R.n_spare = 0
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
        """``{"used_bytes", "chunks", "evicted_chunks", "budget_bytes"}`` now."""
        pthread_mutex_lock(&self.R.lock)
        out = {"used_bytes": self.R.used, "chunks": self.R.chunks, "evicted_chunks": self.R.evicted_chunks,
               "budget_bytes": self.R.budget}
        pthread_mutex_unlock(&self.R.lock)
        return out

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
    uint32_t n
    uint32_t n_long


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


cdef carray.array r_column(Py_ssize_t n):
    return carray.clone(_INT64, n, False)


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
    cdef uint64_t dur, pos, wj, seq_at
    cdef const Shape *x
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
                pins[n_pins].n = c.published
                pins[n_pins].n_long = c.published_long
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
                for i in range(pins[k].n):
                    d = <int64_t>c.start[i] - c_lo
                    if d >= 0 and <uint64_t>d < W:
                        counts[r_shape_at(c, c.shape[i]).lane] += 1
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
                seq_at = c.base_seq
                for i in range(pins[k].n):
                    seq_at += c.seq[i]
                    x = r_shape_at(c, c.shape[i])
                    li = x.lane
                    if mode[li] == 0:
                        continue
                    d = <int64_t>c.start[i] - c_lo
                    if mode[li] == 1:
                        if d < 0 or <uint64_t>d >= W:
                            continue
                        cols = outs[li].cols
                        pos = outs[li].pos
                        outs[li].pos = pos + 1
                        cols[0][pos] = <int64_t>seq_at
                        cols[1][pos] = (<int64_t>c.start[i] + offset) // 1000
                        cols[2][pos] = <int64_t>r_dur(c, i, pins[k].n_long)
                        if x.type == GPUFLOW_REC_KERNEL:
                            hit = map_find(&names, li, <uint32_t>x.word, 0)
                            if hit < 0:
                                hit = <int32_t>outs[li].n_names
                                outs[li].n_names += 1
                                if map_insert(&names, li, <uint32_t>x.word, 0, hit) != 0:
                                    s.oom = 1
                            cols[3][pos] = 0
                            cols[4][pos] = hit
                            cols[5][pos] = c.grid_x[i]
                            cols[6][pos] = x.grid_y
                            cols[7][pos] = x.grid_z
                            cols[8][pos] = x.block_x
                            cols[9][pos] = x.block_y
                            cols[10][pos] = x.block_z
                            cols[11][pos] = -1
                            cols[12][pos] = -1
                            cols[13][pos] = x.launch_id
                        else:
                            cols[3][pos] = 2 if x.type == GPUFLOW_REC_MEMSET else 1
                            for j in range(4, 11):
                                cols[j][pos] = -1
                            cols[11][pos] = <int64_t>x.word if x.word < 0x7FFFFFFFFFFFFFFFULL else 0x7FFFFFFFFFFFFFFFLL
                            cols[12][pos] = x.direction
                            cols[13][pos] = -1
                    else:
                        if d >= <int64_t>W:
                            continue
                        dur = r_dur(c, i, pins[k].n_long)
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
                c = pins[k].c
                c.pins -= 1
                if c.pins == 0 and c.owner == NULL:
                    r_chunk_free(R, c)
            pthread_mutex_unlock(&R.lock)
        free(pins)
        free(counts)
        free(outs)
        free(mode)
        free(names.slots)
