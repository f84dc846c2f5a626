/*
 * buffer_pool.c — lock-free pool of CUPTI activity buffers (see buffer_pool.h).
 * One mmap at init, atomic flags afterwards; no allocation, lock or system call on the hot path.
 */
#define _GNU_SOURCE
#include "buffer_pool.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#define ZERO_MARGIN 4096u /* also clear a little past validSize, in case of a partial record */

static uint8_t *g_base;
static uint8_t g_used[GF_POOL_BUFFERS];
static uint32_t g_hint;
static uint64_t g_empty;

int gf_pool_init(void)
{
    if (g_base)
        return 0;
    size_t total = (size_t)GF_POOL_BUFFERS * GF_POOL_BUFFER_SIZE;
    void *p = mmap(NULL, total, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return -errno;
    g_base = p;
    return 0;
}

uint8_t *gf_pool_get(void)
{
    if (!g_base)
        return NULL;
    uint32_t start = __atomic_load_n(&g_hint, __ATOMIC_RELAXED);
    for (uint32_t k = 0; k < GF_POOL_BUFFERS; k++) {
        uint32_t i = (start + k) % GF_POOL_BUFFERS;
        uint8_t expected = 0;
        if (__atomic_load_n(&g_used[i], __ATOMIC_RELAXED) == 0 &&
            __atomic_compare_exchange_n(&g_used[i], &expected, 1, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED)) {
            __atomic_store_n(&g_hint, (i + 1) % GF_POOL_BUFFERS, __ATOMIC_RELAXED);
            return g_base + (size_t)i * GF_POOL_BUFFER_SIZE;
        }
    }
    __atomic_add_fetch(&g_empty, 1, __ATOMIC_RELAXED);
    return NULL;
}

int gf_pool_put(uint8_t *buf, size_t used)
{
    if (!gf_pool_owns(buf))
        return -1;
    size_t i = (size_t)(buf - g_base) / GF_POOL_BUFFER_SIZE;
    size_t n = used + ZERO_MARGIN;
    if (n > GF_POOL_BUFFER_SIZE)
        n = GF_POOL_BUFFER_SIZE;
    memset(buf, 0, n);
    __atomic_store_n(&g_used[i], 0, __ATOMIC_RELEASE);
    return 0;
}

int gf_pool_owns(const uint8_t *buf)
{
    if (!g_base || buf < g_base)
        return 0;
    size_t off = (size_t)(buf - g_base);
    return off % GF_POOL_BUFFER_SIZE == 0 && off / GF_POOL_BUFFER_SIZE < GF_POOL_BUFFERS;
}

uint64_t gf_pool_empty_count(void)
{
    return __atomic_load_n(&g_empty, __ATOMIC_RELAXED);
}

uint32_t gf_pool_in_use(void)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < GF_POOL_BUFFERS; i++)
        n += __atomic_load_n(&g_used[i], __ATOMIC_RELAXED);
    return n;
}
