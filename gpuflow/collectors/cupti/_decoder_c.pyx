# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled ring decoder: drains a ring straight from its mapping, with no Python object per record.

Hot path. The drain loop runs without the GIL over the records between ``tail`` and ``head``: each
64-byte record is copied once out of the shared mapping (so a misbehaving producer cannot change a
field between its check and its use), checked, and folded into C tables: per-name kernel
aggregates indexed by name id (a two-level page table), six per-direction transfer totals, and
one lane per (device, context, stream) found through a small open-addressing hash table (kept at
most half full, 16-byte slots; a one-entry last-lane cache in front of it measured ~10 % slower
with interleaved streams, the usual case in CUPTI buffers), each lane holding a circular buffer
of its most recent spans in 48-byte slots (a raw record plus its seq took 72: the smaller slots
halved the cost of span sampling on a 2.1 GHz Xeon host). Python objects are made
only by the accessors, at frame time. With a ``Retention`` (the flight recorder), every timed
execution is written once, in the same pass, into its process's retained rows (``_retain.pxi``),
which window queries read from other threads; the lanes' newest spans are then read back from
those rows at the end of the drain, only the newest ``cap`` of each lane (``lanes_sync``).

Caps (docs/decoder.md, "Caps"): at most ``max_names`` names get a slot (a name beyond is marked in
a bitmap and its kernels count together in ``other``), a name keeps at most ``max_name_bytes``
bytes, at most ``max_lanes`` lanes (and contexts, devices), at most ``max_pending_names`` names are
being reassembled at once (a list, least recently continued first: that one makes room for a new
one; one a ring's worth of records old is dropped too).

Constraints: identical results to ``_decoder_py`` (the tests compare them case by case), including
the table limits, caps, saturation and invalid-record accounting in ``_layout``; every value read from
the ring is bounds-checked before it indexes anything; not thread-safe (one consumer thread; a
call while a drain is running in another thread raises RuntimeError rather than racing).
"""

cimport cython
from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, UINT64_MAX
from libc.stdlib cimport calloc, free, malloc, qsort, realloc
from libc.string cimport memcmp, memcpy, memset

from gpuflow.collectors.cupti._ring cimport *

import operator

from gpuflow.collectors.cupti import _layout as L
from gpuflow.collectors.cupti.errors import RingDetached, RingFormatError

# -- limits and codes (the values mirror _layout; a test checks they match) -------------------
cdef enum:
    PAGE_BITS = 8                       # small pages: max_names ids scattered over the id space
    PAGE_SIZE = 256                     # 1 << PAGE_BITS     cost 1 KiB each, not 16
    NAME_ID_LIMIT = 16777216            # L.NAME_ID_LIMIT
    N_PAGES = 65536                     # NAME_ID_LIMIT >> PAGE_BITS
    MAX_LANES = 65536                   # L.MAX_LANES
    MAX_CONTEXTS = 65536                # L.MAX_CONTEXTS
    MAX_DEVICES = 65536                 # L.MAX_DEVICES
    N_REASONS = 10                      # len(L.INVALID_REASONS), in that order:
    INV_BAD_TYPE = 0
    INV_END_BEFORE_START = 1
    INV_UNDEFINED_NAME = 2
    INV_BAD_NAME_CHUNK = 3
    INV_INCOMPLETE_NAME = 4
    INV_NAME_CONFLICT = 5
    INV_BAD_COPY_KIND = 6
    INV_TABLE_FULL = 7
    INV_UNDEFINED_LAUNCH = 8
    INV_BAD_LAUNCH = 9
    LAUNCH_ID_LIMIT = 65536             # L.LAUNCH_ID_LIMIT
    DIR_D2D = 2                         # L.DIR_D2D
    DIR_P2P = 3                         # L.DIR_P2P
    DIR_MEMSET = 5                      # L.DIR_MEMSET
    FIRST_SPAN_ALLOC = 16
    NAME_KEEP_FLAGS = 0x0006            # NAME_TRUNCATED | NAME_STREAM
    OTHER_NAME_ID = 16777216            # L.OTHER_NAME_ID: the kernels of names beyond max_names

cdef extern from *:
    """
    #include <stddef.h>
    /* gpuflow_copy_kind -> direction index (-1: decide by memory kinds); _layout.COPY_KIND_DIRECTION */
    static const signed char gpuflow_copy_dir[11] = {-1, 0, 1, 0, 1, 2, 2, 2, 2, 4, 3};
    #define gpuflow_off_head offsetof(gpuflow_ring_header, head)
    #define gpuflow_off_tail offsetof(gpuflow_ring_header, tail)
    #define gpuflow_off_dropped_ring offsetof(gpuflow_ring_header, dropped_ring)
    #define gpuflow_off_producer_exited offsetof(gpuflow_ring_header, producer_exited)
    #define gpuflow_off_buffers_completed offsetof(gpuflow_ring_header, buffers_completed)
    #define gpuflow_off_translate_cpu_ns offsetof(gpuflow_ring_header, translate_cpu_ns)
    #define gpuflow_sizeof_record sizeof(gpuflow_record)
    /* ascending uint64_t, for qsort */
    static int gpuflow_cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
    }
    """
    int gpuflow_cmp_u64(const void *a, const void *b) noexcept nogil
    const signed char *gpuflow_copy_dir
    const size_t gpuflow_off_head
    const size_t gpuflow_off_tail
    const size_t gpuflow_off_dropped_ring
    const size_t gpuflow_off_producer_exited
    const size_t gpuflow_off_buffers_completed
    const size_t gpuflow_off_translate_cpu_ns
    const size_t gpuflow_sizeof_record

LIMITS = {"NAME_ID_LIMIT": NAME_ID_LIMIT, "OTHER_NAME_ID": OTHER_NAME_ID, "MAX_LANES": MAX_LANES, "MAX_CONTEXTS": MAX_CONTEXTS,
          "MAX_DEVICES": MAX_DEVICES, "N_REASONS": N_REASONS, "LAUNCH_ID_LIMIT": LAUNCH_ID_LIMIT, "DIR_D2D": DIR_D2D, "DIR_P2P": DIR_P2P, "DIR_MEMSET": DIR_MEMSET,
          "COPY_KIND_DIRECTION": tuple([gpuflow_copy_dir[i] for i in range(11)])}
HEADER_CONSTANTS = {"MAGIC": GPUFLOW_RING_MAGIC, "VERSION": GPUFLOW_RING_VERSION,
                    "HEADER_SIZE": GPUFLOW_HEADER_SIZE, "RECORD_SIZE": gpuflow_sizeof_record,
                    "NAME_CHUNK_TEXT": GPUFLOW_NAME_CHUNK_TEXT, "NAME_MAX": GPUFLOW_NAME_MAX,
                    "MIN_CAPACITY": GPUFLOW_MIN_CAPACITY, "MAX_CAPACITY": GPUFLOW_MAX_CAPACITY,
                    "OFF_HEAD": gpuflow_off_head, "OFF_TAIL": gpuflow_off_tail,
                    "OFF_DROPPED_RING": gpuflow_off_dropped_ring,
                    "OFF_PRODUCER_EXITED": gpuflow_off_producer_exited,
                    "OFF_BUFFERS_COMPLETED": gpuflow_off_buffers_completed,
                    "OFF_TRANSLATE_CPU_NS": gpuflow_off_translate_cpu_ns}

cdef object _DIRECTIONS = L.DIRECTIONS
cdef str _KERNEL = "kernel"
cdef str _MEMCPY = "memcpy"
cdef str _MEMSET = "memset"


cdef struct SpanSlot:           # 48 bytes: only what a span shows (a raw record is 64 + seq)
    uint64_t seq
    uint64_t start
    uint64_t end
    uint64_t word              # kernel: name_id | grid_x << 32; copy/memset: bytes
    uint16_t grid_y
    uint16_t grid_z
    uint16_t block_x
    uint16_t block_y
    uint16_t block_z
    uint8_t type
    int8_t direction

include "_retain_types.pxi"


cdef struct Lane:
    uint32_t device
    uint32_t context
    uint32_t stream
    uint32_t name_id        # NVTX stream name, 0 if none
    uint64_t executions
    SpanSlot *spans         # circular once count == cap
    uint32_t alloc
    uint32_t count
    uint32_t next           # when full: the oldest slot, overwritten next
    uint32_t pending        # with retention: its rows in the chunk being written not yet among its spans

cdef struct KStat:
    uint64_t count
    uint64_t timed
    uint64_t total
    uint64_t min
    uint64_t max
    uint32_t launch_id      # of its latest kernel that had one (0: none yet)
    uint16_t registers      # of that kernel

cdef struct Launch:         # a LAUNCH record's configuration, indexed by launch id
    uint32_t static_shared
    uint32_t dynamic_shared
    uint32_t executed_shared
    uint32_t cluster_x
    uint32_t cluster_y
    uint32_t cluster_z
    uint8_t defined
    uint8_t carveout_set    # FLAG_CARVEOUT: a carve-out was requested
    uint8_t shared_config
    uint8_t shmem_limit_config
    uint8_t carveout
    uint8_t cache_config

cdef struct Name:
    uint32_t id
    uint8_t defined
    uint8_t pending
    uint16_t flags
    uint32_t len
    char *text
    char *pbuf              # text being reassembled from chunks, grown as they arrive
    uint32_t palloc         # bytes allocated at pbuf (never more than min(ptotal, max_name_bytes) + 1)
    uint32_t ptotal
    uint32_t pgot           # bytes received (those beyond max_name_bytes are not kept)
    int32_t pprev           # while pending: its neighbours in State's pending list (-1: none)
    int32_t pnext
    uint64_t pseq           # while pending: the ring position of its first chunk

cdef struct MapSlot:
    uint32_t a
    uint32_t b
    uint32_t c
    int32_t idx             # -1: empty

cdef struct Map:            # open addressing, linear probing, power-of-two size, load <= 1/2
    MapSlot *slots
    uint32_t size
    uint32_t used

cdef struct Ctx:
    uint32_t null_stream

cdef struct Dev:
    uint32_t name_id
    uint8_t uuid[16]        # the DEVICE record's facts (_activity_layout.device_facts reads them)
    uint32_t sm_count
    uint16_t cc_major
    uint16_t cc_minor

include "_activity_types.pxi"

cdef struct State:
    # names and kernel aggregates
    int32_t **pages         # name id >> PAGE_BITS -> page of entries: dense index when defined,
                            # -2 - index while the name is still being reassembled, -1: unknown
    Name *names
    KStat *kstats
    uint32_t n_names        # slots, id 0's included
    uint32_t names_alloc
    KStat other             # the kernels of names beyond max_names
    uint8_t *folded         # bit per name id: beyond max_names (allocated at the first)
    int32_t phead           # the names being reassembled, least recently continued first (-1: none)
    int32_t ptail
    # caps
    uint32_t max_names
    uint32_t max_name_bytes
    uint32_t max_lanes
    uint32_t max_pending
    uint64_t names_folded
    uint64_t names_cut
    uint64_t names_unfinished
    # transfers: count, timed, bytes, total per direction
    uint64_t dir_count[6]
    uint64_t dir_timed[6]
    uint64_t dir_bytes[6]
    uint64_t dir_total[6]
    # lanes
    Lane *lanes
    uint32_t n_lanes
    uint32_t lanes_alloc
    Map lane_map
    uint32_t cap
    uint32_t *dirty         # with retention: the lanes with pending rows (lanes_sync)
    uint32_t n_dirty
    uint32_t dirty_alloc
    uint32_t *take          # lanes_sync's, by lane: how many of its rows it still reads, newest first
    uint32_t take_alloc
    # contexts and devices
    Ctx *ctxs
    uint32_t n_ctxs
    uint32_t ctxs_alloc
    Map ctx_map
    Dev *devs
    uint32_t n_devs
    uint32_t devs_alloc
    Map dev_map
    # launch configurations (LAUNCH records), by id
    Launch *launches
    uint32_t launches_alloc
    # clock
    int have_sync
    uint64_t sync_cupti
    uint64_t sync_wall
    # counters
    uint64_t invalid[N_REASONS]
    int have_first_invalid
    uint64_t first_invalid_seq
    uint64_t lane_overflow
    int saturated
    uint32_t n_pending
    int oom
    # the flight recorder's columns of this process (_retain.pxi)
    Store store
    # per device and per launch configuration (_activity.pxi)
    Act act


# -- small helpers ---------------------------------------------------------------------------
cdef inline uint64_t sat_add(State *s, uint64_t a, uint64_t b) noexcept nogil:
    cdef uint64_t t = a + b
    if t < a:
        s.saturated = 1
        return UINT64_MAX
    return t


cdef inline void bad(State *s, int reason, uint64_t seq) noexcept nogil:
    s.invalid[reason] += 1
    if not s.have_first_invalid:
        s.have_first_invalid = 1
        s.first_invalid_seq = seq


cdef inline uint32_t mix3(uint32_t a, uint32_t b, uint32_t c) noexcept nogil:
    cdef uint64_t h = (<uint64_t>a * 0x9E3779B97F4A7C15ULL) ^ (<uint64_t>b * 0xC2B2AE3D27D4EB4FULL) \
        ^ (<uint64_t>c * 0x165667B19E3779F9ULL)
    h ^= h >> 31
    h *= 0xD6E8FEB86659FD93ULL
    h ^= h >> 32
    return <uint32_t>h


cdef int map_init(Map *m) noexcept nogil:
    cdef uint32_t i
    m.size = 64
    m.used = 0
    m.slots = <MapSlot *>malloc(m.size * sizeof(MapSlot))
    if m.slots == NULL:
        return -1
    for i in range(m.size):
        m.slots[i].idx = -1
    return 0


cdef inline int32_t map_find(const Map *m, uint32_t a, uint32_t b, uint32_t c) noexcept nogil:
    cdef uint32_t mask = m.size - 1
    cdef uint32_t i = mix3(a, b, c) & mask
    cdef const MapSlot *e
    while True:
        e = &m.slots[i]
        if e.idx < 0:
            return -1
        if e.a == a and e.b == b and e.c == c:
            return e.idx
        i = (i + 1) & mask


cdef int map_insert(Map *m, uint32_t a, uint32_t b, uint32_t c, int32_t idx) noexcept nogil:
    """Insert a key known to be absent; grows the table first when it would pass half full."""
    cdef uint32_t i, j, mask, new_size
    cdef MapSlot *old
    cdef MapSlot *fresh
    if (m.used + 1) * 2 > m.size:
        new_size = m.size * 2
        fresh = <MapSlot *>malloc(new_size * sizeof(MapSlot))
        if fresh == NULL:
            return -1
        for i in range(new_size):
            fresh[i].idx = -1
        mask = new_size - 1
        old = m.slots
        for i in range(m.size):
            if old[i].idx >= 0:
                j = mix3(old[i].a, old[i].b, old[i].c) & mask
                while fresh[j].idx >= 0:
                    j = (j + 1) & mask
                fresh[j] = old[i]
        free(old)
        m.slots = fresh
        m.size = new_size
    mask = m.size - 1
    i = mix3(a, b, c) & mask
    while m.slots[i].idx >= 0:
        i = (i + 1) & mask
    m.slots[i].a = a
    m.slots[i].b = b
    m.slots[i].c = c
    m.slots[i].idx = idx
    m.used += 1
    return 0


cdef void* grow(void *ptr, uint32_t *alloc, uint32_t need, size_t item) noexcept nogil:
    """Make room for ``need`` items (doubling); NULL on failure, the old block left intact."""
    cdef uint32_t n = alloc[0]
    cdef void *p
    if need <= n:
        return ptr
    if n == 0:
        n = 16
    while n < need:
        n *= 2
    p = realloc(ptr, n * item)
    if p != NULL:
        alloc[0] = n
    return p


# -- names ---------------------------------------------------------------------------------
cdef inline int32_t page_entry(const State *s, uint32_t nid) noexcept nogil:
    cdef int32_t *page
    if nid >= NAME_ID_LIMIT:
        return -1
    page = s.pages[nid >> PAGE_BITS]
    if page == NULL:
        return -1
    return page[nid & (PAGE_SIZE - 1)]


cdef inline int32_t defined_name(const State *s, uint32_t nid) noexcept nogil:
    """Dense index of a completely defined name, or -1 (one load less than asking the Name)."""
    cdef int32_t e = page_entry(s, nid)
    return e if e >= 0 else -1


cdef inline int32_t name_index(const State *s, uint32_t nid) noexcept nogil:
    """Dense index of a name defined or being reassembled, or -1."""
    cdef int32_t e = page_entry(s, nid)
    if e >= 0:
        return e
    if e == -1:
        return -1
    return -2 - e


cdef int32_t name_create(State *s, uint32_t nid) noexcept nogil:
    """Dense entry for a (valid, < NAME_ID_LIMIT) id; -1 when out of memory."""
    cdef int32_t *page = s.pages[nid >> PAGE_BITS]
    cdef uint32_t i
    cdef int32_t idx
    cdef void *p
    if page == NULL:
        page = <int32_t *>malloc(PAGE_SIZE * sizeof(int32_t))
        if page == NULL:
            return -1
        for i in range(<uint32_t>PAGE_SIZE):
            page[i] = -1
        s.pages[nid >> PAGE_BITS] = page
    idx = page[nid & (PAGE_SIZE - 1)]
    if idx != -1:
        return idx if idx >= 0 else -2 - idx
    if s.n_names == s.names_alloc:
        i = s.names_alloc
        p = grow(s.names, &i, s.n_names + 1, sizeof(Name))
        if p == NULL:
            return -1
        s.names = <Name *>p
        p = realloc(s.kstats, i * sizeof(KStat))
        if p == NULL:
            return -1
        s.kstats = <KStat *>p
        s.names_alloc = i
    idx = <int32_t>s.n_names
    s.n_names += 1
    memset(&s.names[idx], 0, sizeof(Name))
    memset(&s.kstats[idx], 0, sizeof(KStat))
    s.names[idx].id = nid
    page[nid & (PAGE_SIZE - 1)] = -2 - idx    # not defined yet
    return idx


cdef inline int is_folded(const State *s, uint32_t nid) noexcept nogil:
    """Whether an id (any value read from the ring) is a name beyond max_names."""
    return s.folded != NULL and nid < NAME_ID_LIMIT and (s.folded[nid >> 3] >> (nid & 7)) & 1


cdef void fold_name(State *s, uint32_t nid) noexcept nogil:
    """Mark a (valid) id as a name beyond max_names: its chunks are consumed, its kernels are other."""
    if s.folded == NULL:
        s.folded = <uint8_t *>calloc(NAME_ID_LIMIT >> 3, 1)
        if s.folded == NULL:
            s.oom = 1
            return
    if not is_folded(s, nid):
        s.folded[nid >> 3] |= <uint8_t>(1 << (nid & 7))
        s.names_folded += 1


cdef inline void pending_add(State *s, int32_t idx) noexcept nogil:
    """Append a name to the pending list (it was continued last)."""
    cdef Name *nm = &s.names[idx]
    nm.pending = 1
    nm.pprev = s.ptail
    nm.pnext = -1
    if s.ptail >= 0:
        s.names[s.ptail].pnext = idx
    else:
        s.phead = idx
    s.ptail = idx
    s.n_pending += 1


cdef inline void pending_remove(State *s, int32_t idx) noexcept nogil:
    cdef Name *nm = &s.names[idx]
    nm.pending = 0
    if nm.pprev >= 0:
        s.names[nm.pprev].pnext = nm.pnext
    else:
        s.phead = nm.pnext
    if nm.pnext >= 0:
        s.names[nm.pnext].pprev = nm.pprev
    else:
        s.ptail = nm.pprev
    s.n_pending -= 1


cdef inline void pending_drop(State *s, int32_t idx) noexcept nogil:
    """A name announced and never finished: forgotten, its text freed, counted."""
    cdef Name *nm = &s.names[idx]
    pending_remove(s, idx)
    free(nm.pbuf)
    nm.pbuf = NULL
    nm.palloc = 0
    s.names_unfinished += 1


cdef void expire_pending(State *s, uint64_t tail, uint64_t capacity) noexcept nogil:
    """Drop the names announced more than a ring's worth of records ago and never finished (a
    producer publishes a name's chunks together)."""
    cdef int32_t idx = s.phead, following
    while idx >= 0:
        following = s.names[idx].pnext
        if tail - s.names[idx].pseq > capacity:
            pending_drop(s, idx)
        idx = following


