/*
 * test_producer.c — a ring producer for tests, compiled by the test suite (never shipped) from
 * the same ring_producer.c and gpuflow_ring.h as the injected library:
 *
 *     gcc -shared -fPIC -O2 -Icupti_src tests/support/test_producer.c cupti_src/ring_producer.c \
 *         cupti_src/ring_handover.c -pthread
 *
 * Two APIs over the same code:
 *   - tp_*  : one ring per process (global state), the contract tests/support/ringproducer.py
 *             documents;
 *   - tph_* : the same calls on an explicit handle, so one test process can fill several rings.
 * A ring is an anonymous sealed memory file (rp_create); tph_hand_over gives it to an agent's socket
 * exactly as the injected library does (ring_handover.c), and tph_fd lends its descriptor to a
 * test that hands it over another way (from another process, or not at all). Record-pushing calls
 * return 1 if the record (and any name chunks it needed) was written and
 * 0 if it was dropped. Activity timestamps are normalised exactly as in the injected library
 * (start=end=0 or end<start: FLAG_NO_TIMING, times zeroed, `incomplete` counted). Correlation
 * ids are assigned from a per-ring counter starting at 1; no ASYNC/GRAPH flags are set.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ring_handover.h"
#include "ring_producer.h"

#define TP_EXPORT __attribute__((visibility("default")))

typedef struct tp_handle {
    rp_ring *ring;
    uint32_t correlation;
} tp_handle;

/* ---------------------------------------------------------------- handle-based API --------- */

/* Returns a handle, or NULL with *err = -errno. */
TP_EXPORT void *tph_open(int pid, uint32_t capacity, int *err)
{
    tp_handle *h = calloc(1, sizeof *h);
    int rc = h ? rp_create(&h->ring, pid, capacity) : -ENOMEM;
    if (err)
        *err = rc;
    if (rc != 0) {
        free(h);
        return NULL;
    }
    return h;
}

TP_EXPORT int tph_close(void *hv)
{
    tp_handle *h = hv;
    if (!h)
        return -EINVAL;
    int rc = rp_close(h->ring);
    free(h);
    return rc;
}

TP_EXPORT int tph_fd(void *hv)
{
    return rp_fd(((tp_handle *)hv)->ring);
}

/* rh_hand_over on this ring: the connected socket (the caller closes it to end the "process"),
 * or -errno. */
TP_EXPORT int tph_hand_over(void *hv, const char *socket_path, uint32_t wait_ms)
{
    return rh_hand_over(rp_fd(((tp_handle *)hv)->ring), socket_path, wait_ms);
}

TP_EXPORT int tph_kernel(void *hv, uint32_t dev, uint32_t ctx, uint32_t stream, uint64_t start,
                         uint64_t end, const char *mangled_name, uint32_t gx, uint32_t gy,
                         uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz)
{
    tp_handle *h = hv;
    uint32_t grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
    return rp_kernel(h->ring, dev, ctx, stream, start, end, ++h->correlation, NULL,
                     mangled_name, grid, block, 0, NULL, 0);
}

/* A kernel with its registers and launch configuration (interned as LAUNCH records). */
TP_EXPORT int tph_kernel_launch(void *hv, uint32_t dev, uint32_t ctx, uint32_t stream,
                                uint64_t start, uint64_t end, const char *mangled_name,
                                uint16_t registers, uint32_t static_shared, uint32_t dynamic_shared,
                                uint32_t shared_executed, uint32_t cx, uint32_t cy, uint32_t cz,
                                uint32_t shared_config, uint32_t shmem_limit_config,
                                int carveout_percent, uint32_t cache_config)
{
    tp_handle *h = hv;
    uint32_t one[3] = {1, 1, 1};
    uint32_t cluster[3] = {cx, cy, cz};
    rp_launch launch;
    rp_launch_pack(&launch, (int32_t)static_shared, (int32_t)dynamic_shared, shared_executed, cluster,
                   (uint8_t)cache_config, (uint8_t)shared_config, carveout_percent >= 0,
                   carveout_percent >= 0 ? (uint8_t)carveout_percent : 0, shmem_limit_config);
    return rp_kernel(h->ring, dev, ctx, stream, start, end, ++h->correlation, NULL, mangled_name,
                     one, one, registers, &launch, 0);
}

TP_EXPORT uint32_t tph_launches(void *hv)
{
    return rp_launches_interned(((tp_handle *)hv)->ring);
}

