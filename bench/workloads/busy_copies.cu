// busy_copies.cu — a process that keeps the GPU busy, one that mostly sleeps, and copies of known
// bytes from pinned and pageable memory, for the GPU check's `activity` stage
// (scripts/gpu_activity.py runs each mode under `gpuflow run` and judges the summary's GPU busy
// share and copy bandwidth against what this program printed).
//
//   nvcc -O2 -o busy_copies bench/workloads/busy_copies.cu
//   ./busy_copies busy SECONDS      # spin kernels of 5 ms back to back for SECONDS
//   ./busy_copies sleep SECONDS     # one tiny kernel every 200 ms, sleeping in between
//   ./busy_copies copies [MIB [COUNT]]   # COUNT copies of MIB MiB each way, pinned and pageable
//
// Every mode first prints `device index=0 pci_bus_id=<domain:bus:device.function> sms=<n>
// name=<name>` (the bus id names the GPU to NVML), then one line of what it did, `key=value`
// words after a keyword:
//
//   busy kernels=<n> kernel_ms=5 host_s=<first launch to last kernel's end, host clock>
//   sleep kernels=<n> period_ms=200 host_s=<...>
//   copy direction=<h2d|d2h> memory=<pinned|pageable> bytes=<total> count=<copies>
//        host_s=<the copies' own host time, summed> host_bytes_per_s=<bytes / host_s>
//
// (one `copy` line per direction and memory). The kernels are extern "C" (busy_spin, sleep_tick)
// so that the trace names them as printed. A busy kernel spins on the GPU's global timer for
// 5 ms on every SM; the host keeps at most three in flight (waiting on the event of the one
// three back), so the next is always queued and the GPU never waits for the host. The copies are
// synchronous cudaMemcpy calls (one CUPTI record each), in rounds of h2d pinned, d2h pinned, h2d
// pageable, d2h pageable; the pageable buffer is written once before, so its pages exist.
//
// Constraints: one GPU (device 0); SECONDS in (0, 600]; MIB in [1, 4096], COUNT in [1, 64]
// (defaults 256 and 4: 1 GiB each way from each memory, about a second on PCIe gen 5); exit
// status 1 with the failing CUDA call named (no GPU: the first one), 2 for bad arguments.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include <cuda_runtime.h>

#define CHECK(call)                                                                        \
    do {                                                                                   \
        cudaError_t err_ = (call);                                                         \
        if (err_ != cudaSuccess) {                                                         \
            std::fprintf(stderr, "busy_copies: %s failed: %s\n", #call,                    \
                         cudaGetErrorString(err_));                                        \
            std::exit(1);                                                                  \
        }                                                                                  \
    } while (0)

static const unsigned long long BUSY_KERNEL_NS = 5000000ull;   // 5 ms a busy kernel
static const int IN_FLIGHT = 3;                                  // busy kernels queued at most
static const int SLEEP_PERIOD_MS = 200;

static __device__ __forceinline__ unsigned long long global_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Spins for `ns` of the GPU's global timer; `sink` is written only if the timer stood still,
// which never happens, so the loop is kept.
extern "C" __global__ void busy_spin(unsigned long long ns, int *sink)
{
    const unsigned long long start = global_ns();
    unsigned long long now = start;
    while (now - start < ns)
        now = global_ns();
    if (now == start && threadIdx.x == 0)
        *sink = (int)blockIdx.x;
}

extern "C" __global__ void sleep_tick(int *sink)
{
    if (threadIdx.x == 0)
        *sink += 1;
}

static double now_s()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
    if (s <= 0)
        return;
    timespec t;
    t.tv_sec = (time_t)s;
    t.tv_nsec = (long)((s - (double)t.tv_sec) * 1e9);
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

static int usage()
{
    std::fprintf(stderr, "usage: busy_copies busy SECONDS | sleep SECONDS | copies [MIB [COUNT]]\n"
                         "  SECONDS in (0, 600], MIB in [1, 4096], COUNT in [1, 64]\n");
    return 2;
}

// A whole-string number in [low, high], else false.
static bool number(const char *text, double low, double high, double *out)
{
    char *end = nullptr;
    errno = 0;
    const double v = std::strtod(text, &end);
    if (errno != 0 || end == text || *end != '\0' || !(v >= low && v <= high))
        return false;
    *out = v;
    return true;
}

static int device_line()
{
    cudaDeviceProp p;
    CHECK(cudaGetDeviceProperties(&p, 0));
    char bus[32] = {0};
    CHECK(cudaDeviceGetPCIBusId(bus, (int)sizeof bus, 0));
    std::printf("device index=0 pci_bus_id=%s sms=%d name=%s\n", bus, p.multiProcessorCount, p.name);
    return p.multiProcessorCount;
}

