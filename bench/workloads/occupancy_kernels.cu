// occupancy_kernels.cu — kernels with known occupancy limiters, each launched once, for the GPU
// check's `occupancy` stage (scripts/gpu_occupancy.py runs this under `gpuflow run` and compares
// the driver's blocks per SM with gpuflow/collectors/cupti/occupancy.py's).
//
//   nvcc -O2 -o occupancy_kernels bench/workloads/occupancy_kernels.cu && ./occupancy_kernels
//
// It prints, between `==== occupancy-kernels ====` and `==== end ====`, one `device` line (the
// compute capability, SM count and the cudaDeviceProp values the calculator takes) and one
// `kernel` line per kernel: its name, grid, block, registers per thread and static shared memory
// (cudaFuncGetAttributes), the dynamic shared memory, the opt-in, requested carve-out and cache
// preference it was launched with, the limiter it was written to have, and
// cudaOccupancyMaxActiveBlocksPerMultiprocessor's answer for that configuration; a cluster
// launch's line adds cudaOccupancyMaxActiveClusters'. Kernels are extern "C" so that their
// names in the trace are the names printed.
//
// The limiters: registers (a block of live values that the compiler keeps in registers), shared
// memory (100 KiB dynamic, opted in; 40 KiB static), a requested 25 % carve-out and a prefer-L1
// cache config (each with 12 KiB a block), blocks per SM (blocks of one warp), warps (full
// blocks), and a grid of exactly three full waves beside one with a one-block tail wave; on
// compute capability 9.0 and newer, a cluster launch of 2 blocks a cluster.
//
// Constraints: one GPU (device 0), a second or so; exit status 1 with the failing call named when
// CUDA fails (no GPU), 2 for arguments (it takes none).
#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define CHECK(call)                                                                        \
    do {                                                                                   \
        cudaError_t err_ = (call);                                                         \
        if (err_ != cudaSuccess) {                                                         \
            std::fprintf(stderr, "occupancy_kernels: %s failed: %s\n", #call,              \
                         cudaGetErrorString(err_));                                        \
            std::exit(1);                                                                  \
        }                                                                                  \
    } while (0)

#define REG_VALUES 96

// Many values live at once: the compiler keeps them in registers (over 100 a thread on sm_90).
extern "C" __global__ void __launch_bounds__(256) occ_registers(float *out, float seed)
{
    float v[REG_VALUES];
#pragma unroll
    for (int i = 0; i < REG_VALUES; ++i)
        v[i] = seed * (threadIdx.x + i + 1);
#pragma unroll
    for (int round = 0; round < 4; ++round) {
#pragma unroll
        for (int i = 0; i < REG_VALUES; ++i)
            v[i] = v[i] * v[(i + 7) % REG_VALUES] + v[(i + 13) % REG_VALUES];
    }
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < REG_VALUES; ++i)
        sum += v[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

extern "C" __global__ void occ_dynamic_shared(float *out, int words)
{
    extern __shared__ float tile[];
    for (int i = threadIdx.x; i < words; i += blockDim.x)
        tile[i] = (float)(i + blockIdx.x);
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = tile[(threadIdx.x * 31) % words];
}

#define STATIC_WORDS (40 * 1024 / 4)

extern "C" __global__ void occ_static_shared(float *out)
{
    __shared__ float tile[STATIC_WORDS];
    for (int i = threadIdx.x; i < STATIC_WORDS; i += blockDim.x)
        tile[i] = (float)(i + blockIdx.x);
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = tile[(threadIdx.x * 17) % STATIC_WORDS];
}

extern "C" __global__ void occ_carveout(float *out, int words)
{
    extern __shared__ float tile[];
    for (int i = threadIdx.x; i < words; i += blockDim.x)
        tile[i] = (float)i;
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = tile[threadIdx.x % words];
}

extern "C" __global__ void occ_prefer_l1(float *out, int words)
{
    extern __shared__ float tile[];
    for (int i = threadIdx.x; i < words; i += blockDim.x)
        tile[i] = (float)i;
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = tile[threadIdx.x % words];
}

extern "C" __global__ void occ_tiny_blocks(float *out)
{
    out[blockIdx.x * blockDim.x + threadIdx.x] = (float)blockIdx.x;
}

extern "C" __global__ void occ_full_waves(float *out)
{
    out[blockIdx.x * blockDim.x + threadIdx.x] = (float)threadIdx.x;
}

extern "C" __global__ void occ_tail_wave(float *out)
{
    out[blockIdx.x * blockDim.x + threadIdx.x] = (float)threadIdx.x;
}

extern "C" __global__ void occ_cluster(float *out)
{
    out[blockIdx.x * blockDim.x + threadIdx.x] = (float)blockIdx.x;
}

struct Launch {
    const char *name;
    const void *func;
    const char *limiter;      // what it was written to be limited by
    int block;
    size_t dynamic_shared;
    bool optin;               // cudaFuncAttributeMaxDynamicSharedMemorySize set to its size
    int carveout;             // cudaFuncAttributePreferredSharedMemoryCarveout, -1: not set
    cudaFuncCache cache;      // cudaFuncSetCacheConfig
    double waves;             // grid = waves x blocks per SM x SMs (rounded up); 0: one block per SM
    int cluster;              // blocks a cluster, 0: not a cluster launch
};

static float *g_out;
static int g_sms;

static int report(const Launch &l, int grid)
{
    cudaFuncAttributes attr;
    CHECK(cudaFuncGetAttributes(&attr, l.func));
    int driver = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&driver, l.func, l.block, l.dynamic_shared));
    std::printf("kernel %s grid=%d,1,1 block=%d,1,1 registers=%d static_shared=%zu dynamic_shared=%zu "
                "optin=%d carveout=%d cache=%d cluster=%d,1,1 expect=%s driver_blocks_per_sm=%d",
                l.name, grid, l.block, attr.numRegs, attr.sharedSizeBytes, l.dynamic_shared,
                l.optin ? 1 : 0, l.carveout, (int)l.cache, l.cluster, l.limiter, driver);
    return driver;
}

