/*
 * cupti_records.h — where the injected collector reads CUPTI activity records.
 *
 * CUPTI hands out records of the newest struct version the *running* libcupti knows (e.g.
 * CUpti_ActivityKernel10 in 13.0, Kernel13 in 13.5, Kernel9 in 12.9). Newer versions only append
 * fields, so every offset used here is identical in 12.9, 13.0 and 13.5 (docs/inject.md,
 * "Environment", on the accepted CUPTI versions). We therefore read fixed offsets with memcpy
 * instead of depending on whichever struct names the build-time headers happen to have, and
 * never step through a buffer with sizeof (cuptiActivityGetNextRecord does that). When the build
 * headers are CUDA 13.0's, the offsets are checked against the real struct types at compile time.
 */
#ifndef GPUFLOW_CUPTI_RECORDS_H
#define GPUFLOW_CUPTI_RECORDS_H

#include <stdint.h>
#include <string.h>

/* Every record: CUpti_ActivityKind kind @0 (uint32). */
#define CR_KIND 0

/* CONCURRENT_KERNEL (CUpti_ActivityKernel10; the same offsets in Kernel9 of 12.x and Kernel13 of 13.5) */
#define CR_K_CACHE_CONFIG 4  /* uint8 cacheConfig (requested: low nibble, executed: high) */
#define CR_K_SHMEM_CONFIG 5  /* uint8 sharedMemoryConfig */
#define CR_K_REGISTERS   6   /* uint16 registersPerThread */
#define CR_K_START       16  /* uint64 */
#define CR_K_END         24  /* uint64 */
#define CR_K_DEVICE      40  /* uint32 */
#define CR_K_CONTEXT     44  /* uint32 */
#define CR_K_STREAM      48  /* uint32 */
#define CR_K_GRID_X      52  /* int32 x3 */
#define CR_K_BLOCK_X     64  /* int32 x3 */
#define CR_K_STATIC_SMEM 76  /* int32 */
#define CR_K_DYN_SMEM    80  /* int32 */
#define CR_K_CORRELATION 92  /* uint32 */
#define CR_K_NAME        104 /* const char* */
#define CR_K_CARVEOUT_REQUESTED 137 /* uint8 isSharedMemoryCarveoutRequested */
#define CR_K_CARVEOUT    138 /* uint8 sharedMemoryCarveoutRequested, percent */
#define CR_K_SHMEM_EXECUTED 140 /* uint32 sharedMemoryExecuted */
#define CR_K_SHMEM_LIMIT 152 /* uint32 shmemLimitConfig (CUpti_FuncShmemLimitConfig) */
#define CR_K_GRAPH_ID    156 /* uint32 */
#define CR_K_CLUSTER_X   176 /* uint32 x3 clusterX, clusterY, clusterZ */
#define CR_K_MIN_SIZE    192

/* MEMCPY (CUpti_ActivityMemcpy6) */
#define CR_M_COPY_KIND   4   /* uint8 */
#define CR_M_SRC_KIND    5   /* uint8 */
#define CR_M_DST_KIND    6   /* uint8 */
#define CR_M_FLAGS       7   /* uint8, CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC */
#define CR_M_BYTES       8   /* uint64 */
#define CR_M_START       16
#define CR_M_END         24
#define CR_M_DEVICE      32
#define CR_M_CONTEXT     36
#define CR_M_STREAM      40
#define CR_M_CORRELATION 44
#define CR_M_GRAPH_ID    72

/* MEMCPY2 = peer-to-peer (CUpti_ActivityMemcpyPtoP4); kind, flags, bytes, times, ids as MEMCPY */
#define CR_P_SRC_DEVICE  44
#define CR_P_DST_DEVICE  52
#define CR_P_CORRELATION 60
#define CR_P_GRAPH_ID    80

