/*
 * fake_cupti.c — a stand-in libcupti for testing libgpuflow_inject.so without a GPU.
 *
 * What it is for: the injected library loads CUPTI with dlopen(GPUFLOW_CUPTI_PATH), so tests
 * point that variable at this library and script what "CUPTI" does. Activity records are built
 * with the real CUDA 13.0 struct types from the toolkit headers, so the library's fixed-offset
 * reads (cupti_src/cupti_records.h) are checked against real layouts at run time too.
 *
 * Environment (all optional):
 *   FAKE_CUPTI_LOG=path           append one line per interesting call (subscribe, enable <kind>,
 *                                 attr <a> <v>, timestamp_cb, callbacks, flush <flag>, ...)
 *   FAKE_CUPTI_VERSION=n          what cuptiGetVersion reports (default 130001)
 *   FAKE_CUPTI_SUBSCRIBE=code     cuptiSubscribe(_v2) result (default 0 = success)
 *   FAKE_CUPTI_OLD_SUBSCRIBER=s   name written to oldSubscriberName on code 39
 *   FAKE_CUPTI_ENABLE_FAIL=k:code cuptiActivityEnable(k) returns code
 *   FAKE_CUPTI_KERNELS=n          kernel records in the scripted batch (default 10)
 *   FAKE_CUPTI_DROPPED=n          dropped records reported with the first buffer (default 0)
 *   FAKE_CUPTI_STEAL=1            after the batch, every FlushAll(0) simulates 10 kernel
 *                                 launches (through the subscriber callback, if enabled) that
 *                                 never reach the registered buffers: a thief took them
 *   FAKE_CUPTI_WORKER=n           0.2 s after the callbacks are registered, a thread of the fake
 *                                 completes n buffers of one kernel each ("_Z6workerv",
 *                                 correlation 100000 + i), as CUPTI's own thread does when
 *                                 buffers fill between flushes
 *   FAKE_CUPTI_WORKER_GAP_MS=g    the worker waits g ms between its buffers and logs
 *                                 "worker <i> <CLOCK_MONOTONIC ns>" as it completes each
 * The scripted batch is delivered on the first cuptiActivityFlushAll(0); a forced flush
 * (flag 1) delivers one more kernel, "_Z4latev".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_runtime_cbid.h>
#include <cupti_version.h>

#define EXPORT __attribute__((visibility("default")))

static CUpti_BuffersCallbackRequestFunc g_req;
static CUpti_BuffersCallbackCompleteFunc g_done;
static CUpti_CallbackFunc g_cb;
static int g_batch_sent, g_dropped_sent;
static unsigned char g_enabled_runtime[1024];

/* stable name strings, as CUPTI's would be; NAME_C has the text of NAME_A at another address */
static const char NAME_A[] = "_Z6kernelPf";
static const char NAME_B[] = "_Z7softmaxIfLi128EEvPT_ii";
static char NAME_C[sizeof NAME_A];
static const char LATE[] = "_Z4latev";

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
    const char *p = getenv("FAKE_CUPTI_LOG");
    if (!p)
        return;
    FILE *f = fopen(p, "a");
    if (!f)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

static long envl(const char *name, long dflt)
{
    const char *s = getenv(name);
    return s && *s ? strtol(s, NULL, 0) : dflt;
}

/* buffer framing: [u32 size][u32 pad][record ...] repeated, 8-aligned */
typedef struct writer {
    uint8_t *buf;
    size_t size, used;
} writer;

static void *put(writer *w, size_t size)
{
    size_t need = 8 + ((size + 7) & ~(size_t)7);
    if (w->used + need > w->size)
        return NULL;
    uint8_t *p = w->buf + w->used;
    uint32_t s = (uint32_t)((size + 7) & ~(size_t)7);
    memcpy(p, &s, 4);
    memset(p + 8, 0, s);
    w->used += need;
    return p + 8;
}

