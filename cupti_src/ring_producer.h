/*
 * ring_producer.h — the producer side of the GPUFlow ring (gpuflow_ring.h).
 *
 * Shared by the injected collector (libgpuflow_inject.so) and the test producer that the test
 * suite compiles from the same sources, so the wire format is exercised byte for byte without
 * CUPTI. Constraints:
 *   - never blocks and never waits for the consumer: a full ring drops the record and counts it;
 *   - never calls exit()/abort(), never raises a signal: every failure is a return value;
 *   - thread safe through one pthread mutex per ring, held only while a record (plus the name
 *     chunks it needs) is interned and copied, never across a system call or a CUPTI call;
 *   - a record that first uses an interned name is reserved together with all of that name's
 *     NAME_CHUNK records (all or nothing), and the name is marked sent only once its chunks are
 *     written, so the consumer never sees a name id it has no definition for; likewise a kernel
 *     and the LAUNCH record of its launch configuration.
 *
 * Counting rules (the consumer relies on them):
 *   - `dropped_ring` counts activity/metadata records lost to a full ring, one per rejected
 *     push; the name chunks that would have travelled with it are not counted (they are resent
 *     with the next record that uses the name);
 *   - `incomplete` counts written KERNEL/MEMCPY/MEMSET records that carry FLAG_NO_TIMING.
 *   - after rp_mark_exited() the ring is frozen: pushes return 0 and change nothing.
 *
 * Not async-signal-safe. A forked child must not call into a ring its parent created (the
 * injected library makes such a child inert before it could).
 */
#ifndef GPUFLOW_RING_PRODUCER_H
#define GPUFLOW_RING_PRODUCER_H

#include <stddef.h>
#include <stdint.h>

#include "gpuflow_ring.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rp_ring rp_ring;

/* Interned-name kinds (a kernel and a stream may share a text but never an id). */
enum rp_name_kind {
    RP_NAME_NONE   = 0,
    RP_NAME_KERNEL = 1, /* kernel or device name: NAME_CHUNK without FLAG_NAME_STREAM */
    RP_NAME_STREAM = 2  /* NVTX stream name: NAME_CHUNK with FLAG_NAME_STREAM */
};

/* Size in bytes of a ring holding `capacity` records. */
size_t rp_segment_size(uint32_t capacity);

/*
 * Create a ring for producer `pid`: an anonymous memory file (memfd_create, close-on-exec), sized
 * and its memory reserved (ftruncate + posix_fallocate, so a memory limit fails here and not with
 * SIGBUS later), sealed against shrinking and growing and against further seals, mapped, its
 * header filled and its magic written last (release). Status starts as STARTING. Nothing names
 * it: hand its descriptor (rp_fd) to the agent (ring_handover.h).
 * capacity: a power of two in [GPUFLOW_MIN_CAPACITY, GPUFLOW_MAX_CAPACITY].
 * Returns 0 and *out, or -errno (-EINVAL for a bad capacity or pid, -ENOMEM, -ENOSPC, ...).
 */
int rp_create(rp_ring **out, int pid, uint32_t capacity);

/* Unmap, close the descriptor and free. Returns 0 or -errno. */
int rp_close(rp_ring *r);

/* The ring's memory file descriptor (close-on-exec; owned by the ring until rp_close). */
int rp_fd(const rp_ring *r);

/* A kernel's launch configuration: interned as a LAUNCH record (gpuflow_ring.h), packed into four
 * 64-bit words so that it is built and compared in four stores and four loads (every record of
 * every kernel is compared with its name's last one: it must cost next to nothing). Fill it with
 * rp_launch_pack; the fields are CUPTI's values as they come (negative sizes, and a carve-out
 * percent without the flag, are normalised in the LAUNCH record). */
typedef struct rp_launch {
    uint64_t w[4];
} rp_launch;

/* w[0]: static | dynamic shared bytes << 32 (int32 each); w[1]: cluster x | y << 32;
 * w[2]: cluster z | shared executed bytes << 32; w[3]: cache config | shared config << 8 |
 * carve-out requested (0/1) << 16 | carve-out percent << 24 | shmem limit config << 32. */
static inline void rp_launch_pack(rp_launch *l, int32_t static_shared, int32_t dynamic_shared,
                                  uint32_t shared_executed, const uint32_t cluster[3],
                                  uint8_t cache_config, uint8_t shared_config,
                                  uint8_t carveout_is_requested, uint8_t carveout_percent,
                                  uint32_t shmem_limit_config)
{
    l->w[0] = (uint64_t)(uint32_t)static_shared | (uint64_t)(uint32_t)dynamic_shared << 32;
    l->w[1] = (uint64_t)cluster[0] | (uint64_t)cluster[1] << 32;
    l->w[2] = (uint64_t)cluster[2] | (uint64_t)shared_executed << 32;
    l->w[3] = (uint64_t)cache_config | (uint64_t)shared_config << 8 |
              (uint64_t)carveout_is_requested << 16 | (uint64_t)carveout_percent << 24 |
              (uint64_t)shmem_limit_config << 32;
}