cdef void name_chunk(State *s, const gpuflow_record *r, uint64_t seq) noexcept nogil:
    cdef uint32_t nid = r.device
    cdef uint32_t off = r.body.name.offset
    cdef uint32_t total = r.body.name.total_len
    cdef uint32_t n, kept, keep, limit
    cdef int32_t idx
    cdef Name *nm = NULL
    cdef int had_pending = 0
    cdef int last = (r.flags & GPUFLOW_FLAG_NAME_LAST) != 0
    cdef uint16_t keep_flags
    cdef uint32_t grown
    cdef void *p
    if nid == 0 or nid >= NAME_ID_LIMIT:
        bad(s, INV_BAD_NAME_CHUNK, seq)
        return
    idx = name_index(s, nid)
    if idx >= 0:
        nm = &s.names[idx]
        if nm.pending:          # take the pending text; it is put back only if this chunk fits
            had_pending = 1
            pending_remove(s, idx)
    if total > GPUFLOW_NAME_MAX or (off >= total and not (off == 0 and total == 0)):
        bad(s, INV_BAD_NAME_CHUNK, seq)
        return
    limit = total if total < s.max_name_bytes else s.max_name_bytes
    if not had_pending:
        if is_folded(s, nid):   # a name beyond max_names: its chunks are consumed, not kept
            return
        if off != 0:
            bad(s, INV_BAD_NAME_CHUNK, seq)
            return
        if nm == NULL and s.n_names - 1 >= s.max_names:
            fold_name(s, nid)
            return
        if nm == NULL:
            idx = name_create(s, nid)
            if idx < 0:
                s.oom = 1
                return
        if not last and s.n_pending >= s.max_pending:
            pending_drop(s, s.phead)    # the one continued least recently makes room
        nm = &s.names[idx]
        # Room for what has arrived, not for what total_len claims: a first chunk saying 4096
        # must not cost 4 KiB (a ring of such chunks would make the agent allocate 64x its size).
        free(nm.pbuf)
        nm.palloc = (limit if limit < 2 * GPUFLOW_NAME_CHUNK_TEXT else 2 * GPUFLOW_NAME_CHUNK_TEXT) + 1
        nm.pbuf = <char *>malloc(nm.palloc)
        if nm.pbuf == NULL:
            nm.palloc = 0
            s.oom = 1
            return
        nm.ptotal = total
        nm.pgot = 0
        nm.pseq = seq
    elif nm.ptotal != total or off != nm.pgot:
        bad(s, INV_BAD_NAME_CHUNK, seq)
        return
    n = total - off
    if n > GPUFLOW_NAME_CHUNK_TEXT:
        n = GPUFLOW_NAME_CHUNK_TEXT
    kept = off if off < limit else limit        # bytes kept so far
    keep = limit - kept
    if keep > n:
        keep = n
    if kept + keep + 1 > nm.palloc:   # doubling, capped at the kept name: O(1) amortised per chunk
        grown = nm.palloc * 2
        if grown > limit + 1:
            grown = limit + 1
        p = realloc(nm.pbuf, grown)
        if p == NULL:               # the chunk is consumed and the partial name discarded
            s.oom = 1
            return
        nm.pbuf = <char *>p
        nm.palloc = grown
    memcpy(nm.pbuf + kept, r.body.name.text, keep)
    nm.pgot += n
    if not last:
        pending_add(s, idx)
        return
    if nm.pgot != total:
        bad(s, INV_INCOMPLETE_NAME, seq)
        return
    keep_flags = r.flags & NAME_KEEP_FLAGS
    if total > s.max_name_bytes:
        keep_flags |= GPUFLOW_FLAG_NAME_TRUNCATED
    if not nm.defined:
        nm.text = nm.pbuf
        nm.pbuf = NULL
        nm.palloc = 0
        nm.len = limit
        nm.flags = keep_flags
        nm.defined = 1
        s.pages[nid >> PAGE_BITS][nid & (PAGE_SIZE - 1)] = idx
        if total > s.max_name_bytes:
            s.names_cut += 1
    elif nm.len != limit or nm.flags != keep_flags or memcmp(nm.text, nm.pbuf, limit) != 0:
        bad(s, INV_NAME_CONFLICT, seq)