static void kernel(writer *w, const char *name, uint64_t start, uint64_t end, uint32_t corr)
{
    CUpti_ActivityKernel10 *k = put(w, sizeof *k);
    if (!k)
        return;
    k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k->registersPerThread = 32;
    k->start = start;
    k->end = end;
    k->deviceId = 0;
    k->contextId = 1;
    k->streamId = 13;
    k->gridX = 4;
    k->gridY = 2;
    k->gridZ = 1;
    k->blockX = 128;
    k->blockY = 1;
    k->blockZ = 1;
    k->staticSharedMemory = 1024;
    k->dynamicSharedMemory = 512;
    k->correlationId = corr;
    k->name = name;
    /* the launch configuration (ring version 3 interns it): the late kernel launches differently */
    int late = name == LATE;
    k->cacheConfig.both = 0x21;               /* requested PREFER_SHARED (1), executed PREFER_L1 (2) */
    k->sharedMemoryConfig = 1;                /* four-byte banks */
    k->isSharedMemoryCarveoutRequested = late ? 0 : 1;
    k->sharedMemoryCarveoutRequested = late ? 0 : 50;
    k->sharedMemoryExecuted = late ? 0 : 102400;
    k->shmemLimitConfig = late ? CUPTI_FUNC_SHMEM_LIMIT_DEFAULT : CUPTI_FUNC_SHMEM_LIMIT_OPTIN;
    k->clusterX = late ? 0 : 2;
    k->clusterY = late ? 0 : 1;
    k->clusterZ = late ? 0 : 1;
}

static void memcpy_rec(writer *w, uint8_t kind, uint64_t bytes, uint64_t t, uint32_t stream)
{
    CUpti_ActivityMemcpy6 *m = put(w, sizeof *m);
    if (!m)
        return;
    m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m->copyKind = kind;
    m->srcKind = kind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD ? CUPTI_ACTIVITY_MEMORY_KIND_PINNED
                                                         : CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m->dstKind = kind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH ? CUPTI_ACTIVITY_MEMORY_KIND_PINNED
                                                         : CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m->flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
    m->bytes = bytes;
    m->start = t;
    m->end = t + 40;
    m->deviceId = 0;
    m->contextId = 1;
    m->streamId = stream;
    m->correlationId = 500 + kind;
}

static void batch(writer *w)
{
    CUpti_ActivityDevice5 *d = put(w, sizeof *d);
    if (d) {
        d->kind = CUPTI_ACTIVITY_KIND_DEVICE;
        d->id = 0;
        d->name = "Fake H200";
        d->numMultiprocessors = 132;
        d->computeCapabilityMajor = 9;
        d->computeCapabilityMinor = 0;
        for (int i = 0; i < 16; i++) /* GPU-00112233-4455-6677-8899-aabbccddeeff */
            d->uuid.bytes[i] = (char)(0x11 * i);
    }
    CUpti_ActivityContext3 *c = put(w, sizeof *c);
    if (c) {
        c->kind = CUPTI_ACTIVITY_KIND_CONTEXT;
        c->contextId = 1;
        c->deviceId = 0;
        c->nullStreamId = 7;
    }
    CUpti_ActivityName *n = put(w, sizeof *n);
    if (n) {
        n->kind = CUPTI_ACTIVITY_KIND_NAME;
        n->objectKind = CUPTI_ACTIVITY_OBJECT_STREAM;
        n->objectId.dcs.deviceId = 0;
        n->objectId.dcs.contextId = 1;
        n->objectId.dcs.streamId = 13;
        n->name = "compute";
    }
    CUpti_ActivityName *t = put(w, sizeof *t);
    if (t) {
        t->kind = CUPTI_ACTIVITY_KIND_NAME;
        t->objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
        t->name = "a thread name, not shown";
    }
    long nk = envl("FAKE_CUPTI_KERNELS", 10);
    for (long i = 0; i < nk; i++)
        kernel(w, i % 2 ? NAME_B : NAME_A, 1000 + 100 * (uint64_t)i, 1050 + 100 * (uint64_t)i,
               (uint32_t)i + 1);
    memcpy(NAME_C, NAME_A, sizeof NAME_A);
    kernel(w, NAME_C, 90000, 90010, 9000);  /* same text, another pointer */
    kernel(w, NAME_A, 0, 0, 9001);          /* no timing */
    memcpy_rec(w, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 4096, 2000, 14);
    memcpy_rec(w, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, 8192, 3000, 15);
    memcpy_rec(w, CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, 100, 4000, 13);
    CUpti_ActivityMemcpyPtoP4 *p = put(w, sizeof *p);
    if (p) {
        p->kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
        p->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
        p->bytes = 1 << 20;
        p->start = 5000;
        p->end = 5100;
        p->deviceId = 0;
        p->contextId = 1;
        p->streamId = 13;
        p->srcDeviceId = 0;
        p->dstDeviceId = 1;
        p->correlationId = 600;
    }
    CUpti_ActivityMemset4 *s = put(w, sizeof *s);
    if (s) {
        s->kind = CUPTI_ACTIVITY_KIND_MEMSET;
        s->value = 7;
        s->bytes = 256;
        s->start = 6000;
        s->end = 6010;
        s->deviceId = 0;
        s->contextId = 1;
        s->streamId = 7;
        s->correlationId = 700;
        s->flags = CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC;
        s->memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    }
    uint32_t *unknown = put(w, 48); /* a kind GPUFlow does not translate */
    if (unknown)
        unknown[0] = CUPTI_ACTIVITY_KIND_OVERHEAD;
}