/*
 * Push one record. For KERNEL, STREAM_NAME and DEVICE records `name` (may be NULL: name id 0)
 * is interned as `name_kind` and its id stored in rec->body.act.u.kernel.name_id; `key`, when
 * not NULL, is a pointer to cache the lookup by (CUPTI's name pointers). For KERNEL, MEMCPY and
 * MEMSET records, start=end=0 or end<start sets FLAG_NO_TIMING (times zeroed) and counts
 * `incomplete`. Returns 1 when the record (and any name chunks it needed) was written, 0 when
 * it was dropped (ring full, or frozen after rp_mark_exited).
 */
int rp_push(rp_ring *r, gpuflow_record *rec, int name_kind, const void *key, const char *name);


/*
 * Begin a key epoch: a run of pushes in which each name key stands for one string throughout (a
 * CUPTI activity buffer: the names its records point at are alive together while it is
 * processed, so one address is one string). Within an epoch a key found once to point at its
 * interned text is trusted without comparing the text again; the first use of a key in a new
 * epoch compares it once more, since an address can be reused for another string later. A
 * producer that never calls it has every key hit compared.
 */
void rp_key_epoch_begin(rp_ring *r);

/*
 * Hold the ring's lock from rp_batch_begin to rp_batch_end, across every push the calling thread
 * makes in between (translating one CUPTI buffer: one lock for its ~5,000 records instead of one
 * each, which cost as much as the rest of a record's translation). Other threads' pushes and
 * header updates wait for rp_batch_end; the calling thread's own calls of this API work as
 * always. Batches do not nest; a thread must end its batch before it blocks on anything else.
 */
void rp_batch_begin(rp_ring *r);
void rp_batch_end(rp_ring *r);

/* Convenience builders over rp_push. */
/*
 * A kernel. Its launch configuration (`launch`; NULL: none known, launch id 0) is interned: the KERNEL record
 * carries its launch id, and the first record to use an id is reserved together with that id's
 * LAUNCH record (and with its name's chunks), all or nothing, as for names. The lookup is one
 * comparison with the configuration the same kernel name launched with last time; a hash lookup
 * only when it changed.
 */
int rp_kernel(rp_ring *r, uint32_t dev, uint32_t ctx, uint32_t stream, uint64_t start,
              uint64_t end, uint32_t correlation, const void *name_key, const char *mangled,
              const uint32_t grid[3], const uint32_t block[3], uint16_t registers,
              const rp_launch *launch, uint32_t graph_id);
int rp_memcpy(rp_ring *r, uint32_t dev, uint32_t ctx, uint32_t stream, uint64_t start,
              uint64_t end, uint32_t correlation, uint8_t copy_kind, uint8_t src_kind,
              uint8_t dst_kind, uint64_t bytes, uint32_t src_dev, uint32_t dst_dev,
              uint16_t extra_flags, uint32_t graph_id);
int rp_memset(rp_ring *r, uint32_t dev, uint32_t ctx, uint32_t stream, uint64_t start,
              uint64_t end, uint32_t correlation, uint64_t bytes, uint32_t value,
              uint8_t memory_kind, uint16_t extra_flags, uint32_t graph_id);
int rp_stream_name(rp_ring *r, uint32_t dev, uint32_t ctx, uint32_t stream, const char *name);
int rp_context(rp_ring *r, uint32_t dev, uint32_t ctx, uint32_t null_stream);
/* What a DEVICE record says besides the name (gpuflow_device_payload): 0 / all-zero bytes: unknown. */
typedef struct rp_device_facts {
    uint8_t uuid[16];
    uint32_t sm_count;
    uint16_t cc_major;
    uint16_t cc_minor;
} rp_device_facts;
/* A DEVICE record for device `dev`: its name (interned), and `facts` (NULL: none known). */
int rp_device(rp_ring *r, uint32_t dev, const char *name, const rp_device_facts *facts);
/* A CLOCK_SYNC record (start = cupti_ns, end = wall_ns); also refreshes the header's pair. */
int rp_clock_sync(rp_ring *r, uint64_t cupti_ns, uint64_t wall_ns);

/* Header fields. The detail is copied, NUL-terminated, before the status is stored (release). */
void rp_set_status(rp_ring *r, uint32_t status, const char *detail);
uint32_t rp_status(rp_ring *r);
void rp_set_info(rp_ring *r, uint32_t cupti_version, uint32_t flush_ms);
void rp_add_cupti_dropped(rp_ring *r, uint64_t n);
void rp_add_buffers_completed(rp_ring *r, uint64_t n);
void rp_add_translate_cpu_ns(rp_ring *r, uint64_t ns);
/* Publish producer_exited = 1 (release) and freeze the ring. */
void rp_mark_exited(rp_ring *r);

uint64_t rp_head(rp_ring *r);
uint64_t rp_tail(rp_ring *r);
uint64_t rp_dropped(rp_ring *r);
uint64_t rp_incomplete(rp_ring *r);
uint32_t rp_names_interned(rp_ring *r);
uint32_t rp_launches_interned(rp_ring *r);

/* Test hooks (malformed-input tests): raw access that bypasses every rule above. */
int rp_push_raw(rp_ring *r, const void *rec64);                 /* published like a record */
void rp_write_slot(rp_ring *r, uint64_t index, const void *rec64); /* no publish */
void rp_set_head(rp_ring *r, uint64_t head);                    /* publish an arbitrary head */
gpuflow_ring_header *rp_header(rp_ring *r);

#ifdef __cplusplus
}
#endif

#endif /* GPUFLOW_RING_PRODUCER_H */
