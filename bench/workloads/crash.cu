// crash.cu — a CUDA program that does known work and then dies the way it is told to.
//
// For the fault checks in scripts/gpu_faults.py: under `gpuflow run`, the program launches
// KERNELS kernels (one name, "crash_kernel"), synchronizes, prints `kernels=<n>`, waits WAIT_MS
// (longer than the flush period, so the flusher has handed every record to the ring) and then
// dies: `segv` (a null write), `abort` (SIGABRT), `kill` (SIGKILL to itself) or `exit` (a normal
// exit with status 3, the control case). gpuflow must report 128+N (or 3), drain what was
// flushed, mark the session truncated when the exit flush never ran, and leave no shm behind.
// Usage: crash <segv|abort|kill|exit> [kernels=1000] [wait_ms=400]
#include <cuda_runtime.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

__global__ void crash_kernel(float *data, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] = data[i] * 0.5f + 1.0f;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: crash <segv|abort|kill|exit> [kernels] [wait_ms]\n");
        return 2;
    }
    const char *how = argv[1];
    int kernels = argc > 2 ? atoi(argv[2]) : 1000;
    int wait_ms = argc > 3 ? atoi(argv[3]) : 400;
    const int n = 1 << 12;
    float *d = NULL;
    CHECK(cudaMalloc(&d, n * sizeof(float)));
    for (int i = 0; i < kernels; ++i) crash_kernel<<<n / 256, 256>>>(d, n);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    printf("kernels=%d\n", kernels);
    fflush(stdout);
    usleep(wait_ms * 1000);
    if (strcmp(how, "segv") == 0) {
        volatile int *null_pointer = NULL;
        *null_pointer = 1;
    } else if (strcmp(how, "abort") == 0) {
        abort();
    } else if (strcmp(how, "kill") == 0) {
        kill(getpid(), SIGKILL);
    } else if (strcmp(how, "exit") == 0) {
        return 3;
    }
    fprintf(stderr, "crash: unknown way to die: %s\n", how);
    return 2;
}
