// demo_workload.cu — a transformer-shaped CUDA workload with known kernel and copy counts.
//
// What it is for: GPUFlow's end-to-end check on a real GPU. Run it under `gpuflow run` and the
// per-kernel launch counts and per-direction copy counts GPUFlow reports must equal the ones
// this program prints at the end. It is written to make the lanes legible: three streams named
// with nvtxNameCudaStreamA ("compute", "prefetch_h2d", "offload_d2h") plus work on the legacy
// null stream ("default" in GPUFlow), pinned-memory H2D prefetches and D2H offloads, a D2D copy
// per step, a memset per step, and several distinct kernels, two of them templates so that
// demangling matters.
//
// Build (CUDA 12/13; NVTX 3 is header-only, no -lnvToolsExt):
//     nvcc -O2 -lineinfo -o demo_workload examples/demo_workload.cu
// Run:  ./demo_workload [iterations=100] [layers=2]
//
// Output: a human line per phase, then a machine-readable block that a checker parses:
//     ==== gpuflow-demo-counts ====
//     iterations <n>
//     kernel <mangled-name> <launches> <demangled name, rest of the line>
//     copy h2d <count> <bytes>
//     copy d2h <count> <bytes>
//     copy d2d <count> <bytes>
//     copy memset <count> <bytes>
//     total kernels <n>
//     ==== end ====
// Every count is incremented right after the CUDA call that made the work succeeded; nothing in
// the block is a constant. Every CUDA call is checked; a failure prints the call and exits 1.
#include <cuda_runtime.h>
#include <cxxabi.h>
#include <nvtx3/nvToolsExtCudaRt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#define CHECK(call)                                                                            \
    do {                                                                                       \
        cudaError_t err_ = (call);                                                             \
        if (err_ != cudaSuccess) {                                                             \
            std::fprintf(stderr, "demo_workload: %s failed at %s:%d: %s\n", #call, __FILE__,  \
                         __LINE__, cudaGetErrorString(err_));                                  \
            std::exit(1);                                                                      \
        }                                                                                      \
    } while (0)

// ------------------------------------------------------------------------------------------ //
// kernels (cheap but real work, so spans have width)                                          //

__global__ void embed(float *out, const int *tokens, const float *table, int n, int dim)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = table[(tokens[i / dim] % 1024) * dim + i % dim];
}

__global__ void layernorm(float *x, int rows, int dim)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows)
        return;
    float mean = 0.f, var = 0.f;
    for (int j = 0; j < dim; j++)
        mean += x[r * dim + j];
    mean /= dim;
    for (int j = 0; j < dim; j++) {
        float d = x[r * dim + j] - mean;
        var += d * d;
    }
    float inv = rsqrtf(var / dim + 1e-5f);
    for (int j = 0; j < dim; j++)
        x[r * dim + j] = (x[r * dim + j] - mean) * inv;
}

__global__ void qkv_proj(float *qkv, const float *x, const float *w, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < 3 * n)
        qkv[i] = x[i % n] * w[i % 4096];
}

__global__ void attention(float *scores, const float *qkv, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float acc = 0.f;
        for (int k = 0; k < 32; k++)
            acc += qkv[i] * qkv[n + (i + k) % n];
        scores[i] = acc;
    }
}

template <typename T, int BLOCK>
__global__ void softmax(T *x, int rows, int cols)
{
    int r = blockIdx.x;
    if (r >= rows)
        return;
    __shared__ T red[BLOCK];
    T m = x[r * cols];
    for (int j = threadIdx.x; j < cols; j += BLOCK)
        m = x[r * cols + j] > m ? x[r * cols + j] : m;
    red[threadIdx.x] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int j = 1; j < BLOCK; j++)
            m = red[j] > m ? red[j] : m;
        red[0] = m;
    }
    __syncthreads();
    m = red[0];
    for (int j = threadIdx.x; j < cols; j += BLOCK)
        x[r * cols + j] = (T)expf((float)(x[r * cols + j] - m));
}

__global__ void mlp_up(float *h, const float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < 4 * n)
        h[i] = x[i % n] * 1.5f + 0.25f;
}

__global__ void gelu(float *h, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = h[i];
        h[i] = 0.5f * v * (1.f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
    }
}

__global__ void mlp_down(float *x, const float *h, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] += 0.25f * (h[i] + h[n + i] + h[2 * n + i] + h[3 * n + i]);
}

template <typename T>
__global__ void residual_add(T *x, const T *y, int n, T scale)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] += scale * y[i];
}

namespace optim {
__global__ void sgd_step(float *w, const float *g, int n, float lr)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        w[i] -= lr * g[i];
}
} // namespace optim

// ------------------------------------------------------------------------------------------ //
// bookkeeping                                                                                 //

struct KernelCount {
    std::string demangled;
    long long launches = 0;
};

