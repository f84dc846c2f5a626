/*
 * inject_cost.c — what the injected library spends per CUPTI record, against what the minimal
 * CUPTI collector (bench/cost/cupti_floor.c) spends on the same records, side by side in one
 * process, without a GPU. Built and run by bench/cost/inject_cost.py.
 *
 * bench/overhead.py measures GPUFlow's cost on a real program, but on the lent VMs one process's
 * speed varies by 6-15 %, so it cannot place a 1 % difference. This measures the part of that
 * difference that happens inside the traced process, per record, where the noise is small:
 *   floor   — the floor's buffer handling: aligned_alloc a 1 MiB buffer on request; on
 *             completion walk its records, count them by kind, free it;
 *   gpuflow — libgpuflow_inject.so's own activity.c and buffer_pool.c, unmodified: a pooled
 *             buffer on request; on completion translate every record into a real ring
 *             (ring_producer.c: interned names, compact records, release-store publish)
 *             and re-zero the buffer for the pool (the flusher thread's work, or the completion
 *             callback's when no flusher runs);
 * while a consumer thread drains the ring as the agent does (reads every published slot,
 * releases it), so the producer pays for the cache lines the consumer takes away.
 *
 * Both modes walk the same buffers, built with the real CUDA 13 CUpti_ActivityKernel10 layout
 * (the same framing the test suite's fake libcupti uses, read by a stand-in for
 * cuptiActivityGetNextRecord in both modes); rounds alternate which mode goes first. Every record
 * must reach the ring and the consumer, or the run fails.
 *
 * The times are per CUPTI record (a kernel), whatever the ring makes of it (from ring version 3 a
 * kernel's launch configuration is interned: a LAUNCH record once per configuration).
 * The ring is made the way the library being measured makes it: a sealed memory file (rp_create),
 * or, built against a library from before the ring handover (its gpuflow_ring.h still names rings:
 * GPUFLOW_RING_NAME_FMT), a named shared-memory segment, so that --baseline-src can measure a
 * version from either side of that change.
 *
 * Usage: inject_cost ROUNDS BUFFERS_PER_ROUND NAMES
 * Prints per round `round=<i> floor_ns=<x> gpuflow_ns=<y>` (per record), then
 * `records=<n> floor_ns_per_record=<median> gpuflow_ns_per_record=<median> ratio=<y/x>`.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cupti_activity.h>

#include "buffer_pool.h"
#include "gpuflow_ring.h"
#include "inject_state.h"

/* what gpuflow_inject.c provides to the rest of the library (flusher.c's clock and kick are
 * linked as they are; its thread is never started here) */
gf_state g_gf;

/* framing: [u32 size][u32 pad][record], as tests/support/fake_cupti.c writes and reads it */
static CUptiResult next_record(uint8_t *buf, size_t valid, CUpti_Activity **rec)
{
    uint8_t *p = buf;
    if (*rec) {
        uint32_t s;
        memcpy(&s, (uint8_t *)*rec - 8, 4);
        p = (uint8_t *)*rec + s;
    }
    if ((size_t)(p - buf) + 8 > valid)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *rec = (CUpti_Activity *)(p + 8);
    return CUPTI_SUCCESS;
}
static CUptiResult no_drops(CUcontext c, uint32_t s, size_t *d)
{
    (void)c;
    (void)s;
    *d = 0;
    return CUPTI_SUCCESS;
}

/* ------------------------------------------------------------------ the records ---------- */

enum { RECORD_SPACE = 8 + ((sizeof(CUpti_ActivityKernel10) + 7) & ~(size_t)7) };
static char **g_names;
static unsigned g_nnames;
static uint32_t g_correlation = 1;
static uint64_t g_time = 1000000;

