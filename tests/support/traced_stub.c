/*
 * traced_stub.c — a stand-in for a CUDA program under `gpuflow run`, for tests without a GPU.
 *
 * What it is for: it does what the CUDA driver does at cuInit (load the library named by
 * CUDA_INJECTION64_PATH and call its InitializeInjection; with the fake libcupti of
 * tests/support/fake_cupti.c the library then records a scripted batch), then lives for a while,
 * optionally starting traced children of its own first. A compiled program rather than a Python
 * child so that any uid can run it (a test's victim may be an unprivileged user who cannot read
 * the test interpreter's installation).
 *
 *     traced_stub [init_delay_ms [run_ms [children [child_init_delay_ms]]]]
 *
 * init_delay_ms: wait before "cuInit" (default 0); run_ms: live this long after it (default 50);
 * children: start this many copies of itself (each with child_init_delay_ms and run_ms, no
 * children) right after starting, and wait for them before exiting. It prints
 * "stub <pid> init" when it has called InitializeInjection. Exit status 0, or 3 when the library
 * could not be loaded.
 *
 * Constraints: plain C and POSIX; build with `gcc -O2 traced_stub.c -o traced_stub -ldl`.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static long arg(int argc, char **argv, int i, long dflt)
{
    return argc > i ? strtol(argv[i], NULL, 10) : dflt;
}

int main(int argc, char **argv)
{
    long init_delay = arg(argc, argv, 1, 0), run = arg(argc, argv, 2, 50);
    long children = arg(argc, argv, 3, 0), child_delay = arg(argc, argv, 4, 0);
    for (long i = 0; i < children; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            char d[24], r[24];
            snprintf(d, sizeof d, "%ld", child_delay);
            snprintf(r, sizeof r, "%ld", run);
            execl("/proc/self/exe", argv[0], d, r, "0", "0", (char *)NULL);
            _exit(127);
        }
    }
    sleep_ms(init_delay);
    const char *path = getenv("CUDA_INJECTION64_PATH");
    void *lib = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    int (*init)(void) = lib ? (int (*)(void))dlsym(lib, "InitializeInjection") : NULL;
    if (!init) {
        fprintf(stderr, "traced_stub: cannot load %s\n", path ? path : "(unset)");
        return 3;
    }
    init();
    printf("stub %d init\n", (int)getpid());
    fflush(stdout);
    sleep_ms(run);
    while (wait(NULL) > 0)
        ;
    return 0;
}
