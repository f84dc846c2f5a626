"""What each NVML call the collector makes costs on this machine's GPUs, one call at a time.

bench/nvml_tick.py compares a whole tick with bare pynvml making the same calls, so a call that is
slow in itself (slow in the driver, not in GPUFlow) is invisible in its ratio. This times every
call the NVML collector's tick and sampler make, alone, on one GPU, and the alternatives that were
weighed against them: the median and the 95th percentile of ``--reps`` calls, in microseconds,
and whether it answered or raised (a call the GPU does not support raises at once; its time is
still printed, as the collector pays it too).

Each call is marked with who makes it: ``tick`` (the poll thread, every tick), ``graphics`` (the
tick's GPM evaluation with GRAPHICS_UTIL, at most once every ``gpm.GRAPHICS_EVERY_S``),
``sampler`` (the background sweep, once per interval; ``sampler_without_gpm``: only for a GPU
whose PCIe rates GPM does not give) or ``compared`` (not made: another form of a reading, or
single GPM ids, to see where a cost comes from). GPM is evaluated over one pair of
samples taken 110 ms apart, with a request built once per id set, as the collector does.

Usage: python bench/nvml_calls.py [--reps 200] [--gpu 0]
Prints one line per call: ``call=<name> by=<who> median_us=<m> p95_us=<p>
answered=<yes|no:_error>``, then, last, ``slowest=<name> slowest_median_us=<m>
tick_calls_median_us_sum=<s> sampler_calls_median_us_sum=<s>`` (the sums of the medians of the
calls the tick makes every tick, and of those the sampler makes every sweep).

Constraints: needs an NVIDIA driver and nvidia-ml-py; read-only calls only (nothing is set, no
event is waited for); imports nothing of GPUFlow but the GPM id sets (gpm.py).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

from gpuflow.collectors.nvml.gpm import FAST_IDS, METRIC_IDS

TICK, GRAPHICS, SAMPLER, COMPARED = "tick", "graphics", "sampler", "compared"
SAMPLER_WITHOUT_GPM = "sampler_without_gpm"  #: the sampler's only for a GPU without GPM's PCIe rates


def gpm_evaluation(nv: Any, samples: list[Any], ids: tuple[int, ...]) -> Callable[[], Any]:
    """One nvmlGpmMetricsGet over the pair, into a request built once (as the collector's)."""
    request = nv.c_nvmlGpmMetricsGet_t()
    request.version = nv.NVML_GPM_METRICS_GET_VERSION
    request.numMetrics = len(ids)
    request.sample1, request.sample2 = samples
    for i, metric in enumerate(ids):
        request.metrics[i].metricId = metric
    return lambda: nv.nvmlGpmMetricsGet(request)


def calls(nv: Any, h: Any, samples: list[Any]) -> list[tuple[str, str, Callable[[], Any]]]:
    """Every call, as (name, who makes it, thunk)."""
    pcie_ids = (nv.NVML_GPM_METRIC_PCIE_TX_PER_SEC, nv.NVML_GPM_METRIC_PCIE_RX_PER_SEC)
    corr, vol = nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC
    return [
        ("nvmlDeviceGetUtilizationRates", TICK, lambda: nv.nvmlDeviceGetUtilizationRates(h)),
        ("nvmlDeviceGetMemoryInfo_v2", TICK, lambda: nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)),
        ("nvmlDeviceGetTemperature", TICK, lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
        ("nvmlDeviceGetPowerUsage", TICK, lambda: nv.nvmlDeviceGetPowerUsage(h)),
        ("nvmlDeviceGetEnforcedPowerLimit", TICK, lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h)),
        ("nvmlDeviceGetClockInfo_sm", TICK, lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
        ("nvmlDeviceGetClockInfo_mem", TICK, lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)),
        ("nvmlDeviceGetComputeRunningProcesses", TICK, lambda: nv.nvmlDeviceGetComputeRunningProcesses(h)),
        ("nvmlDeviceGetGraphicsRunningProcesses", TICK, lambda: nv.nvmlDeviceGetGraphicsRunningProcesses(h)),
        ("nvmlDeviceGetCurrentClocksEventReasons", TICK, lambda: nv.nvmlDeviceGetCurrentClocksEventReasons(h)),
        ("nvmlGpmSampleGet", TICK, lambda: nv.nvmlGpmSampleGet(h, samples[1])),
        (f"nvmlGpmMetricsGet_fast_{len(FAST_IDS)}ids", TICK, gpm_evaluation(nv, samples, FAST_IDS)),
        (f"nvmlGpmMetricsGet_with_graphics_{len(METRIC_IDS)}ids", GRAPHICS,
         gpm_evaluation(nv, samples, METRIC_IDS)),
        ("nvmlGpmMetricsGet_pcie_2ids", COMPARED, gpm_evaluation(nv, samples, pcie_ids)),
        *((f"nvmlGpmMetricsGet_id{m}", COMPARED, gpm_evaluation(nv, samples, (m,))) for m in METRIC_IDS),
        ("nvmlDeviceGetMemoryInfo_v1", COMPARED, lambda: nv.nvmlDeviceGetMemoryInfo(h)),
        ("nvmlDeviceGetTotalEnergyConsumption", SAMPLER, lambda: nv.nvmlDeviceGetTotalEnergyConsumption(h)),
        ("nvmlDeviceGetFieldValues_total_energy", COMPARED, lambda: nv.nvmlDeviceGetFieldValues(
            h, [nv.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION])),
        ("nvmlDeviceGetMigMode", SAMPLER, lambda: nv.nvmlDeviceGetMigMode(h)),
        ("nvmlDeviceGetProcessUtilization", SAMPLER, lambda: nv.nvmlDeviceGetProcessUtilization(h, 0)),
        ("nvmlDeviceGetPcieThroughput_tx", SAMPLER_WITHOUT_GPM,
         lambda: nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_TX_BYTES)),
        ("nvmlDeviceGetTotalEccErrors", SAMPLER, lambda: nv.nvmlDeviceGetTotalEccErrors(h, corr, vol)),
        ("nvmlDeviceGetRemappedRows", SAMPLER, lambda: nv.nvmlDeviceGetRemappedRows(h)),
        ("nvmlDeviceGetPcieReplayCounter", SAMPLER, lambda: nv.nvmlDeviceGetPcieReplayCounter(h)),
        ("nvmlDeviceGetCurrPcieLinkGeneration", SAMPLER, lambda: nv.nvmlDeviceGetCurrPcieLinkGeneration(h)),
        ("nvmlDeviceGetEncoderUtilization", SAMPLER, lambda: nv.nvmlDeviceGetEncoderUtilization(h)),
        ("nvmlDeviceGetTemperature_memory_field", SAMPLER, lambda: nv.nvmlDeviceGetFieldValues(
            h, [nv.NVML_FI_DEV_MEMORY_TEMP])),
        ("nvmlDeviceGetNvLinkState_0", SAMPLER, lambda: nv.nvmlDeviceGetNvLinkState(h, 0)),
    ]


