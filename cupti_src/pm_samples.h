/*
 * pm_samples.h — the wire format between a PM-sampling helper (gpuflow-pm-sampler, pm_sampler.cpp)
 * and the agent's pmsampling collector (gpuflow/collectors/pmsampling/, whose samples_layout.py is
 * Python's view of this file, checked against it by a compiled test).
 *
 * One sample ring per GPU: an anonymous, sealed memory file (memfd_create; F_SEAL_SHRINK |
 * F_SEAL_GROW | F_SEAL_SEAL before it is shared) that the sampler hands to the agent over the
 * agent's private Unix socket (the handover below). Layout:
 *
 *     [ gpuflow_pm_header, padded to GPUFLOW_PM_HEADER_SIZE bytes ]
 *     [ capacity x gpuflow_pm_record (GPUFLOW_PM_RECORD_SIZE bytes each) ]
 *
 * Single producer (the sampler's decode thread), single consumer (the agent). `head` and `tail`
 * are free-running 64-bit record counters; the slot of record n is n & (capacity - 1). The
 * producer writes a record, then publishes it with a release store to `head`; the consumer reads
 * up to `head` (acquire), then frees the slots with a release store to `tail`. A full ring drops
 * the new record and counts it in `samples_dropped`: the producer never waits for the consumer.
 *
 * This format is its own, apart from the kernel ring's (gpuflow_ring.h): a sample is a fixed
 * record of fixed metric slots, never names or variable-length data, so its reader is small and
 * everything in it is a number the agent bounds.
 *
 * Constraints: plain C99 + <stdint.h>, little-endian x86-64 / aarch64, every offset checked by
 * static asserts below. Bump GPUFLOW_PM_VERSION on any change an older reader would misread.
 */
#ifndef GPUFLOW_PM_SAMPLES_H
#define GPUFLOW_PM_SAMPLES_H

#include <stddef.h>
#include <stdint.h>

#define GPUFLOW_PM_MAGIC         0x31534d5057465047ULL /* "GPFWPMS1" read little-endian */
#define GPUFLOW_PM_VERSION       1u
#define GPUFLOW_PM_HEADER_SIZE   4096u
#define GPUFLOW_PM_RECORD_SIZE   64u
#define GPUFLOW_PM_MIN_CAPACITY  1024u
#define GPUFLOW_PM_MAX_CAPACITY  (1u << 20)   /* 64 MiB of records */
#define GPUFLOW_PM_TEXT_MAX      64u          /* device name, bytes incl. NUL */
#define GPUFLOW_PM_CHIP_MAX      32u          /* chip name, bytes incl. NUL */
#define GPUFLOW_PM_DETAIL_MAX    256u         /* status detail, bytes incl. NUL */
#define GPUFLOW_PM_SLOTS         10u          /* value slots per sample */

/*
 * The handover: the sampler connects to the agent's SOCK_SEQPACKET Unix socket (its path given on
 * the sampler's command line, inside a directory only the agent's user can enter), checks with
 * SO_PEERCRED that the listener is its own user or root, and sends exactly one message:
 * GPUFLOW_PM_HELLO_SIZE bytes, GPUFLOW_PM_HELLO_MAGIC little-endian, with the ring's descriptor
 * attached (SCM_RIGHTS). It keeps the connection open while it samples; its end (the kernel
 * closes it when the process dies) is the sampler's end, and the agent closing it tells the
 * sampler to stop. The agent identifies a sampler by the connection's peer pid (SO_PEERCRED),
 * which must be one it started, never by anything in the ring.
 */
#define GPUFLOW_PM_HELLO_MAGIC   0x31504d4f4c4c4548ULL /* "HELLOMP1" read little-endian */
#define GPUFLOW_PM_HELLO_SIZE    8u

/* Record kinds (gpuflow_pm_record.kind). 0 is never valid (a zeroed slot is torn). */
enum gpuflow_pm_kind {
    GPUFLOW_PM_SAMPLE = 1, /* start/end: the sample's CUPTI timestamps (ns); values: the slots */
    GPUFLOW_PM_CLOCK  = 2, /* start: a CUPTI timestamp, end: CLOCK_REALTIME ns, the same instant */
    GPUFLOW_PM_KIND_MAX = 2
};

/* Value slots of a SAMPLE (gpuflow_pm_record.values[i]); bit i of `valid` says slot i holds a
 * value. Percentages are 0-100 of the peak the counter can reach in the sample's time; "min" and
 * "max" are the least and the greatest SM, "avg" their mean. */
enum gpuflow_pm_slot {
    GPUFLOW_PM_SM_ACTIVE_AVG  = 0, /* % of elapsed cycles an SM had work (sm__cycles_active) */
    GPUFLOW_PM_SM_ACTIVE_MIN  = 1,
    GPUFLOW_PM_SM_ACTIVE_MAX  = 2,
    GPUFLOW_PM_WARPS_AVG      = 3, /* % of an SM's warp slots in use (sm__warps_active) */
    GPUFLOW_PM_WARPS_MIN      = 4,
    GPUFLOW_PM_WARPS_MAX      = 5,
    GPUFLOW_PM_DRAM_PCT       = 6, /* % of peak DRAM throughput (dram__throughput) */
    GPUFLOW_PM_PCIE_READ_BPS  = 7, /* bytes/s (pcie__read_bytes over the sample) */
    GPUFLOW_PM_PCIE_WRITE_BPS = 8, /* bytes/s (pcie__write_bytes over the sample) */
    GPUFLOW_PM_SLOT_COUNT     = 9  /* slot 9 is reserved: never valid */
};