# -- lanes, contexts, devices ---------------------------------------------------------------
cdef inline int32_t lane_get(State *s, uint32_t dev, uint32_t ctx, uint32_t stream) noexcept nogil:
    """The lane of a key, created if needed; -1 when the table is full (or out of memory)."""
    cdef int32_t li
    cdef Lane *lane
    cdef void *p
    li = map_find(&s.lane_map, dev, ctx, stream)
    if li < 0:
        if s.n_lanes >= s.max_lanes:
            return -1
        if s.store.ret != NULL:     # a window query reads the lanes' keys under this lock
            pthread_mutex_lock(&s.store.ret.lock)
        p = grow(s.lanes, &s.lanes_alloc, s.n_lanes + 1, sizeof(Lane))
        if p != NULL:
            s.lanes = <Lane *>p
        if s.store.ret != NULL:
            pthread_mutex_unlock(&s.store.ret.lock)
        if p == NULL:
            s.oom = 1
            return -1
        p = grow(s.dirty, &s.dirty_alloc, s.n_lanes + 1, sizeof(uint32_t))
        if p != NULL:
            s.dirty = <uint32_t *>p
            p = grow(s.take, &s.take_alloc, s.n_lanes + 1, sizeof(uint32_t))
        if p == NULL:
            s.oom = 1
            return -1
        s.take = <uint32_t *>p
        li = <int32_t>s.n_lanes
        if map_insert(&s.lane_map, dev, ctx, stream, li) != 0:
            s.oom = 1
            return -1
        s.n_lanes += 1
        lane = &s.lanes[li]
        memset(lane, 0, sizeof(Lane))
        lane.device = dev
        lane.context = ctx
        lane.stream = stream
    return li


