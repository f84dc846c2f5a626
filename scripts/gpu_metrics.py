"""The GPU check's `gpm` stage: NVML GPM and PCIe figures against a workload with known phases.

    python scripts/gpu_metrics.py <sm_phases binary> <json out> [seconds per phase]

Runs bench/workloads/sm_phases.cu (idle; every SM busy at full occupancy; half the SMs; every SM
at 2 warps; host-to-device and device-to-host copies of counted bytes) and, meanwhile, in this
process, GPUFlow's own NVML collector over the real NVML (``poll_once`` every 100 ms: a GPM pair
per tick) plus, every 20 ms, the candidate exact PCIe source that is not GPM: the cumulative
``NVML_FI_DEV_PCIE_COUNT_TX/RX_BYTES`` fields, unwrapped as 32-bit counters. Then it prints:

* ``gpm_phase <name> sm_util_pct=<mean> occupancy_pct=<mean> pairs=<n>`` per phase: the means of
  the GPM pairs that lie wholly inside the phase (its first 0.3 s left out);
* ``gpm_pcie <dir> program_bytes=<b> gpm_bytes=<b> gpm_err_pct=<e> fields_bytes=<b>
  fields_err_pct=<e>``: the collector's PCIe byte totals (GPM) and the fields' over the copy
  phase (from the last reading before it to the first after it: the idle gaps around it), against
  the bytes the program copied;
* ``pcie_source_cost field_values_ms=<m> gpm_pair_2ids_ms=<m> gpm_pair_13ids_ms=<m>``: median of
  200 calls each: one nvmlDeviceGetFieldValues for the two byte fields, and one
  nvmlGpmSampleGet + nvmlGpmMetricsGet for the two PCIe ids and for the collector's 13 ids;
* ``gpm_failed <criterion> value=<v> want=<bound>`` for each criterion below that the figures
  miss (none when all are met; a figure that could not be measured misses its criterion);
* last, ``gpm_ok=<yes|no> sm_util_all=.. sm_util_half=.. sm_util_low=.. sm_util_idle=..
  occupancy_all=.. occupancy_low=.. h2d_err_pct=.. d2h_err_pct=.. fields_wrapped=<yes|no>``.
  yes when every criterion of :data:`CRITERIA` is met: all and low ≥ 85 %, half within
  50 ± 12 %, idle ≤ 3 %, low's occupancy ≤ 10 %, and GPM's PCIe bytes within 5 % of the
  program's both ways (issue 19's bound; docs/gpu-metrics.md says why GPM counts more than the
  program copies).

The JSON file holds every reading (time, GPM means, totals, fields) and the phases, for
docs/gpu-metrics.md. Exit status: 0 when the figures were taken (whatever gpm_ok says), 1 when
they could not be (no GPU, no GPM, the workload failed), 2 for bad arguments.

Constraints: device 0 only; about 6 phases × the phase length + 15 s; imports GPUFlow's
collector, nvidia-ml-py and nothing else of GPUFlow's dependencies.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

import pynvml as N

from gpuflow.collectors.nvml.collector import NvmlCollector
from gpuflow.collectors.nvml.gpm import METRIC_IDS
from gpuflow.collectors.nvml.pynvml_backend import PynvmlBackend
from gpuflow.core.context import AgentConfig

TICK_S = 0.1  #: the collector's tick: a GPM pair each (its minimum gap)
FIELD_S = 0.02  #: the byte fields' reading period: < 4 GiB moves in it even at 64 GB/s
WRAP = 1 << 32
FIELDS = [N.NVML_FI_DEV_PCIE_COUNT_TX_BYTES, N.NVML_FI_DEV_PCIE_COUNT_RX_BYTES]

#: gpm_ok's criteria: (summary key, the bound as printed, whether a value meets it). A value that
#: could not be measured (NaN, or absent) meets none.
CRITERIA: tuple[tuple[str, str, Any], ...] = (
    ("sm_util_all", ">= 85", lambda v: v >= 85),
    ("sm_util_half", "50 +- 12", lambda v: abs(v - 50) <= 12),
    ("sm_util_low", ">= 85", lambda v: v >= 85),
    ("sm_util_idle", "<= 3", lambda v: v <= 3),
    ("occupancy_low", "<= 10", lambda v: v <= 10),
    ("h2d_err_pct", "within +-5", lambda v: abs(v) <= 5),
    ("d2h_err_pct", "within +-5", lambda v: abs(v) <= 5),
)


def missed(summary: dict[str, Any]) -> list[tuple[str, float, str]]:
    """The criteria the summary misses, as (key, value, bound)."""
    out = []
    for key, bound, meets in CRITERIA:
        value = summary.get(key, float("nan"))
        if value != value or not meets(value):  # NaN: not measured
            out.append((key, value, bound))
    return out


def read_fields(h: Any) -> tuple[int | None, int | None]:
    values = N.nvmlDeviceGetFieldValues(h, FIELDS)
    return tuple(v.value.ullVal if v.nvmlReturn == 0 else None for v in values)  # type: ignore[return-value]


class Unwrapped:
    """A cumulative counter read often enough to see every wrap at 2**32."""

    def __init__(self) -> None:
        self.last: int | None = None
        self.total = 0
        self.wrapped = False

    def add(self, raw: int | None) -> None:
        if raw is None:
            return
        if self.last is not None:
            if raw < self.last:
                self.wrapped = True
            self.total += (raw - self.last) % WRAP
        self.last = raw


def median_ms(fn: Any, reps: int = 200) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def source_costs(h: Any) -> dict[str, float]:
    """What each candidate exact PCIe source costs per reading on this GPU."""
    out = {"field_values_ms": median_ms(lambda: N.nvmlDeviceGetFieldValues(h, FIELDS))}
    for label, ids in (("gpm_pair_2ids_ms", (N.NVML_GPM_METRIC_PCIE_TX_PER_SEC, N.NVML_GPM_METRIC_PCIE_RX_PER_SEC)),
                       ("gpm_pair_13ids_ms", METRIC_IDS)):
        samples = [N.nvmlGpmSampleAlloc(), N.nvmlGpmSampleAlloc()]
        request = N.c_nvmlGpmMetricsGet_t()
        request.version = N.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(ids)
        for i, metric in enumerate(ids):
            request.metrics[i].metricId = metric
        N.nvmlGpmSampleGet(h, samples[0])

        def pair() -> None:
            N.nvmlGpmSampleGet(h, samples[1])
            request.sample1, request.sample2 = samples[0], samples[1]
            N.nvmlGpmMetricsGet(request)
            samples.reverse()

        out[label] = median_ms(pair)
        for s in samples:
            N.nvmlGpmSampleFree(s)
    return out


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4):
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    binary, json_out = argv[1], argv[2]
    phase_s = float(argv[3]) if len(argv) == 4 else 4.0
    collector = NvmlCollector(PynvmlBackend(), AgentConfig(interval_s=1.0), gpm_gap_s=TICK_S * 0.9)
    part = collector.poll_once()
    if not part.devices:
        print("gpm: no GPU:", "; ".join(p.message for p in part.problems))
        return 1
    gpu = collector._gpus[0]
    if gpu.gpm is None:
        print(f"gpm: {part.devices[0].name} has no GPM (nvmlGpmQueryDeviceSupport): nothing to check")
        return 1
    h = gpu.handle
    phases: list[dict[str, Any]] = []
    child = subprocess.Popen([binary, str(phase_s)], stdout=subprocess.PIPE, text=True)

    def read_phases() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            print("workload:", line.rstrip())
            words = line.split()
            if words and words[0] == "phase":
                phases.append({"name": words[1], "start": float(words[2]), "end": float(words[3]),
                               "bytes": int(words[4])})

    reader = threading.Thread(target=read_phases, daemon=True)
    reader.start()
    ticks: list[dict[str, Any]] = []
    fields: list[tuple[float, int | None, int | None]] = []
    tx_u, rx_u = Unwrapped(), Unwrapped()
    next_tick = time.monotonic()
    while child.poll() is None:
        now = time.monotonic()
        tx, rx = read_fields(h)
        tx_u.add(tx)
        rx_u.add(rx)
        fields.append((now, tx_u.total, rx_u.total))
        if now >= next_tick:
            d = collector.poll_once().devices[0]
            t = time.monotonic()
            g = d.gpm
            ticks.append({"t": t, "interval_s": g.interval_s if g else None,
                          "sm_util_pct": g.sm_util_pct if g else None,
                          "sm_occupancy_pct": g.sm_occupancy_pct if g else None,
                          "tensor_util_pct": g.tensor_util_pct if g else None,
                          "dram_bw_util_pct": g.dram_bw_util_pct if g else None,
                          "pcie_tx_bytes_per_s": g.pcie_tx_bytes_per_s if g else None,
                          "pcie_rx_bytes_per_s": g.pcie_rx_bytes_per_s if g else None,
                          "pcie_tx_bytes_total": d.links.pcie_tx_bytes_total if d.links else None,
                          "pcie_rx_bytes_total": d.links.pcie_rx_bytes_total if d.links else None,
                          "sm_clock_mhz": d.clock_sm_mhz, "power_w": d.power_draw_w})
            next_tick += TICK_S
        time.sleep(FIELD_S)
    reader.join(5)
    if child.returncode != 0 or not phases:
        print(f"gpm: the workload failed (exit {child.returncode})")
        collector.stop()
        return 1
    costs = source_costs(h)
    collector.stop()

    result: dict[str, Any] = {"phases": phases, "ticks": ticks, "costs": costs, "device": part.devices[0].name}
    summary: dict[str, Any] = {}
    for ph in phases:
        if ph["name"] == "idle" and "sm_util_idle" in summary:
            continue  # the first idle stretch speaks for all
        inside = [k for k in ticks if k["sm_util_pct"] is not None
                  and k["t"] - k["interval_s"] >= ph["start"] + 0.3 and k["t"] <= ph["end"]]
        util = statistics.fmean(k["sm_util_pct"] for k in inside) if inside else float("nan")
        occ = statistics.fmean(k["sm_occupancy_pct"] for k in inside if k["sm_occupancy_pct"] is not None) \
            if inside else float("nan")
        print(f"gpm_phase {ph['name']} sm_util_pct={util:.1f} occupancy_pct={occ:.1f} pairs={len(inside)}")
        if ph["name"] in ("idle", "all", "half", "low"):
            summary[f"sm_util_{ph['name']}"] = util
            summary[f"occupancy_{ph['name']}"] = occ
    for name, gpm_key, field_index in (("h2d", "pcie_rx_bytes_total", 2), ("d2h", "pcie_tx_bytes_total", 1)):
        ph = next((p for p in phases if p["name"] == name), None)
        if ph is None:
            continue
        before = [k for k in ticks if k["t"] <= ph["start"] and k[gpm_key] is not None]
        after = [k for k in ticks if k["t"] >= ph["end"] and k[gpm_key] is not None]
        f_before = [f for f in fields if f[0] <= ph["start"]]
        f_after = [f for f in fields if f[0] >= ph["end"]]
        gpm_bytes = after[0][gpm_key] - before[-1][gpm_key] if before and after else None
        field_bytes = f_after[0][field_index] - f_before[-1][field_index] if f_before and f_after else None
        program = ph["bytes"]

        def err(b: int | None) -> float:
            return float("nan") if b is None else (b - program) / program * 100

        summary[f"{name}_err_pct"] = err(gpm_bytes)
        summary[f"{name}_fields_err_pct"] = err(field_bytes)
        print(f"gpm_pcie {name} program_bytes={program} gpm_bytes={gpm_bytes} gpm_err_pct={err(gpm_bytes):.2f} "
              f"fields_bytes={field_bytes} fields_err_pct={err(field_bytes):.2f}")
    print("pcie_source_cost " + " ".join(f"{k}={v:.4f}" for k, v in costs.items()))
    result["summary"] = summary
    with open(json_out, "w") as f:
        json.dump(result, f, indent=1)

    s = summary
    failed = missed(s)
    for key, value, bound in failed:
        print(f"gpm_failed {key} value={value:.2f} want={bound.replace(' ', '')}")
    ok = not failed
    keys = ("sm_util_all", "sm_util_half", "sm_util_low", "sm_util_idle", "occupancy_all", "occupancy_low",
            "h2d_err_pct", "d2h_err_pct")
    print(f"gpm_ok={'yes' if ok else 'no'} " + " ".join(f"{k}={s.get(k, float('nan')):.1f}" for k in keys)
          + f" fields_wrapped={'yes' if tx_u.wrapped or rx_u.wrapped else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