/* Sampler status (gpuflow_pm_header.status): why sampling is or is not happening. */
enum gpuflow_pm_status {
    GPUFLOW_PM_STARTING      = 0,
    GPUFLOW_PM_OK            = 1,
    GPUFLOW_PM_NO_DRIVER     = 2,  /* libcuda could not be loaded, or cuInit failed */
    GPUFLOW_PM_NO_DEVICE     = 3,  /* no CUDA device of that index */
    GPUFLOW_PM_CUPTI_MISSING = 4,  /* libcupti could not be loaded */
    GPUFLOW_PM_CUPTI_VERSION = 5,  /* libcupti lacks the PM sampling API (CUDA 12.6+) */
    GPUFLOW_PM_UNSUPPORTED   = 6,  /* the device or its configuration cannot be sampled */
    GPUFLOW_PM_NO_PRIVILEGE  = 7,  /* NVreg_RestrictProfilingToAdminUsers: root or CAP_SYS_ADMIN */
    GPUFLOW_PM_COUNTERS_BUSY = 8,  /* another tool holds the GPU's performance counters */
    GPUFLOW_PM_CUPTI_ERROR   = 9,  /* any other CUPTI error; see detail */
    GPUFLOW_PM_STOPPED       = 10, /* sampled, then stopped (asked to, or the agent went away) */
    GPUFLOW_PM_STATUS_MAX    = 10
};

/* gpuflow_pm_header.flags */
#define GPUFLOW_PM_FLAG_CONTEXT_HELD   0x0001u /* the sampler had to hold a CUDA context */
#define GPUFLOW_PM_FLAG_CLOCK_SUSPECT  0x0002u /* sample times were far from CUPTI's clock */

typedef struct gpuflow_pm_header {
    uint64_t magic;                            /*   0: GPUFLOW_PM_MAGIC, written last at creation */
    uint32_t version;                          /*   8 */
    uint32_t header_size;                      /*  12 */
    uint32_t record_size;                      /*  16 */
    uint32_t capacity;                         /*  20: records, a power of two */
    uint32_t status;                           /*  24: gpuflow_pm_status (release store) */
    int32_t  error;                            /*  28: the CUDA or CUPTI result behind status */
    uint32_t device_index;                     /*  32: the CUDA device sampled */
    uint32_t device_count;                     /*  36: CUDA devices the sampler saw */
    uint32_t sm_count;                         /*  40 */
    uint32_t slots_collected;                  /*  44: bit i: slot i is sampled */
    uint64_t interval_ns;                      /*  48: the sampling interval in force */
    uint32_t flags;                            /*  56 */
    uint32_t reserved0;                        /*  60 */
    uint8_t  uuid[16];                         /*  64: CUuuid; NVML's "GPU-..." is its hex */
    char     device_name[GPUFLOW_PM_TEXT_MAX]; /*  80 */
    char     chip_name[GPUFLOW_PM_CHIP_MAX];   /* 144 */
    uint64_t samples_written;                  /* 176 */
    uint64_t samples_dropped;                  /* 184: ring full */
    uint64_t hw_overflows;                     /* 192: the GPU's buffer overflowed: samples lost there */
    uint64_t decode_passes;                    /* 200 */
    uint64_t cpu_ns;                           /* 208: the sampler process's CPU time so far */
    uint64_t reserved1;                        /* 216 */
    char     detail[GPUFLOW_PM_DETAIL_MAX];    /* 224: status detail, NUL-terminated */
    uint8_t  pad0[512 - 480];
    uint64_t head;                             /* 512: producer (release) */
    uint8_t  pad1[56];
    uint64_t tail;                             /* 576: consumer (release) */
    uint8_t  pad2[GPUFLOW_PM_HEADER_SIZE - 584];
} gpuflow_pm_header;

typedef struct gpuflow_pm_record {
    uint16_t kind;                             /*  0: gpuflow_pm_kind */
    uint16_t valid;                            /*  2: SAMPLE: bit i, slot i holds a value */
    uint32_t reserved;                         /*  4 */
    uint64_t start;                            /*  8 */
    uint64_t end;                              /* 16 */
    float    values[GPUFLOW_PM_SLOTS];         /* 24 */
} gpuflow_pm_record;

#define GPUFLOW_PM_ASSERT(c, m) _Static_assert(c, m)
#ifdef __cplusplus
#undef GPUFLOW_PM_ASSERT
#define GPUFLOW_PM_ASSERT(c, m) static_assert(c, m)
#endif
GPUFLOW_PM_ASSERT(sizeof(gpuflow_pm_header) == GPUFLOW_PM_HEADER_SIZE, "pm header size");
GPUFLOW_PM_ASSERT(sizeof(gpuflow_pm_record) == GPUFLOW_PM_RECORD_SIZE, "pm record size");
GPUFLOW_PM_ASSERT(offsetof(gpuflow_pm_header, uuid) == 64, "uuid offset");
GPUFLOW_PM_ASSERT(offsetof(gpuflow_pm_header, device_name) == 80, "device_name offset");
GPUFLOW_PM_ASSERT(offsetof(gpuflow_pm_header, chip_name) == 144, "chip_name offset");
GPUFLOW_PM_ASSERT(offsetof(gpuflow_pm_header, samples_written) == 176, "counters offset");
GPUFLOW_PM_ASSERT(offsetof(gpuflow_pm_header, detail) == 224, "detail offset");
GPUFLOW_PM_ASSERT(offsetof(gpuflow_pm_header, head) == 512, "head offset");
GPUFLOW_PM_ASSERT(offsetof(gpuflow_pm_header, tail) == 576, "tail offset");
GPUFLOW_PM_ASSERT(offsetof(gpuflow_pm_record, values) == 24, "values offset");

#endif /* GPUFLOW_PM_SAMPLES_H */