/* MEMSET (CUpti_ActivityMemset4) */
#define CR_S_VALUE       4   /* uint32 */
#define CR_S_BYTES       8
#define CR_S_START       16
#define CR_S_END         24
#define CR_S_DEVICE      32
#define CR_S_CONTEXT     36
#define CR_S_STREAM      40
#define CR_S_CORRELATION 44
#define CR_S_FLAGS       48  /* uint16, CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC */
#define CR_S_MEMORY_KIND 50  /* uint16 */
#define CR_S_GRAPH_ID    72

/* NAME (CUpti_ActivityName) */
#define CR_N_OBJECT_KIND 4   /* uint32 CUpti_ActivityObjectKind */
#define CR_N_DCS_DEVICE  8   /* objectId.dcs.deviceId */
#define CR_N_DCS_CONTEXT 12
#define CR_N_DCS_STREAM  16
#define CR_N_NAME        24  /* const char* */

/* CONTEXT (CUpti_ActivityContext3) */
#define CR_C_CONTEXT     4
#define CR_C_DEVICE      8
#define CR_C_NULL_STREAM 14  /* uint16 */

/* DEVICE (CUpti_ActivityDevice5) */
#define CR_D_SM_COUNT    44  /* uint32 numMultiprocessors */
#define CR_D_CC_MAJOR    104 /* uint32 computeCapabilityMajor */
#define CR_D_CC_MINOR    108 /* uint32 computeCapabilityMinor */
#define CR_D_ID          112
#define CR_D_UUID        120 /* CUuuid, 16 bytes */
#define CR_D_NAME        136 /* const char* */

/* activity.c loads these pairs as one (the order rp_launch_pack keeps them in, ring_producer.h) */
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(CR_K_DYN_SMEM == CR_K_STATIC_SMEM + 4, "static, dynamic shared memory side by side");
_Static_assert(CR_K_CLUSTER_X % 4 == 0, "cluster x, y, z side by side");
_Static_assert(CR_K_SHMEM_CONFIG == CR_K_CACHE_CONFIG + 1, "cache, shared-memory config side by side");
_Static_assert(CR_K_CARVEOUT == CR_K_CARVEOUT_REQUESTED + 1, "carve-out flag, percent side by side");
#endif

static inline uint8_t cr_u8(const void *r, size_t off)
{
    return ((const uint8_t *)r)[off];
}

static inline uint16_t cr_u16(const void *r, size_t off)
{
    uint16_t v;
    memcpy(&v, (const char *)r + off, sizeof v);
    return v;
}

static inline uint32_t cr_u32(const void *r, size_t off)
{
    uint32_t v;
    memcpy(&v, (const char *)r + off, sizeof v);
    return v;
}

static inline uint64_t cr_u64(const void *r, size_t off)
{
    uint64_t v;
    memcpy(&v, (const char *)r + off, sizeof v);
    return v;
}

static inline const char *cr_str(const void *r, size_t off)
{
    const char *p;
    memcpy(&p, (const char *)r + off, sizeof p);
    return p;
}

/* Compile-time check against the CUDA 13.0 structs when those are the build headers. */
#if defined(CUPTI_API_VERSION) && CUPTI_API_VERSION >= 130000 && CUPTI_API_VERSION < 130100 && \
    defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#include <stddef.h>
