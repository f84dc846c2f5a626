// pulse.cu — one short kernel every PERIOD ms, for the kernel-end → browser latency benchmark.
//
// bench/latency.py runs this under `gpuflow run` and, over SSE, measures for every pulse_kernel
// span the time from the kernel's end (CUPTI timestamp mapped to wall clock) to the moment the
// frame carrying it reaches the client. Usage: pulse [count=100] [period_ms=50] [delay_ms=2000]
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

__global__ void pulse_kernel(float *data, int n, int spins) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = data[i];
        for (int k = 0; k < spins; ++k) v = v * 0.999f + 0.001f;
        data[i] = v;
    }
}

int main(int argc, char **argv) {
    int count = argc > 1 ? atoi(argv[1]) : 100;
    int period_ms = argc > 2 ? atoi(argv[2]) : 50;
    int delay_ms = argc > 3 ? atoi(argv[3]) : 2000;
    const int n = 1 << 16;
    float *d = NULL;
    CHECK(cudaMalloc(&d, n * sizeof(float)));
    CHECK(cudaMemset(d, 0, n * sizeof(float)));
    CHECK(cudaDeviceSynchronize());
    usleep(delay_ms * 1000);
    for (int i = 0; i < count; ++i) {
        pulse_kernel<<<n / 256, 256>>>(d, n, 2000);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        usleep(period_ms * 1000);
    }
    CHECK(cudaFree(d));
    printf("pulses=%d\n", count);
    return 0;
}
