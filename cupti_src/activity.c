/*
 * activity.c — the CUPTI activity-buffer callbacks: hand out pooled buffers, and translate
 * completed buffers into GPUFlow ring records (gpuflow_ring.h), reading CUPTI's records at the
 * fixed offsets of cupti_records.h. Unknown kinds are skipped and counted; CUPTI's own dropped
 * records are added to the ring's dropped_cupti. Runs on CUPTI's threads, the flusher thread or
 * (for requests) the application's threads: no blocking, no exit, no crash on odd input.
 *
 * While the flusher thread runs, the completion callback only queues the buffer (as Kineto
 * does) and the flusher translates it after its next cuptiActivityFlushAll: CUPTI calls the
 * callback from inside its flush, and whatever the callback spends there (a 1 MiB buffer holds
 * ~5,000 kernel records) is spent inside CUPTI, which the launching threads may be waiting on.
 * The queue holds at most every pool buffer, in completion order; once GF_KICK_PENDING
 * buffers wait (CUPTI's own thread completes full buffers between flushes, and a long
 * GPUFLOW_FLUSH_MS would otherwise let them pile up until the pool runs dry) the flusher is
 * woken to translate them at once. Without a flusher the callback translates at once, as it
 * must. Whichever thread translates adds its CPU time for it to the ring header
 * (translate_cpu_ns): GPUFlow's own cost in the process, reported to the user.
 *
 * GPUFLOW_AB_PERIOD_MS=P (benchmarking only; bench/cost/overhead_ab.py): time is cut into
 * periods of P ms of CLOCK_MONOTONIC, and in the odd ones (floor(now / P) odd when a batch of
 * buffers is translated) kernel, copy and memset records are only counted and stepped over, as
 * the minimal CUPTI collector (bench/cost/cupti_floor.c) does; names, contexts and devices are
 * still translated.
 * A program that times its own progress on the same clock is then measured with GPUFlow's
 * per-record work on and off in alternation, in one process: the between-process spread that
 * swamps a side-by-side comparison cancels. One clock read per batch; unset, one branch.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "buffer_pool.h"
#include "cupti_records.h"
#include "inject_state.h"

void CUPTIAPI gf_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *max_records = 0;
    uint8_t *b = (g_gf.child || g_gf.exiting || getpid() != g_gf.pid) ? NULL : gf_pool_get();
    *buffer = b;
    *size = b ? GF_POOL_BUFFER_SIZE : 0;
    if (b) {
        __atomic_add_fetch(&g_gf.buffers_requested, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&g_gf.last_activity_ns, gf_now_mono_ns(), __ATOMIC_RELAXED);
    }
}

static void kernel(rp_ring *r, const void *a)
{
    uint32_t grid[3], block[3];
    for (int i = 0; i < 3; i++) {
        int32_t g = (int32_t)cr_u32(a, CR_K_GRID_X + 4 * i);
        int32_t b = (int32_t)cr_u32(a, CR_K_BLOCK_X + 4 * i);
        grid[i] = g > 0 ? (uint32_t)g : 0;
        block[i] = b > 0 ? (uint32_t)b : 0;
    }
    /* the launch configuration, as CUPTI has it, packed as rp_launch_pack packs it (ring_producer.h),
     * straight from the record: fields that CUPTI keeps side by side in the order rp_launch keeps
     * them are loaded together (cupti_records.h checks that they are). Compared with the name's
     * last one, interned when it differs. */
    rp_launch launch;
    launch.w[0] = cr_u64(a, CR_K_STATIC_SMEM);                 /* static | dynamic << 32 */
    launch.w[1] = cr_u64(a, CR_K_CLUSTER_X);                   /* cluster x | y << 32 */
    launch.w[2] = cr_u32(a, CR_K_CLUSTER_X + 8) | (uint64_t)cr_u32(a, CR_K_SHMEM_EXECUTED) << 32;
    launch.w[3] = cr_u16(a, CR_K_CACHE_CONFIG) | (uint64_t)cr_u16(a, CR_K_CARVEOUT_REQUESTED) << 16 |
                  (uint64_t)cr_u32(a, CR_K_SHMEM_LIMIT) << 32;
    const char *name = cr_str(a, CR_K_NAME);
    rp_kernel(r, cr_u32(a, CR_K_DEVICE), cr_u32(a, CR_K_CONTEXT), cr_u32(a, CR_K_STREAM),
              cr_u64(a, CR_K_START), cr_u64(a, CR_K_END), cr_u32(a, CR_K_CORRELATION), name,
              name, grid, block, cr_u16(a, CR_K_REGISTERS), &launch, cr_u32(a, CR_K_GRAPH_ID));
}