cdef inline int32_t execution(State *s, const gpuflow_record *r, uint64_t seq, int timed,
                              int direction, const int retain) noexcept nogil:
    """Count an execution on its lane and, without retention, keep its span among the lane's
    newest; its lane (-1: none). With retention the loop copies it into the flight recorder, and
    the lane takes its newest spans from those rows at the end of the drain (lanes_sync)."""
    cdef int32_t li = lane_get(s, r.device, r.body.act.context, r.body.act.stream)
    cdef Lane *lane
    if li < 0:                      # table full (or out of memory): counted, on no lane
        s.lane_overflow += 1
        return -1
    lane = &s.lanes[li]
    lane.executions += 1
    if timed and s.cap != 0 and not retain:
        span_keep(s, lane, r, seq, direction)
    return li


cdef inline void span_keep(State *s, Lane *lane, const gpuflow_record *r, uint64_t seq,
                           int direction) noexcept nogil:
    """Keep a timed execution's span among its lane's newest ``cap``."""
    cdef SpanSlot *slot
    if lane.count < s.cap:
        if lane.count == lane.alloc and lane_room(s, lane, 1) != 0:
            s.oom = 1               # the execution stays counted; its span is elided
            return
        slot = &lane.spans[lane.count]
        lane.count += 1
    else:
        slot = &lane.spans[lane.next]
        lane.next += 1
        if lane.next == s.cap:
            lane.next = 0
    slot.seq = seq
    slot.start = r.body.act.start
    slot.end = r.body.act.end
    slot.type = <uint8_t>r.type
    slot.direction = <int8_t>direction
    if r.type == GPUFLOW_REC_KERNEL:
        slot.word = r.body.act.u.kernel.name_id | (<uint64_t>r.body.act.u.kernel.grid_x << 32)
        slot.grid_y = r.body.act.u.kernel.grid_y
        slot.grid_z = r.body.act.u.kernel.grid_z
        slot.block_x = r.body.act.u.kernel.block_x
        slot.block_y = r.body.act.u.kernel.block_y
        slot.block_z = r.body.act.u.kernel.block_z
    else:
        slot.word = r.body.act.u.copy.bytes


cdef int lane_room(State *s, Lane *lane, uint32_t more) noexcept nogil:
    """Room in a lane's ring for ``more`` spans beyond those it holds (at most ``cap`` in all);
    -1 when out of memory."""
    cdef uint64_t need = <uint64_t>lane.count + more
    cdef uint32_t alloc
    cdef void *p
    if need > s.cap:
        need = s.cap
    if need <= lane.alloc:
        return 0
    alloc = lane.alloc * 2 if lane.alloc else FIRST_SPAN_ALLOC
    while alloc < need:
        alloc *= 2
    if alloc > s.cap:
        alloc = s.cap
    p = realloc(lane.spans, alloc * sizeof(SpanSlot))
    if p == NULL:
        return -1
    lane.spans = <SpanSlot *>p
    lane.alloc = alloc
    return 0


cdef void lanes_sync(State *s, Chunk *c) noexcept nogil:
    """With retention: the rows ``[c.synced, c.count)`` of the chunk being written join their lanes'
    spans, as if each had been kept when drained (span_keep), but only the newest ``cap`` of each
    lane are read, newest first, and nothing is written for the rest: the drain writes each
    execution once, into its row, and a lane's ring holds the same spans in the same order. Called
    before the chunk is sealed and at the end of every drain, so each row joins before its chunk
    can be evicted or compacted."""
    cdef uint32_t k, i, left = 0, j, pos, base, li
    cdef uint64_t total
    cdef Lane *lane
    cdef const RawRow *row
    cdef SpanSlot *slot
    cdef uint64_t meta, p0, p1
    cdef uint16_t block_z
    for k in range(s.n_dirty):
        lane = &s.lanes[s.dirty[k]]
        if lane.pending > s.cap:
            lane.pending = s.cap        # the older ones would be overwritten by the newer
        if lane.pending and lane_room(s, lane, lane.pending) != 0:
            s.oom = 1                   # its executions stay counted; these spans are elided
            lane.pending = 0
        s.take[s.dirty[k]] = lane.pending
        left += lane.pending != 0
    i = c.count
    while left and i > c.synced:
        i -= 1
        row = &c.rows[i]
        meta = row.meta
        li = (meta >> 32) & 0xFFFF
        if s.take[li] == 0:
            continue
        s.take[li] -= 1
        j = s.take[li]                  # its place among the spans joining, oldest first
        left -= j == 0
        lane = &s.lanes[li]
        pos = lane.count + j
        if pos >= s.cap:                # past a full ring's end: from its oldest slot on
            base = lane.next if lane.count == s.cap else 0
            pos = base + pos - s.cap
            if pos >= s.cap:
                pos -= s.cap
        slot = &lane.spans[pos]
        slot.seq = r_raw_seq(c, row)
        slot.start = row.start
        slot.end = row.end
        slot.type = <uint8_t>(meta >> 48)
        memcpy(&p0, &row.payload[0], 8)
        if slot.type == GPUFLOW_REC_KERNEL:   # name id, grid x | grid y, z, block x, y | block z
            memcpy(&p1, &row.payload[8], 8)
            memcpy(&block_z, &row.payload[16], 2)
            slot.word = p0
            slot.grid_y = <uint16_t>p1
            slot.grid_z = <uint16_t>(p1 >> 16)
            slot.block_x = <uint16_t>(p1 >> 32)
            slot.block_y = <uint16_t>(p1 >> 48)
            slot.block_z = block_z
            slot.direction = -1
        else:
            slot.direction = <int8_t>r_raw_direction(row, slot.type)
            memcpy(&slot.word, &row.payload[4], 8)  # a copy's bytes (its kinds before them)
    for k in range(s.n_dirty):
        lane = &s.lanes[s.dirty[k]]
        total = <uint64_t>lane.count + lane.pending
        if total <= s.cap:
            lane.count = <uint32_t>total
        else:
            base = lane.next if lane.count == s.cap else 0
            lane.next = <uint32_t>((base + total - s.cap) % s.cap)
            lane.count = s.cap
        lane.pending = 0
        s.take[s.dirty[k]] = 0
    s.n_dirty = 0
    c.synced = c.count


cdef void set_context(State *s, const gpuflow_record *r, uint64_t seq) noexcept nogil:
    cdef int32_t ci = map_find(&s.ctx_map, r.device, r.body.act.context, 0)
    cdef void *p
    if ci < 0:
        if s.n_ctxs >= s.max_lanes:
            bad(s, INV_TABLE_FULL, seq)
            return
        p = grow(s.ctxs, &s.ctxs_alloc, s.n_ctxs + 1, sizeof(Ctx))
        if p == NULL or map_insert(&s.ctx_map, r.device, r.body.act.context, 0, <int32_t>s.n_ctxs) != 0:
            if p != NULL:
                s.ctxs = <Ctx *>p
            s.oom = 1
            return
        s.ctxs = <Ctx *>p
        ci = <int32_t>s.n_ctxs
        s.n_ctxs += 1
    s.ctxs[ci].null_stream = r.body.act.stream


