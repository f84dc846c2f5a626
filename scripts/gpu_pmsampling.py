"""The GPU check's `pmsampling` stage: GPUFlow's PM-sampling rows against a workload with known phases.

    python scripts/gpu_pmsampling.py <sm_phases> <demo_workload> <json out> [seconds per phase] [rounds]

1. Runs bench/workloads/sm_phases.cu under ``gpuflow run --gpu-metrics --linger`` (port
   :data:`PORT`) and, once the program has exited, asks the lingering agent for everything it
   kept: GET /api/history (the pm_* series at full resolution), /api/window (every traced
   kernel, exact) and /api/snapshot (the pmsampling lines: sampling, or why not); reads the
   helper's CPU time from /proc (gpuflow-pm-sampler, the agent's child); then stops the agent.
2. Per phase (idle, all, half, low, h2d, d2h; its first 0.3 s left out), the means of the samples
   lying wholly inside it: ``pm_phase <name> sm_active=<avg>/<min>/<max> warps=<avg>/<min>/<max>
   dram_pct=<d> pcie_read_gbps=<r> pcie_write_gbps=<w> samples=<n>``.
3. Alignment with the lanes: for all, half and low, the traced kernels' first start and last end
   against the times the SM-active row crosses half its plateau (interpolated between sample
   middles): ``pm_align <phase> rise_ms=<d> fall_ms=<d>``; the worst must be within one sample
   interval.
4. Cost, side by side: the demo workload (its own elapsed_ms) under ``gpuflow run`` with and
   without --gpu-metrics, alternately, ``rounds`` times each: ``pm_cost sampler_cpu_pct=<c>
   demo_ms_off=<median> demo_ms_on=<median> slowdown=<on/off>``.
5. ``pm_failed <criterion> value= want=`` per criterion missed, then the last line
   ``pm_ok=<yes|no> ...`` with every figure. The expected values come from the workload's
   geometry (it prints its SM count): every SM busy with 64 warps (all), half the SMs with one
   32-warp block each (half: SM active 50 % from 0 to 100, warps 25 % from 0 to 50), every SM with
   2 warps (low: SM active 100 %, warps 2/64 = 3.1 %), nothing (idle); each within
   :data:`TOLERANCE` points.

When the agent says it could not sample (no privilege, counters held by another tool, an
unsupported device, no driver), the stage prints ``pm_refused status=<s> message=<the agent's
line>`` and ``pm_ok=no refused=<s>``: the refusal, with the driver and CUDA from nvidia-smi in the
log's machine section, is what docs/gpu-metrics.md records then. Exit status: 0 when the figures
(or the refusal) were taken, 1 when the run itself failed, 2 for bad arguments.

Constraints: device 0; talks to the agent over loopback HTTP only; the analysis functions are
pure (tests/pmsampling/test_gpu_stage.py runs them on made-up series).
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

PORT = 17719
TOLERANCE = 5.0
EDGE_SKIP_S = 0.3
METRICS = ("pm_sm_active_pct", "pm_sm_active_min_pct", "pm_sm_active_max_pct", "pm_warps_active_pct",
           "pm_warps_active_min_pct", "pm_warps_active_max_pct", "pm_dram_throughput_pct",
           "pm_pcie_read_bytes_per_s", "pm_pcie_write_bytes_per_s")
MAX_WARPS_PER_SM = 64   # sm_90


def expected(sms: int) -> dict[str, tuple[float, float, float, float, float, float]]:
    """Per spin phase: SM active (avg, min, max) and warps in flight (avg, min, max), in %."""
    busy = (sms // 2) / sms * 100
    per_block = 32 / MAX_WARPS_PER_SM * 100
    low = 2 / MAX_WARPS_PER_SM * 100
    return {"idle": (0, 0, 0, 0, 0, 0), "all": (100, 100, 100, 100, 100, 100),
            "half": (busy, 0, 100, busy * per_block / 100, 0, per_block), "low": (100, 100, 100, low, low, low)}


def phase_means(series: dict[str, tuple[list[float], list[float]]], resolution_s: float,
                start: float, end: float) -> dict[str, float]:
    """Each metric's mean over the samples lying wholly inside [start + EDGE_SKIP_S, end)."""
    out: dict[str, float] = {}
    for metric, (t, v) in series.items():
        got = [x for ts, x in zip(t, v) if ts >= start + EDGE_SKIP_S and ts + resolution_s <= end
               and x is not None and not math.isnan(x)]
        out[metric] = statistics.fmean(got) if got else math.nan
        out["samples"] = max(out.get("samples", 0), len(got))
    return out