struct CopyCount {
    long long count = 0;
    long long bytes = 0;
};

static std::map<std::string, KernelCount> g_kernels; // by mangled name
static std::map<const void *, std::string> g_mangled;
static CopyCount g_h2d, g_d2h, g_d2d, g_memset;

static const std::string &mangled_of(const void *fn)
{
    auto it = g_mangled.find(fn);
    if (it != g_mangled.end())
        return it->second;
    const char *name = nullptr;
    CHECK(cudaFuncGetName(&name, fn));
    std::string m = name ? name : "?";
    int status = 0;
    char *dem = abi::__cxa_demangle(m.c_str(), nullptr, nullptr, &status);
    g_kernels[m].demangled = (status == 0 && dem) ? dem : m;
    std::free(dem);
    return g_mangled[fn] = m;
}

// Launch through the runtime's <<<>>> path, then count it once the launch succeeded.
#define LAUNCH(kernel, grid, block, smem, stream, ...)                                         \
    do {                                                                                       \
        kernel<<<(grid), (block), (smem), (stream)>>>(__VA_ARGS__);                            \
        CHECK(cudaGetLastError());                                                             \
        g_kernels[mangled_of((const void *)&kernel)].launches++;                               \
    } while (0)

static void copy_async(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                       cudaStream_t s)
{
    CHECK(cudaMemcpyAsync(dst, src, bytes, kind, s));
    CopyCount &c = kind == cudaMemcpyHostToDevice   ? g_h2d
                   : kind == cudaMemcpyDeviceToHost ? g_d2h
                                                    : g_d2d;
    c.count++;
    c.bytes += (long long)bytes;
}

static void memset_async(void *dst, int value, size_t bytes, cudaStream_t s)
{
    CHECK(cudaMemsetAsync(dst, value, bytes, s));
    g_memset.count++;
    g_memset.bytes += (long long)bytes;
}

static unsigned blocks(int n, int t)
{
    return (unsigned)((n + t - 1) / t);
}

// ------------------------------------------------------------------------------------------ //

