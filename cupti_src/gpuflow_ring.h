/*
 * gpuflow_ring.h — the wire format between the injected collector (libgpuflow_inject.so)
 * and the Cython decoder (gpuflow/collectors/cupti/_ring.pxd includes this file).
 *
 * One ring per traced process: an anonymous, sealed memory file (memfd_create; F_SEAL_SHRINK |
 * F_SEAL_GROW | F_SEAL_SEAL before it is shared, so its size never changes under a mapping) that
 * has no name anywhere. The producer hands its descriptor to the agent over the agent's Unix
 * socket (the handover below); nothing else can reach it. Layout:
 *
 *     [ gpuflow_ring_header, padded to GPUFLOW_HEADER_SIZE bytes ]
 *     [ capacity x gpuflow_record (GPUFLOW_RECORD_SIZE bytes each) ]
 *
 * Single producer (the injected library, serialised by its own lock), single consumer (the
 * agent). `head` and `tail` are free-running 64-bit record counters; the slot of record n is
 * n & (capacity - 1). The producer writes records, then publishes them with a release store to
 * `head`; the consumer reads up to `head` (acquire), then releases the slots with a release store
 * to `tail`. The producer never overwrites unread records: when the ring is full it drops the
 * record and counts it in `dropped_ring`. The producer never blocks and never waits for the
 * consumer.
 *
 * Records are GPUFlow's own compact format, never CUPTI's structs (whose layouts change between
 * CUDA versions). A kernel's launch configuration (shared memory, carve-out, cluster) is interned
 * like a name (version 3): a LAUNCH record defines it once under a launch id, and every KERNEL
 * record that launched with it carries that id (docs/inject.md says why this rather than a
 * larger or an extension record). Names (kernel names, NVTX stream names) are interned: defined once by one or
 * more NAME_CHUNK records, then referred to by a non-zero name id. A record never refers to a
 * name id whose chunks were dropped: the producer reserves a name's chunks and the record that
 * first uses it in one step, or drops them all.
 *
 * Constraints: plain C99 + <stdint.h>, little-endian x86-64 / aarch64, no padding surprises
 * (every struct is checked with static asserts below). Bump GPUFLOW_RING_VERSION on any change an
 * older decoder would misread; a fact added in bytes every earlier producer left zero, read as
 * "unknown" when zero, is not one (the DEVICE record's UUID, SMs and compute capability).
 */
#ifndef GPUFLOW_RING_H
#define GPUFLOW_RING_H

#include <stddef.h>
#include <stdint.h>

#define GPUFLOW_RING_MAGIC      0x31474e5257465047ULL /* "GPFWRNG1" read little-endian */
#define GPUFLOW_RING_VERSION    3u
#define GPUFLOW_HEADER_SIZE     4096u
#define GPUFLOW_RECORD_SIZE     64u
#define GPUFLOW_SESSION_MAX     32u   /* bytes incl. NUL */
#define GPUFLOW_DETAIL_MAX      256u  /* bytes incl. NUL */
#define GPUFLOW_NAME_CHUNK_TEXT 48u   /* text bytes carried by one NAME_CHUNK record */
#define GPUFLOW_NAME_MAX        4096u /* longer names are truncated (flag NAME_TRUNCATED) */
#define GPUFLOW_MIN_CAPACITY    1024u
#define GPUFLOW_MAX_CAPACITY    (1u << 26)
#define GPUFLOW_LAUNCH_ID_MAX   65536u /* launch ids are 1..this; a producer that has defined this
                                        * many launch configurations gives further ones id 0 (none
                                        * known), and decoders refuse larger ids */

/*
 * The handover: the producer connects to the agent's SOCK_SEQPACKET Unix socket (its path in
 * GPUFLOW_RING_SOCKET, inside a directory only the agent's user can enter) and sends exactly one
 * message: GPUFLOW_HELLO_SIZE bytes, GPUFLOW_HELLO_MAGIC little-endian, with the ring's
 * descriptor attached (SCM_RIGHTS). It keeps the connection open for as long as it lives; the
 * agent takes the connection's end (the kernel closes it when the process dies) as the producer's
 * end. The agent identifies the producer by the connection's peer credentials (SO_PEERCRED),
 * never by anything in the ring.
 */