static void busy(double seconds, int sms)
{
    int *sink = nullptr;
    CHECK(cudaMalloc(&sink, sizeof(int)));
    cudaEvent_t done[IN_FLIGHT];
    for (cudaEvent_t &e : done)
        CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming | cudaEventBlockingSync));
    long kernels = 0;
    const double start = now_s();
    while (now_s() - start < seconds) {
        cudaEvent_t &slot = done[kernels % IN_FLIGHT];
        if (kernels >= IN_FLIGHT)
            CHECK(cudaEventSynchronize(slot));   // the kernel three back has ended: two are still queued
        busy_spin<<<sms, 64>>>(BUSY_KERNEL_NS, sink);
        CHECK(cudaGetLastError());
        CHECK(cudaEventRecord(slot, 0));
        ++kernels;
    }
    CHECK(cudaDeviceSynchronize());
    const double host = now_s() - start;
    std::printf("busy kernels=%ld kernel_ms=%llu host_s=%.6f\n", kernels, BUSY_KERNEL_NS / 1000000ull, host);
    for (cudaEvent_t &e : done)
        CHECK(cudaEventDestroy(e));
    CHECK(cudaFree(sink));
}

static void sleeper(double seconds)
{
    int *sink = nullptr;
    CHECK(cudaMalloc(&sink, sizeof(int)));
    long kernels = 0;
    const double start = now_s();
    while (now_s() - start < seconds) {
        sleep_tick<<<1, 32>>>(sink);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        ++kernels;
        sleep_s(start + kernels * (SLEEP_PERIOD_MS / 1000.0) - now_s());
    }
    const double host = now_s() - start;
    std::printf("sleep kernels=%ld period_ms=%d host_s=%.6f\n", kernels, SLEEP_PERIOD_MS, host);
    CHECK(cudaFree(sink));
}

struct CopyTally {
    const char *direction, *memory;
    unsigned long long bytes;
    int count;
    double host_s;
};

static void timed_copy(CopyTally &tally, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    const double t = now_s();
    CHECK(cudaMemcpy(dst, src, bytes, kind));
    tally.host_s += now_s() - t;
    tally.bytes += bytes;
    tally.count += 1;
}

static void copies(size_t mib, int count)
{
    const size_t bytes = mib << 20;
    void *device = nullptr, *pinned = nullptr;
    CHECK(cudaMalloc(&device, bytes));
    CHECK(cudaMallocHost(&pinned, bytes));
    void *pageable = std::malloc(bytes);
    if (pageable == nullptr) {
        std::fprintf(stderr, "busy_copies: malloc(%zu) of the pageable buffer failed\n", bytes);
        std::exit(1);
    }
    std::memset(pageable, 1, bytes);   // its pages exist before the first copy
    std::memset(pinned, 2, bytes);
    CopyTally tally[4] = {{"h2d", "pinned", 0, 0, 0}, {"d2h", "pinned", 0, 0, 0},
                          {"h2d", "pageable", 0, 0, 0}, {"d2h", "pageable", 0, 0, 0}};
    for (int round = 0; round < count; ++round) {
        timed_copy(tally[0], device, pinned, bytes, cudaMemcpyHostToDevice);
        timed_copy(tally[1], pinned, device, bytes, cudaMemcpyDeviceToHost);
        timed_copy(tally[2], device, pageable, bytes, cudaMemcpyHostToDevice);
        timed_copy(tally[3], pageable, device, bytes, cudaMemcpyDeviceToHost);
    }
    for (const CopyTally &t : tally)
        std::printf("copy direction=%s memory=%s bytes=%llu count=%d host_s=%.6f host_bytes_per_s=%.0f\n",
                    t.direction, t.memory, t.bytes, t.count, t.host_s, t.host_s > 0 ? t.bytes / t.host_s : 0.0);
    std::free(pageable);
    CHECK(cudaFreeHost(pinned));
    CHECK(cudaFree(device));
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    const char *mode = argv[1];
    double seconds = 0, mib = 256, count = 4;
    if (std::strcmp(mode, "busy") == 0 || std::strcmp(mode, "sleep") == 0) {
        if (argc != 3 || !number(argv[2], 1e-3, 600, &seconds))
            return usage();
    } else if (std::strcmp(mode, "copies") == 0) {
        if (argc > 4 || (argc > 2 && !number(argv[2], 1, 4096, &mib)) || (argc > 3 && !number(argv[3], 1, 64, &count))
            || mib != (double)(long)mib || count != (double)(long)count)
            return usage();
    } else {
        return usage();
    }
    const int sms = device_line();
    if (mode[0] == 'b')
        busy(seconds, sms);
    else if (mode[0] == 's')
        sleeper(seconds);
    else
        copies((size_t)mib, (int)count);
    std::fflush(stdout);
    return 0;
}
