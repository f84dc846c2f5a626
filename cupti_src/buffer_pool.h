/*
 * buffer_pool.h — pre-allocated, pre-zeroed CUPTI activity buffers, handed out without blocking.
 *
 * CUPTI asks for buffers on whatever thread needs one, the application's included, so taking a
 * buffer must never block, allocate or make a system call: the pool is one anonymous mapping
 * reserved at start (pages are committed only when CUPTI writes them) and a fixed array of
 * atomic in-use flags; a full scan that finds nothing returns NULL (CUPTI then drops and
 * counts). Returned buffers are zeroed again (CUPTI is told they arrive zeroed) and recycled.
 * Internal to the injected library.
 */
#ifndef GPUFLOW_BUFFER_POOL_H
#define GPUFLOW_BUFFER_POOL_H

#include <stddef.h>
#include <stdint.h>

#define GF_POOL_BUFFERS     64u
#define GF_POOL_BUFFER_SIZE (1u << 20) /* 1 MiB: CUPTI recommends 1-10 MB */

/* Reserve the pool. Returns 0, or -errno when the mapping fails. */
int gf_pool_init(void);

/* A zeroed buffer of GF_POOL_BUFFER_SIZE bytes, or NULL when all are in use (counted). */
uint8_t *gf_pool_get(void);

/* Zero the first `used` bytes (plus a margin) and recycle. Returns 0, or -1 for a pointer that
 * is not one of ours (left alone). */
int gf_pool_put(uint8_t *buf, size_t used);

/* 1 when `buf` is one of the pool's buffers. */
int gf_pool_owns(const uint8_t *buf);

/* Times gf_pool_get found no free buffer. */
uint64_t gf_pool_empty_count(void);

/* Buffers currently handed out. */
uint32_t gf_pool_in_use(void);

#endif /* GPUFLOW_BUFFER_POOL_H */
