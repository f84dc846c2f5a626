"""Benchmark: the agent's memory with 8 traced processes writing 100 k records/s each.

    python bench/agent_rss.py [--seconds 60] [--processes 8] [--rate 100000] [--capacity 262144]
                              [--client sse|json] [--retain-mb 256] [--tracemalloc]

This process is the agent: ``gpuflow.core.agent.Agent`` with the real plugin manager (NVML
disabled, no third-party entry points), the CUPTI plugin's ``ring_socket`` option set (a socket in a
private directory made here), so the built-in CUPTI collector takes and drains the rings exactly as
under ``gpuflow run``, with the flight recorder's ``--retain-mb`` budget; the real app in the
embedded server on a loopback port, and one real SSE client (``--client sse``, the default: a
separate process reading ``/api/stream`` with bench/sse_client.py, so its own CPU is not the
agent's) taking every frame the agent sends. ``--client json`` measures the old stand-in instead:
a thread of the agent calling ``to_json_dict()`` on the latest snapshot 10 times a second.

Each simulated traced process is a separate process: a small C driver (below, compiled here) that
dlopens the compiled test producer (built by running tests/support/ringproducer.py: the same
ring_producer.c and ring_handover.c as libgpuflow_inject.so), creates its own ring of
``--capacity`` records (the injected library's own default, four times what ``gpuflow run`` asks
for), hands it to the agent's socket from its own pid, and writes a realistic mix at a paced
rate: kernels on 4 named streams
(~200 distinct long mangled C++ names, a few hot), host/device copies on the null stream, some
memsets, a clock sync every second. When its time is up it does the exit flush and exits.

Measured: the agent's VmRSS (and its RssAnon / RssShmem parts) from /proc/self/status every 0.25 s;
the rate the producers actually achieved (records pushed per second, all of them together, from
their own counts); drops; and the records the agent decoded, which must equal what the producers
wrote. ``--tracemalloc`` also prints the Python allocation sites holding the most memory at the end.

Also measured: the agent's CPU time (this process's user + system, every thread of it) while
the producers run, in cores: what tracing at that record rate costs the machine beside the
program (``--processes 1 --rate 200000`` is the launch storm's rate on an H200). It is split by
what spent it, each part the thread CPU time (``time.thread_time``, not wall time: a thread
waiting for the GIL costs nothing here) of the calls that do it, timed by wrapping them on this
agent's own objects: draining the rings (the collector's ``_drain``, the Cython drain and the
recorder's columns), building snapshots (its ``_build``), merging the parts (the agent's
``collect_once``) and encoding the stream's frames (the frame encoder's ``_encode``); the rest
(the client's one full frame, the server writing to the socket, this script's sampling) is the
difference. And by thread, from /proc/self/task (every live thread's user + system time: the
collector's, the frame loop's, the server's, this script's main thread). The cyclic garbage
collector's share (its collections' thread CPU, by generation, from ``gc.callbacks``; inside the
parts above). And per unit of work, what the machine's load changes least (it changes how many
frames the client takes, and with them the agent's CPU): the drain's CPU a record, one build's
(every traced process), one frame's encoding, and the agent's CPU per frame the client got.

Last line: ``rss_mb=<peak VmRSS> records_per_s=<achieved, all producers> dropped=<ring drops>
agent_cpu_cores=<agent CPU seconds per second>``; goals (issue 17) records_per_s >= 760,000,
dropped = 0, agent_cpu_cores <= 0.25 and rss_mb <= 150 + the retention budget (docs/recorder.md
states them and the figures measured).

Constraints: Linux, gcc, memory for the rings (8 x 16 MiB by default); no GPU.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from gpuflow.collectors.cupti.plugin import get_collector
from gpuflow.core.agent import Agent
from gpuflow.core.context import AgentConfig
from gpuflow.core.plugins import get_plugin_manager

#: builds the test producer into a folder and prints its path; run, not imported, because this
#: benchmark runs as ``python bench/agent_rss.py``, which puts only bench/ on the import path
PRODUCER_BUILDER = Path(__file__).resolve().parents[1] / "tests" / "support" / "ringproducer.py"

DRIVER_C = r"""
/* One simulated traced process: writes a realistic record mix into its own ring, paced. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef void *(*open_fn)(int, uint32_t, int *);
typedef int (*handover_fn)(void *, const char *, uint32_t);
typedef int (*kernel_fn)(void *, uint32_t, uint32_t, uint32_t, uint64_t, uint64_t, const char *,
                         uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t);
typedef int (*memcpy_fn)(void *, uint32_t, uint32_t, uint32_t, uint64_t, uint64_t, uint32_t, uint64_t,
                         uint32_t, uint32_t);
typedef int (*memset_fn)(void *, uint32_t, uint32_t, uint32_t, uint64_t, uint64_t, uint64_t, uint32_t);
typedef int (*sname_fn)(void *, uint32_t, uint32_t, uint32_t, const char *);
typedef int (*ctx_fn)(void *, uint32_t, uint32_t, uint32_t);
typedef int (*dev_fn)(void *, uint32_t, const char *);
typedef int (*sync_fn)(void *, uint64_t, uint64_t);
typedef void (*status_fn)(void *, uint32_t, const char *);
typedef void (*exited_fn)(void *);
typedef uint64_t (*u64_fn)(void *);

static uint64_t now_ns(clockid_t c) { struct timespec t; clock_gettime(c, &t); return t.tv_sec * 1000000000ull + t.tv_nsec; }
static uint64_t rng_state;
static uint32_t rnd(void) { rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull; return rng_state >> 33; }

#define NAMES 200
static const char *families[] = {
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_",
    "_ZN7cutlass6KernelINS_4gemm6kernel4GemmINS1_11threadblock12MmaPipelinedINS1_9GemmShapeILi128ELi128ELi8EEE",
    "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_14func_wrapper_tIfZNS0_11sum_functorIfffEclERNS_14TensorIteratorEEUlffE_EEjfLi4EEEEEvT1_",
    "_Z28flash_fwd_splitkv_kernel_v2I23Flash_fwd_kernel_traitsILi128ELi64ELi128ELi4ELb0ELb0EN7cutlass10bfloat16_tEELb1ELb0ELb0ELb0ELb1ELb0ELb0EEv16Flash_fwd_params",
    "_ZN4cuda3std3__48__detail21__invoke_thrust_kernelIN6thrust20THRUST_200500_800_NS8cuda_cub4core13_kernel_agentINS7_8__reduce",
};

int main(int argc, char **argv) {
    if (argc != 7) { fprintf(stderr, "usage: driver LIB RING_SOCKET RATE SECONDS CAPACITY SEED\n"); return 2; }
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 2; }
    open_fn o = (open_fn)dlsym(lib, "tph_open");
    handover_fn hand_over = (handover_fn)dlsym(lib, "tph_hand_over");
    kernel_fn kern = (kernel_fn)dlsym(lib, "tph_kernel");
    memcpy_fn mcp = (memcpy_fn)dlsym(lib, "tph_memcpy");
    memset_fn mst = (memset_fn)dlsym(lib, "tph_memset");
    sname_fn sname = (sname_fn)dlsym(lib, "tph_stream_name");
    ctx_fn ctx = (ctx_fn)dlsym(lib, "tph_context");
    dev_fn dev = (dev_fn)dlsym(lib, "tph_device");
    sync_fn sync = (sync_fn)dlsym(lib, "tph_clock_sync");
    status_fn status = (status_fn)dlsym(lib, "tph_set_status");
    exited_fn exited = (exited_fn)dlsym(lib, "tph_mark_exited");
    u64_fn dropped = (u64_fn)dlsym(lib, "tph_dropped");
    u64_fn head = (u64_fn)dlsym(lib, "tph_head");
    double rate = atof(argv[3]), seconds = atof(argv[4]);
    rng_state = strtoull(argv[6], NULL, 10) * 2654435761ull + 1;
    int err = 0;
    void *h = o(getpid(), (uint32_t)strtoul(argv[5], NULL, 10), &err);
    if (!h) { fprintf(stderr, "tph_open failed: %d\n", err); return 1; }
    int conn = hand_over(h, argv[2], 2000);  /* kept open until exit: its end is ours */
    if (conn < 0) { fprintf(stderr, "handing the ring over failed: %d\n", conn); return 1; }
    static char names[NAMES][400];
    for (int i = 0; i < NAMES; i++)
        snprintf(names[i], sizeof names[i], "%s%dv", families[i % 5], i);  /* ~110-170 bytes each */
    status(h, 1, "simulated by bench/agent_rss.py");
    ctx(h, 0, 1, 7);
    dev(h, 0, "NVIDIA H200");
    const char *streams[4] = {"compute", "comm", "prefetch", "aux"};
    for (int s = 0; s < 4; s++) sname(h, 0, 1, 13 + s, streams[s]);
    uint64_t t = now_ns(CLOCK_MONOTONIC), start = t, pushed = 5 + 4, written = 5 + 4, last_sync = 0;
    sync(h, t, now_ns(CLOCK_REALTIME));
    uint64_t end_at = start + (uint64_t)(seconds * 1e9);
    uint64_t cursor[4] = {t, t, t, t};
    for (;;) {
        uint64_t now = now_ns(CLOCK_MONOTONIC);
        if (now >= end_at) break;
        uint64_t due = (uint64_t)((now - start) * 1e-9 * rate);
        while (pushed < due) {
            uint32_t r = rnd() % 1000;
            int ok;
            if (r < 850) {  /* a kernel: hot names get most launches */
                uint32_t s = rnd() % 4, n = (rnd() % 4 == 0) ? rnd() % NAMES : rnd() % 12;
                uint64_t dur = 2000 + rnd() % 200000;
                cursor[s] += dur + rnd() % 3000;
                ok = kern(h, 0, 1, 13 + s, cursor[s], cursor[s] + dur, names[n], 128 + rnd() % 4096, 1, 1, 256, 1, 1);
            } else if (r < 970) {  /* a copy on the null stream: h2d, d2h or d2d */
                uint32_t kinds[3] = {1, 2, 8};
                uint64_t bytes = 4096ull << (rnd() % 12);
                ok = mcp(h, 0, 1, 7, now, now + bytes / 20, kinds[rnd() % 3], bytes, 0, 0);
            } else {
                ok = mst(h, 0, 1, 13 + rnd() % 4, now, now + 1500, 1 << 20, 0);
            }
            pushed++;
            written += ok ? 1 : 0;
        }
        if (now - last_sync >= 1000000000ull) {
            pushed++;
            written += sync(h, now, now_ns(CLOCK_REALTIME)) ? 1 : 0;
            last_sync = now;
        }
        struct timespec nap = {0, 1000000};  /* 1 ms */
        nanosleep(&nap, NULL);
    }
    double elapsed = (now_ns(CLOCK_MONOTONIC) - start) * 1e-9;
    exited(h);  /* the exit flush: producer_exited = 1 */
    printf("{\"pid\": %d, \"pushed\": %llu, \"written\": %llu, \"dropped\": %llu, \"head\": %llu, "
           "\"elapsed\": %.3f}\n", getpid(), (unsigned long long)pushed, (unsigned long long)written,
           (unsigned long long)dropped(h), (unsigned long long)head(h), elapsed);
    return 0;
}
"""


def ring_mappings() -> int:
    """This process's mappings of rings (memfd_create's name in /proc/self/maps)."""
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if line.rstrip().endswith("/memfd:gpuflow-ring (deleted)"))


def status_kb() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmHWM"):
                out[key] = int(value.split()[0])
    return out


def build(workdir: Path) -> tuple[str, str]:
    lib = subprocess.run([sys.executable, str(PRODUCER_BUILDER), str(workdir)], check=True,
                         capture_output=True, text=True).stdout.strip()
    src = workdir / "agent_rss_driver.c"
    src.write_text(DRIVER_C)
    exe = workdir / "agent_rss_driver"
    subprocess.run(["gcc", "-O2", "-Wall", "-o", str(exe), str(src), "-ldl"], check=True)
    return lib, str(exe)


SSE_READER = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
from sse_client import connect, events
sock = connect("127.0.0.1", int(sys.argv[2]))
frames = size = 0
try:
    for _t, name, data in events(sock):
        frames += 1
        size += len(data)
except (OSError, RuntimeError):
    pass
print(frames, size, flush=True)
"""


