# The flight recorder's C types (included by _decoder_c.pyx before its State, which holds a Store;
# _retain.pxi has the functions and says how they are used).

cdef extern from "pthread.h" nogil:
    ctypedef struct pthread_mutex_t:
        pass
    int pthread_mutex_init(pthread_mutex_t *m, const void *attr)
    int pthread_mutex_lock(pthread_mutex_t *m)
    int pthread_mutex_unlock(pthread_mutex_t *m)
    int pthread_mutex_destroy(pthread_mutex_t *m)

cdef enum:
    R_RECORD_BYTES = 22             # RL.RECORD_BYTES
    R_RAW_ROW_BYTES = 48            # RL.RAW_ROW_BYTES
    R_SHAPE_BYTES = 24              # RL.SHAPE_BYTES
    R_CHUNK_OVERHEAD = 1024         # RL.CHUNK_OVERHEAD
    R_LONG_BYTES = 16               # RL.LONG_BYTES
    R_FIRST_CHUNK = 1024            # RL.FIRST_CHUNK_RECORDS
    R_SEQ_GAP_MAX = 0xFFFF          # RL.SEQ_GAP_MAX
    R_HASH_FIRST = 512              # compaction's intern table: first slots (kept at most half full)
    R_SPARES = 2                    # full-size raw and compacted columns kept for the next chunks
    R_TAG_SHIFT = 24                # a Shape's tag: the record type above, a launch id or direction below
    R_TAG_LOW = 0xFFFFFF
    N_COLUMNS = 14                  # SpanColumns' 13 and the launch id

cdef uint64_t R_DUR_LONG = 0xFFFFFFFFULL      # RL.DUR_LONG
cdef uint64_t R_TIME_LIMIT = 1ULL << 62       # RL.TIME_LIMIT


cdef struct RawRow:             # 48 bytes: a record as the drain copied it (RL.RAW_ROW_BYTES)
    uint64_t start              # CUPTI ns
    uint64_t end
    uint8_t payload[24]         # the ring record's bytes 36..59 (gpuflow_ring.h): a kernel's name id,
                                # grid, block, registers, launch id; a copy's kinds and bytes
    uint64_t meta               # the seq's low 32 bits | lane << 32 | record type << 48

cdef struct Shape:              # 24 bytes, 3 little-endian words (built, hashed, compared as such)
    uint64_t word               # kernel: name_id; copy, memset: bytes
    uint32_t tag                # record type << R_TAG_SHIFT | kernel: launch id; copy, memset: direction
    uint16_t grid_y
    uint16_t grid_z
    uint16_t block_x
    uint16_t block_y
    uint16_t block_z
    uint16_t lane

cdef struct LongDur:
    uint32_t index
    uint64_t dur

cdef struct Chunk
cdef struct Store

cdef struct RetState:
    pthread_mutex_t lock
    uint64_t budget
    uint64_t used
    uint32_t max_chunk
    Chunk *first                # every chunk of every process, oldest first
    Chunk *last
    uint64_t chunks
    uint64_t evicted_chunks
    uint64_t sealed_raw         # chunks sealed and not compacted yet
    char *spare_raw[R_SPARES]   # full-size chunks' memory, kept for the next ones (no page faults)
    uint32_t n_spare_raw
    char *spare_cols[R_SPARES]
    uint32_t n_spare_cols

cdef struct Chunk:
    Chunk *gprev
    Chunk *gnext
    Chunk *oprev
    Chunk *onext
    Store *owner                # NULL once evicted (then freed by its last reader)
    uint64_t bytes
    uint32_t capacity
    uint32_t count              # written (the drain's)
    uint32_t published          # readable
    uint32_t synced             # rows among their lanes' spans (lanes_sync; the chunk being written's)
    uint32_t pins
    int sealed                  # takes no more records
    uint64_t base_seq
    uint64_t last_seq           # the writer's: the seq of the latest record
    uint64_t min_start          # over the records written
    uint64_t max_end
    uint64_t pub_min_start      # over the records published
    uint64_t pub_max_end
    uint64_t max_start          # compacted: over its records (a raw chunk's is read when needed)
    RawRow *rows                # raw: the records (NULL once compacted)
    RawRow *retired             # raw rows a reader still reads, freed by the last one
    uint64_t *start             # compacted: the columns (one block), start (CUPTI ns),
    uint32_t *dur               # DUR_LONG: in longs
    uint32_t *shape
    uint32_t *grid_x            # kernels' (copies: 0)
    uint16_t *seq               # seq - the previous record's seq (the first: 0)
    Shape *shapes               # the chunk's distinct shapes, and its long durations (one block)
    LongDur *longs              # durations of DUR_LONG ns or more, by record index, in order
    uint32_t n_shapes
    uint32_t n_long

cdef struct Store:              # one process's retained records (in its decoder's State)
    RetState *ret               # NULL: retention off
    Chunk *first
    Chunk *last
    Chunk *cur                  # being written (NULL: the next record starts one)
    uint32_t next_capacity
    int writing                 # a drain of this decoder is running
    uint64_t records            # published (the chunk being written's later ones are not yet)
    uint64_t evicted_records
    int have_evicted
    uint64_t evicted_through    # the latest start among evicted records
    uint64_t unplaced           # timed executions not retained: a time beyond TIME_LIMIT
    int have_offset
    int64_t offset              # wall - CUPTI ns of the latest clock pair (for --retain-s)