/* Fill `buf` with as many kernel records as fit in GF_POOL_BUFFER_SIZE; returns the bytes used. */
static size_t fill(uint8_t *buf, size_t *records)
{
    size_t used = 0, n = 0;
    while (used + RECORD_SPACE <= GF_POOL_BUFFER_SIZE) {
        uint32_t s = RECORD_SPACE - 8;
        memcpy(buf + used, &s, 4);
        memset(buf + used + 4, 0, RECORD_SPACE - 4);
        CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)(buf + used + 8);
        k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        k->start = g_time;
        k->end = g_time + 1800;
        g_time += 4500;
        k->contextId = 1;
        k->streamId = 7 + (g_correlation % 3);
        k->gridX = 1;
        k->gridY = 1;
        k->gridZ = 1;
        k->blockX = 32;
        k->blockY = 1;
        k->blockZ = 1;
        k->registersPerThread = 16;
        k->correlationId = g_correlation++;
        unsigned which = (unsigned)(n % g_nnames);
        k->name = g_names[which];
        /* a launch configuration of its own per kernel name, as in a real program (the same each
         * time the name launches): shared memory, the carve-out it ran with, some with clusters */
        k->staticSharedMemory = 1024 * (which % 8);
        k->dynamicSharedMemory = which % 3 ? 0 : 4096;
        k->sharedMemoryExecuted = 32768;
        k->sharedMemoryConfig = 1;
        k->clusterX = which % 5 ? 0 : 2;
        k->clusterY = which % 5 ? 0 : 1;
        k->clusterZ = which % 5 ? 0 : 1;
        used += RECORD_SPACE;
        n++;
    }
    *records = n;
    return used;
}

/* ------------------------------------------------------------------ the floor ------------ */

static atomic_ulong floor_kernels, floor_other;

static void floor_completed(uint8_t *buffer, size_t valid)
{
    CUpti_Activity *record = NULL;
    while (next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
        switch (record->kind) { /* cupti_floor.c's buffer_completed */
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: atomic_fetch_add(&floor_kernels, 1); break;
        default: atomic_fetch_add(&floor_other, 1); break;
        }
    }
    free(buffer);
}

/* ------------------------------------------------------------------ the consumer --------- */

static gpuflow_ring_header *g_hdr;
static const uint8_t *g_slots;
static atomic_int g_stop;
static uint64_t g_consumed, g_checksum;

