/*
 * gpuflow_inject.c — libgpuflow_inject.so's entry point, loaded by CUDA through
 * CUDA_INJECTION64_PATH: InitializeInjection (the only exported symbol), the CUPTI subscriber
 * callback, the exit flush and the fork handler.
 *
 * Constraints (docs/inject.md: "Environment", "What InitializeInjection does", "fork and exec",
 * "Guarantees and non-goals"): inert unless GPUFLOW_RING_SOCKET is set and an agent of this user
 * takes the ring there (otherwise the program runs untraced, at no cost); settings are read with
 * secure_getenv, so a setuid or setgid program is never traced; libcupti is dlopen'ed, never
 * linked; no CUDA runtime/driver call here; InitializeInjection always returns 1 (a tracing
 * failure must not fail cuInit); never exit(), abort() or crash the host program — every failure
 * becomes the ring's status and detail, and the program runs on untouched. One ring per process,
 * handed to the agent once; the connection stays open until the process ends, which is how the
 * agent learns that it ended. A child forked without exec goes inert and lets go of the
 * connection.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buffer_pool.h"
#include "inject_state.h"
#include "ring_handover.h"

#define GF_EXPORT __attribute__((visibility("default")))
#define GF_DEVICE_BUFFER_POOL_LIMIT 16u
#define GF_HANDOVER_WAIT_MS 100u /* the most InitializeInjection waits for a busy agent */

gf_state g_gf;
static int g_once;

/* ------------------------------------------------------------------------------------------ */
/* configuration                                                                              */

static int all_digits(const char *s)
{
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

static uint32_t parse_capacity(const char *s)
{
    if (!s || !*s || !all_digits(s))
        return GF_DEFAULT_CAPACITY;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || v == 0)
        return GF_DEFAULT_CAPACITY;
    if (v <= GPUFLOW_MIN_CAPACITY)
        return GPUFLOW_MIN_CAPACITY;
    if (v >= GPUFLOW_MAX_CAPACITY)
        return GPUFLOW_MAX_CAPACITY;
    uint32_t c = GPUFLOW_MIN_CAPACITY;
    while (c < v)
        c <<= 1; /* round up to a power of two */
    return c;
}

/* A period in milliseconds from the environment: unset, empty, not all digits or 0 gives
 * `dflt`; anything else is clamped to [lo, hi]. */
static uint32_t parse_ms(const char *s, uint32_t dflt, uint32_t lo, uint32_t hi)
{
    if (!s || !*s || !all_digits(s))
        return dflt;
    char *end = NULL;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || v == 0)
        return dflt;
    if (v < lo)
        return lo;
    if (v > hi)
        return hi;
    return (uint32_t)v;
}

/* ------------------------------------------------------------------------------------------ */
/* hooks                                                                                      */

static uint64_t CUPTIAPI monotonic_timestamp(void)
{
    return gf_now_mono_ns();
}

static void CUPTIAPI on_callback(void *userdata, CUpti_CallbackDomain domain,
                                 CUpti_CallbackId cbid, const void *cbdata)
{
    (void)userdata;
    if (g_gf.child || !g_gf.collecting)
        return;
    switch (domain) {
    case CUPTI_CB_DOMAIN_RESOURCE:
        /* contexts going away take their unflushed records with them */
        if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING && getpid() == g_gf.pid)
            gf_flush(0);
        break;
    case CUPTI_CB_DOMAIN_RUNTIME_API:
    case CUPTI_CB_DOMAIN_DRIVER_API:
        if (g_gf.probing && cbdata &&
            ((const CUpti_CallbackData *)cbdata)->callbackSite == CUPTI_API_ENTER)
            gf_probe_on_api_call();
        break;
    case CUPTI_CB_DOMAIN_STATE:
        if (cbid == CUPTI_CBID_STATE_FATAL_ERROR && g_gf.ring && getpid() == g_gf.pid) {
            const CUpti_StateData *sd = cbdata;
            char d[GPUFLOW_DETAIL_MAX];
            snprintf(d, sizeof d, "CUPTI fatal error %d: %s", sd ? (int)sd->notification.result : -1,
                     sd && sd->notification.message ? sd->notification.message : "(no message)");
            g_gf.collecting = 0; /* stop flushing; never exit */
            rp_set_status(g_gf.ring, GPUFLOW_STATUS_CUPTI_ERROR, d);
        }
        break;
    default:
        break;
    }
}

