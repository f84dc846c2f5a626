/*
 * flusher.c — the injected collector's one background thread.
 *
 * Every GPUFLOW_FLUSH_MS it calls cuptiActivityFlushAll(0), which hands back completed buffers
 * even when they are not full (cuptiActivityFlushPeriod alone would keep a half-empty buffer
 * forever); at least every GF_CLOCK_SYNC_MS it writes a CLOCK_SYNC record so the consumer can
 * map CUPTI timestamps to wall time; and it runs the stolen-callbacks probe: when no activity
 * buffer has moved for GF_PROBE_IDLE_PERIODS flush periods it briefly enables launch-API
 * callbacks, and if launches happen while still nothing reaches our buffers, another CUPTI
 * client (torch.profiler/Kineto, typically) has re-registered the activity callbacks: status
 * STOLEN. The status returns to OK when our buffers move again. The thread blocks all signals
 * and never holds a lock while calling into CUPTI.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include "inject_state.h"

#define GF_PROBE_IDLE_PERIODS   60u /* 3 s at the default 50 ms */
#define GF_PROBE_WINDOW_PERIODS 20u /* 1 s at the default 50 ms */
#define GF_PROBE_MIN_CALLS      16u
#define GF_STOP_WAIT_MS         2000u

static pthread_t g_thread;
static int g_started;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv;
static int g_stop, g_done, g_kick;

/* probe state, flusher thread only */
static uint64_t g_probe_start, g_probe_last, g_next_probe, g_stolen_last;

static const CUpti_CallbackId RUNTIME_LAUNCHES[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
    505, /* __cudaLaunchKernel_v13000 (<<<>>> in CUDA 13), absent from older headers */
    506, /* __cudaLaunchKernel_ptsz_v13000 */
};

static const CUpti_CallbackId DRIVER_LAUNCHES[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,   CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
};

uint64_t gf_now_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t gf_now_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void gf_flush(uint32_t flag)
{
    if (gf_live() && g_gf.cupti.ActivityFlushAll)
        g_gf.cupti.ActivityFlushAll(flag);
}

void gf_clock_sync(void)
{
    if (!g_gf.ring || g_gf.child || g_gf.exiting)
        return;
    uint64_t c = 0, w0 = gf_now_wall_ns();
    if (g_gf.own_clock)
        c = gf_now_mono_ns();
    else if (!g_gf.cupti.GetTimestamp || g_gf.cupti.GetTimestamp(&c) != CUPTI_SUCCESS)
        return;
    uint64_t w1 = gf_now_wall_ns();
    rp_clock_sync(g_gf.ring, c, w0 + (w1 - w0) / 2);
}

void gf_probe_on_api_call(void)
{
    __atomic_add_fetch(&g_gf.probe_calls, 1, __ATOMIC_RELAXED);
}

void gf_probe_set_callbacks(int enable)
{
    const gf_cupti *c = &g_gf.cupti;
    for (size_t i = 0; i < sizeof RUNTIME_LAUNCHES / sizeof RUNTIME_LAUNCHES[0]; i++)
        c->EnableCallback(enable ? 1 : 0, g_gf.sub, CUPTI_CB_DOMAIN_RUNTIME_API,
                          RUNTIME_LAUNCHES[i]);
    for (size_t i = 0; i < sizeof DRIVER_LAUNCHES / sizeof DRIVER_LAUNCHES[0]; i++)
        c->EnableCallback(enable ? 1 : 0, g_gf.sub, CUPTI_CB_DOMAIN_DRIVER_API,
                          DRIVER_LAUNCHES[i]);
}

static void probe_stop(void)
{
    __atomic_store_n(&g_gf.probing, 0, __ATOMIC_RELAXED);
    gf_probe_set_callbacks(0);
}