/* A kernel whose name is looked up by `key` first, as the injected library looks CUPTI's name
 * pointers up; the key is any address-sized value, never dereferenced. */
TP_EXPORT int tph_kernel_keyed(void *hv, uint64_t key, const char *mangled_name)
{
    tp_handle *h = hv;
    uint32_t one[3] = {1, 1, 1};
    return rp_kernel(h->ring, 0, 1, 2, 10, 20, ++h->correlation, (const void *)(uintptr_t)key,
                     mangled_name, one, one, 0, NULL, 0);
}

TP_EXPORT void tph_key_epoch_begin(void *hv)
{
    rp_key_epoch_begin(((tp_handle *)hv)->ring);
}

TP_EXPORT void tph_batch_begin(void *hv)
{
    rp_batch_begin(((tp_handle *)hv)->ring);
}

TP_EXPORT void tph_batch_end(void *hv)
{
    rp_batch_end(((tp_handle *)hv)->ring);
}

TP_EXPORT int tph_memcpy(void *hv, uint32_t dev, uint32_t ctx, uint32_t stream, uint64_t start,
                         uint64_t end, uint32_t copy_kind, uint64_t bytes, uint32_t src_dev,
                         uint32_t dst_dev)
{
    tp_handle *h = hv;
    return rp_memcpy(h->ring, dev, ctx, stream, start, end, ++h->correlation,
                     (uint8_t)copy_kind, 0, 0, bytes, src_dev, dst_dev, 0, 0);
}

TP_EXPORT int tph_memset(void *hv, uint32_t dev, uint32_t ctx, uint32_t stream, uint64_t start,
                         uint64_t end, uint64_t bytes, uint32_t value)
{
    tp_handle *h = hv;
    return rp_memset(h->ring, dev, ctx, stream, start, end, ++h->correlation, bytes, value, 0, 0,
                     0);
}

TP_EXPORT int tph_stream_name(void *hv, uint32_t dev, uint32_t ctx, uint32_t stream,
                              const char *name)
{
    return rp_stream_name(((tp_handle *)hv)->ring, dev, ctx, stream, name);
}

TP_EXPORT int tph_context(void *hv, uint32_t dev, uint32_t ctx, uint32_t null_stream)
{
    return rp_context(((tp_handle *)hv)->ring, dev, ctx, null_stream);
}

TP_EXPORT int tph_device(void *hv, uint32_t dev, const char *name)
{
    return rp_device(((tp_handle *)hv)->ring, dev, name, NULL);
}

/* A DEVICE record with its facts: uuid (16 bytes, NULL: unknown), SMs, compute capability. */
TP_EXPORT int tph_device_facts(void *hv, uint32_t dev, const char *name, const uint8_t *uuid,
                               uint32_t sm_count, uint32_t cc_major, uint32_t cc_minor)
{
    rp_device_facts f = {{0}, sm_count, (uint16_t)cc_major, (uint16_t)cc_minor};
    if (uuid)
        memcpy(f.uuid, uuid, sizeof f.uuid);
    return rp_device(((tp_handle *)hv)->ring, dev, name, &f);
}

TP_EXPORT int tph_clock_sync(void *hv, uint64_t cupti_ns, uint64_t wall_ns)
{
    return rp_clock_sync(((tp_handle *)hv)->ring, cupti_ns, wall_ns);
}

TP_EXPORT void tph_set_status(void *hv, uint32_t status, const char *detail)
{
    rp_set_status(((tp_handle *)hv)->ring, status, detail);
}

TP_EXPORT void tph_add_cupti_dropped(void *hv, uint64_t n)
{
    rp_add_cupti_dropped(((tp_handle *)hv)->ring, n);
}

TP_EXPORT void tph_mark_exited(void *hv)
{
    rp_mark_exited(((tp_handle *)hv)->ring);
}

TP_EXPORT uint64_t tph_head(void *hv) { return rp_head(((tp_handle *)hv)->ring); }
TP_EXPORT uint64_t tph_tail(void *hv) { return rp_tail(((tp_handle *)hv)->ring); }
TP_EXPORT uint64_t tph_dropped(void *hv) { return rp_dropped(((tp_handle *)hv)->ring); }
TP_EXPORT uint64_t tph_incomplete(void *hv) { return rp_incomplete(((tp_handle *)hv)->ring); }

/* Raw access for malformed-input tests. */
TP_EXPORT int tph_push_raw(void *hv, const void *rec64)
{
    return rp_push_raw(((tp_handle *)hv)->ring, rec64);
}