static void on_fork_child(void)
{
    /* The child has our mapping and atexit handler but not our threads: stay out of both. And let
     * go of the connection to the agent: its end must mean that this process ended. */
    g_gf.child = 1;
    g_gf.collecting = 0;
    if (g_gf.conn >= 0) {
        close(g_gf.conn);
        g_gf.conn = -1;
    }
}

static void on_exit_flush(void)
{
    if (g_gf.child || !g_gf.ring || getpid() != g_gf.pid)
        return;
    if (g_gf.collecting) {
        gf_flusher_stop();
        gf_drain_completed(); /* the queued buffers first: records stay in completion order */
        gf_flush(0);
        gf_flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        gf_drain_completed();
        gf_clock_sync();
        uint64_t empty = gf_pool_empty_count();
        if (empty && rp_status(g_gf.ring) == GPUFLOW_STATUS_OK) {
            char d[GPUFLOW_DETAIL_MAX];
            snprintf(d, sizeof d, "%.180s; buffer pool ran dry %llu times",
                     rp_header(g_gf.ring)->status_detail, (unsigned long long)empty);
            rp_set_status(g_gf.ring, GPUFLOW_STATUS_OK, d);
        }
    }
    gf_drain_completed(); /* what a fatal CUPTI error (collecting off) left queued */
    g_gf.exiting = 1;
    rp_mark_exited(g_gf.ring);
}

/* ------------------------------------------------------------------------------------------ */
/* setup                                                                                      */

static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