def timed(thunk: Callable[[], Any], reps: int) -> tuple[float, float, str]:
    """Median and 95th percentile of ``reps`` calls in µs, and whether the call answered."""
    times, answered = [], "yes"
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        try:
            thunk()
        except Exception as exc:  # noqa: BLE001 - unsupported, or an older nvidia-ml-py: said, and timed
            answered = f"no: {type(exc).__name__} {exc}"
        times.append((time.perf_counter_ns() - t0) / 1e3)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))], answered


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=200, help="calls of each (default 200)")
    parser.add_argument("--gpu", type=int, default=0, help="the GPU's NVML index (default 0)")
    args = parser.parse_args()
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    import pynvml as nv

    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        raise SystemExit(f"no GPUs: {exc}")
    try:
        count = nv.nvmlDeviceGetCount()
        if not 0 <= args.gpu < count:
            raise SystemExit(f"no GPU {args.gpu}: NVML shows {count}")
        h = nv.nvmlDeviceGetHandleByIndex(args.gpu)
        samples = [nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()]
        try:
            nv.nvmlGpmSampleGet(h, samples[0])
            time.sleep(0.11)  # GPM refreshes its counters every ~100 ms
            nv.nvmlGpmSampleGet(h, samples[1])
            results = []
            for name, who, thunk in calls(nv, h, samples):
                median, p95, answered = timed(thunk, args.reps)
                results.append((name, who, median))
                print(f"call={name} by={who} median_us={median:.1f} p95_us={p95:.1f} "
                      f"answered={answered.replace(' ', '_')}", flush=True)
        finally:
            for s in samples:
                nv.nvmlGpmSampleFree(s)
    finally:
        nv.nvmlShutdown()
    slowest = max(results, key=lambda r: r[2])
    tick = sum(m for _, who, m in results if who == TICK)
    sampler = sum(m for _, who, m in results if who == SAMPLER)
    print(f"slowest={slowest[0]} slowest_median_us={slowest[2]:.1f} tick_calls_median_us_sum={tick:.1f} "
          f"sampler_calls_median_us_sum={sampler:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