cdef void set_launch(State *s, const gpuflow_record *r, uint64_t seq) noexcept nogil:
    """A LAUNCH record: defines its id once; a different second definition is invalid (the first
    stays), like a name's."""
    cdef uint32_t lid = r.device, old = s.launches_alloc
    cdef const gpuflow_launch_payload *x = &r.body.launch
    cdef Launch l
    cdef void *p
    if lid == 0 or lid > LAUNCH_ID_LIMIT:
        bad(s, INV_BAD_LAUNCH, seq)
        return
    memset(&l, 0, sizeof(Launch))
    l.static_shared = x.static_shared_bytes
    l.dynamic_shared = x.dynamic_shared_bytes
    l.executed_shared = x.shared_executed_bytes
    l.cluster_x = x.cluster_x
    l.cluster_y = x.cluster_y
    l.cluster_z = x.cluster_z
    l.defined = 1
    l.carveout_set = 1 if r.flags & GPUFLOW_FLAG_CARVEOUT else 0
    l.shared_config = x.shared_config
    l.shmem_limit_config = x.shmem_limit_config
    l.carveout = x.carveout_requested if l.carveout_set else 0
    l.cache_config = x.cache_config
    if lid >= old:
        p = grow(s.launches, &s.launches_alloc, lid + 1, sizeof(Launch))
        if p == NULL:
            s.oom = 1
            return
        s.launches = <Launch *>p
        memset(&s.launches[old], 0, (s.launches_alloc - old) * sizeof(Launch))
    if not s.launches[lid].defined:
        s.launches[lid] = l
    elif memcmp(&s.launches[lid], &l, sizeof(Launch)) != 0:
        bad(s, INV_BAD_LAUNCH, seq)


cdef void set_device(State *s, const gpuflow_record *r, uint64_t seq) noexcept nogil:
    cdef uint32_t nid = r.body.act.u.kernel.name_id
    cdef int32_t di
    cdef void *p
    if defined_name(s, nid) < 0:
        if not is_folded(s, nid):
            bad(s, INV_UNDEFINED_NAME, seq)
            return
        nid = 0                 # a name beyond max_names reads as no name
    di = map_find(&s.dev_map, r.device, 0, 0)
    if di < 0:
        if s.n_devs >= s.max_lanes:
            bad(s, INV_TABLE_FULL, seq)
            return
        p = grow(s.devs, &s.devs_alloc, s.n_devs + 1, sizeof(Dev))
        if p == NULL or map_insert(&s.dev_map, r.device, 0, 0, <int32_t>s.n_devs) != 0:
            if p != NULL:
                s.devs = <Dev *>p
            s.oom = 1
            return
        s.devs = <Dev *>p
        di = <int32_t>s.n_devs
        s.n_devs += 1
    s.devs[di].name_id = nid
    memcpy(s.devs[di].uuid, r.body.dev.uuid, 16)
    s.devs[di].sm_count = r.body.dev.sm_count
    s.devs[di].cc_major = r.body.dev.cc_major
    s.devs[di].cc_minor = r.body.dev.cc_minor


include "_activity.pxi"


cdef inline int copy_direction(const gpuflow_copy_payload *c) noexcept nogil:
    """Direction index of a MEMCPY payload, -1 if unclassifiable: see _layout.copy_direction."""
    cdef int d
    if c.copy_kind > 10:
        return -1
    d = gpuflow_copy_dir[c.copy_kind]
    if d < 0:
        d = by_memory_kinds(c.src_kind, c.dst_kind)
    if d == DIR_D2D and c.src_device != c.dst_device:
        return DIR_P2P
    return d


cdef inline int by_memory_kinds(uint8_t src, uint8_t dst) noexcept nogil:
    cdef int src_host, dst_host, src_dev, dst_dev
    src_host = src == 1 or src == 2
    dst_host = dst == 1 or dst == 2
    src_dev = src == 3 or src == 4 or src == 6
    dst_dev = dst == 3 or dst == 4 or dst == 6
    if src_host and dst_dev:
        return 0
    if src_dev and dst_host:
        return 1
    if src_dev and dst_dev:
        return 2
    if src_host and dst_host:
        return 4
    return -1


# -- the drain loop ------------------------------------------------------------------------
cdef inline uint64_t drain_range(State *s, const gpuflow_record *recs, uint64_t mask,
                                 uint64_t tail, uint64_t n, const int retain) noexcept nogil:
    """Decode records [tail, tail + n); return how many were consumed (fewer only on OOM).
    ``retain``: the flight recorder copies each timed execution, and its lane takes the span from
    that row later (lanes_sync) rather than a copy of its own now. One loop serves both callers
    (drain_plain, drain_retaining): it is too large for the compiler to inline or clone, so
    ``retain`` is tested at each timed execution, a branch that never changes within a drain. Two
    loops compiled apart (a fused type) measured no faster with retention and ~3 % slower without
    it (docs/recorder.md, "What the copy costs in the pass")."""
    cdef gpuflow_record r
    cdef uint64_t seq, dur, end = tail + n
    cdef uint32_t lid
    cdef int32_t idx, li
    cdef int timed, d
    cdef KStat *k
    for seq in range(tail, end):
        r = recs[seq & mask]        # one copy out of the shared mapping; every check uses it
        if r.type == GPUFLOW_REC_KERNEL:
            idx = defined_name(s, r.body.act.u.kernel.name_id)
            if idx < 0 and not is_folded(s, r.body.act.u.kernel.name_id):
                bad(s, INV_UNDEFINED_NAME, seq)
                continue
            lid = r.body.act.u.kernel.launch_id
            if lid != 0 and (lid >= s.launches_alloc or not s.launches[lid].defined):
                bad(s, INV_UNDEFINED_LAUNCH, seq)
                continue
            timed = not (r.flags & GPUFLOW_FLAG_NO_TIMING)
            if timed and r.body.act.end < r.body.act.start:
                bad(s, INV_END_BEFORE_START, seq)
                continue
            if idx >= 0:
                k = &s.kstats[idx]
            else:                   # a name beyond max_names: the other kernels
                k = &s.other
                r.body.act.u.kernel.name_id = OTHER_NAME_ID
            dur = r.body.act.end - r.body.act.start if timed else 0
            act_kernel(s, idx, &r, timed, dur)
            k.count += 1
            if lid != 0:
                k.launch_id = lid
                k.registers = r.body.act.u.kernel.registers
            if timed:
                if k.timed == 0:
                    k.min = dur
                    k.max = dur
                else:
                    if dur < k.min:
                        k.min = dur
                    if dur > k.max:
                        k.max = dur
                k.timed += 1
                k.total = sat_add(s, k.total, dur)
            li = execution(s, &r, seq, timed, -1, retain)
            if retain and timed and li >= 0:    # the flight recorder's copy
                r_retain(s, &r, seq, <uint32_t>li, -1)
        elif r.type == GPUFLOW_REC_MEMCPY or r.type == GPUFLOW_REC_MEMSET:
            if r.type == GPUFLOW_REC_MEMSET:
                d = DIR_MEMSET
            else:
                d = copy_direction(&r.body.act.u.copy)
                if d < 0:
                    bad(s, INV_BAD_COPY_KIND, seq)
                    continue
            timed = not (r.flags & GPUFLOW_FLAG_NO_TIMING)
            if timed and r.body.act.end < r.body.act.start:
                bad(s, INV_END_BEFORE_START, seq)
                continue
            s.dir_count[d] += 1
            s.dir_bytes[d] = sat_add(s, s.dir_bytes[d], r.body.act.u.copy.bytes)
            if timed:
                s.dir_timed[d] += 1
                s.dir_total[d] = sat_add(s, s.dir_total[d], r.body.act.end - r.body.act.start)
            act_copy(s, &r, d, timed)
            li = execution(s, &r, seq, timed, d, retain)
            if retain and timed and li >= 0:
                r_retain(s, &r, seq, <uint32_t>li, d)
        elif r.type == GPUFLOW_REC_NAME_CHUNK:
            name_chunk(s, &r, seq)
        elif r.type == GPUFLOW_REC_STREAM_NAME:
            if defined_name(s, r.body.act.u.kernel.name_id) < 0:
                if not is_folded(s, r.body.act.u.kernel.name_id):
                    bad(s, INV_UNDEFINED_NAME, seq)
                    continue
                r.body.act.u.kernel.name_id = 0     # a name beyond max_names reads as no name
            li = lane_get(s, r.device, r.body.act.context, r.body.act.stream)
            if li < 0:
                if not s.oom:
                    bad(s, INV_TABLE_FULL, seq)
            else:
                s.lanes[li].name_id = r.body.act.u.kernel.name_id
        elif r.type == GPUFLOW_REC_CONTEXT:
            set_context(s, &r, seq)
        elif r.type == GPUFLOW_REC_CLOCK_SYNC:
            s.have_sync = 1
            s.sync_cupti = r.body.act.start
            s.sync_wall = r.body.act.end
            r_set_offset(&s.store, r.body.act.start, r.body.act.end)
        elif r.type == GPUFLOW_REC_DEVICE:
            set_device(s, &r, seq)
        elif r.type == GPUFLOW_REC_LAUNCH:
            set_launch(s, &r, seq)
        else:
            bad(s, INV_BAD_TYPE, seq)
        if s.oom:                   # this record is consumed; MemoryError follows the batch
            return seq - tail + 1
    return n