#define GPUFLOW_HELLO_MAGIC     0x314f444e48465047ULL /* "GPFHNDO1" read little-endian */
#define GPUFLOW_HELLO_SIZE      8u

/* Record types (gpuflow_record.type). 0 is never a valid type (a zeroed slot is torn). */
enum gpuflow_record_type {
    GPUFLOW_REC_KERNEL      = 1,
    GPUFLOW_REC_MEMCPY      = 2,  /* includes peer-to-peer (copy_kind PTOP) */
    GPUFLOW_REC_MEMSET      = 3,
    GPUFLOW_REC_NAME_CHUNK  = 4,  /* part of an interned name's text */
    GPUFLOW_REC_STREAM_NAME = 5,  /* (device, context, stream) is named by name_id (NVTX) */
    GPUFLOW_REC_CONTEXT     = 6,  /* (device, context) has null stream id `stream` */
    GPUFLOW_REC_CLOCK_SYNC  = 7,  /* start = CUPTI timestamp, end = CLOCK_REALTIME ns, same instant */
    GPUFLOW_REC_DEVICE      = 8,  /* device `device` exists: its name, UUID, SMs, compute capability */
    GPUFLOW_REC_LAUNCH      = 9,  /* a launch configuration, defined once under its launch id (v3) */
    GPUFLOW_REC_TYPE_MAX    = 9
};

/* gpuflow_record.flags */
#define GPUFLOW_FLAG_NAME_LAST       0x0001u /* NAME_CHUNK: final chunk of this name */
#define GPUFLOW_FLAG_NAME_TRUNCATED  0x0002u /* NAME_CHUNK: text was cut at GPUFLOW_NAME_MAX */
#define GPUFLOW_FLAG_NAME_STREAM     0x0004u /* NAME_CHUNK: a stream name (else a kernel/device name) */
#define GPUFLOW_FLAG_ASYNC           0x0008u /* MEMCPY/MEMSET: asynchronous */
#define GPUFLOW_FLAG_NO_TIMING       0x0010u /* start/end unknown (CUPTI gave 0): counted, no span */
#define GPUFLOW_FLAG_GRAPH           0x0020u /* launched from a CUDA graph */
#define GPUFLOW_FLAG_CARVEOUT        0x0040u /* LAUNCH: a shared-memory carve-out was requested */

/* Copy kinds, numerically equal to CUpti_ActivityMemcpyKind. */
enum gpuflow_copy_kind {
    GPUFLOW_COPY_UNKNOWN = 0,
    GPUFLOW_COPY_HTOD    = 1,
    GPUFLOW_COPY_DTOH    = 2,
    GPUFLOW_COPY_HTOA    = 3,
    GPUFLOW_COPY_ATOH    = 4,
    GPUFLOW_COPY_ATOA    = 5,
    GPUFLOW_COPY_ATOD    = 6,
    GPUFLOW_COPY_DTOA    = 7,
    GPUFLOW_COPY_DTOD    = 8,
    GPUFLOW_COPY_HTOH    = 9,
    GPUFLOW_COPY_PTOP    = 10
};

/* Collector status (gpuflow_ring_header.status): why tracing is or is not happening. */
enum gpuflow_status {
    GPUFLOW_STATUS_STARTING        = 0,
    GPUFLOW_STATUS_OK              = 1,
    GPUFLOW_STATUS_CUPTI_MISSING   = 2, /* libcupti could not be loaded */
    GPUFLOW_STATUS_CUPTI_VERSION   = 3, /* unsupported CUPTI version */
    GPUFLOW_STATUS_CUPTI_IN_USE    = 4, /* another subscriber holds CUPTI (nsys, ncu, profiler) */
    GPUFLOW_STATUS_UNSUPPORTED     = 5, /* virtualised / MIG / WSL / insufficient privileges */
    GPUFLOW_STATUS_CUPTI_ERROR     = 6, /* any other CUPTI error; see status_detail */
    GPUFLOW_STATUS_STOLEN          = 7  /* another tool re-registered the activity callbacks */
};