def thread_cpu() -> dict[int, tuple[str, float]]:
    """Each live thread of this process: its name (the Python thread's, else the OS's) and its CPU
    seconds so far (user + system, from /proc/self/task/<tid>/stat)."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:   # ended meanwhile
            continue
        comm, fields = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        out[int(tid)] = (names.get(int(tid), comm), (int(fields[11]) + int(fields[12])) / tick)
    return out


class CpuSplit:
    """The thread CPU seconds spent inside some calls: ``wrap(obj, name)`` replaces the method
    ``name`` of ``obj`` (on that object only) by one that adds its calls' ``time.thread_time()``
    to ``seconds[part]``. Each part is timed in whichever thread calls it; parts do not nest."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def wrap(self, obj: object, name: str, part: str) -> None:
        inner = getattr(obj, name)
        self.seconds.setdefault(part, 0.0)
        self.calls.setdefault(part, 0)

        def timed(*args, **kwargs):
            t = time.thread_time()
            try:
                return inner(*args, **kwargs)
            finally:
                spent = time.thread_time() - t
                with self._lock:
                    self.seconds[part] += spent
                    self.calls[part] += 1

        setattr(obj, name, timed)

    def taken(self) -> dict[str, float]:
        with self._lock:
            return dict(self.seconds)

    def called(self) -> dict[str, int]:
        with self._lock:
            return dict(self.calls)


