/*
 * pm_ring.h — the producer's side of a sample ring (pm_samples.h): a sealed memory file, its
 * header, records published one at a time, the handover to the agent.
 *
 * Shared by the PM-sampling helper (pm_sampler.cpp) and the test producer
 * (tests/pmsampling/pm_test_producer.c), so the tests hand samples over exactly as the helper
 * does. Constraints: C11 + POSIX; one producer thread per ring (the counters and `head` are
 * written by it alone); never blocks on the consumer (a full ring drops, counted); the handover
 * waits at most the caller's bound; the connection is close-on-exec.
 */
#ifndef GPUFLOW_PM_RING_H
#define GPUFLOW_PM_RING_H

#include <stdint.h>

#include "pm_samples.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pm_ring {
    int fd;                        /* the sealed memory file */
    gpuflow_pm_header *header;     /* its mapping */
    gpuflow_pm_record *records;
    uint64_t capacity;
    uint64_t cached_tail;          /* the consumer's tail as last read */
} pm_ring;

/* Create a ring of `capacity` records (rounded up to a power of two, clamped to the format's
 * bounds), sealed, mapped, header filled (status STARTING, magic last). 0, or -errno. */
int pm_ring_create(pm_ring *ring, uint32_t capacity);
void pm_ring_close(pm_ring *ring);

/* Publish one record: 1 written, 0 dropped (ring full; counted for SAMPLEs). */
int pm_ring_push(pm_ring *ring, const gpuflow_pm_record *record);

/* status (release store) with its CUDA/CUPTI result and a printf-style detail (cut to fit). */
void pm_ring_set_status(pm_ring *ring, uint32_t status, int32_t error, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Copy `text` into a fixed text field of `size` bytes, NUL-terminated, cut to fit. */
void pm_copy_text(char *field, uint32_t size, const char *text);

/*
 * Hand the ring to the agent listening at `socket_path` (pm_samples.h's handover): connect,
 * check the listener is this user or root, send the hello with the ring's descriptor. Waits at
 * most `wait_ms` while the agent's backlog is full. The connected socket (>= 0), kept open while
 * sampling, or -errno (-EPERM: a listener of another user).
 */
int pm_hand_over(int ring_fd, const char *socket_path, unsigned wait_ms);

#ifdef __cplusplus
}
#endif

#endif /* GPUFLOW_PM_RING_H */
