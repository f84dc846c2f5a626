"""Benchmark: what the NVML history costs a tick, what it holds, and how fast /api/history answers.

    python bench/history.py                  # on a machine with NVIDIA GPUs (the tick's part)
    python bench/history.py --fake shared8   # anywhere: against the fake backend

Three questions, each side by side or against a stated budget, in this one process:

* **the tick** — two collectors over the same GPUs (two fake backends of the same scenario and
  seed, or the real NVML twice), one keeping the history and one not, ticked alternately (ABBA)
  ``--ticks`` times each with a clock that moves one interval a tick, so the minute roll-ups come
  at their real rate (every 60th tick at 1 s). The mean includes the roll-ups; the median is a
  plain tick's. The NVML tick's budget is 1 ms per GPU (bench/nvml_tick.py measures the rest).
* **the bytes** — the store's byte count after an hour and after a day of 1 s ticks of the fake
  ``churn`` scenario (8 GPUs; a new short job every 30 ticks, so processes keep coming and going:
  2,880 of them a day), against the budget the options give (HistoryBudget.nbytes).
* **the answer** — the history-on collector's hour behind a real Agent (the real plugin manager's
  NVML plugin and its ``query_history``), the real app and the embedded server on a loopback
  socket: ``GET /api/history`` for the last hour, timed from the request to the JSON parsed by the
  client, ``--answers`` times; and the agent's ``query_history`` alone (the plugin's columns,
  before any JSON), to show where the time goes.

The last line is exactly ``tick_on_ms=<a> tick_off_ms=<b> ratio=<a/b> extra_us_per_gpu=<c>
bytes_hour=<d> bytes_day=<e> answer_hour_p50_ms=<f> answer_hour_p95_ms=<g>`` (tick times are
means, roll-ups included).

Constraints: imports the installed package and nothing of the tests; the fake runs measure
GPUFlow's Python against a pure-Python fake, not NVML (bench/nvml_tick.py says the same).
"""

from __future__ import annotations

import argparse
import http.client
import json
import platform
import statistics
import sys
import time
from typing import Any, Callable

from gpuflow.collectors.nvml.collector import MIN_GAP_S, NvmlCollector
from gpuflow.collectors.nvml.fake_backend import FakeBackend, scenario_names
from gpuflow.collectors.nvml.history import HistoryBudget, HistoryStore
from gpuflow.core.context import AgentConfig

EPOCH = 1_764_600_000.0  #: where the benchmark's clocks start (seconds since the epoch)


class Clock:
    """A clock the benchmark moves itself."""

    def __init__(self) -> None:
        self.now = EPOCH

    def __call__(self) -> float:
        return self.now


def collector(fake: str | None, seed: int, interval_s: float, history: bool) -> tuple[NvmlCollector, Clock, Any]:
    clock = Clock()
    store = HistoryStore(HistoryBudget(interval_s=interval_s, min_tick_s=MIN_GAP_S)) if history else None
    if fake:
        backend: Any = FakeBackend(fake, seed=seed, clock=clock)
        backend.slow = {}
        reader = backend.proc_reader
    else:
        from gpuflow.collectors.nvml.pynvml_backend import PynvmlBackend

        backend, reader = PynvmlBackend(), None
    c = NvmlCollector(backend, AgentConfig(interval_s=interval_s), proc_reader=reader, clock=clock,
                      hostname="bench", history=store)
    c.poll_once()
    c.sample_once()
    return c, clock, backend


def tick_side_by_side(fake: str | None, seed: int, ticks: int) -> tuple[list[float], list[float], NvmlCollector, Clock, int]:
    on, on_clock, _ = collector(fake, seed, 1.0, True)
    off, off_clock, _ = collector(fake, seed, 1.0, False)
    first = on.poll_once()
    gpus = len(first.devices)
    if not gpus:
        raise SystemExit("no GPUs: " + "; ".join(p.message for p in first.problems))
    off.poll_once()
    t_on: list[float] = []
    t_off: list[float] = []
    clock = time.perf_counter

    def one(c: NvmlCollector, moved: Clock, sink: list[float]) -> None:
        moved.now += 1.0
        if fake:  # the fake's per-process samples stay fresh (on a GPU a sweep takes ~40 ms)
            c.sample_once()
        t0 = clock()
        c.poll_once()
        sink.append(clock() - t0)

    for r in range(ticks):
        if r % 2 == 0:
            one(on, on_clock, t_on)
            one(off, off_clock, t_off)
        else:
            one(off, off_clock, t_off)
            one(on, on_clock, t_on)
    off.stop()
    return t_on, t_off, on, on_clock, gpus


def bytes_over_a_day(day_ticks: int) -> tuple[int, int, int, int]:
    """(bytes after an hour, after a day, the budget, processes seen) for the churn scenario."""
    c, clock, backend = collector("churn", 0, 1.0, True)
    store = c.history
    assert store is not None
    pids: set[int] = set()
    hour = 0
    for i in range(1, day_ticks + 1):
        clock.now += 1.0
        if i % 30 == 0:
            c.sample_once()
        part = c.poll_once()
        if i % 30 == 0:
            pids.update(p.pid for p in part.processes)
        if i == min(3600, day_ticks):
            hour = store.nbytes
    return hour, store.nbytes, store.budget.nbytes(backend.scenario.gpus), len(pids)