def crossing(t: list[float], v: list[float], resolution_s: float, level: float, after: float, before: float,
             rising: bool) -> float:
    """When the series (sample middles) first crosses ``level`` upward (or downward) between
    ``after`` and ``before``, interpolated; NaN when it does not."""
    pts = [(ts + resolution_s / 2, x) for ts, x in zip(t, v) if after <= ts <= before and x is not None
           and not math.isnan(x)]
    for (t0, x0), (t1, x1) in zip(pts, pts[1:]):
        if (rising and x0 < level <= x1) or (not rising and x0 > level >= x1):
            return t0 + (t1 - t0) * (level - x0) / (x1 - x0)
    return math.nan


def kernel_edges(spans: list[tuple[float, float]], start: float, end: float) -> tuple[float, float]:
    """The first kernel start and the last kernel end of a phase (seconds), from (start, end) spans."""
    inside = [(a, b) for a, b in spans if start - 0.2 <= a <= end]
    if not inside:
        return math.nan, math.nan
    return min(a for a, _ in inside), max(b for _, b in inside)


def criteria(means: dict[str, dict[str, float]], sms: int) -> list[tuple[str, float, str]]:
    """(key, value, want) for every phase figure against its expectation."""
    out = []
    for phase, want in expected(sms).items():
        m = means.get(phase, {})
        for i, metric in enumerate(METRICS[:6]):
            key = f"{phase}_{metric.replace('pm_', '').replace('_pct', '')}"
            out.append((key, m.get(metric, math.nan), f"{want[i]:.1f}+-{TOLERANCE:g}"))
    return out


def missed(rows: list[tuple[str, float, str]]) -> list[tuple[str, float, str]]:
    bad = []
    for key, value, want in rows:
        target, tol = (float(x) for x in want.split("+-"))
        if value != value or abs(value - target) > tol:
            bad.append((key, value, want))
    return bad


