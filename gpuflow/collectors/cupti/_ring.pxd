# cython: language_level=3
"""Cython declarations of cupti_src/gpuflow_ring.h, the ring's wire format (the C boundary only).

The header is the single definition shared with libgpuflow_inject.so and the test producer; this
file only declares what the decoder reads. The record's body is a union of anonymous structs in C,
so the nested types get names here through ``__typeof__`` (GCC/Clang) rather than by repeating
their layout. Memory ordering helpers: an acquire load of ``head`` and a release store of ``tail``.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

cdef extern from "gpuflow_ring.h":
    const uint64_t GPUFLOW_RING_MAGIC
    const uint32_t GPUFLOW_RING_VERSION
    const uint32_t GPUFLOW_HEADER_SIZE
    const uint32_t GPUFLOW_RECORD_SIZE
    const uint32_t GPUFLOW_SESSION_MAX
    const uint32_t GPUFLOW_DETAIL_MAX
    const uint32_t GPUFLOW_NAME_CHUNK_TEXT
    const uint32_t GPUFLOW_NAME_MAX
    const uint32_t GPUFLOW_MIN_CAPACITY
    const uint32_t GPUFLOW_MAX_CAPACITY

    enum gpuflow_record_type:
        GPUFLOW_REC_KERNEL
        GPUFLOW_REC_MEMCPY
        GPUFLOW_REC_MEMSET
        GPUFLOW_REC_NAME_CHUNK
        GPUFLOW_REC_STREAM_NAME
        GPUFLOW_REC_CONTEXT
        GPUFLOW_REC_CLOCK_SYNC
        GPUFLOW_REC_DEVICE
        GPUFLOW_REC_LAUNCH
        GPUFLOW_REC_TYPE_MAX

    const uint16_t GPUFLOW_FLAG_NAME_LAST
    const uint16_t GPUFLOW_FLAG_NAME_TRUNCATED
    const uint16_t GPUFLOW_FLAG_NAME_STREAM
    const uint16_t GPUFLOW_FLAG_ASYNC
    const uint16_t GPUFLOW_FLAG_NO_TIMING
    const uint16_t GPUFLOW_FLAG_GRAPH
    const uint16_t GPUFLOW_FLAG_CARVEOUT

    enum gpuflow_copy_kind:
        GPUFLOW_COPY_UNKNOWN
        GPUFLOW_COPY_HTOD
        GPUFLOW_COPY_DTOH
        GPUFLOW_COPY_HTOA
        GPUFLOW_COPY_ATOH
        GPUFLOW_COPY_ATOA
        GPUFLOW_COPY_ATOD
        GPUFLOW_COPY_DTOA
        GPUFLOW_COPY_DTOD
        GPUFLOW_COPY_HTOH
        GPUFLOW_COPY_PTOP

    ctypedef struct gpuflow_ring_header:
        uint64_t magic
        uint32_t version
        uint32_t header_size
        uint32_t record_size
        uint32_t capacity
        int32_t producer_pid
        uint32_t status
        char session[32]
        int64_t clock_cupti_ns
        int64_t clock_wall_ns
        uint32_t cupti_version
        uint32_t flush_ms
        int64_t started_wall_ns
        char status_detail[256]
        uint64_t head              # volatile in C
        uint64_t tail              # volatile in C; written by the consumer only
        uint64_t dropped_ring
        uint64_t dropped_cupti
        uint64_t incomplete
        uint32_t producer_exited
        uint64_t buffers_completed
        uint64_t translate_cpu_ns

    ctypedef struct gpuflow_kernel_payload:
        uint32_t correlation
        uint32_t name_id
        uint32_t grid_x
        uint16_t grid_y
        uint16_t grid_z
        uint16_t block_x
        uint16_t block_y
        uint16_t block_z
        uint16_t registers
        uint32_t launch_id
        uint32_t graph_id

    ctypedef struct gpuflow_copy_payload:
        uint32_t correlation
        uint8_t copy_kind
        uint8_t src_kind
        uint8_t dst_kind
        uint64_t bytes
        uint32_t src_device
        uint32_t dst_device
        uint32_t value
        uint32_t graph_id

    ctypedef struct gpuflow_name_payload:
        uint32_t offset
        uint32_t total_len
        char text[48]

    ctypedef struct gpuflow_launch_payload:
        uint32_t static_shared_bytes
        uint32_t dynamic_shared_bytes
        uint32_t shared_executed_bytes
        uint32_t cluster_x
        uint32_t cluster_y
        uint32_t cluster_z
        uint8_t shared_config
        uint8_t shmem_limit_config
        uint8_t carveout_requested
        uint8_t cache_config

    ctypedef struct gpuflow_device_payload:
        uint8_t uuid[16]
        uint32_t sm_count
        uint16_t cc_major
        uint16_t cc_minor
        uint32_t name_id


cdef extern from *:
    """
    /* Names for the anonymous nested types of gpuflow_record (GCC/Clang __typeof__). */
    typedef __typeof__(((gpuflow_record *)0)->body.act.u) gpuflow_act_payload;
    typedef __typeof__(((gpuflow_record *)0)->body.act) gpuflow_act;
    typedef __typeof__(((gpuflow_record *)0)->body) gpuflow_body;

    /* Single-producer single-consumer ordering: see gpuflow_ring.h. */
    static inline uint64_t gpuflow_load_head(const gpuflow_ring_header *h) {
        return __atomic_load_n(&h->head, __ATOMIC_ACQUIRE);
    }
    static inline void gpuflow_store_tail(gpuflow_ring_header *h, uint64_t tail) {
        __atomic_store_n(&h->tail, tail, __ATOMIC_RELEASE);
    }
    """
    ctypedef union gpuflow_act_payload:
        gpuflow_kernel_payload kernel
        gpuflow_copy_payload copy

    ctypedef struct gpuflow_act:
        uint64_t start
        uint64_t end
        uint32_t context
        uint32_t stream
        gpuflow_act_payload u

    ctypedef union gpuflow_body:
        gpuflow_act act
        gpuflow_name_payload name
        gpuflow_launch_payload launch
        gpuflow_device_payload dev

    ctypedef struct gpuflow_record:
        uint16_t type
        uint16_t flags
        uint32_t device
        gpuflow_body body

    uint64_t gpuflow_load_head(const gpuflow_ring_header *h) nogil
    void gpuflow_store_tail(gpuflow_ring_header *h, uint64_t tail) nogil
