// launch_patterns.cu — the ways real programs launch work that examples/demo_workload.cu does
// not, with known counts, for GPUFlow's exact-count check on a real GPU (scripts/gpu-check stage
// `patterns`). Four phases, each on its own NVTX-named stream or the null stream:
//
//   graph    a CUDA graph captured from a stream (two kernels, one twice; a pinned H2D copy, a
//            memset and a D2D copy as graph nodes), instantiated once and launched N times:
//            every node of every launch is one execution;
//   worker0..3  four host threads, each with its own non-blocking stream, launching kernels and
//            one D2H copy back to back at the same time;
//   alloc    the stream-ordered allocator: cudaMallocAsync, a memset and a kernel on the fresh
//            memory, cudaFreeAsync, N times;
//   default  synchronous copies from pageable host memory (plain cudaMemcpy, both ways) on the
//            legacy null stream;
//   peer     only with two GPUs that can reach each other: peer access enabled, a kernel on the
//            second GPU and peer copies from the first (cudaMemcpyPeerAsync), N times;
//   reset    cudaDeviceReset() ends the first context with its work done but perhaps not yet
//            handed over, then kernels and a memset in the new context on its null stream: work
//            from both sides of a context's end must be counted.
//
// At the end it prints the same block as demo_workload (kernel <mangled> <launches> <demangled>,
// copy <h2d|d2h|d2d|p2p|memset> <count> <bytes>, total kernels) between "==== gpuflow-demo-counts
// ====" and "==== end ====", plus one "lane <label>" line per stream name it used, each count incremented after the call that made the work succeeded
// (a graph launch adds its nodes). First argument: N (default 50). Every CUDA call is checked; a
// failure prints the call and exits 1.
//
// Build (CUDA 12/13; NVTX 3 is header-only): nvcc -O2 -o launch_patterns bench/workloads/launch_patterns.cu
#include <cuda_runtime.h>
#include <cxxabi.h>
#include <nvtx3/nvToolsExtCudaRt.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#define CHECK(call)                                                                            \
    do {                                                                                       \
        cudaError_t err_ = (call);                                                             \
        if (err_ != cudaSuccess) {                                                             \
            std::fprintf(stderr, "launch_patterns: %s failed at %s:%d: %s\n", #call, __FILE__, \
                         __LINE__, cudaGetErrorString(err_));                                  \
            std::exit(1);                                                                      \
        }                                                                                      \
    } while (0)

__global__ void graph_scale(float *x, int n, float a)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= a;
}

__global__ void graph_add(float *x, const float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] += y[i];
}

template <int Worker> __global__ void worker_step(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = x[i] * 0.5f + (float)Worker;
}

__global__ void fill_fresh(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] += 1.0f;
}

struct CopyCount {
    long long count = 0;
    long long bytes = 0;
};

static std::map<std::string, std::pair<std::string, long long>> g_kernels; // mangled -> (demangled, launches)
static CopyCount g_h2d, g_d2h, g_d2d, g_p2p, g_memset;
static std::vector<std::string> g_lanes;

static std::string mangled_of(const void *fn)
{
    const char *name = nullptr;
    CHECK(cudaFuncGetName(&name, fn));
    std::string m = name ? name : "?";
    if (!g_kernels.count(m)) {
        int status = 0;
        char *dem = abi::__cxa_demangle(m.c_str(), nullptr, nullptr, &status);
        g_kernels[m] = {(status == 0 && dem) ? dem : m, 0};
        std::free(dem);
    }
    return m;
}

static void add(CopyCount &c, long long n, size_t bytes)
{
    c.count += n;
    c.bytes += n * (long long)bytes;
}

static unsigned blocks(int n, int t)
{
    return (unsigned)((n + t - 1) / t);
}

static const int N_ELEMS = 1 << 16;
static const size_t BYTES = N_ELEMS * sizeof(float);

