// launch_storm.cu — tiny kernels launched back to back: the worst case for tracing overhead.
//
// Prints `per_launch_us=<x> launches=<n>` for the timed region only (after a warm-up), so
// bench/overhead.py compares bare, the minimal-CUPTI floor and gpuflow run on the same number.
// Usage: launch_storm [launches=200000] [batch=1000]
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

__global__ void tiny_kernel(int *p) { if (threadIdx.x == 0 && blockIdx.x == 0) p[0] += 1; }

static double now_s(void) {
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    long launches = argc > 1 ? atol(argv[1]) : 200000;
    long batch = argc > 2 ? atol(argv[2]) : 1000;
    int *d = NULL;
    CHECK(cudaMalloc(&d, sizeof(int)));
    CHECK(cudaMemset(d, 0, sizeof(int)));
    for (int i = 0; i < 2000; ++i) tiny_kernel<<<1, 32>>>(d);   // warm-up
    CHECK(cudaDeviceSynchronize());
    double t0 = now_s();
    for (long i = 0; i < launches; ++i) {
        tiny_kernel<<<1, 32>>>(d);
        if ((i + 1) % batch == 0) CHECK(cudaDeviceSynchronize());
    }
    CHECK(cudaDeviceSynchronize());
    double t1 = now_s();
    int h = 0;
    CHECK(cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost));
    if (h != launches + 2000) { fprintf(stderr, "wrong count %d\n", h); return 1; }
    printf("per_launch_us=%.4f launches=%ld elapsed_s=%.4f\n", (t1 - t0) * 1e6 / launches, launches, t1 - t0);
    return 0;
}
