/*
 * pm_ring.c — a sample ring's producer side and its handover (pm_ring.h; the format is
 * pm_samples.h). Plain C11 + POSIX.
 *
 * The ring is made the way the kernel ring is (a nameless memory file, its pages reserved, sealed
 * before anyone else can see it), so the agent checks both the same way; the handover is a copy of
 * the kernel ring's protocol with the sample format's own hello, so a sampler's descriptor can
 * never be taken for a traced process's ring or the reverse.
 */
#define _GNU_SOURCE
#include "pm_ring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define PM_RETRY_NS 2000000L /* 2 ms between attempts while the agent's backlog is full */

static uint32_t round_capacity(uint32_t want)
{
    uint32_t c = GPUFLOW_PM_MIN_CAPACITY;
    while (c < want && c < GPUFLOW_PM_MAX_CAPACITY)
        c <<= 1;
    return c;
}

int pm_ring_create(pm_ring *ring, uint32_t capacity)
{
    memset(ring, 0, sizeof *ring);
    ring->fd = -1;
    uint32_t cap = round_capacity(capacity);
    size_t size = GPUFLOW_PM_HEADER_SIZE + (size_t)cap * GPUFLOW_PM_RECORD_SIZE;
    int fd = memfd_create("gpuflow-pm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -errno;
    int err = 0;
    if (ftruncate(fd, (off_t)size) != 0)
        err = errno;
    if (!err)
        err = posix_fallocate(fd, 0, (off_t)size); /* the error number itself */
    if (!err && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
        err = errno;
    void *base = MAP_FAILED;
    if (!err) {
        base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (base == MAP_FAILED)
            err = errno;
    }
    if (err) {
        close(fd);
        return -err;
    }
    gpuflow_pm_header *h = (gpuflow_pm_header *)base;
    h->version = GPUFLOW_PM_VERSION;
    h->header_size = GPUFLOW_PM_HEADER_SIZE;
    h->record_size = GPUFLOW_PM_RECORD_SIZE;
    h->capacity = cap;
    h->status = GPUFLOW_PM_STARTING;
    __atomic_store_n(&h->magic, GPUFLOW_PM_MAGIC, __ATOMIC_RELEASE);
    ring->fd = fd;
    ring->header = h;
    ring->records = (gpuflow_pm_record *)((char *)base + GPUFLOW_PM_HEADER_SIZE);
    ring->capacity = cap;
    return 0;
}

void pm_ring_close(pm_ring *ring)
{
    if (ring->header) {
        munmap(ring->header, GPUFLOW_PM_HEADER_SIZE + ring->capacity * GPUFLOW_PM_RECORD_SIZE);
        ring->header = NULL;
    }
    if (ring->fd >= 0) {
        close(ring->fd);
        ring->fd = -1;
    }
}

int pm_ring_push(pm_ring *ring, const gpuflow_pm_record *record)
{
    gpuflow_pm_header *h = ring->header;
    uint64_t head = h->head; /* ours alone */
    if (head - ring->cached_tail >= ring->capacity) {
        ring->cached_tail = __atomic_load_n(&h->tail, __ATOMIC_ACQUIRE);
        /* a consumer whose tail is beyond head (it lies) makes the ring look full: never overwrite */
        if (ring->cached_tail > head || head - ring->cached_tail >= ring->capacity) {
            if (record->kind == GPUFLOW_PM_SAMPLE)
                __atomic_store_n(&h->samples_dropped, h->samples_dropped + 1, __ATOMIC_RELAXED);
            return 0;
        }
    }
    ring->records[head & (ring->capacity - 1)] = *record;
    if (record->kind == GPUFLOW_PM_SAMPLE)
        __atomic_store_n(&h->samples_written, h->samples_written + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&h->head, head + 1, __ATOMIC_RELEASE);
    return 1;
}

void pm_copy_text(char *field, uint32_t size, const char *text)
{
    size_t n = text ? strlen(text) : 0;
    if (n >= size)
        n = size - 1;
    if (n)
        memcpy(field, text, n);
    memset(field + n, 0, size - n);
}

void pm_ring_set_status(pm_ring *ring, uint32_t status, int32_t error, const char *fmt, ...)
{
    char text[GPUFLOW_PM_DETAIL_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    pm_copy_text(ring->header->detail, GPUFLOW_PM_DETAIL_MAX, text);
    ring->header->error = error;
    __atomic_store_n(&ring->header->status, status, __ATOMIC_RELEASE);
}

/* -- the handover ------------------------------------------------------------------------------ */

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int may_retry(uint64_t deadline)
{
    if (mono_ns() >= deadline)
        return 0;
    struct timespec pause = {0, PM_RETRY_NS};
    nanosleep(&pause, NULL);
    return 1;
}

static int send_hello(int s, int ring_fd, uint64_t deadline)
{
    uint64_t magic = GPUFLOW_PM_HELLO_MAGIC;
    char data[GPUFLOW_PM_HELLO_SIZE];
    memcpy(data, &magic, sizeof data);
    struct iovec iov = {data, sizeof data};
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int))];
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof control.buf;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &ring_fd, sizeof ring_fd);
    for (;;) {
        ssize_t n = sendmsg(s, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n == (ssize_t)sizeof data)
            return 0;
        if (n >= 0)
            return EPROTO;
        int e = errno;
        if (e == EINTR)
            continue;
        if (e != EAGAIN || !may_retry(deadline))
            return e == EAGAIN ? ETIMEDOUT : e;
    }
}

int pm_hand_over(int ring_fd, const char *socket_path, unsigned wait_ms)
{
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    size_t len = socket_path ? strlen(socket_path) : 0;
    if (ring_fd < 0 || len == 0 || socket_path[0] != '/' || len >= sizeof addr.sun_path)
        return -EINVAL;
    memcpy(addr.sun_path, socket_path, len);
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
        return -errno;
    uint64_t deadline = mono_ns() + (uint64_t)wait_ms * 1000000ull;
    int err = 0;
    for (;;) {
        if (connect(s, (const struct sockaddr *)&addr, sizeof addr) == 0)
            break;
        err = errno;
        if (err == EINTR)
            continue;
        if (err != EAGAIN || !may_retry(deadline)) {
            err = err == EAGAIN ? ETIMEDOUT : err;
            break;
        }
        err = 0;
    }
    if (!err) {
        struct ucred cred;
        socklen_t clen = sizeof cred;
        if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0)
            err = errno;
        else if (cred.uid != geteuid() && cred.uid != 0)
            err = EPERM;
    }
    if (!err)
        err = send_hello(s, ring_fd, deadline);
    if (err) {
        close(s);
        return -err;
    }
    return s;
}
