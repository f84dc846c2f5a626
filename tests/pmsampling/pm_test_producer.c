/*
 * pm_test_producer.c — a stand-in for gpuflow-pm-sampler that the agent starts in its place (the
 * pmsampling collector's `sampler` option), compiled from the sample format's own header and
 * producer (cupti_src/pm_samples.h, pm_ring.c), to play a sampler that is wrong or hostile.
 *
 * It takes the helper's command line (--socket PATH --device N ...; the rest is ignored) and does
 * what GPUFLOW_PM_TEST_SCENARIO says:
 *
 *   good          a well-formed ring: status OK, a clock pair, 200 samples (sample k: its start
 *                 1 ms apart from the clock pair's instant, every slot k % 100 except PCIe,
 *                 1e6 * k bytes/s), then waits for the agent to close the connection
 *   bad_records   the good ring's samples interleaved with: an unknown kind, a sample ending
 *                 before it starts, one of 20 s, one out of order, NaN, infinite and 1e30 values,
 *                 valid bits beyond the slots; then waits
 *   no_clock      samples and no clock pair
 *   clock_far     a clock pair two days from now, then samples
 *   lying_head    head set a million records past tail
 *   garbage_text  a device name of control bytes and invalid UTF-8 with no NUL, status 999
 *   unsealed      hands over a memory file that is not sealed
 *   pipe          hands over a pipe
 *   two_fds       sends the hello with two descriptors
 *   bad_hello     sends the kernel ring's hello instead of the sampler's
 *   silent        connects, sends nothing, waits
 *   flood         writes samples as fast as it can into a small ring for 2 s (drops counted)
 *   exit_early    writes one line on stderr and exits 3 without handing anything over
 *   show_env      the same, the line saying whether GPUFLOW_TOKEN reached it
 *   deaf          a good ring, then ignores SIGTERM and the connection's end (the agent must
 *                 kill it)
 *
 * Constraints: test-only; every scenario ends by itself within a minute.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "pm_ring.h"

static uint64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void wait_for_close(int conn, int seconds)
{
    struct pollfd p = {conn, POLLIN, 0};
    poll(&p, 1, seconds * 1000);
}

static gpuflow_pm_record sample(uint64_t base, uint64_t k)
{
    gpuflow_pm_record r;
    memset(&r, 0, sizeof r);
    r.kind = GPUFLOW_PM_SAMPLE;
    r.start = base + k * 1000000ull;
    r.end = r.start + 1000000ull;
    for (int s = 0; s < GPUFLOW_PM_PCIE_READ_BPS; ++s)
        r.values[s] = (float)(k % 100);
    r.values[GPUFLOW_PM_PCIE_READ_BPS] = (float)(1e6 * (double)k);
    r.values[GPUFLOW_PM_PCIE_WRITE_BPS] = (float)(1e6 * (double)k);
    r.valid = (1u << GPUFLOW_PM_SLOT_COUNT) - 1;
    return r;
}

static void fill_header(pm_ring *ring)
{
    gpuflow_pm_header *h = ring->header;
    h->device_count = 1;
    h->sm_count = 132;
    h->interval_ns = 1000000;
    h->slots_collected = (1u << GPUFLOW_PM_SLOT_COUNT) - 1;
    for (int i = 0; i < 16; ++i)
        h->uuid[i] = (uint8_t)(0x20 + i);
    pm_copy_text(h->device_name, GPUFLOW_PM_TEXT_MAX, "Test Producer GPU");
    pm_copy_text(h->chip_name, GPUFLOW_PM_CHIP_MAX, "TEST");
    pm_ring_set_status(ring, GPUFLOW_PM_OK, 0, "the test producer");
}

static uint64_t clock_pair(pm_ring *ring, uint64_t offset)
{
    gpuflow_pm_record c;
    memset(&c, 0, sizeof c);
    c.kind = GPUFLOW_PM_CLOCK;
    c.end = realtime_ns() + offset;
    c.start = 5000000000ull;   /* a CUPTI clock of its own: 5 s at "now" */
    pm_ring_push(ring, &c);
    return c.start;
}

static int send_raw(const char *path, const void *data, size_t len, const int *fds, int nfds)
{
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    strncpy(addr.sun_path, path, sizeof addr.sun_path - 1);
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&addr, sizeof addr) != 0)
        return -1;
    struct iovec iov = {(void *)data, len};
    char control[CMSG_SPACE(4 * sizeof(int))];
    memset(control, 0, sizeof control);
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (nfds) {
        msg.msg_control = control;
        msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
    }
    if ((len || nfds) && sendmsg(s, &msg, MSG_NOSIGNAL) < 0)   /* nothing to send: connect only */
        return -1;
    return s;
}

