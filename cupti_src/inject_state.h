/*
 * inject_state.h — the injected collector's process-wide state and the functions its parts
 * (gpuflow_inject.c, activity.c, flusher.c) share. Internal: built with -fvisibility=hidden and
 * the version script, so nothing here is exported from libgpuflow_inject.so.
 *
 * Rules every hook follows: do nothing unless gf_live() (collecting, not a forked child, not
 * past the exit flush); never block on the consumer; never exit, abort or raise.
 */
#ifndef GPUFLOW_INJECT_STATE_H
#define GPUFLOW_INJECT_STATE_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "cupti_loader.h"
#include "ring_producer.h"

#define GF_DEFAULT_CAPACITY (1u << 18) /* 256 Ki records = 16 MiB + 4 KiB of memory */
#define GF_DEFAULT_FLUSH_MS 50u
#define GF_MIN_FLUSH_MS     5u
#define GF_MAX_FLUSH_MS     10000u
#define GF_CLOCK_SYNC_MS    1000u /* a CLOCK_SYNC record at least this often */
#define GF_MIN_AB_PERIOD_MS 10u
#define GF_MAX_AB_PERIOD_MS 60000u

typedef struct gf_state {
    pid_t pid;                    /* owner: every hook checks it (fork without exec) */
    rp_ring *ring;
    int conn;                     /* the connection to the agent, open until the process ends */
    gf_cupti cupti;
    CUpti_SubscriberHandle sub;
    uint32_t flush_ms;
    uint32_t ab_period_ms;        /* GPUFLOW_AB_PERIOD_MS, benchmarking only (activity.c); 0: off */
    int own_clock;                /* our CLOCK_MONOTONIC timestamp callback is registered */
    volatile int collecting;      /* activity enabled and ours */
    volatile int child;           /* set in the pthread_atfork child handler */
    volatile int exiting;         /* the exit flush has started */
    volatile int deferred;        /* the flusher runs: completed buffers wait for it (activity.c) */
    /* activity seen (for the stolen-callbacks probe), updated by the buffer callbacks */
    volatile uint64_t last_activity_ns;
    volatile uint64_t buffers_requested;
    volatile uint64_t records_seen;
    volatile uint64_t probe_calls;  /* launch API calls counted while probing */
    volatile int probing;
    uint64_t records_unknown;       /* CUPTI kinds we skip */
    uint64_t buffers_foreign;       /* completed buffers that were not from our pool */
} gf_state;

extern gf_state g_gf;

/* True while this process may touch the ring and CUPTI. */
static inline int gf_live(void)
{
    return g_gf.collecting && !g_gf.child && !g_gf.exiting;
}

uint64_t gf_now_mono_ns(void);
uint64_t gf_now_wall_ns(void);

/* activity.c: the CUPTI buffer callbacks. */
void CUPTIAPI gf_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records);
void CUPTIAPI gf_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                  size_t valid);
void gf_drain_completed(void);          /* translate the queued completed buffers (flusher, exit) */

/* flusher.c */
int gf_flusher_start(void);
void gf_flusher_stop(void);             /* bounded wait; safe when not started */
void gf_flusher_kick(void);             /* wake the flusher to translate queued buffers now */
void gf_clock_sync(void);               /* push a CLOCK_SYNC record now */
void gf_flush(uint32_t flag);           /* cuptiActivityFlushAll(flag) when live */
void gf_probe_on_api_call(void);        /* subscriber callback: a launch API call was seen */
void gf_probe_set_callbacks(int enable);/* enable/disable the launch-API probe callbacks */

#endif /* GPUFLOW_INJECT_STATE_H */