def answer_times(c: NvmlCollector, now: float, answers: int) -> tuple[list[float], list[float], int, int]:
    """Time GET /api/history for the last hour from a real agent, app and embedded server, and
    the agent's query_history alone (the plugin's answer, before any JSON)."""
    from gpuflow.collectors.nvml.plugin import SLOT
    from gpuflow.core.agent import Agent
    from gpuflow.core.plugins import get_plugin_manager
    from gpuflow.transport.app import AppSettings, create_app
    from gpuflow.transport.server import EmbeddedServer

    pm = get_plugin_manager(environ={"GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1",
                                     "GPUFLOW_DISABLED_PLUGINS": "cupti"})
    agent = Agent(AgentConfig(interval_s=1.0), pm)
    agent.context.slots[SLOT] = c  # the hour the benchmark ticked, answered by the real hook
    server = EmbeddedServer(create_app(agent, settings=AppSettings(start_agent=False)), "127.0.0.1", 0)
    server.serve_in_thread()
    path = f"/api/history?from={now - 3600:.3f}&to={now + 1:.3f}"
    hook = []
    for _ in range(answers):
        t0 = time.perf_counter()
        agent.query_history(now - 3600, now + 1)
        hook.append(time.perf_counter() - t0)
    times, size, series = [], 0, 0
    try:
        for _ in range(answers):
            t0 = time.perf_counter()
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            conn.request("GET", path, headers={"Host": f"127.0.0.1:{server.port}"})
            response = conn.getresponse()
            body = response.read()
            doc = json.loads(body)
            times.append(time.perf_counter() - t0)
            conn.close()
            if response.status != 200:
                raise SystemExit(f"/api/history answered {response.status}: {body[:200]!r}")
            size, series = len(body), len(doc["series"])
    finally:
        server.shutdown()
    return times, hook, size, series


def ms(values: list[float], pick: Callable[[list[float]], float]) -> float:
    return pick(values) * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fake", metavar="SCENARIO", choices=scenario_names(),
                        help="tick the fake backend (no GPU needed): " + ", ".join(scenario_names()))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ticks", type=int, default=3600, help="ticks each side (default 3600: an hour)")
    parser.add_argument("--day-ticks", type=int, default=86_400, help="ticks of the bytes run (default a day)")
    parser.add_argument("--answers", type=int, default=20, help="/api/history requests (default 20)")
    args = parser.parse_args(argv)

    if args.fake:
        print(f"FAKE backend, scenario {args.fake!r}: the tick figures measure GPUFlow's Python "
              "against a pure-Python fake, NOT NVML on a GPU")
    print(f"python {platform.python_version()}")
    t_on, t_off, on, on_clock, gpus = tick_side_by_side(args.fake, args.seed, args.ticks)
    on_mean, off_mean = ms(t_on, statistics.fmean), ms(t_off, statistics.fmean)
    extra_us = (on_mean - off_mean) * 1e3 / gpus
    print(f"tick, {gpus} GPU(s), {args.ticks} each, interleaved: history on mean {on_mean:.4f} ms "
          f"median {ms(t_on, statistics.median):.4f} ms p99 {ms(t_on, lambda v: statistics.quantiles(v, n=100)[-1]):.4f} ms "
          f"max {ms(t_on, max):.3f} ms; off mean {off_mean:.4f} ms median "
          f"{ms(t_off, statistics.median):.4f} ms p99 {ms(t_off, lambda v: statistics.quantiles(v, n=100)[-1]):.4f} ms "
          f"max {ms(t_off, max):.3f} ms; the history adds {extra_us:.2f} us per GPU a tick "
          "(budget: the whole tick <= 1 ms per GPU)")

    times, hook, size, series = answer_times(on, on_clock.now, args.answers)
    p50, p95 = ms(times, statistics.median), ms(times, lambda v: statistics.quantiles(v, n=20)[-1])
    print(f"/api/history, the last hour of {gpus} GPU(s): {series} series, {size} bytes of JSON; "
          f"request to parsed answer p50 {p50:.1f} ms p95 {p95:.1f} ms over {len(times)} requests; "
          f"of which the plugin's answer (query_history, no JSON) median {ms(hook, statistics.median):.1f} ms")
    on.stop()

    t0 = time.perf_counter()
    hour, day, budget, seen = bytes_over_a_day(args.day_ticks)
    print(f"bytes, fake churn scenario (8 GPUs, {seen} processes seen over {args.day_ticks} ticks, "
          f"{time.perf_counter() - t0:.0f} s to tick): after an hour {hour} B, after "
          f"{args.day_ticks} ticks {day} B; the budget {budget} B ({budget / 2**20:.2f} MiB)")
    print(f"tick_on_ms={on_mean:.4f} tick_off_ms={off_mean:.4f} ratio={on_mean / off_mean:.3f} "
          f"extra_us_per_gpu={extra_us:.2f} bytes_hour={hour} bytes_day={day} "
          f"answer_hour_p50_ms={p50:.1f} answer_hour_p95_ms={p95:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