int main(int argc, char **argv)
{
    int iterations = argc > 1 ? std::atoi(argv[1]) : 100;
    int layers = argc > 2 ? std::atoi(argv[2]) : 2;
    if (iterations < 0 || layers < 1) {
        std::fprintf(stderr, "usage: demo_workload [iterations>=0] [layers>=1]\n");
        return 2;
    }
    const int seq = 256, dim = 256, n = seq * dim; // activations: 64 Ki floats
    const size_t act_bytes = n * sizeof(float);
    const size_t tok_bytes = seq * sizeof(int);

    cudaStream_t compute, prefetch, offload;
    CHECK(cudaStreamCreate(&compute));
    CHECK(cudaStreamCreate(&prefetch));
    CHECK(cudaStreamCreate(&offload));
    nvtxNameCudaStreamA(compute, "compute");
    nvtxNameCudaStreamA(prefetch, "prefetch_h2d");
    nvtxNameCudaStreamA(offload, "offload_d2h");

    int *h_tokens, *d_tokens;
    float *h_out, *d_table, *d_x, *d_qkv, *d_scores, *d_h, *d_w, *d_grad, *d_kv;
    CHECK(cudaMallocHost(&h_tokens, 2 * tok_bytes));
    CHECK(cudaMallocHost(&h_out, act_bytes));
    CHECK(cudaMalloc(&d_tokens, 2 * tok_bytes));
    CHECK(cudaMalloc(&d_table, 1024 * dim * sizeof(float)));
    CHECK(cudaMalloc(&d_x, act_bytes));
    CHECK(cudaMalloc(&d_qkv, 3 * act_bytes));
    CHECK(cudaMalloc(&d_scores, act_bytes));
    CHECK(cudaMalloc(&d_h, 4 * act_bytes));
    CHECK(cudaMalloc(&d_w, 4096 * sizeof(float)));
    CHECK(cudaMalloc(&d_grad, 4096 * sizeof(float)));
    CHECK(cudaMalloc(&d_kv, act_bytes));
    for (int i = 0; i < 2 * seq; i++)
        h_tokens[i] = (i * 7919) % 1024;

    cudaEvent_t batch_ready[2], step_done;
    CHECK(cudaEventCreateWithFlags(&batch_ready[0], cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&batch_ready[1], cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&step_done, cudaEventDisableTiming));

    // Setup on the null stream: a memset and an init kernel per weight buffer.
    memset_async(d_table, 0, 1024 * dim * sizeof(float), 0);
    memset_async(d_w, 0, 4096 * sizeof(float), 0);
    LAUNCH(residual_add<float>, blocks(4096, 256), 256, 0, 0, d_w, d_w, 4096, 1.0f);
    copy_async(d_tokens, h_tokens, tok_bytes, cudaMemcpyHostToDevice, prefetch);
    CHECK(cudaEventRecord(batch_ready[0], prefetch));
    CHECK(cudaDeviceSynchronize());
    std::printf("demo_workload: %d iterations, %d layers, 3 named streams + null stream\n",
                iterations, layers);

    const auto loop_start = std::chrono::steady_clock::now();
    for (int it = 0; it < iterations; it++) {
        int cur = it & 1, nxt = cur ^ 1;
        int *tok = d_tokens + cur * seq;
        // prefetch the next batch while this one computes
        copy_async(d_tokens + nxt * seq, h_tokens + nxt * seq, tok_bytes,
                   cudaMemcpyHostToDevice, prefetch);
        CHECK(cudaEventRecord(batch_ready[nxt], prefetch));

        CHECK(cudaStreamWaitEvent(compute, batch_ready[cur], 0));
        LAUNCH(embed, blocks(n, 256), 256, 0, compute, d_x, tok, d_table, n, dim);
        for (int l = 0; l < layers; l++) {
            LAUNCH(layernorm, blocks(seq, 128), 128, 0, compute, d_x, seq, dim);
            LAUNCH(qkv_proj, blocks(3 * n, 256), 256, 0, compute, d_qkv, d_x, d_w, n);
            LAUNCH(attention, blocks(n, 256), 256, 0, compute, d_scores, d_qkv, n);
            LAUNCH((softmax<float, 128>), seq, 128, 0, compute, d_scores, seq, dim);
            LAUNCH(residual_add<float>, blocks(n, 256), 256, 0, compute, d_x, d_scores, n, 0.5f);
            LAUNCH(layernorm, blocks(seq, 128), 128, 0, compute, d_x, seq, dim);
            LAUNCH(mlp_up, blocks(4 * n, 256), 256, 0, compute, d_h, d_x, n);
            LAUNCH(gelu, blocks(4 * n, 256), 256, 0, compute, d_h, 4 * n);
            LAUNCH(mlp_down, blocks(n, 256), 256, 0, compute, d_x, d_h, n);
        }
        copy_async(d_kv, d_x, act_bytes, cudaMemcpyDeviceToDevice, compute); // KV-cache save
        CHECK(cudaEventRecord(step_done, compute));

        // offload activations to pinned host memory
        CHECK(cudaStreamWaitEvent(offload, step_done, 0));
        copy_async(h_out, d_x, act_bytes, cudaMemcpyDeviceToHost, offload);

        // optimizer on the legacy null stream (synchronises with the streams above)
        memset_async(d_grad, 0, 4096 * sizeof(float), 0);
        LAUNCH(optim::sgd_step, blocks(4096, 256), 256, 0, 0, d_w, d_grad, 4096, 1e-3f);
        if (it % 10 == 9)
            LAUNCH(residual_add<double>, 1, 32, 0, 0, (double *)d_grad, (const double *)d_grad, 32,
                   0.0);
    }
    CHECK(cudaDeviceSynchronize());
    const double elapsed_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - loop_start).count();
    std::printf("demo_workload: done, last activation %g\n", (double)h_out[0]);
    std::printf("elapsed_ms=%.3f (the iteration loop, for bench/overhead.py)\n", elapsed_ms);

    long long total = 0;
    std::printf("==== gpuflow-demo-counts ====\n");
    std::printf("iterations %d\n", iterations);
    for (const auto &kv : g_kernels) {
        std::printf("kernel %s %lld %s\n", kv.first.c_str(), kv.second.launches,
                    kv.second.demangled.c_str());
        total += kv.second.launches;
    }
    std::printf("copy h2d %lld %lld\n", g_h2d.count, g_h2d.bytes);
    std::printf("copy d2h %lld %lld\n", g_d2h.count, g_d2h.bytes);
    std::printf("copy d2d %lld %lld\n", g_d2d.count, g_d2d.bytes);
    std::printf("copy memset %lld %lld\n", g_memset.count, g_memset.bytes);
    std::printf("total kernels %lld\n", total);
    std::printf("==== end ====\n");
    std::fflush(stdout);

    CHECK(cudaEventDestroy(batch_ready[0]));
    CHECK(cudaEventDestroy(batch_ready[1]));
    CHECK(cudaEventDestroy(step_done));
    CHECK(cudaStreamDestroy(compute));
    CHECK(cudaStreamDestroy(prefetch));
    CHECK(cudaStreamDestroy(offload));
    CHECK(cudaFreeHost(h_tokens));
    CHECK(cudaFreeHost(h_out));
    for (void *p : {(void *)d_tokens, (void *)d_table, (void *)d_x, (void *)d_qkv,
                    (void *)d_scores, (void *)d_h, (void *)d_w, (void *)d_grad, (void *)d_kv})
        CHECK(cudaFree(p));
    return 0;
}