int main(int argc, char **argv)
{
    const char *socket_path = NULL;
    for (int i = 1; i + 1 < argc; ++i)
        if (!strcmp(argv[i], "--socket"))
            socket_path = argv[i + 1];
    const char *scenario = getenv("GPUFLOW_PM_TEST_SCENARIO");
    if (!socket_path || !scenario) {
        fprintf(stderr, "pm_test_producer: --socket and GPUFLOW_PM_TEST_SCENARIO are required\n");
        return 2;
    }
    if (!strcmp(scenario, "show_env")) {
        fprintf(stderr, "token=%s\n", getenv("GPUFLOW_TOKEN") ? "set" : "unset");
        return 3;
    }
    if (!strcmp(scenario, "exit_early")) {
        fprintf(stderr, "pm_test_producer: giving up before the handover, as asked\n");
        return 3;
    }
    uint64_t hello = GPUFLOW_PM_HELLO_MAGIC;
    if (!strcmp(scenario, "pipe") || !strcmp(scenario, "two_fds") || !strcmp(scenario, "bad_hello")
        || !strcmp(scenario, "silent") || !strcmp(scenario, "unsealed")) {
        int fds[2] = {-1, -1}, nfds = 1, s = -1;
        if (!strcmp(scenario, "pipe")) {
            if (pipe(fds) != 0)
                return 1;
            s = send_raw(socket_path, &hello, sizeof hello, fds, 1);
        } else if (!strcmp(scenario, "unsealed")) {
            fds[0] = memfd_create("unsealed", MFD_CLOEXEC);
            if (fds[0] < 0 || ftruncate(fds[0], GPUFLOW_PM_HEADER_SIZE + 1024 * GPUFLOW_PM_RECORD_SIZE) != 0)
                return 1;
            s = send_raw(socket_path, &hello, sizeof hello, fds, 1);
        } else if (!strcmp(scenario, "silent")) {
            s = send_raw(socket_path, "", 0, NULL, 0);
            nfds = 0;
        } else {
            pm_ring ring;
            if (pm_ring_create(&ring, 1024))
                return 1;
            fds[0] = fds[1] = ring.fd;
            uint64_t wrong = !strcmp(scenario, "bad_hello") ? 0x314f444e48465047ULL : hello;
            nfds = !strcmp(scenario, "two_fds") ? 2 : 1;
            s = send_raw(socket_path, &wrong, sizeof wrong, fds, nfds);
        }
        if (s < 0)
            return 1;
        wait_for_close(s, 30);
        return 0;
    }

    pm_ring ring;
    if (pm_ring_create(&ring, !strcmp(scenario, "flood") ? 1024 : 4096))
        return 1;
    fill_header(&ring);
    int conn = pm_hand_over(ring.fd, socket_path, 1000);
    if (conn < 0) {
        fprintf(stderr, "pm_test_producer: handover failed: %s\n", strerror(-conn));
        return 3;
    }
    gpuflow_pm_header *h = ring.header;
    if (!strcmp(scenario, "lying_head")) {
        __atomic_store_n(&h->head, h->tail + 1000000ull, __ATOMIC_RELEASE);
    } else if (!strcmp(scenario, "garbage_text")) {
        memset(h->device_name, 0x07, GPUFLOW_PM_TEXT_MAX);
        memcpy(h->device_name, "\xff\xfe<b>\x1b[31m", 10);
        memset(h->detail, 'x', GPUFLOW_PM_DETAIL_MAX);
        __atomic_store_n(&h->status, 999u, __ATOMIC_RELEASE);
    } else if (!strcmp(scenario, "flood")) {
        uint64_t base = clock_pair(&ring, 0);
        uint64_t deadline = realtime_ns() + 2000000000ull, k = 0;
        while (realtime_ns() < deadline) {
            gpuflow_pm_record r = sample(base, k++);
            pm_ring_push(&ring, &r);
        }
    } else {
        uint64_t base = clock_pair(&ring, !strcmp(scenario, "clock_far") ? 2 * 86400000000000ull : 0);
        if (!strcmp(scenario, "no_clock"))
            __atomic_store_n(&h->head, 0, __ATOMIC_RELEASE);   /* the pair is unwritten again */
        for (uint64_t k = 0; k < 200; ++k) {
            gpuflow_pm_record r = sample(base, k);
            if (!strcmp(scenario, "bad_records") && k % 20 == 10) {
                gpuflow_pm_record bad = r;
                switch ((k / 20) % 8) {
                case 0: bad.kind = 77; break;
                case 1: bad.end = bad.start - 1; break;
                case 2: bad.end = bad.start + 20000000000ull; break;
                case 3: bad.start -= 5000000; bad.end -= 5000000; break;   /* before the previous one ended */
                case 4: bad.values[GPUFLOW_PM_WARPS_AVG] = NAN; break;
                case 5: bad.values[GPUFLOW_PM_DRAM_PCT] = INFINITY; break;
                case 6: bad.values[GPUFLOW_PM_SM_ACTIVE_MAX] = 1e30f; break;
                default: bad.valid = 0xffff; bad.values[9] = 123; break;
                }
                if (bad.kind == GPUFLOW_PM_SAMPLE && (k / 20) % 8 >= 4) {
                    r = bad;   /* these replace the good sample: its values are checked one by one */
                } else {
                    pm_ring_push(&ring, &r);
                    pm_ring_push(&ring, &bad);
                    continue;
                }
            }
            pm_ring_push(&ring, &r);
        }
    }
    if (!strcmp(scenario, "deaf")) {
        signal(SIGTERM, SIG_IGN);
        for (;;)
            pause();
    }
    wait_for_close(conn, 30);
    pm_ring_set_status(&ring, GPUFLOW_PM_STOPPED, 0, "the test producer stopped");
    return 0;
}