static void memcpy_rec(rp_ring *r, const void *a)
{
    uint32_t dev = cr_u32(a, CR_M_DEVICE);
    uint16_t fl = (cr_u8(a, CR_M_FLAGS) & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) ? GPUFLOW_FLAG_ASYNC
                                                                             : 0;
    rp_memcpy(r, dev, cr_u32(a, CR_M_CONTEXT), cr_u32(a, CR_M_STREAM), cr_u64(a, CR_M_START),
              cr_u64(a, CR_M_END), cr_u32(a, CR_M_CORRELATION), cr_u8(a, CR_M_COPY_KIND),
              cr_u8(a, CR_M_SRC_KIND), cr_u8(a, CR_M_DST_KIND), cr_u64(a, CR_M_BYTES), dev, dev,
              fl, cr_u32(a, CR_M_GRAPH_ID));
}

static void peer_rec(rp_ring *r, const void *a)
{
    uint16_t fl = (cr_u8(a, CR_M_FLAGS) & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) ? GPUFLOW_FLAG_ASYNC
                                                                             : 0;
    uint8_t kind = cr_u8(a, CR_M_COPY_KIND);
    rp_memcpy(r, cr_u32(a, CR_M_DEVICE), cr_u32(a, CR_M_CONTEXT), cr_u32(a, CR_M_STREAM),
              cr_u64(a, CR_M_START), cr_u64(a, CR_M_END), cr_u32(a, CR_P_CORRELATION),
              kind ? kind : GPUFLOW_COPY_PTOP, cr_u8(a, CR_M_SRC_KIND), cr_u8(a, CR_M_DST_KIND),
              cr_u64(a, CR_M_BYTES), cr_u32(a, CR_P_SRC_DEVICE), cr_u32(a, CR_P_DST_DEVICE), fl,
              cr_u32(a, CR_P_GRAPH_ID));
}

static void memset_rec(rp_ring *r, const void *a)
{
    uint16_t fl = (cr_u16(a, CR_S_FLAGS) & CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC) ? GPUFLOW_FLAG_ASYNC
                                                                              : 0;
    uint16_t mk = cr_u16(a, CR_S_MEMORY_KIND);
    rp_memset(r, cr_u32(a, CR_S_DEVICE), cr_u32(a, CR_S_CONTEXT), cr_u32(a, CR_S_STREAM),
              cr_u64(a, CR_S_START), cr_u64(a, CR_S_END), cr_u32(a, CR_S_CORRELATION),
              cr_u64(a, CR_S_BYTES), cr_u32(a, CR_S_VALUE), (uint8_t)(mk > 0xff ? 0 : mk), fl,
              cr_u32(a, CR_S_GRAPH_ID));
}

static void name_rec(rp_ring *r, const void *a)
{
    if (cr_u32(a, CR_N_OBJECT_KIND) != CUPTI_ACTIVITY_OBJECT_STREAM)
        return; /* thread/device/context names: not shown */
    const char *name = cr_str(a, CR_N_NAME);
    if (!name)
        return;
    rp_stream_name(r, cr_u32(a, CR_N_DCS_DEVICE), cr_u32(a, CR_N_DCS_CONTEXT),
                   cr_u32(a, CR_N_DCS_STREAM), name);
}

/* Once per device: its name and what the occupancy figures need (SMs, compute capability) and
 * the UUID the agent matches it to NVML's GPU by (the process's device ordinals are its own,
 * renumbered by CUDA_VISIBLE_DEVICES). A value a 16-bit field cannot hold is sent as unknown. */
static void device_rec(rp_ring *r, const void *a)
{
    rp_device_facts f;
    uint32_t major = cr_u32(a, CR_D_CC_MAJOR), minor = cr_u32(a, CR_D_CC_MINOR);
    memcpy(f.uuid, (const char *)a + CR_D_UUID, sizeof f.uuid);
    f.sm_count = cr_u32(a, CR_D_SM_COUNT);
    f.cc_major = major > 0xffffu || minor > 0xffffu ? 0 : (uint16_t)major;
    f.cc_minor = major > 0xffffu || minor > 0xffffu ? 0 : (uint16_t)minor;
    const char *name = cr_str(a, CR_D_NAME);
    rp_device(r, cr_u32(a, CR_D_ID), name ? name : "", &f);
}

