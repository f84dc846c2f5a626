// cupti_holder.cu — a CUDA program that uses CUPTI itself, as an in-process profiler would.
//
// For scripts/gpu_faults.py: the two ways another CUPTI client meets GPUFlow's injected library.
//   holder subscribe  — cuptiSubscribe before any CUDA call (a tool that holds CUPTI first, as
//                       nsys/ncu or an early-initialised profiler do); then 200 kernels.
//   holder steal      — CUDA first (GPUFlow is injected at cuInit and subscribes), 50 kernels,
//                       then the program registers its own activity callbacks, as Kineto does,
//                       and launches a kernel every 5 ms for 6 s: GPUFlow's buffers stop moving.
// Prints what it saw (`subscribe=<CUptiResult>`, `register=.. enable=..`, whether its own buffers
// received kernel records) on stdout, which must be the same traced or not: GPUFlow must say what happened, never harm the program.
// Build: nvcc -I$CUDA_HOME/include -o holder cupti_holder.cu -L<cupti lib dir> -lcupti
#include <cuda_runtime.h>
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

__global__ void holder_kernel(float *data, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] = data[i] * 0.5f + 1.0f;
}

static unsigned long long g_kernel_records;

static void CUPTIAPI on_request(uint8_t **buffer, size_t *size, size_t *max_records) {
    *size = 1 << 20;
    *buffer = (uint8_t *)aligned_alloc(8, *size);
    *max_records = 0;
}

static void CUPTIAPI on_complete(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                 size_t valid) {
    (void)ctx; (void)stream; (void)size;
    CUpti_Activity *record = NULL;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS)
        if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) ++g_kernel_records;
    free(buffer);
}

static void CUPTIAPI on_callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                                 const void *data) {
    (void)userdata; (void)domain; (void)id; (void)data;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    const int n = 1 << 12;
    float *d = NULL;
    int kernels = 0;
    if (strcmp(mode, "subscribe") == 0) {
        CUpti_SubscriberHandle subscriber;
        CUptiResult r = cuptiSubscribe(&subscriber, (CUpti_CallbackFunc)on_callback, NULL);
        printf("subscribe=%d\n", (int)r);
        CHECK(cudaMalloc(&d, n * sizeof(float)));
        for (; kernels < 200; ++kernels) holder_kernel<<<n / 256, 256>>>(d, n);
        CHECK(cudaDeviceSynchronize());
    } else if (strcmp(mode, "steal") == 0) {
        CHECK(cudaMalloc(&d, n * sizeof(float)));
        for (; kernels < 50; ++kernels) holder_kernel<<<n / 256, 256>>>(d, n);
        CHECK(cudaDeviceSynchronize());
        usleep(300 * 1000);
        CUptiResult r = cuptiActivityRegisterCallbacks(on_request, on_complete);
        CUptiResult e = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        printf("register=%d enable=%d\n", (int)r, (int)e);
        double end = now_s() + 6.0;
        while (now_s() < end) {
            holder_kernel<<<n / 256, 256>>>(d, n);
            ++kernels;
            CHECK(cudaDeviceSynchronize());
            usleep(5000);
        }
        cuptiActivityFlushAll(1);
    } else {
        fprintf(stderr, "usage: holder <subscribe|steal>\n");
        return 2;
    }
    CHECK(cudaFree(d));
    // stdout is the same traced or not; the exact figures (timing-dependent in steal mode) go to stderr
    printf("holder_kernel_records=%s\n", g_kernel_records ? "some" : "none");
    fprintf(stderr, "kernels=%d holder_kernel_records=%llu\n", kernels, g_kernel_records);
    return 0;
}