include "_retain.pxi"


cdef uint64_t drain_plain(State *s, const gpuflow_record *recs, uint64_t mask, uint64_t tail,
                          uint64_t n) noexcept nogil:
    return drain_range(s, recs, mask, tail, n, 0)


cdef uint64_t drain_retaining(State *s, const gpuflow_record *recs, uint64_t mask, uint64_t tail,
                              uint64_t n) noexcept nogil:
    return drain_range(s, recs, mask, tail, n, 1)


cdef void state_free(State *s) noexcept nogil:
    cdef uint32_t i
    r_store_free(&s.store)
    act_free(&s.act)
    if s.pages != NULL:
        for i in range(<uint32_t>N_PAGES):
            free(s.pages[i])
        free(s.pages)
    for i in range(s.n_names):
        free(s.names[i].text)
        free(s.names[i].pbuf)
    free(s.names)
    free(s.kstats)
    for i in range(s.n_lanes):
        free(s.lanes[i].spans)
    free(s.lanes)
    free(s.dirty)
    free(s.take)
    free(s.lane_map.slots)
    free(s.ctxs)
    free(s.ctx_map.slots)
    free(s.devs)
    free(s.dev_map.slots)
    free(s.folded)
    free(s.launches)
    memset(s, 0, sizeof(State))


cdef carray.array _UINT64 = pyarray.array("Q")


cdef inline void kstat_row(const KStat *k, uint64_t *row) noexcept:
    """A kernel_rows row's figures (row[0], the name id, is the caller's)."""
    row[1] = k.count
    row[2] = k.timed
    row[3] = k.total
    row[4] = k.min if k.timed else 0
    row[5] = k.max if k.timed else 0


cdef tuple launch_tuple(const State *s, const KStat *k):
    cdef const Launch *l = &s.launches[k.launch_id]
    return (k.registers, l.static_shared, l.dynamic_shared, l.executed_shared, l.shared_config,
            l.shmem_limit_config, l.carveout if l.carveout_set else None, l.cache_config,
            (l.cluster_x, l.cluster_y, l.cluster_z))


cdef tuple span_tuple(const SpanSlot *slot):
    if slot.type == GPUFLOW_REC_KERNEL:
        return (slot.seq, _KERNEL, slot.start, slot.end, <uint32_t>slot.word,
                (<uint32_t>(slot.word >> 32), slot.grid_y, slot.grid_z),
                (slot.block_x, slot.block_y, slot.block_z), None, None)
    return (slot.seq, _MEMSET if slot.type == GPUFLOW_REC_MEMSET else _MEMCPY, slot.start, slot.end, 0,
            None, None, slot.word, _DIRECTIONS[slot.direction])