static void graph_phase(int launches)
{
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    nvtxNameCudaStreamA(s, "graph");
    g_lanes.push_back("graph");
    float *d_x, *d_y, *h_y;
    CHECK(cudaMalloc(&d_x, BYTES));
    CHECK(cudaMalloc(&d_y, BYTES));
    CHECK(cudaMallocHost(&h_y, BYTES));
    for (int i = 0; i < N_ELEMS; i++)
        h_y[i] = 1.0f;

    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    CHECK(cudaMemcpyAsync(d_y, h_y, BYTES, cudaMemcpyHostToDevice, s));
    CHECK(cudaMemsetAsync(d_x, 0, BYTES, s));
    graph_scale<<<blocks(N_ELEMS, 256), 256, 0, s>>>(d_x, N_ELEMS, 2.0f);
    graph_add<<<blocks(N_ELEMS, 256), 256, 0, s>>>(d_x, d_y, N_ELEMS);
    graph_add<<<blocks(N_ELEMS, 256), 256, 0, s>>>(d_x, d_y, N_ELEMS);
    CHECK(cudaMemcpyAsync(d_y, d_x, BYTES, cudaMemcpyDeviceToDevice, s));
    CHECK(cudaStreamEndCapture(s, &graph));
    CHECK(cudaGetLastError());
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    const std::string scale = mangled_of((const void *)&graph_scale);
    const std::string addk = mangled_of((const void *)&graph_add);
    for (int i = 0; i < launches; i++) {
        CHECK(cudaGraphLaunch(exec, s));
        g_kernels[scale].second += 1;
        g_kernels[addk].second += 2;
        add(g_h2d, 1, BYTES);
        add(g_memset, 1, BYTES);
        add(g_d2d, 1, BYTES);
    }
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaFreeHost(h_y));
    CHECK(cudaFree(d_y));
    CHECK(cudaFree(d_x));
    CHECK(cudaStreamDestroy(s));
}

struct WorkerResult {
    long long launches = 0;
    long long copies = 0;
};

template <int Worker> static void worker(int launches, WorkerResult *out)
{
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    char name[16];
    std::snprintf(name, sizeof name, "worker%d", Worker);
    nvtxNameCudaStreamA(s, name);
    float *d_x, *h_x;
    CHECK(cudaMalloc(&d_x, BYTES));
    CHECK(cudaMallocHost(&h_x, BYTES));
    CHECK(cudaMemsetAsync(d_x, 0, BYTES, s));
    for (int i = 0; i < launches; i++) {
        worker_step<Worker><<<blocks(N_ELEMS, 256), 256, 0, s>>>(d_x, N_ELEMS);
        CHECK(cudaGetLastError());
        out->launches++;
    }
    CHECK(cudaMemcpyAsync(h_x, d_x, BYTES, cudaMemcpyDeviceToHost, s));
    out->copies++;
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaFreeHost(h_x));
    CHECK(cudaFree(d_x));
    CHECK(cudaStreamDestroy(s));
}

static void threads_phase(int launches)
{
    // names looked up here, on one thread; the workers only count
    const std::string names[4] = {mangled_of((const void *)&worker_step<0>),
                                  mangled_of((const void *)&worker_step<1>),
                                  mangled_of((const void *)&worker_step<2>),
                                  mangled_of((const void *)&worker_step<3>)};
    WorkerResult results[4];
    for (int w = 0; w < 4; w++)
        g_lanes.push_back("worker" + std::to_string(w));
    std::vector<std::thread> threads;
    threads.emplace_back(worker<0>, launches, &results[0]);
    threads.emplace_back(worker<1>, launches, &results[1]);
    threads.emplace_back(worker<2>, launches, &results[2]);
    threads.emplace_back(worker<3>, launches, &results[3]);
    for (auto &t : threads)
        t.join();
    for (int w = 0; w < 4; w++) {
        g_kernels[names[w]].second += results[w].launches;
        add(g_memset, 1, BYTES);
        add(g_d2h, results[w].copies, BYTES);
    }
}

static void allocator_phase(int rounds)
{
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    nvtxNameCudaStreamA(s, "alloc");
    g_lanes.push_back("alloc");
    const std::string fill = mangled_of((const void *)&fill_fresh);
    for (int i = 0; i < rounds; i++) {
        float *d = nullptr;
        CHECK(cudaMallocAsync(&d, BYTES, s));
        CHECK(cudaMemsetAsync(d, 0, BYTES, s));
        add(g_memset, 1, BYTES);
        fill_fresh<<<blocks(N_ELEMS, 256), 256, 0, s>>>(d, N_ELEMS);
        CHECK(cudaGetLastError());
        g_kernels[fill].second++;
        CHECK(cudaFreeAsync(d, s));
    }
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaStreamDestroy(s));
}