static void copy_truncated(char *dst, size_t len, const char *src)
{
    size_t n = strlen(src);
    if (n >= len)
        n = len - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static const char *kind_name(CUpti_ActivityKind k)
{
    switch (k) {
    case CUPTI_ACTIVITY_KIND_MEMCPY: return "MEMCPY";
    case CUPTI_ACTIVITY_KIND_MEMCPY2: return "MEMCPY2";
    case CUPTI_ACTIVITY_KIND_MEMSET: return "MEMSET";
    case CUPTI_ACTIVITY_KIND_NAME: return "NAME";
    case CUPTI_ACTIVITY_KIND_CONTEXT: return "CONTEXT";
    case CUPTI_ACTIVITY_KIND_DEVICE: return "DEVICE";
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return "CONCURRENT_KERNEL";
    default: return "?";
    }
}

static void set_attr_size(CUpti_ActivityAttribute a, size_t v)
{
    size_t sz = sizeof v;
    g_gf.cupti.ActivitySetAttribute(a, &sz, &v);
}

static void set_attr_u8(CUpti_ActivityAttribute a, uint8_t v)
{
    size_t sz = sizeof v;
    g_gf.cupti.ActivitySetAttribute(a, &sz, &v);
}

static CUptiResult subscribe(char *old, size_t old_len)
{
    const gf_cupti *c = &g_gf.cupti;
    old[0] = '\0';
    if (c->Subscribe_v2) {
        gf_subscriber_params p = {sizeof p, "GPUFlow", old, old_len};
        return c->Subscribe_v2(&g_gf.sub, on_callback, NULL, &p);
    }
    return c->Subscribe(&g_gf.sub, on_callback, NULL);
}

/* Returns the status to publish, with its detail. */
static uint32_t start_collection(char *detail, size_t len)
{
    const gf_cupti *c = &g_gf.cupti;
    char err[96], loaded[GPUFLOW_DETAIL_MAX];
    snprintf(loaded, sizeof loaded, "%s", detail); /* "CUPTI <v> loaded from <path>" */

    if (gf_pool_init() != 0) {
        snprintf(detail, len, "cannot reserve the activity buffer pool; not tracing");
        return GPUFLOW_STATUS_CUPTI_ERROR;
    }
    char old[128];
    CUptiResult r = subscribe(old, sizeof old);
    if (r != CUPTI_SUCCESS) {
        uint32_t st = gf_status_for_error(r);
        if (st == GPUFLOW_STATUS_CUPTI_IN_USE)
            snprintf(detail, len, "CUPTI is already in use by %s; not tracing",
                     old[0] ? old : "another tool (nsys, ncu, a debugger or a profiler)");
        else
            snprintf(detail, len, "cuptiSubscribe: %s; not tracing",
                     gf_cupti_error(c, r, err, sizeof err));
        return st;
    }
    c->EnableCallback(1, g_gf.sub, CUPTI_CB_DOMAIN_RESOURCE,
                      CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
    c->EnableCallback(1, g_gf.sub, CUPTI_CB_DOMAIN_STATE, CUPTI_CBID_STATE_FATAL_ERROR);
    set_attr_size(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT, GF_DEVICE_BUFFER_POOL_LIMIT);
    set_attr_u8(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, 1);
    /* before any enable: every record then carries CLOCK_MONOTONIC nanoseconds */
    g_gf.own_clock = c->ActivityRegisterTimestampCallback &&
                     c->ActivityRegisterTimestampCallback(monotonic_timestamp) == CUPTI_SUCCESS;
    r = c->ActivityRegisterCallbacks(gf_buffer_requested, gf_buffer_completed);
    if (r != CUPTI_SUCCESS) {
        c->Unsubscribe(g_gf.sub);
        snprintf(detail, len, "cuptiActivityRegisterCallbacks: %s; not tracing",
                 gf_cupti_error(c, r, err, sizeof err));
        return gf_status_for_error(r);
    }
    g_gf.collecting = 1;
    /* never CUPTI_ACTIVITY_KIND_KERNEL: it serialises every kernel */
    r = c->ActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r != CUPTI_SUCCESS) {
        g_gf.collecting = 0;
        c->Unsubscribe(g_gf.sub);
        snprintf(detail, len, "cuptiActivityEnable(CONCURRENT_KERNEL): %s; not tracing",
                 gf_cupti_error(c, r, err, sizeof err));
        return gf_status_for_error(r);
    }
    static const CUpti_ActivityKind more[] = {
        CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMSET,
        CUPTI_ACTIVITY_KIND_NAME,   CUPTI_ACTIVITY_KIND_CONTEXT, CUPTI_ACTIVITY_KIND_DEVICE,
    };
    char missing[160] = "";
    size_t ml = 0;
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
        CUpti_ActivityKind k = more[i];
        int dump = (k == CUPTI_ACTIVITY_KIND_CONTEXT || k == CUPTI_ACTIVITY_KIND_DEVICE) &&
                   c->ActivityEnableAndDump;
        r = dump ? c->ActivityEnableAndDump(k) : c->ActivityEnable(k);
        if (r != CUPTI_SUCCESS && ml < sizeof missing - 24)
            ml += (size_t)snprintf(missing + ml, sizeof missing - ml, " %s(%d)", kind_name(k),
                                   (int)r);
    }
    gf_clock_sync();
    int flusher = gf_flusher_start();

    /* NVTX reads NVTX_INJECTION64_PATH at its first call, usually after cuInit. If it names
     * another CUPTI than the one in use (PyTorch brings its own), NVTX would load a second copy
     * whose stream names never reach our subscriber: point it at ours. Replacing an existing
     * variable swaps one pointer in environ (glibc), so a concurrent getenv stays safe. */
    const char *nvtx = secure_getenv("NVTX_INJECTION64_PATH");
    const char *nvtx_note = "";
    if (!nvtx || !*nvtx)
        nvtx_note = "; NVTX_INJECTION64_PATH unset: no stream names";
    else if (!same_file(nvtx, c->path))
        nvtx_note = setenv("NVTX_INJECTION64_PATH", c->path, 1) == 0
                        ? "; NVTX_INJECTION64_PATH named another CUPTI, now this one"
                        : "; NVTX_INJECTION64_PATH names another CUPTI";
    char ab_note[96] = "";
    if (g_gf.ab_period_ms)
        snprintf(ab_note, sizeof ab_note,
                 "; A/B benchmark: kernels and copies of every other %u ms not recorded",
                 g_gf.ab_period_ms);
    char full[2 * GPUFLOW_DETAIL_MAX];
    snprintf(full, sizeof full, "%s; %s clock; flush %u ms%s%s%s%s%s", loaded,
             g_gf.own_clock ? "monotonic" : "CUPTI default", g_gf.flush_ms, ab_note,
             flusher ? "; no flusher thread" : "", ml ? "; not enabled:" : "", missing,
             nvtx_note);
    copy_truncated(detail, len, full);
    return GPUFLOW_STATUS_OK;
}

