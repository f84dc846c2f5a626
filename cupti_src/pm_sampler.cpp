/*
 * pm_sampler.cpp — gpuflow-pm-sampler: the agent's helper that PM-samples one GPU with CUPTI and
 * hands the samples over in a sealed ring (pm_samples.h). docs/gpu-metrics.md, "PM sampling".
 *
 *   gpuflow-pm-sampler --socket PATH --device N [--interval-us U] [--ring-records R]
 *                      [--decode-ms D] [--hw-buffer-mb M] [--cuda-lib P] [--cupti-lib P]
 *   gpuflow-pm-sampler --probe --device N [...]     # start, report one line, stop (gpuflow doctor)
 *
 * Why a helper process: PM sampling needs the CUDA driver, CUPTI's C++ host API and possibly a
 * context on the GPU; the agent holds none of them (a context costs device memory and shows the
 * agent as a process on the GPU). One helper per GPU, started by the agent's pmsampling collector,
 * so a GPU that refuses leaves the others sampling.
 *
 * Order: the ring is created and handed over first, so every later refusal (no driver, no
 * privilege, counters held by another tool, an unsupported device) reaches the agent as a status
 * with its CUDA/CUPTI result and a sentence. Then the session starts and a loop decodes every
 * --decode-ms, writes a clock pair every second and its own CPU time into the header, until the
 * agent closes the connection, SIGTERM/SIGINT, or the agent dies (PR_SET_PDEATHSIG).
 *
 * Exit status: 0 stopped after sampling (or --probe found it works), 2 bad arguments, 3 the ring
 * could not be made or handed over, 4 sampling refused (the status says why).
 * Constraints: never takes the counters from another tool; one line on stderr at most for what
 * the ring cannot carry; everything it writes for the agent is bounded by the format.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "pm_api.h"
#include "pm_ring.h"
#include "pm_session.h"

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

struct Args {
    const char *socket = nullptr;
    bool probe = false;
    PmSettings settings;
    uint32_t ring_records = 1u << 16;
    const char *cuda_lib = nullptr;
    const char *cupti_lib = nullptr;
};

bool number(const char *text, unsigned long long low, unsigned long long high, unsigned long long *out)
{
    if (!text || !*text)
        return false;
    for (const char *c = text; *c; ++c)
        if (*c < '0' || *c > '9')
            return false;
    errno = 0;
    unsigned long long v = strtoull(text, nullptr, 10);
    if (errno || v < low || v > high)
        return false;
    *out = v;
    return true;
}

int usage(const char *why)
{
    fprintf(stderr, "gpuflow-pm-sampler: %s\nusage: gpuflow-pm-sampler (--socket PATH | --probe) --device N "
                    "[--interval-us 100..1000000] [--ring-records 1024..1048576] [--decode-ms 5..1000] "
                    "[--hw-buffer-mb 1..1024] [--cuda-lib PATH] [--cupti-lib PATH]\n", why);
    return 2;
}

int parse(int argc, char **argv, Args *a)
{
    bool have_device = false;
    for (int i = 1; i < argc; ++i) {
        const char *k = argv[i];
        if (!strcmp(k, "--probe")) {
            a->probe = true;
            continue;
        }
        if (i + 1 >= argc)
            return usage("an option is missing its value");
        const char *v = argv[++i];
        unsigned long long n = 0;
        if (!strcmp(k, "--socket"))
            a->socket = v;
        else if (!strcmp(k, "--cuda-lib"))
            a->cuda_lib = v;
        else if (!strcmp(k, "--cupti-lib"))
            a->cupti_lib = v;
        else if (!strcmp(k, "--device") && number(v, 0, 1023, &n))
            a->settings.device = (int)n, have_device = true;
        else if (!strcmp(k, "--interval-us") && number(v, 100, 1000000, &n))
            a->settings.interval_ns = n * 1000;
        else if (!strcmp(k, "--ring-records") && number(v, GPUFLOW_PM_MIN_CAPACITY, GPUFLOW_PM_MAX_CAPACITY, &n))
            a->ring_records = (uint32_t)n;
        else if (!strcmp(k, "--decode-ms") && number(v, 5, 1000, &n))
            a->settings.decode_ms = (uint32_t)n;
        else if (!strcmp(k, "--hw-buffer-mb") && number(v, 1, 1024, &n))
            a->settings.hw_buffer_bytes = n << 20;
        else
            return usage("unknown option or value out of range");
    }
    if (!have_device)
        return usage("--device is required");
    if (a->probe == (a->socket != nullptr))
        return usage("give exactly one of --socket and --probe");
    return 0;
}

uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// true once the agent has closed its end (or sent anything: it never does)
bool agent_gone(int conn)
{
    struct pollfd p = {conn, POLLIN, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR));
}

const char *status_name(uint32_t s)
{
    static const char *const names[] = {"starting", "ok", "no_driver", "no_device", "cupti_missing", "cupti_version",
                                        "unsupported", "no_privilege", "counters_busy", "cupti_error", "stopped"};
    return s <= GPUFLOW_PM_STATUS_MAX ? names[s] : "?";
}

}  // namespace

int main(int argc, char **argv)
{
    Args a;
    int bad = parse(argc, argv, &a);
    if (bad)
        return bad;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);
    if (!a.probe)
        prctl(PR_SET_PDEATHSIG, SIGTERM);   // the agent's helper ends with it

    pm_ring ring;
    int err = pm_ring_create(&ring, a.ring_records);
    if (err) {
        fprintf(stderr, "gpuflow-pm-sampler: cannot create the sample ring: %s\n", strerror(-err));
        return 3;
    }
    int conn = -1;
    if (!a.probe) {
        conn = pm_hand_over(ring.fd, a.socket, 1000);
        if (conn < 0) {
            fprintf(stderr, "gpuflow-pm-sampler: cannot hand the sample ring to the agent at %s: %s\n", a.socket,
                    strerror(-conn));
            return 3;
        }
    }

    PmApi api;
    char why[200] = {0};
    PmLoadResult loaded = pm_api_load(&api, a.cuda_lib, a.cupti_lib, why, sizeof why);
    PmSession session(api, ring, a.settings);
    bool ok = false;
    if (loaded == PM_NO_CUDA)
        pm_ring_set_status(&ring, GPUFLOW_PM_NO_DRIVER, 0, "the CUDA driver could not be loaded: %s", why);
    else if (loaded == PM_NO_CUPTI)
        pm_ring_set_status(&ring, GPUFLOW_PM_CUPTI_MISSING, 0, "libcupti could not be loaded: %s", why);
    else if (loaded == PM_OLD_CUPTI)
        pm_ring_set_status(&ring, GPUFLOW_PM_CUPTI_VERSION, 0, "%s", why);
    else
        ok = session.start();

    if (a.probe) {
        const gpuflow_pm_header *h = ring.header;
        printf("status=%s error=%d device=%u sms=%u name=%s chip=%s detail=%s\n", status_name(h->status), h->error,
               h->device_index, h->sm_count, h->device_name, h->chip_name, h->detail);
        for (int slot = 0; ok && slot < (int)GPUFLOW_PM_SLOT_COUNT; ++slot)
            printf("slot %d %s\n", slot, session.metric_of(slot).empty() ? "-" : session.metric_of(slot).c_str());
        session.stop();
        return ok ? 0 : 4;
    }
    if (!ok) {
        session.stop();
        return 4;
    }
    uint64_t last_clock = clock_ns(CLOCK_MONOTONIC);
    while (!g_stop && !agent_gone(conn)) {
        struct timespec pause = {0, (long)a.settings.decode_ms * 1000000L};
        nanosleep(&pause, nullptr);
        if (!session.decode()) {
            ok = false;
            break;
        }
        uint64_t now = clock_ns(CLOCK_MONOTONIC);
        if (now - last_clock >= 1000000000ull) {
            session.clock_sync();
            last_clock = now;
        }
        __atomic_store_n(&ring.header->cpu_ns, clock_ns(CLOCK_PROCESS_CPUTIME_ID), __ATOMIC_RELAXED);
    }
    session.stop();
    __atomic_store_n(&ring.header->cpu_ns, clock_ns(CLOCK_PROCESS_CPUTIME_ID), __ATOMIC_RELAXED);
    if (ok)
        pm_ring_set_status(&ring, GPUFLOW_PM_STOPPED, 0, "%s", "sampling stopped");
    close(conn);
    return ok ? 0 : 4;
}