# -- the run --------------------------------------------------------------------------------------
def get(path: str) -> Any:
    req = urllib.request.Request(f"http://127.0.0.1:{PORT}{path}", headers={"Host": f"127.0.0.1:{PORT}"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def helper_cpu(agent_pid: int) -> tuple[float, float]:
    """CPU seconds and age in seconds of the agent's gpuflow-pm-sampler children (device 0's first)."""
    tick = os.sysconf("SC_CLK_TCK")
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        if comm.startswith("gpuflow-pm-samp") and int(fields[1]) == agent_pid:
            cpu = (int(fields[11]) + int(fields[12])) / tick
            return cpu, uptime - int(fields[19]) / tick
    return math.nan, math.nan


def demo_ms(demo: str, on: bool) -> float:
    cmd = [sys.executable, "-m", "gpuflow", "run", "--port", "0", "--no-summary"] + (["--gpu-metrics"] if on else [])
    out = subprocess.run(cmd + ["--", demo, "1500"], capture_output=True, text=True, timeout=300).stdout
    found = re.search(r"elapsed_ms=([0-9.]+)", out)
    return float(found.group(1)) if found else math.nan


def main(argv: list[str]) -> int:
    if len(argv) not in (4, 5, 6):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    phases_bin, demo, json_out = argv[1], argv[2], Path(argv[3])
    phase_s = float(argv[4]) if len(argv) > 4 else 4.0
    rounds = int(argv[5]) if len(argv) > 5 else 5
    work = Path(tempfile.mkdtemp(prefix="gpuflow-pm-"))
    out_f, err_f = open(work / "stdout", "w"), open(work / "stderr", "w")
    offset = statistics.median(time.time() - time.monotonic() for _ in range(5))
    began = time.time()
    run = subprocess.Popen([sys.executable, "-m", "gpuflow", "run", "--port", str(PORT), "--linger", "--gpu-metrics",
                            "--", phases_bin, str(phase_s)], stdout=out_f, stderr=err_f)
    deadline = time.monotonic() + 8 * phase_s + 90
    while time.monotonic() < deadline and "still serving" not in (work / "stderr").read_text():
        if run.poll() is not None:
            print((work / "stderr").read_text()[-2000:])
            print("pm_ok=no (gpuflow run ended early: see above)")
            return 1
        time.sleep(0.5)
    try:
        history = get(f"/api/history?from={began - 5!r}&to={time.time() + 5!r}&metrics={','.join(METRICS)}")
        window = get(f"/api/window?from={began - 5!r}&to={time.time() + 5!r}")
        snap = get("/api/snapshot")
        cpu_s, age_s = helper_cpu(run.pid)
    finally:
        run.send_signal(signal.SIGINT)
        run.wait(timeout=60)
    lines = (work / "stdout").read_text().splitlines()
    print("\n".join(x for x in (work / "stderr").read_text().splitlines() if "pmsampling" in x or "GPU" in x))
    pm_lines = [p for p in snap.get("host", {}).get("problems", []) if p.get("source") == "pmsampling"]
    for p in pm_lines:
        print(f"pm_line {p['severity']}: {p['message']}")
    refused = [p for p in pm_lines if "no GPU metrics" in p["message"]]
    if refused:
        status = re.search(r"no GPU metrics \(([a-z_ ]+)\)", refused[0]["message"])
        why = status.group(1) if status else "failed"
        print(f"pm_refused status={why} message={refused[0]['message']}")
        json_out.write_text(json.dumps({"refused": refused, "pm_lines": pm_lines}, indent=1))
        print(f"pm_ok=no refused={why}")
        return 0
    sms = int(next((re.search(r"sms=(\d+)", x).group(1) for x in lines if x.startswith("device ")), "0"))
    phases = [(x.split()[1], float(x.split()[2]) + offset, float(x.split()[3]) + offset)
              for x in lines if x.startswith("phase ")]
    series: dict[str, tuple[list[float], list[float]]] = {}
    resolution = 0.001
    for s in history.get("series", []):
        if s["entity"][0] == "device" and s["metric"] in METRICS:
            series.setdefault(s["metric"], ([], []))
            series[s["metric"]][0].extend(s["t"])
            series[s["metric"]][1].extend(math.nan if x is None else x for x in s["value"])
            resolution = s["resolution_s"]
    spans = [(a / 1e6, a / 1e6 + d / 1e9) for p in window.get("processes", []) for lane in p.get("lanes", [])
             if "spans" in lane for a, d, k in zip(lane["spans"]["start_us"], lane["spans"]["dur_ns"],
                                                    lane["spans"]["kind"]) if k == 0]
    means: dict[str, dict[str, float]] = {}
    for name, start, end in phases:
        m = means[name] = phase_means(series, resolution, start, end)
        f = lambda k: f"{m.get(k, math.nan):.1f}"   # noqa: E731
        print(f"pm_phase {name} sm_active={f(METRICS[0])}/{f(METRICS[1])}/{f(METRICS[2])} "
              f"warps={f(METRICS[3])}/{f(METRICS[4])}/{f(METRICS[5])} dram_pct={f(METRICS[6])} "
              f"pcie_read_gbps={m.get(METRICS[7], math.nan) / 1e9:.2f} "
              f"pcie_write_gbps={m.get(METRICS[8], math.nan) / 1e9:.2f} samples={m.get('samples', 0)}")
    worst = 0.0 if phases else math.nan
    t_act, v_act = series.get(METRICS[0], ([], []))
    for name, start, end in phases:
        if name not in ("all", "half", "low"):
            continue
        first, last = kernel_edges(spans, start, end)
        level = means[name].get(METRICS[0], math.nan) / 2
        rise = crossing(t_act, v_act, resolution, level, start - 0.5, start + 0.5, True)
        fall = crossing(t_act, v_act, resolution, level, last - 0.5, last + 0.5, False)
        d_rise, d_fall = (rise - first) * 1e3, (fall - last) * 1e3
        print(f"pm_align {name} rise_ms={d_rise:.3f} fall_ms={d_fall:.3f} kernels_from={first:.6f} to={last:.6f}")
        worst = max(worst, abs(d_rise), abs(d_fall)) if not (math.isnan(d_rise) or math.isnan(d_fall)) else math.nan
    demo_ms(demo, False)   # a first run warms the caches both sides share, and is not counted
    off: list[float] = []
    on: list[float] = []
    for i in range(rounds):   # alternately, each side first every other round: drift hits both alike
        for side in ((False, True) if i % 2 == 0 else (True, False)):
            (on if side else off).append(demo_ms(demo, side))
    cpu_pct = 100 * cpu_s / age_s if age_s == age_s and age_s > 0 else math.nan
    off_ms, on_ms = statistics.median(off), statistics.median(on)
    print(f"pm_cost sampler_cpu_pct={cpu_pct:.2f} sampler_cpu_s={cpu_s:.3f} over_s={age_s:.1f} "
          f"demo_ms_off={off_ms:.2f} demo_ms_on={on_ms:.2f} slowdown={on_ms / off_ms:.4f} rounds={rounds}")
    rows = criteria(means, sms) + [("align_ms", worst, f"0+-{resolution * 1e3:g}")]
    for key, value, want in missed(rows):
        print(f"pm_failed {key} value={value:.2f} want={want}")
    json_out.write_text(json.dumps({"phases": phases, "means": means, "sms": sms, "resolution_s": resolution,
                                    "align_worst_ms": worst, "sampler_cpu_pct": cpu_pct, "demo_ms_off": off,
                                    "demo_ms_on": on, "pm_lines": pm_lines, "series": series}, indent=None))
    figures = " ".join(f"{k}={v:.1f}" for k, v, _w in rows[:-1] if k.endswith(("sm_active", "warps_active")))
    print(f"pm_ok={'no' if missed(rows) else 'yes'} {figures} align_ms={worst:.3f} interval_ms={resolution * 1e3:g} "
          f"sampler_cpu_pct={cpu_pct:.2f} slowdown={on_ms / off_ms:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