class GcTimer:
    """The cyclic garbage collector's collections and their thread CPU seconds, by generation
    (``gc.callbacks``; a collection runs in whichever thread's allocation triggered it, so its time
    is also inside that thread's part above)."""

    def __init__(self) -> None:
        self.collections = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self._started = threading.local()

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started.at = time.thread_time()
        elif hasattr(self._started, "at"):
            self.collections[info["generation"]] += 1
            self.seconds[info["generation"]] += time.thread_time() - self._started.at

    def taken(self) -> tuple[list[int], list[float]]:
        return list(self.collections), list(self.seconds)


def start_sse_client(port: int) -> subprocess.Popen:
    """One real SSE client: a process of its own reading /api/stream until the agent ends it."""
    return subprocess.Popen([sys.executable, "-c", SSE_READER, str(Path(__file__).resolve().parent), str(port)],
                            stdout=subprocess.PIPE, text=True)


class SnapshotConsumer(threading.Thread):
    """Stands in for the SSE clients: the latest snapshot's JSON form, 10 times a second."""

    def __init__(self, agent: Agent) -> None:
        super().__init__(name="snapshot-consumer", daemon=True)
        self.agent = agent
        self.stop = threading.Event()
        self.calls = 0
        self.spans = 0
        self.seconds = 0.0
        self.elapsed = 0.0

    def run(self) -> None:
        started = next_tick = time.monotonic()
        while not self.stop.wait(max(0.0, next_tick - time.monotonic())):
            next_tick = max(next_tick + 0.1, time.monotonic())  # 10 Hz; a late call is not made up for
            self.elapsed = time.monotonic() - started
            snap = self.agent.board.latest()
            if snap is None:
                continue
            t = time.perf_counter()
            doc = snap.to_json_dict()
            self.seconds += time.perf_counter() - t
            self.calls += 1
            self.spans = sum(len(lane["spans"]) for p in doc["traced"] for lane in p["lanes"])
            del doc, snap  # sent and forgotten, as a stream would


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--processes", type=int, default=8)
    ap.add_argument("--rate", type=float, default=100_000.0, help="records/s per process")
    ap.add_argument("--capacity", type=int, default=262_144, help="ring capacity (the injected library's own default; gpuflow run asks for 65,536, and the "
                    "agent drains at most that many a pass)")
    ap.add_argument("--client", choices=("sse", "json"), default="sse",
                    help="a real SSE client (a process of its own), or the to_json_dict stand-in thread")
    ap.add_argument("--retain-mb", type=int, default=256, help="the flight recorder's budget (0: none)")
    ap.add_argument("--tracemalloc", action="store_true")
    args = ap.parse_args()
    if args.tracemalloc:
        import tracemalloc

        tracemalloc.start(12)
    with tempfile.TemporaryDirectory(prefix="gpuflow-agent-rss-") as tmp:
        lib, driver = build(Path(tmp))
        private = Path(tempfile.mkdtemp(prefix="sock-", dir=tmp))   # mode 0700: only this user enters
        ring_socket = str(private / "ring.sock")
        base = status_kb()
        env = {"GPUFLOW_DISABLED_PLUGINS": "nvml", "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1"}
        agent = Agent(AgentConfig(options={"cupti": {"ring_socket": ring_socket, "retain_mb": args.retain_mb}}),
                      get_plugin_manager(environ=env))
        agent.start()
        split = CpuSplit()
        collector = get_collector(agent.context)
        split.wrap(collector, "_drain", "drain")
        split.wrap(collector, "_build", "snapshot builds")
        split.wrap(agent, "collect_once", "merge")
        consumer = SnapshotConsumer(agent)
        server = client = None
        if args.client == "json":
            consumer.start()
        else:
            from gpuflow.transport.app import AppSettings, create_app
            from gpuflow.transport.server import EmbeddedServer

            app = create_app(agent, settings=AppSettings(start_agent=False))
            split.wrap(app.state.frames, "_encode", "frame encoding")
            server = EmbeddedServer(app, "127.0.0.1", 0)
            server.serve_in_thread()
            client = start_sse_client(server.port)
        print(f"agent_rss: {args.processes} producers x {args.rate:,.0f} records/s for {args.seconds:.0f} s, "
              f"rings of {args.capacity:,} records")
        print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}, "
              f"Python {platform.python_version()}; agent RSS at start {base['VmRSS'] / 1024:.1f} MB", flush=True)
        started = time.monotonic()
        cpu_start = resource.getrusage(resource.RUSAGE_SELF)
        split_start, calls_start = split.taken(), split.called()
        gc_timer = GcTimer()
        gc.callbacks.append(gc_timer)
        threads_start = thread_cpu()
        procs = [subprocess.Popen([driver, lib, ring_socket, str(args.rate), str(args.seconds), str(args.capacity),
                                   str(i)], stdout=subprocess.PIPE, text=True) for i in range(args.processes)]
        samples: list[tuple[float, dict[str, int]]] = []
        next_print = 5.0
        while any(p.poll() is None for p in procs):
            time.sleep(0.25)
            now = time.monotonic() - started
            s = status_kb()
            samples.append((now, s))
            if now >= next_print:
                next_print += 5.0
                snap = agent.board.latest()
                decoded = sum(t.records for t in snap.traced) if snap else 0
                print(f"  t={now:5.1f}s  VmRSS {s['VmRSS'] / 1024:6.1f} MB (anon {s['RssAnon'] / 1024:6.1f}, "
                      f"shmem {s['RssShmem'] / 1024:6.1f})  decoded {decoded:>11,}", flush=True)
        reports = [json.loads(p.stdout.read()) for p in procs]  # type: ignore[union-attr]
        for p in procs:
            p.wait()
        cpu_end = resource.getrusage(resource.RUSAGE_SELF)   # this process only: the agent's threads
        split_end, calls_end = split.taken(), split.called()
        gc.callbacks.remove(gc_timer)
        threads_end = thread_cpu()
        cpu_wall = time.monotonic() - started
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the final drains: every process exited, every ring released
            part = collector.part()
            if len(part.traced) == len(procs) and all(t.state == "exited" for t in part.traced):
                break
            time.sleep(0.05)
        samples.append((time.monotonic() - started, status_kb()))
        consumer.stop.set()
        if consumer.is_alive():
            consumer.join()
        client_frames = client_bytes = 0
        if server is not None and client is not None:
            server.shutdown()
            try:
                out, _ = client.communicate(timeout=30)
                client_frames, client_bytes = (int(x) for x in out.split())
            except (subprocess.TimeoutExpired, ValueError):
                client.kill()
        agent.stop()
        final_part = collector.part()
        final = status_kb()
        if args.tracemalloc:
            import tracemalloc

            top = tracemalloc.take_snapshot().statistics("traceback")[:8]
            current, peak_traced = tracemalloc.get_traced_memory()
            print(f"tracemalloc: Python allocations now {current / 2**20:.1f} MB, peak {peak_traced / 2**20:.1f} MB; "
                  "largest live:")
            for stat in top:
                print(f"  {stat.size / 2**20:7.2f} MB in {stat.count:>7} blocks  {stat.traceback.format()[-1].strip()}")
    pushed = sum(r["pushed"] for r in reports)
    written = sum(r["written"] for r in reports)
    dropped = sum(r["dropped"] for r in reports)
    elapsed = max(r["elapsed"] for r in reports)
    in_rings = sum(r["head"] for r in reports)  # what was written, name chunks included
    decoded = sum(t.records for t in final_part.traced)
    ring_drops = sum(t.dropped_ring for t in final_part.traced)
    peak = max(samples, key=lambda x: x[1]["VmRSS"])
    settle = min(10.0, args.seconds / 2)
    steady = [s["VmRSS"] for t, s in samples if t >= settle]
    print(f"producers: {pushed:,} records pushed in {elapsed:.1f} s = {pushed / elapsed:,.0f} records/s "
          f"({pushed / elapsed / len(reports):,.0f} per process; asked {args.rate:,.0f}); written {written:,}, "
          f"dropped {dropped:,}")
    print(f"agent: decoded {decoded:,} ring records ({'=' if decoded == in_rings else '!='} the {in_rings:,} the "
          f"producers published, name chunks included); "
          f"drops it reports {ring_drops:,}; processes {len(final_part.traced)}, "
          f"exited {sum(t.state == 'exited' for t in final_part.traced)}, rings still mapped {ring_mappings()}")
    if args.client == "json":
        print(f"snapshot consumer: {consumer.calls} to_json_dict calls ({consumer.calls / max(consumer.elapsed, 1e-9):.1f} "
              f"per second; asked 10), {consumer.seconds / max(1, consumer.calls) * 1e3:.1f} ms each, "
              f"{consumer.spans:,} spans in the last")
    else:
        print(f"SSE client: {client_frames:,} frames, {client_bytes / 1e6:.1f} MB "
              f"({client_frames / max(cpu_wall, 1e-9):.1f} frames/s over the producers' time)")
    print(f"RSS: start {base['VmRSS'] / 1024:.1f} MB, peak {peak[1]['VmRSS'] / 1024:.1f} MB at t={peak[0]:.1f}s "
          f"(anon {peak[1]['RssAnon'] / 1024:.1f}, file {peak[1]['RssFile'] / 1024:.1f}, "
          f"shmem {peak[1]['RssShmem'] / 1024:.1f}), from t={settle:.0f}s on min/max {min(steady) / 1024:.1f}/"
          f"{max(steady) / 1024:.1f} MB, final {final['VmRSS'] / 1024:.1f} MB; VmHWM {final['VmHWM'] / 1024:.1f} MB")
    cpu_s = (cpu_end.ru_utime - cpu_start.ru_utime) + (cpu_end.ru_stime - cpu_start.ru_stime)
    print(f"agent CPU: {cpu_s:.2f} s user+system over the producers' {cpu_wall:.1f} s = {cpu_s / cpu_wall:.3f} "
          f"cores (draining, decoding, retaining, building snapshots, encoding frames for the "
          f"{'SSE client' if args.client == 'sse' else 'to_json_dict stand-in'})")
    parts = {part: split_end[part] - split_start.get(part, 0.0) for part in split_end}
    parts["the rest"] = cpu_s - sum(parts.values())
    print("agent CPU by part: " + ", ".join(f"{part} {seconds / cpu_wall:.3f}" for part, seconds in parts.items())
          + " cores")
    # per unit of work, what the load changes least (it changes how many frames the client takes)
    calls = {part: calls_end[part] - calls_start.get(part, 0) for part in calls_end}
    print(f"per unit: drain {parts['drain'] / max(1, pushed) * 1e9:.0f} ns a record, "
          f"{calls['snapshot builds'] / cpu_wall:.1f} builds a second at {parts['snapshot builds'] / max(1, calls['snapshot builds']) * 1e3:.2f} ms, "
          + (f"{calls['frame encoding'] / cpu_wall:.1f} frames encoded a second at "
             f"{parts['frame encoding'] / max(1, calls['frame encoding']) * 1e3:.2f} ms" if "frame encoding" in calls else "no frames")
          + f"; agent CPU per frame the client got: {cpu_s / max(1, client_frames) * 1e3:.1f} ms")
    counts, gc_seconds = gc_timer.taken()
    print(f"of which the garbage collector: {sum(gc_seconds) / cpu_wall:.3f} cores ("
          + ", ".join(f"generation {g}: {counts[g] / cpu_wall:.1f} a second, {gc_seconds[g] / cpu_wall:.3f}"
                      for g in range(3)) + ")")
    by_thread: dict[str, float] = {}
    for tid, (name, seconds) in threads_end.items():
        by_thread[name] = by_thread.get(name, 0.0) + seconds - threads_start.get(tid, (name, 0.0))[1]
    print("agent CPU by thread: " + ", ".join(f"{name} {seconds / cpu_wall:.3f}" for name, seconds in
                                              sorted(by_thread.items(), key=lambda item: -item[1])) + " cores")
    print(f"rss_mb={peak[1]['VmRSS'] / 1024:.1f} records_per_s={pushed / elapsed:.0f} dropped={ring_drops} "
          f"agent_cpu_cores={cpu_s / cpu_wall:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
