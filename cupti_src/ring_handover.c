/*
 * ring_handover.c — hand a ring's memory file to the agent (ring_handover.h; the protocol is in
 * gpuflow_ring.h). Plain C11 + POSIX sockets.
 */
#define _GNU_SOURCE
#include "ring_handover.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "gpuflow_ring.h"

#define RH_RETRY_NS 2000000L /* 2 ms between attempts while the agent's backlog is full */

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* 1 when there is time for another attempt (after a short sleep), 0 past the deadline. */
static int may_retry(uint64_t deadline)
{
    if (mono_ns() >= deadline)
        return 0;
    struct timespec pause = {0, RH_RETRY_NS};
    nanosleep(&pause, NULL);
    return 1;
}

static int connect_bounded(int s, const struct sockaddr_un *addr, uint64_t deadline)
{
    for (;;) {
        if (connect(s, (const struct sockaddr *)addr, sizeof *addr) == 0)
            return 0;
        int e = errno;
        if (e == EINTR)
            continue;
        if (e != EAGAIN || !may_retry(deadline)) /* EAGAIN: the listener's backlog is full */
            return e == EAGAIN ? ETIMEDOUT : e;
    }
}

static int listener_trusted(int s)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        return errno;
    return cred.uid == geteuid() || cred.uid == 0 ? 0 : EPERM;
}

static int send_hello(int s, int ring_fd, uint64_t deadline)
{
    uint64_t magic = GPUFLOW_HELLO_MAGIC; /* little-endian on every supported platform */
    char data[GPUFLOW_HELLO_SIZE];
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
            return EPROTO; /* a seqpacket message goes whole or not at all */
        int e = errno;
        if (e == EINTR)
            continue;
        if (e != EAGAIN || !may_retry(deadline))
            return e == EAGAIN ? ETIMEDOUT : e;
    }
}

int rh_hand_over(int ring_fd, const char *socket_path, unsigned wait_ms)
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
    int err = connect_bounded(s, &addr, deadline);
    if (!err)
        err = listener_trusted(s);
    if (!err)
        err = send_hello(s, ring_fd, deadline);
    if (err) {
        close(s);
        return -err;
    }
    return s;
}