typedef struct gpuflow_ring_header {
    uint64_t magic;                 /*   0: GPUFLOW_RING_MAGIC, written last at creation */
    uint32_t version;               /*   8: GPUFLOW_RING_VERSION */
    uint32_t header_size;           /*  12: GPUFLOW_HEADER_SIZE */
    uint32_t record_size;           /*  16: GPUFLOW_RECORD_SIZE */
    uint32_t capacity;              /*  20: records, a power of two */
    int32_t  producer_pid;          /*  24 */
    uint32_t status;                /*  28: enum gpuflow_status */
    char     session[GPUFLOW_SESSION_MAX]; /* 32: unused since rings are handed over (zero) */
    int64_t  clock_cupti_ns;        /*  64: CUPTI timestamp ... */
    int64_t  clock_wall_ns;         /*  72: ... and CLOCK_REALTIME at the same instant */
    uint32_t cupti_version;         /*  80: cuptiGetVersion(), 0 if unknown */
    uint32_t flush_ms;              /*  84: flush period in use */
    int64_t  started_wall_ns;       /*  88: CLOCK_REALTIME when the ring was created */
    char     status_detail[GPUFLOW_DETAIL_MAX]; /* 96: human-readable cause for `status` */
    uint8_t  _pad0[512 - 96 - GPUFLOW_DETAIL_MAX];
    /* Producer-written counters, own cache lines. */
    volatile uint64_t head;         /* 512: records published */
    uint8_t  _pad1[56];
    volatile uint64_t tail;         /* 576: records consumed (written by the consumer only) */
    uint8_t  _pad2[56];
    volatile uint64_t dropped_ring;     /* 640: records dropped because the ring was full */
    volatile uint64_t dropped_cupti;    /* 648: records CUPTI reported dropped */
    volatile uint64_t incomplete;       /* 656: kernel/copy records without timing */
    volatile uint32_t producer_exited;  /* 664: 1 once the producer's exit flush completed */
    uint32_t _pad3;                     /* 668 */
    volatile uint64_t buffers_completed;/* 672: CUPTI buffers handed to the producer */
    volatile uint64_t translate_cpu_ns; /* 680: CPU time the producer spent turning CUPTI's
                                         * buffers into ring records and recycling them (v2) */
} gpuflow_ring_header;

typedef struct gpuflow_kernel_payload {   /* record bytes 32..63 */
    uint32_t correlation;   /* 32: CUPTI correlation id */
    uint32_t name_id;       /* 36: interned mangled kernel name */
    uint32_t grid_x;        /* 40 */
    uint16_t grid_y;        /* 44 */
    uint16_t grid_z;        /* 46 */
    uint16_t block_x;       /* 48 */
    uint16_t block_y;       /* 50 */
    uint16_t block_z;       /* 52 */
    uint16_t registers;     /* 54: registers per thread */
    uint32_t launch_id;     /* 56: its launch configuration (a LAUNCH record); 0: none (v2: shared_bytes) */
    uint32_t graph_id;      /* 60 */
} gpuflow_kernel_payload;

/* LAUNCH, record bytes 8..63 (the launch id lives in `device`, flags may hold FLAG_CARVEOUT): a
 * launch configuration (CUpti_ActivityKernel's fields of the same names), defined once, in the
 * same reservation as the first KERNEL record that uses its id. Ids are dense from 1. */
typedef struct gpuflow_launch_payload {
    uint32_t static_shared_bytes;   /*  8: staticSharedMemory */
    uint32_t dynamic_shared_bytes;  /* 12: dynamicSharedMemory */
    uint32_t shared_executed_bytes; /* 16: sharedMemoryExecuted (the carve-out the launch ran with) */
    uint32_t cluster_x;             /* 20: clusterX (0: no cluster launch) */
    uint32_t cluster_y;             /* 24 */
    uint32_t cluster_z;             /* 28 */
    uint8_t  shared_config;         /* 32: sharedMemoryConfig (bank size, CUsharedconfig) */
    uint8_t  shmem_limit_config;    /* 33: shmemLimitConfig (CUpti_FuncShmemLimitConfig) */
    uint8_t  carveout_requested;    /* 34: sharedMemoryCarveoutRequested, percent; valid with FLAG_CARVEOUT */
    uint8_t  cache_config;          /* 35: cacheConfig (requested: low nibble, executed: high) */
    uint8_t  _reserved[28];         /* 36: zero */
} gpuflow_launch_payload;