static void translate(rp_ring *r, const CUpti_Activity *rec)
{
    const void *a = rec;
    switch ((int)cr_u32(a, CR_KIND)) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        kernel(r, a);
        break;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
        memcpy_rec(r, a);
        break;
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
        peer_rec(r, a);
        break;
    case CUPTI_ACTIVITY_KIND_MEMSET:
        memset_rec(r, a);
        break;
    case CUPTI_ACTIVITY_KIND_NAME:
        name_rec(r, a);
        break;
    case CUPTI_ACTIVITY_KIND_CONTEXT:
        rp_context(r, cr_u32(a, CR_C_DEVICE), cr_u32(a, CR_C_CONTEXT),
                   cr_u16(a, CR_C_NULL_STREAM));
        break;
    case CUPTI_ACTIVITY_KIND_DEVICE:
        device_rec(r, a);
        break;
    default:
        __atomic_add_fetch(&g_gf.records_unknown, 1, __ATOMIC_RELAXED);
        break;
    }
}

/* In an off period of GPUFLOW_AB_PERIOD_MS (odd periods of CLOCK_MONOTONIC): 1, else 0. */
static int ab_off_now(void)
{
    uint32_t p = g_gf.ab_period_ms;
    return p ? (int)((gf_now_mono_ns() / ((uint64_t)p * 1000000ull)) & 1u) : 0;
}

/* The records an A/B off period steps over: the per-launch ones. */
static int ab_skipped_kind(const CUpti_Activity *rec)
{
    uint32_t k = cr_u32(rec, CR_KIND);
    return k == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || k == CUPTI_ACTIVITY_KIND_MEMCPY ||
           k == CUPTI_ACTIVITY_KIND_MEMCPY2 || k == CUPTI_ACTIVITY_KIND_MEMSET;
}

/* Records translated under one hold of the ring's lock (rp_batch_begin): the lock costs a record
 * a 64th of a lock and unlock instead of one each, and another thread waits at most for 64
 * records (a few microseconds). */
#define GF_BATCH_RECORDS 64

/* Every record of one completed buffer into the ring (in an A/B off period: all but the
 * per-launch ones, which are only counted). The buffer is one key epoch of the ring: the name
 * strings its records point at are alive together, so one address is one string, and the text
 * behind each address is compared with the interned one once per buffer, not per record.
 *
 * One pass: each record is translated as soon as cuptiActivityGetNextRecord returns it, with the
 * ring's lock held across up to GF_BATCH_RECORDS of them. Walking a batch first and translating it
 * after (so as to call CUPTI only without the lock) cost the H200 host ~40 % more per record: the
 * walk is a chain of dependent loads through the buffer, whose misses translation no longer hides.
 * Holding the lock across cuptiActivityGetNextRecord is safe because that function only reads
 * the buffer: in CUDA 13's libcupti its success and end-of-buffer paths are a table lookup of the
 * record's size by kind, with no lock taken and nothing called out (docs/inject.md, "Locks"). */
static void translate_buffer(uint8_t *buffer, size_t valid, int ab_off)
{
    uint64_t n = 0;
    CUpti_Activity *rec = NULL;
    int more = valid > 0;
    rp_key_epoch_begin(g_gf.ring);
    while (more) {
        unsigned k = 0;
        rp_batch_begin(g_gf.ring);
        while (k < GF_BATCH_RECORDS) {
            if (g_gf.cupti.ActivityGetNextRecord(buffer, valid, &rec) != CUPTI_SUCCESS || !rec) {
                more = 0;
                break;
            }
            if (!ab_off || !ab_skipped_kind(rec))
                translate(g_gf.ring, rec);
            k++; /* walked, translated or not: the lock is held for 64 records at most */
            n++;
        }
        rp_batch_end(g_gf.ring);
    }
    if (n) {
        __atomic_add_fetch(&g_gf.records_seen, n, __ATOMIC_RELAXED);
        __atomic_store_n(&g_gf.last_activity_ns, gf_now_mono_ns(), __ATOMIC_RELAXED);
    }
}

/* CPU time of the calling thread: what translating and recycling buffers costs, whichever
 * thread does it, reported in the ring header (translate_cpu_ns). A system call, made twice per
 * batch of buffers (each ~5,000 records), never per record. */