static void deliver(void (*fill)(writer *))
{
    if (!g_req || !g_done)
        return;
    uint8_t *buf = NULL;
    size_t size = 0, maxrec = 0;
    g_req(&buf, &size, &maxrec);
    if (!buf) {
        logf_("request NULL");
        return;
    }
    writer w = {buf, size, 0};
    fill(&w);
    g_done(NULL, 0, buf, size, w.used);
}

static void late(writer *w)
{
    kernel(w, LATE, 100000, 100100, 9999);
}

static const char WORKER[] = "_Z6workerv";
static uint32_t g_worker_i;

static void one_worker_kernel(writer *w)
{
    kernel(w, WORKER, 200000 + 10 * (uint64_t)g_worker_i, 200005 + 10 * (uint64_t)g_worker_i,
           100000 + g_worker_i);
}

static void *worker_main(void *arg)
{
    long n = (long)(intptr_t)arg;
    struct timespec pause = {0, 200 * 1000 * 1000};
    nanosleep(&pause, NULL);
    long gap_ms = envl("FAKE_CUPTI_WORKER_GAP_MS", 0);
    struct timespec gap = {gap_ms / 1000, (gap_ms % 1000) * 1000000L};
    for (long i = 0; i < n; i++) {
        g_worker_i = (uint32_t)i;
        if (gap_ms > 0) {
            if (i)
                nanosleep(&gap, NULL);
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            logf_("worker %ld %llu", i,
                  (unsigned long long)now.tv_sec * 1000000000ull + (unsigned long long)now.tv_nsec);
        }
        deliver(one_worker_kernel);
    }
    logf_("worker done %ld", n);
    return NULL;
}

/* ---------------------------------------------------------------- the CUPTI API ------------ */

EXPORT CUptiResult cuptiGetVersion(uint32_t *v)
{
    *v = (uint32_t)envl("FAKE_CUPTI_VERSION", 130001);
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetResultString(CUptiResult r, const char **s)
{
    *s = r == 39 ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" : "CUPTI_ERROR_FAKE";
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *h, CUpti_CallbackFunc cb, void *ud)
{
    (void)ud;
    CUptiResult r = (CUptiResult)envl("FAKE_CUPTI_SUBSCRIBE", 0);
    logf_("subscribe %d", (int)r);
    if (r == CUPTI_SUCCESS) {
        g_cb = cb;
        *h = (CUpti_SubscriberHandle)&g_cb;
    }
    return r;
}

EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *h, CUpti_CallbackFunc cb, void *ud,
                                     CUpti_SubscriberParams *p)
{
    CUptiResult r = cuptiSubscribe(h, cb, ud);
    const char *old = getenv("FAKE_CUPTI_OLD_SUBSCRIBER");
    logf_("subscriber_name %s", p && p->subscriberName ? p->subscriberName : "(null)");
    if (r == 39 && p && p->oldSubscriberName && old)
        snprintf(p->oldSubscriberName, p->oldSubscriberSize, "%s", old);
    return r;
}

EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle h)
{
    (void)h;
    logf_("unsubscribe");
    g_cb = NULL;
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle h,
                                       CUpti_CallbackDomain d, CUpti_CallbackId id)
{
    (void)h;
    if (d == CUPTI_CB_DOMAIN_RUNTIME_API && id < sizeof g_enabled_runtime)
        g_enabled_runtime[id] = (unsigned char)enable;
    else
        logf_("callback %u %d %u", enable, (int)d, (unsigned)id);
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                  CUpti_BuffersCallbackCompleteFunc done)
{
    logf_("callbacks");
    g_req = req;
    g_done = done;
    long workers = envl("FAKE_CUPTI_WORKER", 0);
    pthread_t t;
    if (workers > 0 && pthread_create(&t, NULL, worker_main, (void *)(intptr_t)workers) == 0)
        pthread_detach(t);
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f)
{
    logf_("timestamp_cb %d", f != NULL);
    return CUPTI_SUCCESS;
}

static CUptiResult enable_common(CUpti_ActivityKind k, const char *how)
{
    const char *fail = getenv("FAKE_CUPTI_ENABLE_FAIL");
    if (fail) {
        int fk = -1, code = 0;
        if (sscanf(fail, "%d:%d", &fk, &code) == 2 && fk == (int)k) {
            logf_("%s %d failed %d", how, (int)k, code);
            return (CUptiResult)code;
        }
    }
    logf_("%s %d", how, (int)k);
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind k)
{
    return enable_common(k, "enable");
}

EXPORT CUptiResult cuptiActivityEnableAndDump(CUpti_ActivityKind k)
{
    return enable_common(k, "enable_dump");
}

EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind k)
{
    logf_("disable %d", (int)k);
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute a, size_t *sz, void *v)
{
    unsigned long long val = 0;
    memcpy(&val, v, *sz < sizeof val ? *sz : sizeof val);
    logf_("attr %d %llu", (int)a, val);
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
    logf_("flush %u", flag);
    if (flag == 0 && !g_batch_sent) {
        g_batch_sent = 1;
        deliver(batch);
    } else if (flag == 0 && envl("FAKE_CUPTI_STEAL", 0) && g_cb) {
        for (int i = 0; i < 10; i++) {
            CUpti_CallbackData cd;
            memset(&cd, 0, sizeof cd);
            cd.callbackSite = CUPTI_API_ENTER;
            CUpti_CallbackId id = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
            if (g_enabled_runtime[id])
                g_cb(NULL, CUPTI_CB_DOMAIN_RUNTIME_API, id, &cd);
        }
    } else if (flag == CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) {
        deliver(late);
    }
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t *buf, size_t valid, CUpti_Activity **rec)
{
    uint8_t *p;
    if (!*rec) {
        p = buf;
    } else {
        uint32_t s;
        memcpy(&s, (uint8_t *)*rec - 8, 4);
        p = (uint8_t *)*rec + s;
    }
    if ((size_t)(p - buf) + 8 > valid)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *rec = (CUpti_Activity *)(p + 8);
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream,
                                                     size_t *dropped)
{
    (void)ctx;
    (void)stream;
    *dropped = g_dropped_sent ? 0 : (size_t)envl("FAKE_CUPTI_DROPPED", 0);
    g_dropped_sent = 1;
    return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetTimestamp(uint64_t *ts)
{
    *ts = 123456789;
    return CUPTI_SUCCESS;
}