TP_EXPORT void tph_write_slot(void *hv, uint64_t index, const void *rec64)
{
    rp_write_slot(((tp_handle *)hv)->ring, index, rec64);
}

TP_EXPORT void tph_set_head(void *hv, uint64_t head)
{
    rp_set_head(((tp_handle *)hv)->ring, head);
}

TP_EXPORT void *tph_header(void *hv)
{
    return rp_header(((tp_handle *)hv)->ring);
}

TP_EXPORT uint32_t tph_capacity(void *hv)
{
    return rp_header(((tp_handle *)hv)->ring)->capacity;
}

/* ---------------------------------------------------------------- global API (tp_*) -------- */

static tp_handle *g_tp;

TP_EXPORT int tp_open(int pid, uint32_t capacity)
{
    if (g_tp)
        return -EBUSY;
    int err = 0;
    g_tp = tph_open(pid, capacity, &err);
    return g_tp ? 0 : err;
}

TP_EXPORT int tp_fd(void)
{
    return g_tp ? tph_fd(g_tp) : -EBADF;
}

TP_EXPORT int tp_close(void)
{
    if (!g_tp)
        return -EBADF;
    int rc = tph_close(g_tp);
    g_tp = NULL;
    return rc;
}

TP_EXPORT int tp_kernel(uint32_t dev, uint32_t ctx, uint32_t stream, uint64_t start,
                        uint64_t end, const char *mangled_name, uint32_t gx, uint32_t gy,
                        uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz)
{
    return g_tp ? tph_kernel(g_tp, dev, ctx, stream, start, end, mangled_name, gx, gy, gz, bx,
                             by, bz)
                : 0;
}

TP_EXPORT int tp_memcpy(uint32_t dev, uint32_t ctx, uint32_t stream, uint64_t start,
                        uint64_t end, uint32_t copy_kind, uint64_t bytes, uint32_t src_dev,
                        uint32_t dst_dev)
{
    return g_tp ? tph_memcpy(g_tp, dev, ctx, stream, start, end, copy_kind, bytes, src_dev,
                             dst_dev)
                : 0;
}

TP_EXPORT int tp_memset(uint32_t dev, uint32_t ctx, uint32_t stream, uint64_t start,
                        uint64_t end, uint64_t bytes, uint32_t value)
{
    return g_tp ? tph_memset(g_tp, dev, ctx, stream, start, end, bytes, value) : 0;
}

TP_EXPORT int tp_stream_name(uint32_t dev, uint32_t ctx, uint32_t stream, const char *name)
{
    return g_tp ? tph_stream_name(g_tp, dev, ctx, stream, name) : 0;
}

TP_EXPORT int tp_context(uint32_t dev, uint32_t ctx, uint32_t null_stream)
{
    return g_tp ? tph_context(g_tp, dev, ctx, null_stream) : 0;
}

TP_EXPORT int tp_device(uint32_t dev, const char *name)
{
    return g_tp ? tph_device(g_tp, dev, name) : 0;
}

TP_EXPORT int tp_device_facts(uint32_t dev, const char *name, const uint8_t *uuid, uint32_t sm_count,
                              uint32_t cc_major, uint32_t cc_minor)
{
    return g_tp ? tph_device_facts(g_tp, dev, name, uuid, sm_count, cc_major, cc_minor) : 0;
}

TP_EXPORT int tp_clock_sync(uint64_t cupti_ns, uint64_t wall_ns)
{
    return g_tp ? tph_clock_sync(g_tp, cupti_ns, wall_ns) : 0;
}

TP_EXPORT void tp_set_status(uint32_t status, const char *detail)
{
    if (g_tp)
        tph_set_status(g_tp, status, detail);
}

TP_EXPORT void tp_add_cupti_dropped(uint64_t n)
{
    if (g_tp)
        tph_add_cupti_dropped(g_tp, n);
}

TP_EXPORT void tp_mark_exited(void)
{
    if (g_tp)
        tph_mark_exited(g_tp);
}

TP_EXPORT uint64_t tp_head(void) { return g_tp ? tph_head(g_tp) : 0; }
TP_EXPORT uint64_t tp_tail(void) { return g_tp ? tph_tail(g_tp) : 0; }
TP_EXPORT uint64_t tp_dropped(void) { return g_tp ? tph_dropped(g_tp) : 0; }