static void configure(const Launch &l)
{
    if (l.optin)
        CHECK(cudaFuncSetAttribute(l.func, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)l.dynamic_shared));
    if (l.carveout >= 0)
        CHECK(cudaFuncSetAttribute(l.func, cudaFuncAttributePreferredSharedMemoryCarveout, l.carveout));
    if (l.cache != cudaFuncCachePreferNone)
        CHECK(cudaFuncSetCacheConfig(l.func, l.cache));
}

static void run(const Launch &l)
{
    configure(l);
    // the grid from the driver's own blocks per SM, so that the waves are what the line says
    int driver = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&driver, l.func, l.block, l.dynamic_shared));
    int per_wave = driver * g_sms;
    int grid = l.waves > 0 ? (int)(l.waves * per_wave + 0.999999) : g_sms;
    if (l.cluster)
        grid = (grid + l.cluster - 1) / l.cluster * l.cluster;
    report(l, grid);
    int words = (int)(l.dynamic_shared / sizeof(float));
    void *args_words[] = {&g_out, &words};
    void *args_out[] = {&g_out};
    void **args = l.dynamic_shared ? args_words : args_out;
    float seed = 1.0001f;
    void *args_regs[] = {&g_out, &seed};
    if (l.func == (const void *)occ_registers)
        args = args_regs;
    if (l.cluster) {
        cudaLaunchConfig_t config = {};
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = l.cluster;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = 1;
        config.gridDim = dim3(grid);
        config.blockDim = dim3(l.block);
        config.dynamicSmemBytes = l.dynamic_shared;
        config.attrs = attr;
        config.numAttrs = 1;
        int clusters = 0;
        CHECK(cudaOccupancyMaxActiveClusters(&clusters, l.func, &config));
        std::printf(" driver_max_active_clusters=%d\n", clusters);
        CHECK(cudaLaunchKernelExC(&config, l.func, args));
    } else {
        std::printf("\n");
        CHECK(cudaLaunchKernel(l.func, dim3(grid), dim3(l.block), args, l.dynamic_shared, 0));
    }
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
}

int main(int argc, char **argv)
{
    (void)argv;
    if (argc != 1) {
        std::fprintf(stderr, "usage: occupancy_kernels (no arguments)\n");
        return 2;
    }
    cudaDeviceProp p;
    CHECK(cudaGetDeviceProperties(&p, 0));
    g_sms = p.multiProcessorCount;
    // one float a thread: no grid below has more than 3 waves of an SM's 2,048 threads
    CHECK(cudaMalloc(&g_out, (size_t)g_sms * 2048 * 4 * sizeof(float)));
    std::printf("==== occupancy-kernels ====\n");
    std::printf("device cc=%d.%d sms=%d max_threads_per_sm=%d max_threads_per_block=%d regs_per_sm=%d "
                "regs_per_block=%d shared_per_sm=%zu shared_per_block=%zu shared_optin=%zu reserved=%zu "
                "name=%s\n", p.major, p.minor, p.multiProcessorCount, p.maxThreadsPerMultiProcessor,
                p.maxThreadsPerBlock, p.regsPerMultiprocessor, p.regsPerBlock, p.sharedMemPerMultiprocessor,
                p.sharedMemPerBlock, p.sharedMemPerBlockOptin, p.reservedSharedMemPerBlock, p.name);
    const size_t big = 100 * 1024, small = 12 * 1024;
    const Launch launches[] = {
        {"occ_registers", (const void *)occ_registers, "registers", 256, 0, false, -1, cudaFuncCachePreferNone, 2, 0},
        {"occ_dynamic_shared", (const void *)occ_dynamic_shared, "shared_memory", 128, big, true, -1,
         cudaFuncCachePreferNone, 2, 0},
        {"occ_static_shared", (const void *)occ_static_shared, "shared_memory", 128, 0, false, -1,
         cudaFuncCachePreferNone, 2, 0},
        {"occ_carveout", (const void *)occ_carveout, "shared_memory", 64, small, false, 25, cudaFuncCachePreferNone, 2, 0},
        {"occ_prefer_l1", (const void *)occ_prefer_l1, "shared_memory", 64, small, false, -1, cudaFuncCachePreferL1, 2, 0},
        {"occ_tiny_blocks", (const void *)occ_tiny_blocks, "blocks", 32, 0, false, -1, cudaFuncCachePreferNone, 3, 0},
        {"occ_full_waves", (const void *)occ_full_waves, "warps", 1024, 0, false, -1, cudaFuncCachePreferNone, 3, 0},
        {"occ_tail_wave", (const void *)occ_tail_wave, "warps", 1024, 0, false, -1, cudaFuncCachePreferNone, 0, 0},
    };
    for (const Launch &l : launches) {
        if (l.func == (const void *)occ_tail_wave) {
            Launch tail = l;   // two full waves and one block more
            int driver = 0;
            CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&driver, l.func, l.block, 0));
            tail.waves = 2.0 + 1.0 / (driver * g_sms);
            run(tail);
        } else {
            run(l);
        }
    }
    if (p.major >= 9) {
        const Launch cluster = {"occ_cluster", (const void *)occ_cluster, "warps", 1024, 0, false, -1,
                                cudaFuncCachePreferNone, 1, 2};
        run(cluster);
    }
    std::printf("==== end ====\n");
    CHECK(cudaFree(g_out));
    return 0;
}