/* Create the ring and give it to the agent at `socket_path`; 0, or 1 when this process stays
 * untraced (one line on stderr says why). */
static int hand_ring_over(const char *socket_path, uint32_t capacity)
{
    int rc = rp_create(&g_gf.ring, (int)g_gf.pid, capacity);
    if (rc != 0) {
        g_gf.ring = NULL;
        fprintf(stderr, "gpuflow: cannot create the trace ring (%u records): %s; not tracing\n",
                capacity, strerror(-rc));
        return 1;
    }
    int conn = rh_hand_over(rp_fd(g_gf.ring), socket_path, GF_HANDOVER_WAIT_MS);
    if (conn < 0) {
        rp_close(g_gf.ring);
        g_gf.ring = NULL;
        fprintf(stderr, "gpuflow: no GPUFlow agent takes this process's trace at %s (%s); "
                        "not tracing\n", socket_path, strerror(-conn));
        return 1;
    }
    g_gf.conn = conn;
    return 0;
}

GF_EXPORT int InitializeInjection(void)
{
    if (__atomic_exchange_n(&g_once, 1, __ATOMIC_SEQ_CST))
        return 1; /* once per process */
    g_gf.conn = -1;
    /* secure_getenv: a setuid/setgid program gets NULL, so it is never traced into a socket or
     * with a libcupti that its caller chose */
    const char *socket_path = secure_getenv("GPUFLOW_RING_SOCKET");
    if (!socket_path || !*socket_path)
        return 1; /* inherited CUDA_INJECTION64_PATH, not a gpuflow run: stay inert */
    g_gf.pid = getpid();
    g_gf.flush_ms = parse_ms(secure_getenv("GPUFLOW_FLUSH_MS"), GF_DEFAULT_FLUSH_MS,
                             GF_MIN_FLUSH_MS, GF_MAX_FLUSH_MS);
    g_gf.ab_period_ms = parse_ms(secure_getenv("GPUFLOW_AB_PERIOD_MS"), 0, GF_MIN_AB_PERIOD_MS,
                                 GF_MAX_AB_PERIOD_MS);
    uint32_t capacity = parse_capacity(secure_getenv("GPUFLOW_RING_CAPACITY"));
    if (hand_ring_over(socket_path, capacity) != 0)
        return 1;
    rp_set_info(g_gf.ring, 0, g_gf.flush_ms);
    pthread_atfork(NULL, NULL, on_fork_child);
    atexit(on_exit_flush);

    char detail[GPUFLOW_DETAIL_MAX];
    uint32_t st = gf_cupti_load(&g_gf.cupti, detail, sizeof detail);
    rp_set_info(g_gf.ring, g_gf.cupti.version, g_gf.flush_ms);
    if (st == GPUFLOW_STATUS_OK)
        st = start_collection(detail, sizeof detail);
    rp_set_status(g_gf.ring, st, detail);
    return 1;
}
