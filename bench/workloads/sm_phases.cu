// sm_phases.cu - a GPU workload with known phases, for checking NVML GPM's figures
// (scripts/gpu_metrics.py, the `gpm` stage of scripts/gpu-check; docs/gpu-metrics.md).
//
// Phases, each announced on stdout as `phase <name> <start_s> <end_s> <bytes>` with
// CLOCK_MONOTONIC seconds (the same clock as Python's time.monotonic(), so another process can
// place its own readings in them):
//   idle  - nothing runs
//   all   - every SM busy at full occupancy: 2 x SMs blocks of 1024 threads spinning on clock64()
//   half  - half the SMs busy: SMs/2 blocks of 1024 threads, each holding more than half an SM's
//           shared memory, so no SM can hold two of them and exactly SMs/2 SMs are busy
//   low   - every SM busy at low occupancy: one block of 64 threads (2 warps) per SM, the same
//           shared memory trick
//   h2d   - synchronous copies from pinned host memory to the device, bytes counted exactly
//   d2h   - the same back
// Usage: sm_phases [seconds per phase (default 4)] [seconds of idle between phases (default 1.5)]
//
// Constraints: one GPU (device 0); every CUDA call checked (exit 1 with the call named); a spin
// kernel runs ~20 ms so a phase ends within that of its deadline; copies of 256 MiB each.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHECK(call)                                                                     \
    do {                                                                                \
        cudaError_t err_ = (call);                                                      \
        if (err_ != cudaSuccess) {                                                      \
            fprintf(stderr, "sm_phases: %s failed: %s\n", #call, cudaGetErrorString(err_)); \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

__global__ void spin(long long cycles) {
    extern __shared__ char hold[];  // only its size matters: it limits the blocks per SM
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
    if (threadIdx.x == 0 && cycles < 0) hold[0] = 0;  // never true: keeps the array
}

static void announce(const char *name, double start, double end, unsigned long long bytes) {
    printf("phase %s %.6f %.6f %llu\n", name, start, end, bytes);
    fflush(stdout);
}

static void idle(double seconds) {
    double start = now_s();
    while (now_s() - start < seconds) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    announce("idle", start, now_s(), 0);
}

static void spin_phase(const char *name, int blocks, int threads, size_t smem, long long cycles,
                       double seconds) {
    double start = now_s();
    while (now_s() - start < seconds) {
        spin<<<blocks, threads, smem>>>(cycles);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
    }
    announce(name, start, now_s(), 0);
}

static void copy_phase(const char *name, void *dst, const void *src, size_t chunk,
                       cudaMemcpyKind kind, double seconds) {
    unsigned long long bytes = 0;
    double start = now_s();
    while (now_s() - start < seconds) {
        CHECK(cudaMemcpy(dst, src, chunk, kind));
        bytes += chunk;
    }
    announce(name, start, now_s(), bytes);
}

int main(int argc, char **argv) {
    double phase_s = argc > 1 ? atof(argv[1]) : 4.0;
    double gap_s = argc > 2 ? atof(argv[2]) : 1.5;
    if (phase_s <= 0 || gap_s < 0) {
        fprintf(stderr, "usage: sm_phases [seconds per phase > 0] [idle seconds >= 0]\n");
        return 2;
    }
    int sms = 0, clock_khz = 0, smem_per_sm = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    CHECK(cudaDeviceGetAttribute(&smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0));
    size_t alone = (size_t)smem_per_sm / 2 + 1024;  // more than half an SM's: one block per SM
    CHECK(cudaFuncSetAttribute(spin, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)alone));
    long long cycles = (long long)clock_khz * 20;  // ~20 ms at the base clock
    printf("device sms=%d clock_khz=%d smem_per_sm=%d block_smem=%zu\n", sms, clock_khz,
           smem_per_sm, alone);
    fflush(stdout);

    size_t chunk = (size_t)256 << 20;
    void *host = NULL, *device = NULL;
    CHECK(cudaMallocHost(&host, chunk));
    CHECK(cudaMalloc(&device, chunk));
    CHECK(cudaMemset(device, 1, chunk));
    CHECK(cudaDeviceSynchronize());

    idle(gap_s + 1.0);
    spin_phase("all", 2 * sms, 1024, 0, cycles, phase_s);
    idle(gap_s);
    spin_phase("half", sms / 2, 1024, alone, cycles, phase_s);
    idle(gap_s);
    spin_phase("low", sms, 64, alone, cycles, phase_s);
    idle(gap_s);
    copy_phase("h2d", device, host, chunk, cudaMemcpyHostToDevice, phase_s);
    idle(gap_s);
    copy_phase("d2h", host, device, chunk, cudaMemcpyDeviceToHost, phase_s);
    idle(gap_s);
    CHECK(cudaFree(device));
    CHECK(cudaFreeHost(host));
    return 0;
}