@cython.no_gc_clear     # __dealloc__ hands its chunks back to the Retention it still holds
cdef class RingDecoder:
    """Drains one ring and keeps its complete aggregates and per-lane span samples.

    Same API and results as ``_decoder_py.RingDecoder``; see its docstrings and docs/decoder.md.
    """

    cdef Py_buffer view
    cdef int has_view
    cdef gpuflow_ring_header *hdr
    cdef const gpuflow_record *recs
    cdef uint64_t _tail
    cdef uint64_t _records
    cdef uint32_t _capacity
    cdef int busy
    cdef State st
    cdef readonly int producer_pid
    cdef readonly str session
    cdef object _final_header
    cdef object _caps
    cdef Retention _retention
    cdef uint64_t *_by_id       # kernel_rows' order: (name id << 32 | dense index) of each name, ascending
    cdef uint32_t _by_id_n      # names it covers (names only grow: rebuilt when a name was added)

    is_compiled = True

    def __cinit__(self):
        memset(&self.st, 0, sizeof(State))
        self.has_view = 0
        self.hdr = NULL
        self.busy = 0

    def __init__(self, buffer, *, lane_span_cap=L.DEFAULT_LANE_SPAN_CAP, max_names=L.DEFAULT_MAX_NAMES,
                 max_name_bytes=L.DEFAULT_MAX_NAME_BYTES, max_lanes=L.DEFAULT_MAX_LANES,
                 max_pending_names=L.DEFAULT_MAX_PENDING_NAMES, retention=None):
        lane_span_cap = L.check_lane_span_cap(lane_span_cap)
        caps = L.check_caps(max_names, max_name_bytes, max_lanes, max_pending_names)
        if retention is not None and not isinstance(retention, Retention):
            raise TypeError("retention must be this twin's Retention or None")
        if self.has_view:
            raise RuntimeError("RingDecoder.__init__ called twice")
        info = L.validate_header(buffer)
        try:
            PyObject_GetBuffer(buffer, &self.view, PyBUF_WRITABLE)
        except BufferError as exc:
            raise TypeError("the ring buffer must be writable: the decoder stores tail in it") from exc
        self.has_view = 1
        if <uint64_t>self.view.len < GPUFLOW_HEADER_SIZE + <uint64_t>info.capacity * GPUFLOW_RECORD_SIZE:
            raise RingFormatError("ring buffer shrank while it was opened")
        self.hdr = <gpuflow_ring_header *>self.view.buf
        self.recs = <const gpuflow_record *>((<char *>self.view.buf) + GPUFLOW_HEADER_SIZE)
        self._capacity = info.capacity
        self._tail = info.tail
        self._records = 0
        self.producer_pid = info.producer_pid
        self.session = info.session
        self._final_header = None
        self.st.cap = lane_span_cap
        self.st.max_names = caps.max_names
        self.st.max_name_bytes = caps.max_name_bytes
        self.st.max_lanes = caps.max_lanes
        self.st.max_pending = caps.max_pending_names
        self._caps = caps
        self.st.phead = self.st.ptail = -1
        self.st.pages = <int32_t **>calloc(N_PAGES, sizeof(int32_t *))
        if (self.st.pages == NULL or map_init(&self.st.lane_map) != 0 or map_init(&self.st.ctx_map) != 0
                or map_init(&self.st.dev_map) != 0 or name_create(&self.st, 0) < 0):
            raise MemoryError()
        # Id 0 is "no name" (a kernel CUPTI gave no name, or a name the producer could not
        # intern): always defined, empty, never reported by names().
        self.st.names[0].defined = 1
        self.st.pages[0][0] = 0
        self.st.names[0].text = <char *>malloc(1)
        if self.st.names[0].text == NULL:
            raise MemoryError()
        if retention is not None:
            self._retention = retention
            self.st.store.ret = self._retention.state()
            self.st.store.next_capacity = RL.first_capacity(self._retention.max_chunk_records)
            pair = RL.header_pair(L.read_header(buffer))
            if pair is not None:
                r_set_offset(&self.st.store, pair[0], pair[1])

    def __dealloc__(self):
        state_free(&self.st)
        free(self._by_id)
        self._by_id = NULL
        if self.has_view:
            PyBuffer_Release(&self.view)
            self.has_view = 0

    cdef inline void _check_idle(self) except *:
        if self.busy:
            raise RuntimeError("the decoder is draining in another thread")

    # -- identity ----------------------------------------------------------------------------
    @property
    def capacity(self):
        return self._capacity

    @property
    def tail(self):
        return self._tail

    @property
    def lane_span_cap(self):
        return self.st.cap

    @property
    def caps(self):
        return self._caps

    @property
    def detached(self):
        return not self.has_view

    # -- draining ----------------------------------------------------------------------------
    def drain(self, max_records=None):
        """Decode up to ``max_records`` published records (all if None); return how many."""
        cdef uint64_t head, tail, n, done
        cdef uint64_t limit
        self._check_idle()
        if not self.has_view:
            raise RingDetached("the decoder was detached from its ring")
        max_records = L.check_max_records(max_records)
        if (self.hdr.magic != GPUFLOW_RING_MAGIC or self.hdr.version != GPUFLOW_RING_VERSION
                or self.hdr.header_size != GPUFLOW_HEADER_SIZE
                or self.hdr.record_size != GPUFLOW_RECORD_SIZE or self.hdr.capacity != self._capacity):
            L.check_unchanged(<object>self.view.obj, self._capacity)
        head = gpuflow_load_head(self.hdr)
        tail = self._tail
        if head < tail or head - tail > self._capacity:
            L.check_counters(head, tail, self._capacity)
        n = head - tail
        if max_records is not None:
            if max_records <= 0:
                n = 0
            elif max_records < n:
                limit = max_records
                n = limit
        self.busy = 1
        self.st.store.writing = 1
        try:
            with nogil:
                if self.st.store.ret != NULL:
                    done = drain_retaining(&self.st, self.recs, self._capacity - 1, tail, n)
                    if self.st.store.cur != NULL:   # the lanes' newest spans, from the rows
                        lanes_sync(&self.st, self.st.store.cur)
                else:
                    done = drain_plain(&self.st, self.recs, self._capacity - 1, tail, n)
                act_pass_end(&self.st)
                r_publish(&self.st.store)
        finally:
            self.st.store.writing = 0
            self.busy = 0
        self._records += done
        self._tail = tail + done
        gpuflow_store_tail(self.hdr, self._tail)
        if self.st.n_pending:
            expire_pending(&self.st, self._tail, self._capacity)
        if self.st.oom:
            self.st.oom = 0
            raise MemoryError("the ring decoder ran out of memory")
        return done

    def detach(self):
        """Keep the final header values, release the mapping (so it can be closed and unlinked); the
        chunk being written is sealed (no record will come)."""
        self._check_idle()
        if self.st.store.ret != NULL and self.st.store.cur != NULL:
            r_seal(&self.st)
        if self.has_view:
            self._final_header = L.read_header(<object>self.view.obj)
            self.hdr = NULL
            self.recs = NULL
            PyBuffer_Release(&self.view)
            self.has_view = 0

    # -- the flight recorder (any thread) ---------------------------------------------------
    @property
    def retention(self):
        return self._retention

    def retained(self):
        """What this process retains (see the Python twin); None when retention is off."""
        return r_figures(&self.st)

    def window(self, lo_us, hi_us, offset_ns, width=None):
        """The retained executions starting in [lo_us, hi_us) (see the Python twin)."""
        return r_window(&self.st, lo_us, hi_us, offset_ns, width)

    def drop_retained(self):
        """Hand this process's chunks back to the budget (the collector forgets the process)."""
        r_store_free(&self.st.store)

    # -- accessors (frame time) --------------------------------------------------------------
    def kernels(self):
        """``(name_id, count, timed, total_ns, min_ns, max_ns)`` per kernel name seen, by id; the
        kernels of names beyond ``max_names`` together under ``_layout.OTHER_NAME_ID`` (last)."""
        cdef uint32_t i
        cdef KStat *k
        self._check_idle()
        out = []
        for i in range(self.st.n_names):
            k = &self.st.kstats[i]
            if k.count:
                out.append((self.st.names[i].id, k.count, k.timed, k.total,
                            k.min if k.timed else None, k.max if k.timed else None))
        out.sort()
        k = &self.st.other
        if k.count:
            out.append((OTHER_NAME_ID, k.count, k.timed, k.total, k.min if k.timed else None,
                        k.max if k.timed else None))
        return out

    def kernel_rows(self):
        """The rows of :meth:`kernels`, in its order, packed: six values a row in one array('Q');
        a name's min and max are 0 while it has no timed launch (None in :meth:`kernels`). What
        the snapshot builder reads at every build: one object, where :meth:`kernels` makes a
        tuple and six ints a name (see the Python twin)."""
        cdef uint32_t i, n = 0
        cdef KStat *k
        cdef uint64_t *row
        cdef carray.array out
        cdef void *p
        self._check_idle()
        if self._by_id_n != self.st.n_names:     # a name was added: its place by id
            p = realloc(self._by_id, max(self.st.n_names, 1) * sizeof(uint64_t))
            if p == NULL:
                raise MemoryError()
            self._by_id = <uint64_t *>p
            for i in range(self.st.n_names):
                self._by_id[i] = (<uint64_t>self.st.names[i].id << 32) | i
            qsort(self._by_id, self.st.n_names, sizeof(uint64_t), gpuflow_cmp_u64)
            self._by_id_n = self.st.n_names
        for i in range(self.st.n_names):
            n += self.st.kstats[i].count != 0
        n += self.st.other.count != 0
        out = carray.clone(_UINT64, 6 * <Py_ssize_t>n, False)
        PyObject_GC_UnTrack(<void *>out)      # no Python object in it: no cycle (r_column)
        row = <uint64_t *>out.data.as_ulonglongs
        for i in range(self.st.n_names):
            k = &self.st.kstats[<uint32_t>(self._by_id[i] & 0xFFFFFFFFULL)]
            if k.count:
                row[0] = self._by_id[i] >> 32
                kstat_row(k, row)
                row += 6
        if self.st.other.count:
            row[0] = OTHER_NAME_ID
            kstat_row(&self.st.other, row)
        return out

    def launches(self):
        """Per kernel name id, the launch configuration of its latest kernel that had one (see
        ``_decoder_py.RingDecoder.launches``)."""
        cdef uint32_t i
        self._check_idle()
        out = {}
        for i in range(self.st.n_names):
            if self.st.kstats[i].launch_id:
                out[self.st.names[i].id] = launch_tuple(&self.st, &self.st.kstats[i])
        if self.st.other.launch_id:
            out[OTHER_NAME_ID] = launch_tuple(&self.st, &self.st.other)
        return dict(sorted(out.items()))

    def transfers(self):
        """``(direction, count, timed, bytes, total_ns)`` for every direction, in display order."""
        self._check_idle()
        return [(_DIRECTIONS[i], self.st.dir_count[i], self.st.dir_timed[i], self.st.dir_bytes[i],
                 self.st.dir_total[i]) for i in range(6)]

    def lanes(self, after_seq=-1, newest=None):
        """``(device, context, stream, executions, kept, name_id, spans)`` per lane with executions;
        ``spans``: only those with ``seq > after_seq``, at most the ``newest`` of them, oldest first
        (see the Python twin)."""
        cdef uint32_t i, j, pos, skip
        cdef uint64_t fresh
        cdef Lane *lane
        cdef uint64_t after = 0
        cdef int all_spans = after_seq < 0
        cdef int64_t limit = -1
        newest = L.check_newest(newest)
        self._check_idle()
        if newest is not None:
            limit = 0 if newest <= 0 else (newest if newest < 0x7FFFFFFF else 0x7FFFFFFF)
        if not all_spans:
            after = after_seq
        order = sorted((self.st.lanes[i].device, self.st.lanes[i].context, self.st.lanes[i].stream, i)
                       for i in range(self.st.n_lanes) if self.st.lanes[i].executions)
        out = []
        for key in order:
            lane = &self.st.lanes[<uint32_t>key[3]]
            spans = []
            pos = lane.next if lane.count == self.st.cap else 0
            skip = 0
            if limit > 0:           # the new spans are the newest ones: skip all but `limit` of them
                fresh = 0
                for j in range(lane.count):
                    if all_spans or lane.spans[j].seq > after:
                        fresh += 1
                if fresh > <uint64_t>limit:
                    skip = <uint32_t>(fresh - <uint64_t>limit)
            for j in range(lane.count if limit != 0 else 0):
                if all_spans or lane.spans[pos].seq > after:
                    if skip:
                        skip -= 1
                    else:
                        spans.append(span_tuple(&lane.spans[pos]))
                pos += 1
                if pos == lane.count:
                    pos = 0
            out.append((lane.device, lane.context, lane.stream, lane.executions, lane.count,
                        lane.name_id, spans))
        return out

    def lane_columns(self, offset_ns, newest):
        """Each lane's newest ``newest`` spans as columns, without a Python object per span (see
        the Python twin)."""
        cdef uint32_t i, j, pos, n, k, li
        cdef Lane *lane
        cdef SpanSlot *slot
        cdef int64_t offset
        cdef int64_t *cols[13]
        cdef carray.array arr
        cdef uint64_t nbytes
        cdef int32_t local
        cdef uint32_t nid, n_ids
        cdef int64_t wall
        cdef Map ids
        self._check_idle()
        newest = L.check_newest(newest)
        offset = RL.check_offset(offset_ns)
        order = sorted((self.st.lanes[i].device, self.st.lanes[i].context, self.st.lanes[i].stream, i)
                       for i in range(self.st.n_lanes) if self.st.lanes[i].executions)
        out = []
        for key in order:
            lane = &self.st.lanes[<uint32_t>key[3]]
            n = lane.count
            if newest is not None and <uint64_t>newest < n:
                n = <uint32_t>newest
            columns = [r_column(n) for j in range(13)]
            for j in range(13):
                arr = columns[j]
                cols[j] = <int64_t *>arr.data.as_longlongs
            if map_init(&ids) != 0:
                raise MemoryError()
            n_ids = 0
            # the newest n of the lane's ring, oldest first: the ring's oldest is `next` once full
            pos = (lane.next if lane.count == self.st.cap else 0) + (lane.count - n)
            for k in range(n):
                if pos >= lane.count:
                    pos -= lane.count
                slot = &lane.spans[pos]
                pos += 1
                cols[0][k] = <int64_t>slot.seq
                wall = <int64_t>slot.start + offset
                if slot.start > R_TIME_LIMIT:
                    cols[1][k] = -1
                else:           # floored, as Python's // (C's division truncates)
                    cols[1][k] = wall // 1000 if wall >= 0 else -((-wall + 999) // 1000)
                cols[2][k] = <int64_t>(slot.end - slot.start) if slot.end - slot.start < 0x7FFFFFFFFFFFFFFFULL else 0x7FFFFFFFFFFFFFFFLL
                if slot.type == GPUFLOW_REC_KERNEL:
                    nid = <uint32_t>slot.word
                    local = map_find(&ids, nid, 0, 0)
                    if local < 0:
                        local = <int32_t>n_ids
                        n_ids += 1
                        if map_insert(&ids, nid, 0, 0, local) != 0:
                            free(ids.slots)
                            raise MemoryError()
                    cols[3][k] = 0
                    cols[4][k] = local
                    cols[5][k] = <uint32_t>(slot.word >> 32)
                    cols[6][k] = slot.grid_y
                    cols[7][k] = slot.grid_z
                    cols[8][k] = slot.block_x
                    cols[9][k] = slot.block_y
                    cols[10][k] = slot.block_z
                    cols[11][k] = -1
                    cols[12][k] = -1
                else:
                    nbytes = slot.word
                    cols[3][k] = 2 if slot.type == GPUFLOW_REC_MEMSET else 1
                    for j in range(4, 11):
                        cols[j][k] = -1
                    cols[11][k] = <int64_t>nbytes if nbytes < 0x7FFFFFFFFFFFFFFFULL else 0x7FFFFFFFFFFFFFFFLL
                    cols[12][k] = slot.direction
            names = [0] * n_ids
            for i in range(ids.size):
                if ids.slots[i].idx >= 0:
                    names[ids.slots[i].idx] = ids.slots[i].a
            free(ids.slots)
            out.append((lane.device, lane.context, lane.stream, lane.executions, lane.count, lane.name_id,
                        tuple(columns), tuple(names)))
        return out

    def names(self):
        """Every completely defined name: id → (text, NAME_TRUNCATED/NAME_STREAM flags); not id 0."""
        cdef uint32_t i
        cdef Name *nm
        self._check_idle()
        out = {}
        for i in range(self.st.n_names):
            nm = &self.st.names[i]
            if nm.defined and nm.id != 0:
                out[nm.id] = (L.name_text(nm.text[:nm.len], nm.flags), nm.flags)
        return out

    def name(self, name_id):
        """One completely defined name, as :meth:`names` gives it, or None (not defined; id 0)."""
        cdef int32_t idx
        cdef Name *nm
        self._check_idle()
        nid = operator.index(name_id)
        if nid <= 0 or nid >= NAME_ID_LIMIT:
            return None
        idx = defined_name(&self.st, <uint32_t>nid)
        if idx < 0:
            return None
        nm = &self.st.names[idx]
        if not nm.defined:
            return None
        return (L.name_text(nm.text[:nm.len], nm.flags), nm.flags)

    def null_streams(self):
        """(device, context) → the stream id of its null stream, from CONTEXT records."""
        cdef uint32_t i
        self._check_idle()
        out = {}
        for i in range(self.st.ctx_map.size):
            if self.st.ctx_map.slots[i].idx >= 0:
                out[(self.st.ctx_map.slots[i].a, self.st.ctx_map.slots[i].b)] = \
                    self.st.ctxs[self.st.ctx_map.slots[i].idx].null_stream
        return out

    def devices(self):
        """device id → the name id of its name, from DEVICE records."""
        cdef uint32_t i
        self._check_idle()
        out = {}
        for i in range(self.st.dev_map.size):
            if self.st.dev_map.slots[i].idx >= 0:
                out[self.st.dev_map.slots[i].a] = self.st.devs[self.st.dev_map.slots[i].idx].name_id
        return out

    def device_facts(self):
        """device id -> what its latest DEVICE record says (see the Python twin)."""
        cdef uint32_t i
        cdef const Dev *d
        self._check_idle()
        out = {}
        for i in range(self.st.dev_map.size):
            if self.st.dev_map.slots[i].idx >= 0:
                d = &self.st.devs[self.st.dev_map.slots[i].idx]
                out[self.st.dev_map.slots[i].a] = AL.device_facts(d.name_id, bytes(d.uuid[:16]), d.sm_count,
                                                                  d.cc_major, d.cc_minor)
        return dict(sorted(out.items()))

    def launch_config(self, launch_id):
        """A defined launch id's configuration (see the Python twin); None: not defined."""
        cdef const Launch *l
        lid = operator.index(launch_id)
        self._check_idle()
        if not 0 < lid < self.st.launches_alloc or not self.st.launches[lid].defined:
            return None
        l = &self.st.launches[lid]
        return (l.static_shared, l.dynamic_shared, l.executed_shared, l.shared_config, l.shmem_limit_config,
                l.carveout if l.carveout_set else None, l.cache_config, (l.cluster_x, l.cluster_y, l.cluster_z))

    def kernel_configs(self, since=0):
        """Per kernel name id, its launch configurations (see the Python twin)."""
        cdef uint64_t after = AL.check_stamp(since)
        self._check_idle()
        return act_configs(&self.st, after)

    def activity(self):
        """Per device: busy time, late kernels, timed copies (see the Python twin)."""
        self._check_idle()
        return act_activity(&self.st)

    def settle(self, until_ns):
        """Settle every device's busy time up to ``until_ns`` (see the Python twin)."""
        cdef uint64_t until = AL.check_until(until_ns)
        self._check_idle()
        act_settle(&self.st, until)

    def clock(self):
        """(CUPTI ns, wall ns) of the latest CLOCK_SYNC record, else the header's pair, else None."""
        if self.st.have_sync:
            return (self.st.sync_cupti, self.st.sync_wall)
        h = self.header()
        if h["clock_wall_ns"] != 0:
            return (h["clock_cupti_ns"], h["clock_wall_ns"])
        return None

    def counters(self):
        """Decoder counters: records, invalid records (total and by reason), lane overflow, ..."""
        cdef int i
        self._check_idle()
        return {
            "records": self._records,
            "invalid_records": sum([self.st.invalid[i] for i in range(N_REASONS)]),
            "invalid": {L.INVALID_REASONS[i]: self.st.invalid[i] for i in range(N_REASONS)
                        if self.st.invalid[i]},
            "first_invalid_seq": self.st.first_invalid_seq if self.st.have_first_invalid else None,
            "lane_overflow": self.st.lane_overflow,
            "saturated": bool(self.st.saturated),
            "pending_names": self.st.n_pending,
            "names_folded": self.st.names_folded,
            "names_cut": self.st.names_cut,
            "names_unfinished": self.st.names_unfinished,
        }

    def header(self):
        """The header's fields, live (or as they were at :meth:`detach`)."""
        if not self.has_view:
            return dict(self._final_header)
        return L.read_header(<object>self.view.obj)