typedef struct gpuflow_copy_payload {     /* record bytes 32..63, MEMCPY and MEMSET */
    uint32_t correlation;   /* 32: CUPTI correlation id */
    uint8_t  copy_kind;     /* 36: enum gpuflow_copy_kind (MEMSET: 0) */
    uint8_t  src_kind;      /* 37: CUpti_ActivityMemoryKind */
    uint8_t  dst_kind;      /* 38 */
    uint8_t  _pad;          /* 39 */
    uint64_t bytes;         /* 40 */
    uint32_t src_device;    /* 48: PTOP source device (else = device) */
    uint32_t dst_device;    /* 52: PTOP destination device (else = device) */
    uint32_t value;         /* 56: MEMSET value */
    uint32_t graph_id;      /* 60 */
} gpuflow_copy_payload;

/* DEVICE, record bytes 8..63 (the device id lives in `device`): what the device is, from CUPTI's
 * DEVICE record (CUpti_ActivityDevice5's fields of the same names), once per device. The name id
 * sits where a kernel's does (payload.kernel.name_id). The facts fill bytes that DEVICE records
 * left zero before them, and every one reads 0 as unknown, so a decoder that does not know them
 * ignores them and one that does reads an older producer's DEVICE as "not known": no version bump. */
typedef struct gpuflow_device_payload {
    uint8_t  uuid[16];              /*  8: uuid (CUuuid; NVML's "GPU-..." text is its hex); all 0: unknown */
    uint32_t sm_count;              /* 24: numMultiprocessors; 0: unknown */
    uint16_t cc_major;              /* 28: computeCapabilityMajor; 0: unknown */
    uint16_t cc_minor;              /* 30: computeCapabilityMinor */
    uint32_t _reserved0;            /* 32: zero */
    uint32_t name_id;               /* 36: the device's interned name (as in payload.kernel) */
    uint8_t  _reserved[24];         /* 40: zero */
} gpuflow_device_payload;

typedef struct gpuflow_name_payload {     /* NAME_CHUNK, record bytes 8..63 */
    uint32_t offset;        /* 8: byte offset of this chunk in the name */
    uint32_t total_len;     /* 12: full (possibly truncated) length, bytes, no NUL */
    char     text[GPUFLOW_NAME_CHUNK_TEXT]; /* 16 */
} gpuflow_name_payload;

/*
 * One 64-byte record. For NAME_CHUNK the `name_id` lives in `device` (bytes 4..7) and the
 * payload overlays start/end/...; likewise the launch id of a LAUNCH record; for STREAM_NAME and
 * DEVICE the name id is in payload.kernel.name_id.
 */
typedef struct gpuflow_record {
    uint16_t type;          /*  0: enum gpuflow_record_type */
    uint16_t flags;         /*  2 */
    uint32_t device;        /*  4: device id (NAME_CHUNK: the name id) */
    union {
        struct {
            uint64_t start;         /*  8: ns, CUPTI clock */
            uint64_t end;           /* 16 */
            uint32_t context;       /* 24 */
            uint32_t stream;        /* 28 */
            union {                 /* 32 */
                gpuflow_kernel_payload kernel;
                gpuflow_copy_payload   copy;
            } u;
        } act;
        gpuflow_name_payload name;  /* NAME_CHUNK */
        gpuflow_launch_payload launch; /* LAUNCH */
        gpuflow_device_payload dev;    /* DEVICE */
    } body;
} gpuflow_record;

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(sizeof(gpuflow_record) == GPUFLOW_RECORD_SIZE, "record is 64 bytes");
_Static_assert(sizeof(gpuflow_ring_header) <= GPUFLOW_HEADER_SIZE, "header fits its page");
_Static_assert(sizeof(gpuflow_kernel_payload) == 32, "kernel payload");
_Static_assert(sizeof(gpuflow_copy_payload) == 32, "copy payload");
_Static_assert(sizeof(gpuflow_launch_payload) == GPUFLOW_RECORD_SIZE - 8, "launch payload");
_Static_assert(sizeof(gpuflow_device_payload) == GPUFLOW_RECORD_SIZE - 8, "device payload");
_Static_assert(offsetof(gpuflow_record, body.dev.name_id) ==
               offsetof(gpuflow_record, body.act.u.kernel.name_id), "a device's name id where a kernel's is");
#endif

#endif /* GPUFLOW_RING_H */