static void pageable_phase(int rounds)
{
    std::vector<float> host(N_ELEMS, 3.0f);
    float *d;
    CHECK(cudaMalloc(&d, BYTES));
    for (int i = 0; i < rounds; i++) {
        CHECK(cudaMemcpy(d, host.data(), BYTES, cudaMemcpyHostToDevice));
        add(g_h2d, 1, BYTES);
        CHECK(cudaMemcpy(host.data(), d, BYTES, cudaMemcpyDeviceToHost));
        add(g_d2h, 1, BYTES);
    }
    CHECK(cudaFree(d));
    g_lanes.push_back("default");
}

__global__ void peer_touch(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] -= 1.0f;
}

__global__ void after_reset(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= 3.0f;
}

static void reset_phase(int rounds)
{
    CHECK(cudaSetDevice(0));
    CHECK(cudaDeviceReset());
    float *d;
    CHECK(cudaMalloc(&d, BYTES));
    CHECK(cudaMemset(d, 0, BYTES));
    add(g_memset, 1, BYTES);
    const std::string k = mangled_of((const void *)&after_reset);
    for (int i = 0; i < rounds; i++) {
        after_reset<<<blocks(N_ELEMS, 256), 256>>>(d, N_ELEMS);
        CHECK(cudaGetLastError());
        g_kernels[k].second++;
    }
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(d));
}

// Returns whether it ran: two GPUs that can access each other's memory.
static bool peer_phase(int rounds)
{
    int devices = 0, can = 0;
    CHECK(cudaGetDeviceCount(&devices));
    if (devices < 2)
        return false;
    CHECK(cudaDeviceCanAccessPeer(&can, 1, 0));
    if (!can)
        return false;
    float *src, *dst;
    CHECK(cudaSetDevice(0));
    CHECK(cudaMalloc(&src, BYTES));
    CHECK(cudaMemset(src, 0, BYTES));
    add(g_memset, 1, BYTES);
    CHECK(cudaSetDevice(1));
    cudaError_t e = cudaDeviceEnablePeerAccess(0, 0);
    if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
        CHECK(e);
    (void)cudaGetLastError(); // clear an "already enabled"
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    nvtxNameCudaStreamA(s, "peer");
    g_lanes.push_back("peer");
    CHECK(cudaMalloc(&dst, BYTES));
    const std::string touch = mangled_of((const void *)&peer_touch);
    for (int i = 0; i < rounds; i++) {
        CHECK(cudaMemcpyPeerAsync(dst, 1, src, 0, BYTES, s));
        add(g_p2p, 1, BYTES);
        peer_touch<<<blocks(N_ELEMS, 256), 256, 0, s>>>(dst, N_ELEMS);
        CHECK(cudaGetLastError());
        g_kernels[touch].second++;
    }
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(dst));
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(src));
    return true;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? std::atoi(argv[1]) : 50;
    if (n < 1) {
        std::fprintf(stderr, "usage: launch_patterns [N>=1]\n");
        return 2;
    }
    CHECK(cudaFree(nullptr)); // start CUDA (and the injected collector) before the phases
    graph_phase(n);
    threads_phase(n * 4);
    allocator_phase(n);
    pageable_phase(n / 5 + 1);
    const bool peer = peer_phase(n);
    CHECK(cudaDeviceSynchronize());
    reset_phase(n);

    long long total = 0;
    std::printf("launch_patterns: %d graph launches, 4 threads x %d launches, %d allocations, %d "
                "pageable round trips, %s, a device reset then %d launches\n", n, n * 4, n, n / 5 + 1,
                peer ? "peer copies between GPU 0 and 1" : "no peer phase (needs two GPUs with peer access)", n);
    std::printf("==== gpuflow-demo-counts ====\n");
    for (const auto &kv : g_kernels) {
        std::printf("kernel %s %lld %s\n", kv.first.c_str(), kv.second.second, kv.second.first.c_str());
        total += kv.second.second;
    }
    std::printf("copy h2d %lld %lld\n", g_h2d.count, g_h2d.bytes);
    std::printf("copy d2h %lld %lld\n", g_d2h.count, g_d2h.bytes);
    std::printf("copy d2d %lld %lld\n", g_d2d.count, g_d2d.bytes);
    std::printf("copy p2p %lld %lld\n", g_p2p.count, g_p2p.bytes);
    std::printf("copy memset %lld %lld\n", g_memset.count, g_memset.bytes);
    for (const auto &lane : g_lanes)
        std::printf("lane %s\n", lane.c_str());
    std::printf("total kernels %lld\n", total);
    std::printf("==== end ====\n");
    std::fflush(stdout);
    return 0;
}