static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void add_cpu_since(uint64_t t0)
{
    uint64_t t1 = thread_cpu_ns();
    if (t0 && t1 > t0)
        rp_add_translate_cpu_ns(g_gf.ring, t1 - t0);
}

static void recycle(uint8_t *buffer, size_t valid)
{
    if (gf_pool_put(buffer, valid) != 0)
        __atomic_add_fetch(&g_gf.buffers_foreign, 1, __ATOMIC_RELAXED);
}

/* completed buffers waiting for the flusher: a FIFO of at most every pool buffer */
#define GF_PENDING_SLOTS (GF_POOL_BUFFERS + 1u)
#define GF_KICK_PENDING  (GF_POOL_BUFFERS / 4u) /* this many waiting: wake the flusher */
static struct {
    uint8_t *buffer;
    size_t valid;
} g_pending[GF_PENDING_SLOTS];
static uint32_t g_pending_head, g_pending_tail;
static pthread_mutex_t g_pending_mu = PTHREAD_MUTEX_INITIALIZER; /* held for a few stores */
static pthread_mutex_t g_drain_mu = PTHREAD_MUTEX_INITIALIZER;   /* one translator at a time */

/* Queue a completed buffer: the number now waiting, or 0 when the queue is full. */
static uint32_t pending_push(uint8_t *buffer, size_t valid)
{
    uint32_t waiting = 0;
    pthread_mutex_lock(&g_pending_mu);
    uint32_t next = (g_pending_tail + 1u) % GF_PENDING_SLOTS;
    if (next != g_pending_head) {
        g_pending[g_pending_tail].buffer = buffer;
        g_pending[g_pending_tail].valid = valid;
        g_pending_tail = next;
        waiting = (g_pending_tail + GF_PENDING_SLOTS - g_pending_head) % GF_PENDING_SLOTS;
    }
    pthread_mutex_unlock(&g_pending_mu);
    return waiting;
}

static int pending_pop(uint8_t **buffer, size_t *valid)
{
    int ok = 0;
    pthread_mutex_lock(&g_pending_mu);
    if (g_pending_head != g_pending_tail) {
        *buffer = g_pending[g_pending_head].buffer;
        *valid = g_pending[g_pending_head].valid;
        g_pending_head = (g_pending_head + 1u) % GF_PENDING_SLOTS;
        ok = 1;
    }
    pthread_mutex_unlock(&g_pending_mu);
    return ok;
}

void gf_drain_completed(void)
{
    if (g_gf.child || !g_gf.ring || getpid() != g_gf.pid)
        return;
    pthread_mutex_lock(&g_drain_mu);
    uint8_t *buffer;
    size_t valid;
    uint64_t t0 = 0;
    int ab_off = 0;
    while (pending_pop(&buffer, &valid)) {
        if (!t0) {
            t0 = thread_cpu_ns();
            ab_off = ab_off_now();
        }
        translate_buffer(buffer, valid, ab_off);
        recycle(buffer, valid);
    }
    if (t0)
        add_cpu_since(t0);
    pthread_mutex_unlock(&g_drain_mu);
}

void CUPTIAPI gf_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                  size_t valid)
{
    (void)size;
    if (!buffer)
        return;
    /* A forked child never touches the ring or CUPTI; past the exit flush the ring is frozen
     * (pushes are refused there, so nothing is written after producer_exited). */
    if (!g_gf.child && g_gf.collecting && g_gf.ring && getpid() == g_gf.pid) {
        size_t dropped = 0;
        if (g_gf.cupti.ActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS)
            rp_add_cupti_dropped(g_gf.ring, dropped);
        rp_add_buffers_completed(g_gf.ring, 1);
        if (valid > 0)
            __atomic_store_n(&g_gf.last_activity_ns, gf_now_mono_ns(), __ATOMIC_RELAXED);
        if (g_gf.deferred && gf_pool_owns(buffer)) {
            uint32_t waiting = pending_push(buffer, valid);
            if (waiting) { /* the flusher translates it and gives it back to the pool */
                if (waiting == GF_KICK_PENDING)
                    gf_flusher_kick();
                return;
            }
        }
        uint64_t t0 = thread_cpu_ns();
        translate_buffer(buffer, valid, ab_off_now());
        recycle(buffer, valid);
        add_cpu_since(t0);
        return;
    }
    recycle(buffer, valid);
}