#define CR_CHECK(T, f, off) _Static_assert(offsetof(T, f) == (off), #T "." #f " moved")
CR_CHECK(CUpti_ActivityKernel10, cacheConfig, CR_K_CACHE_CONFIG);
CR_CHECK(CUpti_ActivityKernel10, sharedMemoryConfig, CR_K_SHMEM_CONFIG);
CR_CHECK(CUpti_ActivityKernel10, registersPerThread, CR_K_REGISTERS);
CR_CHECK(CUpti_ActivityKernel10, isSharedMemoryCarveoutRequested, CR_K_CARVEOUT_REQUESTED);
CR_CHECK(CUpti_ActivityKernel10, sharedMemoryCarveoutRequested, CR_K_CARVEOUT);
CR_CHECK(CUpti_ActivityKernel10, sharedMemoryExecuted, CR_K_SHMEM_EXECUTED);
CR_CHECK(CUpti_ActivityKernel10, shmemLimitConfig, CR_K_SHMEM_LIMIT);
CR_CHECK(CUpti_ActivityKernel10, clusterX, CR_K_CLUSTER_X);
CR_CHECK(CUpti_ActivityKernel10, clusterY, CR_K_CLUSTER_X + 4);
CR_CHECK(CUpti_ActivityKernel10, clusterZ, CR_K_CLUSTER_X + 8);
/* 12.x hands out Kernel9: the launch-configuration fields sit where Kernel10 has them */
CR_CHECK(CUpti_ActivityKernel9, staticSharedMemory, CR_K_STATIC_SMEM);
CR_CHECK(CUpti_ActivityKernel9, dynamicSharedMemory, CR_K_DYN_SMEM);
CR_CHECK(CUpti_ActivityKernel9, isSharedMemoryCarveoutRequested, CR_K_CARVEOUT_REQUESTED);
CR_CHECK(CUpti_ActivityKernel9, sharedMemoryCarveoutRequested, CR_K_CARVEOUT);
CR_CHECK(CUpti_ActivityKernel9, sharedMemoryExecuted, CR_K_SHMEM_EXECUTED);
CR_CHECK(CUpti_ActivityKernel9, shmemLimitConfig, CR_K_SHMEM_LIMIT);
CR_CHECK(CUpti_ActivityKernel9, clusterX, CR_K_CLUSTER_X);
CR_CHECK(CUpti_ActivityKernel10, start, CR_K_START);
CR_CHECK(CUpti_ActivityKernel10, end, CR_K_END);
CR_CHECK(CUpti_ActivityKernel10, deviceId, CR_K_DEVICE);
CR_CHECK(CUpti_ActivityKernel10, contextId, CR_K_CONTEXT);
CR_CHECK(CUpti_ActivityKernel10, streamId, CR_K_STREAM);
CR_CHECK(CUpti_ActivityKernel10, gridX, CR_K_GRID_X);
CR_CHECK(CUpti_ActivityKernel10, blockX, CR_K_BLOCK_X);
CR_CHECK(CUpti_ActivityKernel10, staticSharedMemory, CR_K_STATIC_SMEM);
CR_CHECK(CUpti_ActivityKernel10, dynamicSharedMemory, CR_K_DYN_SMEM);
CR_CHECK(CUpti_ActivityKernel10, correlationId, CR_K_CORRELATION);
CR_CHECK(CUpti_ActivityKernel10, name, CR_K_NAME);
CR_CHECK(CUpti_ActivityKernel10, graphId, CR_K_GRAPH_ID);
CR_CHECK(CUpti_ActivityMemcpy6, copyKind, CR_M_COPY_KIND);
CR_CHECK(CUpti_ActivityMemcpy6, srcKind, CR_M_SRC_KIND);
CR_CHECK(CUpti_ActivityMemcpy6, dstKind, CR_M_DST_KIND);
CR_CHECK(CUpti_ActivityMemcpy6, flags, CR_M_FLAGS);
CR_CHECK(CUpti_ActivityMemcpy6, bytes, CR_M_BYTES);
CR_CHECK(CUpti_ActivityMemcpy6, start, CR_M_START);
CR_CHECK(CUpti_ActivityMemcpy6, end, CR_M_END);
CR_CHECK(CUpti_ActivityMemcpy6, deviceId, CR_M_DEVICE);
CR_CHECK(CUpti_ActivityMemcpy6, contextId, CR_M_CONTEXT);
CR_CHECK(CUpti_ActivityMemcpy6, streamId, CR_M_STREAM);
CR_CHECK(CUpti_ActivityMemcpy6, correlationId, CR_M_CORRELATION);
CR_CHECK(CUpti_ActivityMemcpy6, graphId, CR_M_GRAPH_ID);
CR_CHECK(CUpti_ActivityMemcpyPtoP4, copyKind, CR_M_COPY_KIND);
CR_CHECK(CUpti_ActivityMemcpyPtoP4, flags, CR_M_FLAGS);
CR_CHECK(CUpti_ActivityMemcpyPtoP4, bytes, CR_M_BYTES);
CR_CHECK(CUpti_ActivityMemcpyPtoP4, start, CR_M_START);
CR_CHECK(CUpti_ActivityMemcpyPtoP4, end, CR_M_END);
CR_CHECK(CUpti_ActivityMemcpyPtoP4, deviceId, CR_M_DEVICE);
CR_CHECK(CUpti_ActivityMemcpyPtoP4, contextId, CR_M_CONTEXT);
CR_CHECK(CUpti_ActivityMemcpyPtoP4, streamId, CR_M_STREAM);
CR_CHECK(CUpti_ActivityMemcpyPtoP4, srcDeviceId, CR_P_SRC_DEVICE);
CR_CHECK(CUpti_ActivityMemcpyPtoP4, dstDeviceId, CR_P_DST_DEVICE);
CR_CHECK(CUpti_ActivityMemcpyPtoP4, correlationId, CR_P_CORRELATION);
CR_CHECK(CUpti_ActivityMemcpyPtoP4, graphId, CR_P_GRAPH_ID);
CR_CHECK(CUpti_ActivityMemset4, value, CR_S_VALUE);
CR_CHECK(CUpti_ActivityMemset4, bytes, CR_S_BYTES);
CR_CHECK(CUpti_ActivityMemset4, start, CR_S_START);
CR_CHECK(CUpti_ActivityMemset4, end, CR_S_END);
CR_CHECK(CUpti_ActivityMemset4, deviceId, CR_S_DEVICE);
CR_CHECK(CUpti_ActivityMemset4, contextId, CR_S_CONTEXT);
CR_CHECK(CUpti_ActivityMemset4, streamId, CR_S_STREAM);
CR_CHECK(CUpti_ActivityMemset4, correlationId, CR_S_CORRELATION);
CR_CHECK(CUpti_ActivityMemset4, flags, CR_S_FLAGS);
CR_CHECK(CUpti_ActivityMemset4, memoryKind, CR_S_MEMORY_KIND);
CR_CHECK(CUpti_ActivityMemset4, graphId, CR_S_GRAPH_ID);
CR_CHECK(CUpti_ActivityName, objectKind, CR_N_OBJECT_KIND);
CR_CHECK(CUpti_ActivityName, objectId.dcs.deviceId, CR_N_DCS_DEVICE);
CR_CHECK(CUpti_ActivityName, objectId.dcs.contextId, CR_N_DCS_CONTEXT);
CR_CHECK(CUpti_ActivityName, objectId.dcs.streamId, CR_N_DCS_STREAM);
CR_CHECK(CUpti_ActivityName, name, CR_N_NAME);
CR_CHECK(CUpti_ActivityContext3, contextId, CR_C_CONTEXT);
CR_CHECK(CUpti_ActivityContext3, deviceId, CR_C_DEVICE);
CR_CHECK(CUpti_ActivityContext3, nullStreamId, CR_C_NULL_STREAM);
CR_CHECK(CUpti_ActivityDevice5, id, CR_D_ID);
CR_CHECK(CUpti_ActivityDevice5, name, CR_D_NAME);
CR_CHECK(CUpti_ActivityDevice5, numMultiprocessors, CR_D_SM_COUNT);
CR_CHECK(CUpti_ActivityDevice5, computeCapabilityMajor, CR_D_CC_MAJOR);
CR_CHECK(CUpti_ActivityDevice5, computeCapabilityMinor, CR_D_CC_MINOR);
CR_CHECK(CUpti_ActivityDevice5, uuid, CR_D_UUID);
#undef CR_CHECK
#endif

#endif /* GPUFLOW_CUPTI_RECORDS_H */
