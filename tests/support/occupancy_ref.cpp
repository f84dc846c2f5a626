/*
 * occupancy_ref.cpp — the CUDA toolkit's own occupancy calculator (cuda_occupancy.h, header-only,
 * no GPU), as the reference gpuflow/collectors/cupti/occupancy.py is compared with
 * (tests/cupti/test_occupancy_reference.py builds this with the host C++ compiler).
 *
 *   occupancy_ref props     one line per architecture: the cudaOccDeviceProp values used
 *   occupancy_ref < cases   one result line per case line
 *
 * A case line: major minor block_size registers static_shared dynamic_shared shmem_limit_config
 * max_dynamic_shared carveout_percent (-1: none requested) cache_config. Its result line: the
 * calculator's status, then cudaOccResult's activeBlocksPerMultiprocessor, limitingFactors,
 * blockLimitRegs, blockLimitSharedMem, blockLimitWarps, blockLimitBlocks, blockLimitBarriers,
 * allocatedRegistersPerBlock and allocatedSharedMemPerBlock (INT_MAX prints as such). A line that
 * is not a case, or an architecture not in the table below, ends the program with status 2.
 *
 * The device values are what cudaGetDeviceProperties reports on each architecture, typed here
 * apart from occupancy.py's table so that a slip in either shows (the test compares the two). The
 * function attributes are what the toolkit's conversion from cudaFuncAttributes gives: one block
 * barrier, no virtual resources, partitioned global caching off.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_occupancy.h>

namespace {

struct Arch {
    int major, minor;
    int max_threads_per_sm;
    size_t shared_per_sm, shared_per_block_optin, reserved_per_block;
};

/* V100, Xavier, T4, A100, A10, Orin, L4, H100/H200, B200, RTX 50 */
const Arch ARCHS[] = {
    {7, 0, 2048, 98304, 98304, 0},
    {7, 2, 2048, 98304, 98304, 0},
    {7, 5, 1024, 65536, 65536, 0},
    {8, 0, 2048, 167936, 166912, 1024},
    {8, 6, 1536, 102400, 101376, 1024},
    {8, 7, 1536, 167936, 166912, 1024},
    {8, 9, 1536, 102400, 101376, 1024},
    {9, 0, 2048, 233472, 232448, 1024},
    {10, 0, 2048, 233472, 232448, 1024},
    {12, 0, 1536, 102400, 101376, 1024},
};

bool device_prop(int major, int minor, cudaOccDeviceProp *p)
{
    for (const Arch &a : ARCHS) {
        if (a.major != major || a.minor != minor)
            continue;
        p->computeMajor = major;
        p->computeMinor = minor;
        p->maxThreadsPerBlock = 1024;
        p->maxThreadsPerMultiprocessor = a.max_threads_per_sm;
        p->regsPerBlock = 65536;
        p->regsPerMultiprocessor = 65536;
        p->warpSize = 32;
        p->sharedMemPerBlock = 49152;
        p->sharedMemPerMultiprocessor = a.shared_per_sm;
        p->numSms = 1;
        p->sharedMemPerBlockOptin = a.shared_per_block_optin;
        p->reservedSharedMemPerBlock = a.reserved_per_block;
        return true;
    }
    return false;
}

int print_props()
{
    for (const Arch &a : ARCHS) {
        cudaOccDeviceProp p;
        device_prop(a.major, a.minor, &p);
        std::printf("%d %d %d %d %d %d %zu %zu %zu %zu\n", p.computeMajor, p.computeMinor,
                    p.maxThreadsPerBlock, p.maxThreadsPerMultiprocessor, p.regsPerBlock,
                    p.regsPerMultiprocessor, p.sharedMemPerBlock, p.sharedMemPerMultiprocessor,
                    p.sharedMemPerBlockOptin, p.reservedSharedMemPerBlock);
    }
    return 0;
}

}  // namespace

int main(int argc, char **argv)
{
    if (argc == 2 && std::strcmp(argv[1], "props") == 0)
        return print_props();
    if (argc != 1) {
        std::fprintf(stderr, "usage: occupancy_ref [props] < cases\n");
        return 2;
    }
    int major, minor, block_size, regs, limit_config, carveout, cache;
    size_t static_shared, dynamic_shared, max_dynamic;
    char line[256];
    while (std::fgets(line, sizeof line, stdin)) {
        if (std::sscanf(line, "%d %d %d %d %zu %zu %d %zu %d %d", &major, &minor, &block_size, &regs,
                        &static_shared, &dynamic_shared, &limit_config, &max_dynamic, &carveout,
                        &cache) != 10) {
            std::fprintf(stderr, "occupancy_ref: not a case: %s", line);
            return 2;
        }
        cudaOccDeviceProp prop;
        if (!device_prop(major, minor, &prop)) {
            std::fprintf(stderr, "occupancy_ref: no device values for %d.%d\n", major, minor);
            return 2;
        }
        cudaOccFuncAttributes attr;
        attr.maxThreadsPerBlock = 1024;
        attr.numRegs = regs;
        attr.sharedSizeBytes = static_shared;
        attr.partitionedGCConfig = PARTITIONED_GC_OFF;
        attr.shmemLimitConfig = limit_config ? FUNC_SHMEM_LIMIT_OPTIN : FUNC_SHMEM_LIMIT_DEFAULT;
        attr.maxDynamicSharedSizeBytes = max_dynamic;
        attr.numBlockBarriers = 1;
        attr.virtualResourceCount = 0;
        cudaOccDeviceState state;
        state.cacheConfig = (cudaOccCacheConfig)cache;
        state.carveoutConfig = carveout;
        cudaOccResult r;
        std::memset(&r, 0, sizeof r);
        cudaOccError rc = cudaOccMaxActiveBlocksPerMultiprocessor(&r, &prop, &attr, &state, block_size,
                                                                  dynamic_shared);
        std::printf("%d %d %u %d %d %d %d %d %d %zu\n", (int)rc, r.activeBlocksPerMultiprocessor,
                    r.limitingFactors, r.blockLimitRegs, r.blockLimitSharedMem, r.blockLimitWarps,
                    r.blockLimitBlocks, r.blockLimitBarriers, r.allocatedRegistersPerBlock,
                    r.allocatedSharedMemPerBlock);
    }
    return 0;
}
