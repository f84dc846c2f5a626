/*
 * cupti_floor.c — the minimal CUPTI collector that sets the overhead floor for bench/overhead.py.
 *
 * Injected with CUDA_INJECTION64_PATH exactly like libgpuflow_inject.so, it enables the same
 * activity kinds (CONCURRENT_KERNEL, MEMCPY, MEMCPY2, MEMSET, NAME), hands CUPTI 1 MiB buffers,
 * asks for a 50 ms flush period, and on each completed buffer only walks and counts the records.
 * Whatever gpuflow run costs above this is GPUFlow's own cost (ring, names, flusher thread,
 * consumer). At exit it force-flushes and prints its counts to stderr, so a run can be checked.
 *
 * Two of GPUFlow's CUPTI-side choices can be added one at a time, for bench/cost/overhead_attribution.sh:
 *   FLOOR_CLOCK=1      register a CLOCK_MONOTONIC timestamp callback before enabling (as GPUFlow)
 *   FLOOR_SUBSCRIBE=1  subscribe and enable the RESOURCE context-destroy and STATE fatal-error
 *                      callbacks (as GPUFlow)
 * and FLOOR_COUNT=1 counts how often CUPTI calls those two into the collector, per thread, and
 * prints it at exit beside the records (bench/cost/floor_calls.py reads it): whether either runs once
 * per launch on the program's threads, which is the only way they could cost per launch.
 *
 * Build: cc -O2 -shared -fPIC -I$CUDA_HOME/include -o libcupti_floor.so cupti_floor.c \
 *        -L$CUDA_HOME/targets/x86_64-linux/lib -lcupti -Wl,-rpath,$CUDA_HOME/targets/x86_64-linux/lib
 */
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BUF_SIZE (1u << 20)

static atomic_ulong kernels, copies, sets, others, buffers;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = aligned_alloc(8, BUF_SIZE);
    *size = *buffer ? BUF_SIZE : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid) {
    (void)ctx; (void)stream; (void)size;
    CUpti_Activity *record = NULL;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
        switch (record->kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: atomic_fetch_add(&kernels, 1); break;
        case CUPTI_ACTIVITY_KIND_MEMCPY:
        case CUPTI_ACTIVITY_KIND_MEMCPY2: atomic_fetch_add(&copies, 1); break;
        case CUPTI_ACTIVITY_KIND_MEMSET: atomic_fetch_add(&sets, 1); break;
        default: atomic_fetch_add(&others, 1); break;
        }
    }
    atomic_fetch_add(&buffers, 1);
    free(buffer);
}

/* FLOOR_COUNT: calls into the collector per thread (timestamp callback, subscriber callback) */
#define COUNT_THREADS 64
static int counting;
static struct { atomic_long tid; atomic_ulong clock_calls, sub_calls; } per_thread[COUNT_THREADS];
static atomic_ulong uncounted; /* calls from threads past the table's end */

static void count_call(int subscriber) {
    long tid = (long)syscall(SYS_gettid);
    for (int i = 0; i < COUNT_THREADS; i++) {
        long seen = atomic_load(&per_thread[i].tid);
        if (seen == 0) {
            long zero = 0;
            if (!atomic_compare_exchange_strong(&per_thread[i].tid, &zero, tid))
                continue; /* another thread took the slot first */
            seen = tid;
        }
        if (seen == tid) {
            atomic_fetch_add(subscriber ? &per_thread[i].sub_calls : &per_thread[i].clock_calls, 1);
            return;
        }
    }
    atomic_fetch_add(&uncounted, 1);
}

/* One line per thread that called in: its id, its name, and both counts. */
static void print_calls(void) {
    for (int i = 0; i < COUNT_THREADS; i++) {
        long tid = atomic_load(&per_thread[i].tid);
        if (!tid)
            break;
        char path[64], name[32] = "?";
        snprintf(path, sizeof path, "/proc/self/task/%ld/comm", tid);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fgets(name, sizeof name, f))
                name[strcspn(name, "\n")] = '\0';
            fclose(f);
        } else {
            snprintf(name, sizeof name, "(exited)");
        }
        fprintf(stderr, "cupti_floor_calls: tid=%ld main=%d thread=%s clock_calls=%lu sub_calls=%lu\n",
                tid, tid == (long)getpid(), name, atomic_load(&per_thread[i].clock_calls),
                atomic_load(&per_thread[i].sub_calls));
    }
    fprintf(stderr, "cupti_floor_calls: uncounted=%lu\n", atomic_load(&uncounted));
}

static void at_exit(void) {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    fprintf(stderr, "cupti_floor: kernels=%lu copies=%lu memsets=%lu other=%lu buffers=%lu\n",
            atomic_load(&kernels), atomic_load(&copies), atomic_load(&sets), atomic_load(&others),
            atomic_load(&buffers));
    if (counting)
        print_calls();
}

static uint64_t CUPTIAPI monotonic_ns(void) {
    if (counting)
        count_call(0);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void CUPTIAPI on_callback(void *u, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *data) {
    (void)u; (void)d; (void)id; (void)data;
    if (counting)
        count_call(1);
}

static int env_on(const char *name) {
    const char *v = getenv(name);
    return v && v[0] == '1';
}

__attribute__((visibility("default"))) int InitializeInjection(void) {
    static int once;
    if (once++) return 1;
    counting = env_on("FLOOR_COUNT");
    if (env_on("FLOOR_SUBSCRIBE")) {
        CUpti_SubscriberHandle sub;
        if (cuptiSubscribe(&sub, on_callback, NULL) == CUPTI_SUCCESS) {
            cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
            cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_STATE, CUPTI_CBID_STATE_FATAL_ERROR);
        }
    }
    if (env_on("FLOOR_CLOCK"))
        cuptiActivityRegisterTimestampCallback(monotonic_ns);
    if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) return 1;
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY2);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_NAME);
    cuptiActivityFlushPeriod(50);
    atexit(at_exit);
    return 1;
}
