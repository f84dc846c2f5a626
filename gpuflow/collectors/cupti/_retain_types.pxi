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
    R_SHAPE_BYTES = 32              # RL.SHAPE_BYTES
    R_SHAPE_BLOCK = 256             # RL.SHAPE_BLOCK
    R_SHAPE_BLOCK_BITS = 8
    R_CHUNK_OVERHEAD = 1024         # RL.CHUNK_OVERHEAD
    R_HASH_FIRST = 512              # RL.HASH_FIRST_SLOTS
    R_HASH_SLOT_BYTES = 4           # RL.HASH_SLOT_BYTES
    R_LONG_BYTES = 16               # RL.LONG_BYTES
    R_LONG_EVERY = 128              # RL.LONG_EVERY
    R_FIRST_CHUNK = 1024            # RL.FIRST_CHUNK_RECORDS
    N_COLUMNS = 14                  # SpanColumns' 13 and the launch id

cdef uint64_t R_DUR_LONG = 0xFFFFFFFFULL      # RL.DUR_LONG
cdef uint64_t R_TIME_LIMIT = 1ULL << 62       # RL.TIME_LIMIT


cdef struct Shape:              # 32 bytes, 4 little-endian words (built, hashed, compared as such)
    uint64_t word               # kernel: name_id; copy, memset: bytes
    uint32_t launch_id
    uint16_t grid_y
    uint16_t grid_z
    uint16_t block_x
    uint16_t block_y
    uint16_t block_z
    uint16_t lane
    uint8_t type
    int8_t direction
    uint8_t pad[6]              # zero: shapes are compared whole

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
    char *spare[4]              # full-size chunks' columns, kept for the next ones (no page faults)
    uint32_t n_spare

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
    uint32_t n_shapes
    uint32_t published_shapes
    uint32_t n_long
    uint32_t published_long
    uint32_t pins
    uint32_t n_blocks
    uint32_t hash_size          # 0 once sealed
    uint64_t base_seq
    uint64_t min_start          # over the records written
    uint64_t max_start
    uint64_t max_end
    uint64_t pub_min_start      # over the records published
    uint64_t pub_max_start
    uint64_t pub_max_end
    uint64_t *start             # the columns: start (CUPTI ns)
    uint32_t *dur               # DUR_LONG: in longs
    uint32_t *shape
    uint32_t *grid_x            # kernels' (copies: 0)
    uint16_t *seq               # seq - the previous record's seq (the first: 0)
    uint64_t last_seq           # the writer's: the seq of the latest record
    Shape **blocks
    uint32_t *hash              # the writer's: shape index + 1, 0 empty
    LongDur *longs              # durations of DUR_LONG ns or more, by record index, in order
    uint32_t long_slots

cdef struct Store:              # one process's retained records (in its decoder's State)
    RetState *ret               # NULL: retention off
    Chunk *first
    Chunk *last
    Chunk *cur                  # being written (NULL: the next record starts one)
    uint32_t next_capacity
    int writing                 # a drain of this decoder is running
    uint64_t records
    uint64_t evicted_records
    int have_evicted
    uint64_t evicted_through    # the latest start among evicted records
    uint64_t unplaced           # timed executions not retained: a time beyond TIME_LIMIT
    int have_offset
    int64_t offset              # wall - CUPTI ns of the latest clock pair (for --retain-s)