static void probe_tick(uint64_t now)
{
    uint64_t period = (uint64_t)g_gf.flush_ms * 1000000ull;
    uint64_t last = __atomic_load_n(&g_gf.last_activity_ns, __ATOMIC_RELAXED);
    uint32_t st = rp_status(g_gf.ring);
    if (st == GPUFLOW_STATUS_STOLEN) {
        if (last != g_stolen_last) /* our buffers move again */
            rp_set_status(g_gf.ring, GPUFLOW_STATUS_OK,
                          "activity buffers flow again after a STOLEN period");
        return;
    }
    if (st != GPUFLOW_STATUS_OK)
        return;
    if (!g_gf.probing) {
        if (now - last < GF_PROBE_IDLE_PERIODS * period || now < g_next_probe)
            return;
        __atomic_store_n(&g_gf.probe_calls, 0, __ATOMIC_RELAXED);
        g_probe_start = now;
        g_probe_last = last;
        __atomic_store_n(&g_gf.probing, 1, __ATOMIC_RELAXED);
        gf_probe_set_callbacks(1);
        return;
    }
    if (last != g_probe_last) { /* activity resumed: nothing was stolen */
        probe_stop();
        return;
    }
    if (now - g_probe_start < GF_PROBE_WINDOW_PERIODS * period)
        return;
    probe_stop();
    uint64_t calls = __atomic_load_n(&g_gf.probe_calls, __ATOMIC_RELAXED);
    if (calls >= GF_PROBE_MIN_CALLS) {
        char d[GPUFLOW_DETAIL_MAX];
        snprintf(d, sizeof d,
                 "%llu kernel launches in %u ms reached no GPUFlow activity buffer: another "
                 "CUPTI client (torch.profiler/Kineto?) took the activity callbacks",
                 (unsigned long long)calls, GF_PROBE_WINDOW_PERIODS * g_gf.flush_ms);
        g_stolen_last = last;
        rp_set_status(g_gf.ring, GPUFLOW_STATUS_STOLEN, d);
    } else {
        g_next_probe = now + GF_PROBE_IDLE_PERIODS * period; /* idle program: back off */
    }
}

static void *flusher_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "gpuflow-flush");
    uint64_t next_sync = gf_now_mono_ns() + (uint64_t)GF_CLOCK_SYNC_MS * 1000000ull;
    pthread_mutex_lock(&g_mu);
    while (!g_stop) {
        struct timespec dl;
        clock_gettime(CLOCK_MONOTONIC, &dl);
        uint64_t ns = (uint64_t)dl.tv_nsec + (uint64_t)g_gf.flush_ms * 1000000ull;
        dl.tv_sec += (time_t)(ns / 1000000000ull);
        dl.tv_nsec = (long)(ns % 1000000000ull);
        for (;;) { /* until the period is over; a kick translates the queue and waits on */
            while (!g_stop && !g_kick && pthread_cond_timedwait(&g_cv, &g_mu, &dl) != ETIMEDOUT)
                ;
            if (g_stop || !g_kick)
                break;
            g_kick = 0;
            pthread_mutex_unlock(&g_mu);
            gf_drain_completed();
            pthread_mutex_lock(&g_mu);
        }
        if (g_stop)
            break;
        pthread_mutex_unlock(&g_mu);
        if (gf_live() && getpid() == g_gf.pid) {
            gf_flush(0);
            gf_drain_completed();
            uint64_t now = gf_now_mono_ns();
            if (now >= next_sync) {
                gf_clock_sync();
                next_sync = now + (uint64_t)GF_CLOCK_SYNC_MS * 1000000ull;
            }
            probe_tick(now);
        }
        pthread_mutex_lock(&g_mu);
    }
    g_done = 1;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

int gf_flusher_start(void)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g_cv, &ca);
    pthread_condattr_destroy(&ca);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&g_thread, NULL, flusher_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return -rc;
    g_started = 1;
    g_gf.deferred = 1;
    return 0;
}

void gf_flusher_kick(void)
{
    pthread_mutex_lock(&g_mu); /* never held by the flusher while it is inside CUPTI */
    g_kick = 1;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}

void gf_flusher_stop(void)
{
    if (!g_started)
        return;
    g_started = 0;
    g_gf.deferred = 0; /* from here on the callback translates at once */
    pthread_mutex_lock(&g_mu);
    g_stop = 1;
    pthread_cond_broadcast(&g_cv);
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += GF_STOP_WAIT_MS / 1000;
    while (!g_done && pthread_cond_timedwait(&g_cv, &g_mu, &dl) != ETIMEDOUT)
        ;
    int done = g_done;
    pthread_mutex_unlock(&g_mu);
    if (done)
        pthread_join(g_thread, NULL);
    else
        pthread_detach(g_thread); /* stuck inside CUPTI: never wait for it at exit */
    if (g_gf.probing)
        probe_stop();
}