static void *consumer(void *arg)
{
    (void)arg;
    uint32_t mask = g_hdr->capacity - 1;
    for (;;) {
        uint64_t head = __atomic_load_n(&g_hdr->head, __ATOMIC_ACQUIRE);
        uint64_t tail = g_hdr->tail;
        if (head == tail) {
            if (atomic_load(&g_stop))
                break;
            struct timespec pause = {0, 200000}; /* 0.2 ms: faster than the agent, never behind */
            nanosleep(&pause, NULL);
            continue;
        }
        for (uint64_t i = tail; i < head; i++) {
            uint64_t first;
            memcpy(&first, g_slots + (size_t)(i & mask) * GPUFLOW_RECORD_SIZE, 8);
            g_checksum += first;
        }
        g_consumed += head - tail;
        __atomic_store_n(&g_hdr->tail, head, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* ------------------------------------------------------------------ timing --------------- */

static double now_ns(void)
{
    return (double)gf_now_mono_ns();
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One round of the floor: its buffers filled beforehand, time completion and the next request. */
static double floor_round(int nbuf, size_t *records)
{
    uint8_t **bufs = calloc((size_t)nbuf, sizeof *bufs);
    size_t *valid = calloc((size_t)nbuf, sizeof *valid);
    *records = 0;
    for (int i = 0; i < nbuf; i++) {
        size_t n;
        bufs[i] = aligned_alloc(8, GF_POOL_BUFFER_SIZE);
        valid[i] = fill(bufs[i], &n);
        *records += n;
    }
    double t0 = now_ns();
    for (int i = 0; i < nbuf; i++)
        floor_completed(bufs[i], valid[i]);
    for (int i = 0; i < nbuf; i++) /* CUPTI asks for the next buffers */
        bufs[i] = aligned_alloc(8, GF_POOL_BUFFER_SIZE);
    double t = now_ns() - t0;
    for (int i = 0; i < nbuf; i++)
        free(bufs[i]);
    free(bufs);
    free(valid);
    return t;
}

static double gpuflow_round(int nbuf, size_t *records)
{
    uint8_t **bufs = calloc((size_t)nbuf, sizeof *bufs);
    size_t *valid = calloc((size_t)nbuf, sizeof *valid);
    *records = 0;
    for (int i = 0; i < nbuf; i++) {
        size_t n, size, maxrec;
        gf_buffer_requested(&bufs[i], &size, &maxrec);
        if (!bufs[i]) {
            fprintf(stderr, "inject_cost: the pool ran dry\n");
            exit(1);
        }
        valid[i] = fill(bufs[i], &n);
        *records += n;
    }
    double t0 = now_ns();
    for (int i = 0; i < nbuf; i++)
        gf_buffer_completed(NULL, 0, bufs[i], GF_POOL_BUFFER_SIZE, valid[i]);
    for (int i = 0; i < nbuf; i++) { /* CUPTI asks for the next buffers; given back at once */
        size_t size, maxrec;
        gf_buffer_requested(&bufs[i], &size, &maxrec);
    }
    double t = now_ns() - t0;
    for (int i = 0; i < nbuf; i++)
        gf_pool_put(bufs[i], 0);
    free(bufs);
    free(valid);
    return t;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 21;
    int nbuf = argc > 2 ? atoi(argv[2]) : 2;
    g_nnames = argc > 3 ? (unsigned)atoi(argv[3]) : 40;
    if (rounds < 1 || nbuf < 1 || nbuf > (int)GF_POOL_BUFFERS / 2 || g_nnames < 1) {
        fprintf(stderr, "usage: inject_cost ROUNDS(>=1) BUFFERS_PER_ROUND(1..%u) NAMES(>=1)\n",
                GF_POOL_BUFFERS / 2);
        return 2;
    }
    g_names = calloc(g_nnames, sizeof *g_names);
    for (unsigned i = 0; i < g_nnames; i++) { /* mangled names of a realistic length */
        g_names[i] = malloc(128);
        snprintf(g_names[i], 128,
                 "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEE%uEEviT0_T1_",
                 i);
    }

    rp_ring *ring;
#ifdef GPUFLOW_RING_NAME_FMT /* a library from before the handover: a named /dev/shm segment */
    char session[32];
    snprintf(session, sizeof session, "cost%d", (int)getpid());
    int rc = rp_open(&ring, session, getpid(), GF_DEFAULT_CAPACITY, RP_OPEN_REPLACE_STALE);
#define RING_CLOSE(r) rp_close((r), 1)
#define RING_FD(r) shm_open(rp_name(r), O_RDWR, 0)
#else
    int rc = rp_create(&ring, getpid(), GF_DEFAULT_CAPACITY);
#define RING_CLOSE(r) rp_close(r)
#define RING_FD(r) dup(rp_fd(r))
#endif
    if (rc != 0) {
        fprintf(stderr, "inject_cost: cannot create a ring (%s)\n", strerror(-rc));
        return 1;
    }
    if ((rc = gf_pool_init()) != 0) {
        fprintf(stderr, "inject_cost: cannot reserve the buffer pool (%s)\n", strerror(-rc));
        RING_CLOSE(ring);
        return 1;
    }
    int fd = RING_FD(ring); /* the consumer's own mapping, as the agent's */
    void *map = fd >= 0 ? mmap(NULL, rp_segment_size(GF_DEFAULT_CAPACITY), PROT_READ | PROT_WRITE,
                               MAP_SHARED, fd, 0)
                        : MAP_FAILED;
    if (fd >= 0)
        close(fd);
    if (map == MAP_FAILED) {
        fprintf(stderr, "inject_cost: cannot map the ring as its consumer\n");
        RING_CLOSE(ring);
        return 1;
    }
    g_hdr = map;
    g_slots = (const uint8_t *)map + GPUFLOW_HEADER_SIZE;

    g_gf.pid = getpid();
    g_gf.ring = ring;
    g_gf.collecting = 1;
    g_gf.cupti.ActivityGetNextRecord = next_record;
    g_gf.cupti.ActivityGetNumDroppedRecords = no_drops;
    pthread_t th;
    pthread_create(&th, NULL, consumer, NULL);

    double *f = calloc((size_t)rounds, sizeof *f), *g = calloc((size_t)rounds, sizeof *g);
    size_t nf = 0, ng = 0, total_f = 0, total_g = 0;
    /* warm-up, untimed: the malloc arena settles, every name is interned, and the ring's pages
     * are all touched once (a traced process pays those faults once, in its first seconds) */
    uint64_t warm_f = 0, warm_g = 0;
    do {
        floor_round(nbuf, &nf);
        gpuflow_round(nbuf, &ng);
        warm_f += nf;
        warm_g += ng;
    } while (rp_head(ring) < 2ull * GF_DEFAULT_CAPACITY);
    uint64_t self_warm = __atomic_load_n(&g_hdr->translate_cpu_ns, __ATOMIC_RELAXED);
    for (int r = 0; r < rounds; r++) {
        if (r % 2) {
            f[r] = floor_round(nbuf, &nf) / (double)nf;
            g[r] = gpuflow_round(nbuf, &ng) / (double)ng;
        } else {
            g[r] = gpuflow_round(nbuf, &ng) / (double)ng;
            f[r] = floor_round(nbuf, &nf) / (double)nf;
        }
        total_f += nf;
        total_g += ng;
        printf("round=%d floor_ns=%.2f gpuflow_ns=%.2f\n", r + 1, f[r], g[r]);
    }
    atomic_store(&g_stop, 1);
    pthread_join(th, NULL);

    /* every record translated, published and consumed; each name interned once, in chunks */
    uint64_t chunks = 0;
    for (unsigned i = 0; i < g_nnames; i++)
        chunks += (strlen(g_names[i]) + GPUFLOW_NAME_CHUNK_TEXT - 1) / GPUFLOW_NAME_CHUNK_TEXT;
    uint64_t expected = total_g + warm_g + chunks;
#if GPUFLOW_RING_VERSION >= 3
    expected += rp_launches_interned(ring); /* each launch configuration's LAUNCH record, once */
#endif
    uint64_t published = rp_head(ring), dropped = rp_dropped(ring);
    uint32_t names = rp_names_interned(ring);
    int ok = dropped == 0 && published == expected && g_consumed == published &&
             names == g_nnames && atomic_load(&floor_kernels) == total_f + warm_f &&
             atomic_load(&floor_other) == 0;
    double mf = median(f, rounds), mg = median(g, rounds);
    /* the library's own account of the timed rounds (ring header, as `gpuflow run` reports it):
     * its thread's CPU time for the completions, where the bench times them by the wall clock */
    double self_ns =
        (double)(__atomic_load_n(&g_hdr->translate_cpu_ns, __ATOMIC_RELAXED) - self_warm) /
        (double)total_g;
    printf("records=%zu floor_ns_per_record=%.2f gpuflow_ns_per_record=%.2f ratio=%.2f "
           "ring_records=%llu dropped=%llu names=%u self_reported_ns_per_record=%.2f\n",
           total_g, mf, mg, mg / mf, (unsigned long long)published, (unsigned long long)dropped,
           names, self_ns);
    RING_CLOSE(ring);
    if (!ok) {
        fprintf(stderr, "inject_cost: records lost: %llu expected in the ring, %llu published, "
                "%llu consumed, %llu dropped, %u of %u names\n", (unsigned long long)expected,
                (unsigned long long)published, (unsigned long long)g_consumed,
                (unsigned long long)dropped, names, g_nnames);
        return 1;
    }
    return 0;
}
