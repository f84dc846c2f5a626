// launch_storm.cu — tiny kernels launched back to back: the worst case for tracing overhead.
//
// Prints `per_launch_us=<x> launches=<n>` for the timed region only (after a warm-up), so
// bench/overhead.py compares bare, the minimal-CUPTI floor and gpuflow run on the same number,
// and `per_launch_us_median=<y>`: the median over 10 equal segments of that region, which a
// burst of noise in one segment does not move (bench/overhead.py records both).
// Usage: launch_storm [launches=200000] [batch=1000]
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

__global__ void tiny_kernel(int *p) { if (threadIdx.x == 0 && blockIdx.x == 0) p[0] += 1; }

static long long now_ns(void) {
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

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
    const char *trace_path = getenv("PROGRESS_TRACE");
    long points = trace_path && *trace_path && batch > 0 ? launches / batch + 1 : 0;
    long long *trace = points ? (long long *)malloc(sizeof(long long) * points) : NULL;
    if (points && !trace) { fprintf(stderr, "no memory for the progress trace\n"); return 1; }
    long traced = 0;
    enum { SEGMENTS = 10 };
    double seg[SEGMENTS];
    double t0 = now_s(), ts = t0;
    if (trace) trace[traced++] = now_ns();
    int s = 0;
    for (long i = 0; i < launches; ++i) {
        tiny_kernel<<<1, 32>>>(d);
        if ((i + 1) % batch == 0) {
            CHECK(cudaDeviceSynchronize());
            if (trace && traced < points) trace[traced++] = now_ns();
        }
        if (s < SEGMENTS && i + 1 == (launches * (s + 1)) / SEGMENTS) {   // segment s ends here
            CHECK(cudaDeviceSynchronize());
            double t = now_s();
            long n = launches * (s + 1) / SEGMENTS - launches * s / SEGMENTS;
            seg[s++] = n > 0 ? (t - ts) * 1e6 / n : 0;
            ts = t;
        }
    }
    CHECK(cudaDeviceSynchronize());
    double t1 = now_s();
    for (int a = 1; a < s; ++a)   // insertion sort: s <= 10
        for (int b = a; b > 0 && seg[b - 1] > seg[b]; --b) { double x = seg[b]; seg[b] = seg[b - 1]; seg[b - 1] = x; }
    double median = s ? (s % 2 ? seg[s / 2] : (seg[s / 2 - 1] + seg[s / 2]) / 2) : 0;
    int h = 0;
    CHECK(cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost));
    if (h != launches + 2000) { fprintf(stderr, "wrong count %d\n", h); return 1; }
    if (trace) {
        FILE *f = fopen(trace_path, "w");
        if (!f) { perror(trace_path); return 1; }
        for (long p = 0; p < traced; ++p) fprintf(f, "%lld %ld\n", trace[p], p * batch);
        if (fclose(f) != 0) { perror(trace_path); return 1; }
        free(trace);
    }
    printf("per_launch_us=%.4f launches=%ld elapsed_s=%.4f per_launch_us_median=%.4f\n",
           (t1 - t0) * 1e6 / launches, launches, t1 - t0, median);
    return 0;
}
