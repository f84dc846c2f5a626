"""The GPU check's `activity` stage: a traced process's GPU busy share and copy bandwidth, judged
against a workload that knows what it did.

    python scripts/gpu_activity.py run <busy_copies binary> <out dir> [busy seconds] [sleep seconds]
    python scripts/gpu_activity.py check <out dir>

``run`` runs bench/workloads/busy_copies.cu three times under ``gpuflow run --summary-json``
(``busy``, ``sleep`` and ``copies``; seconds default 5 each), keeps each one's stdout and summary
in the out directory (``<mode>.stdout``, ``summary_<mode>.json``), reads the GPU's PCIe link from
NVML into ``link.json``, then does what ``check`` does with that directory (``check`` needs no
GPU: the tests give it hand-made files):

* **busy**: the process's share over its whole run, ``busy_ns / kernel_span_ns`` (the union of
  its kernel intervals from its first kernel's start to its last one's end), ≥ 95, and its
  ``busy_pct`` ≥ 95, with every ``busy_spin`` launch traced. ``busy_pct`` is the union of its
  kernel intervals over the snapshot's busy window: the latest stretch of at least a second whose
  records had all arrived (a window under a second, or none, is a failure). The summary is the
  last snapshot, taken after the program exited, when it is settled up to its last kernel's end:
  the window then ends there, and is the last second or so *of the run*. Where it ends later (the
  program took more than the settling delay, 0.5 s, to exit after its last kernel, and a snapshot
  while it was exiting had settled past it) it holds idle time after the run, so ``busy_pct`` is
  printed but not judged (``activity_busy_pct_judged=no``, with how far the window reaches past
  the last kernel); the window's place is found from its end (``busy_window_end_us``) and the last
  kernel's (the newest span's end), both wall clock.
* **sleep**: both figures ≤ 5 (one tiny kernel every 200 ms), every ``sleep_tick`` traced (idle
  time after the run can only lower ``busy_pct``: judged wherever its window lies).
* **copies**: per direction (h2d, d2h) and host memory (pinned, pageable), the traced bytes equal
  the bytes the program printed, exactly; the traced bandwidth (bytes over the copies' GPU time)
  is at least :data:`FLOOR_BYTES_PER_S` and at most the PCIe link's theoretical peak per direction
  (generation × width, gpuflow.collectors.nvml.readings.pcie_peak_bytes_per_s, as
  ``links.pcie_peak_bytes_per_s``: gen 5 ×16 is 63.0 GB/s) with its maximum generation and width
  (NVML's nvmlDeviceGetMaxPcieLinkGeneration/Width: the device's and the system's; the current
  ones only when those are not known, and then the output says so); pinned is faster than
  pageable each way.

It prints the figures one ``key=value`` a line (``activity_busy_pct=99.98`` ...), an
``activity_failed=<what>`` line for each criterion missed, and last ``activity_ok=<yes|no>``.
Exit status: 0 when the figures were judged (whatever activity_ok says), 1 when they could not be
(no GPU, the workload or gpuflow failed, a file missing), 2 for bad arguments.

Constraints: standard library, nvidia-ml-py and GPUFlow's PCIe peak only; every subprocess has a
timeout; about 3 × 5 s of workload plus gpuflow's start and stop, ~30 s in all.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from gpu_occupancy import fields   # the workloads print their lines alike

from gpuflow.collectors.nvml.readings import pcie_peak_bytes_per_s

BUSY_MIN_PCT = 95.0  #: a process that keeps the GPU busy
SLEEP_MAX_PCT = 5.0  #: a process that mostly sleeps
FLOOR_BYTES_PER_S = 1e9  #: a copy of 256 MiB slower than this is not a working link
MIN_WINDOW_MS = 1000.0  #: the busy window is a second or more (traced_activity.WINDOW_NS)
#: how far the busy window's ends may lie outside the kernels' while it is "of the run": the
#: spans' starts are whole microseconds, and the clock pair of the window and of the spans may differ
WINDOW_SLACK_MS = 1.0
MODES = ("busy", "sleep", "copies")
COPY_KINDS = (("h2d", "pinned"), ("d2h", "pinned"), ("h2d", "pageable"), ("d2h", "pageable"))
KERNEL = {"busy": "busy_spin", "sleep": "sleep_tick"}
#: how long past its own seconds a mode may take under gpuflow run (start, stop, the copies' ~3 s)
RUN_MARGIN_S = 120


class Unjudgeable(Exception):
    """The figures cannot be judged at all (a file missing or unreadable): one line for the user."""


def printed(stdout: str, keyword: str) -> list[dict[str, str]]:
    """The workload's lines that start with ``keyword``, as their words."""
    return [fields(line) for line in stdout.splitlines() if line.split(" ", 1)[0] == keyword]


def traced_devices(summary: dict[str, Any]) -> tuple[list[dict], dict[str, int], int | None]:
    """Every traced process's device entries, kernel launches by name, and the newest kernel span's
    end (wall clock, µs; None: no kernel span), over the summary."""
    devices: list[dict] = []
    kernels: dict[str, int] = {}
    last_end_us: int | None = None
    for t in summary.get("traced", []) + summary.get("traced_retired", []):
        devices += t.get("devices") or []
        for k in t.get("kernels") or []:
            kernels[k.get("name")] = kernels.get(k.get("name"), 0) + int(k.get("count") or 0)
        for lane in t.get("lanes") or []:
            for span in lane.get("spans") or []:
                if span.get("kind") == "kernel":
                    end = span["start_us"] + span["dur_ns"] // 1000
                    last_end_us = end if last_end_us is None else max(last_end_us, end)
    return devices, kernels, last_end_us


def _fmt(value: Any) -> str:
    if value is None:
        return "none"
    return f"{value:.4f}" if isinstance(value, float) else str(value)


class Judge:
    """Collects the figures and the failures of one stage."""

    def __init__(self) -> None:
        self.figures: dict[str, Any] = {}
        self.failed: list[str] = []

    def figure(self, key: str, value: Any) -> Any:
        self.figures[key] = value
        return value

    def fail(self, what: str) -> None:
        self.failed.append(what)

    def lines(self) -> list[str]:
        out = [f"activity_{k}={_fmt(v)}" for k, v in self.figures.items()]
        out += [f"activity_failed={f}" for f in self.failed]
        out.append(f"activity_ok={'no' if self.failed else 'yes'}")
        return out


def load(folder: Path, name: str) -> Any:
    path = folder / name
    try:
        text = path.read_text()
        return json.loads(text) if name.endswith(".json") else text
    except OSError as exc:
        raise Unjudgeable(f"{name}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise Unjudgeable(f"{name} is not JSON: {exc}") from None


def judge_share(j: Judge, mode: str, stdout: str, summary: dict[str, Any]) -> None:
    """The busy or sleep run: its busy share over the window and over the run, its kernels."""
    lines = printed(stdout, mode)
    if not lines:
        j.fail(f"{mode}: the workload printed no '{mode}' line")
        return
    launched = int(lines[-1].get("kernels", -1))
    j.figure(f"{mode}_kernels", launched)
    if summary.get("exit_status") != 0:
        j.fail(f"{mode}: the workload exited {summary.get('exit_status')} under gpuflow run")
    devices, kernels, last_end_us = traced_devices(summary)
    busy = [d for d in devices if d.get("kernel_span_ns")]
    traced = kernels.get(KERNEL[mode], 0)
    j.figure(f"{mode}_traced_kernels", traced)
    if traced != launched:
        j.fail(f"{mode}: {traced} {KERNEL[mode]} launches traced, {launched} made")
    if len(busy) != 1:
        j.fail(f"{mode}: {len(busy)} traced devices ran kernels, not 1")
        return
    d = busy[0]
    pct, window, window_end_us = d.get("busy_pct"), d.get("busy_window_ms"), d.get("busy_window_end_us")
    run_pct = 100.0 * d.get("busy_ns", 0) / d["kernel_span_ns"]
    j.figure(f"{mode}_run_pct", round(run_pct, 4))
    j.figure(f"{mode}_pct", pct)
    j.figure(f"{mode}_window_ms", window)
    j.figure(f"{mode}_late", d.get("busy_late"))
    judged = pct is not None
    if pct is None or window is None or window < MIN_WINDOW_MS:
        j.fail(f"{mode}: no busy window of a second or more (busy_pct {pct}, window {window} ms)")
    elif window_end_us is None or last_end_us is None:
        j.fail(f"{mode}: the busy window's end or the last kernel's is not in the summary: the window "
               "cannot be placed in the run")
    else:
        past_ms = (window_end_us - last_end_us) / 1000
        before_ms = (last_end_us - d["kernel_span_ns"] // 1000 - (window_end_us - window * 1000)) / 1000
        j.figure(f"{mode}_window_past_last_kernel_ms", round(past_ms, 3))
        j.figure(f"{mode}_window_before_first_kernel_ms", round(before_ms, 3))
        inside = past_ms <= WINDOW_SLACK_MS and before_ms <= WINDOW_SLACK_MS
        if mode == "busy" and not inside:
            judged = False
        j.figure(f"{mode}_pct_judged", "yes" if judged else
                 f"no (its window reaches {max(past_ms, 0):.1f} ms past the last kernel and "
                 f"{max(before_ms, 0):.1f} ms before the first: not a window of the run)")
    for name, value in (("busy_pct", pct if judged else None), ("busy_ns/kernel_span_ns", run_pct)):
        if value is None:
            continue
        if mode == "busy" and value < BUSY_MIN_PCT:
            j.fail(f"busy: {name} {value:.3f} % < {BUSY_MIN_PCT:g} % for a process that keeps the GPU busy")
        if mode == "sleep" and value > SLEEP_MAX_PCT:
            j.fail(f"sleep: {name} {value:.3f} % > {SLEEP_MAX_PCT:g} % for a process that mostly sleeps")


def link_peak(j: Judge, link: dict[str, Any]) -> float | None:
    """The link's theoretical bytes per second per direction, from link.json's generation and width."""
    source = link.get("source")
    peak = pcie_peak_bytes_per_s(link.get("gen"), link.get("width"))
    j.figure("link_source", source)
    j.figure("link_gen", link.get("gen"))
    j.figure("link_width", link.get("width"))
    j.figure("link_peak_bytes_per_s", peak)
    if peak is None:
        j.fail(f"copies: the PCIe link's peak is not known (generation {link.get('gen')}, width "
               f"{link.get('width')}: {link.get('error') or 'NVML did not say'})")
    return peak


def judge_copies(j: Judge, stdout: str, summary: dict[str, Any], peak: float | None) -> None:
    made = {(w.get("direction"), w.get("memory")): w for w in printed(stdout, "copy")}
    if summary.get("exit_status") != 0:
        j.fail(f"copies: the workload exited {summary.get('exit_status')} under gpuflow run")
    devices, _, _ = traced_devices(summary)
    traced: dict[tuple[str, str], dict[str, Any]] = {}
    for d in devices:
        for c in d.get("copies") or []:
            key = (c.get("direction"), c.get("memory"))
            seen = traced.setdefault(key, {"bytes": 0, "total_ns": 0, "count": 0})
            for field in ("bytes", "total_ns", "count"):
                seen[field] += int(c.get(field) or 0)
    rates: dict[tuple[str, str], float] = {}
    for direction, memory in COPY_KINDS:
        name = f"{direction}_{memory}"
        line = made.get((direction, memory))
        got = traced.get((direction, memory))
        if line is None:
            j.fail(f"copies: the workload printed no {direction} {memory} line")
            continue
        j.figure(f"{name}_bytes", int(line["bytes"]))
        j.figure(f"{name}_host_bytes_per_s", float(line.get("host_bytes_per_s", "nan")))
        if got is None:
            j.fail(f"copies: the trace has no {direction} copies from {memory} memory")
            continue
        j.figure(f"{name}_traced_bytes", got["bytes"])
        j.figure(f"{name}_traced_count", got["count"])
        if got["bytes"] != int(line["bytes"]):
            j.fail(f"copies: {direction} {memory}: {got['bytes']} bytes traced, {line['bytes']} copied")
        if not got["total_ns"]:
            j.fail(f"copies: {direction} {memory}: the copies took no traced time")
            continue
        rate = rates[(direction, memory)] = got["bytes"] * 1e9 / got["total_ns"]
        j.figure(f"{name}_bytes_per_s", round(rate, 1))
        if rate < FLOOR_BYTES_PER_S:
            j.fail(f"copies: {direction} {memory}: {rate / 1e9:.3f} GB/s is below the floor of "
                   f"{FLOOR_BYTES_PER_S / 1e9:g} GB/s")
        if peak is not None and rate > peak:
            j.fail(f"copies: {direction} {memory}: {rate / 1e9:.3f} GB/s is above the link's peak of "
                   f"{peak / 1e9:.3f} GB/s")
    for direction in ("h2d", "d2h"):
        pinned, pageable = rates.get((direction, "pinned")), rates.get((direction, "pageable"))
        if pinned is not None and pageable is not None and not pinned > pageable:
            j.fail(f"copies: {direction}: pageable {pageable / 1e9:.3f} GB/s is not slower than pinned "
                   f"{pinned / 1e9:.3f} GB/s")
    others = sorted(f"{d} {m}" for d, m in traced if (d, m) not in COPY_KINDS)
    if others:
        j.figure("other_copies", ",".join(o.replace(" ", "_") for o in others))


def judge(folder: Path) -> Judge:
    """Every criterion over the files ``run`` leaves in ``folder`` (Unjudgeable: one missing)."""
    j = Judge()
    for mode in ("busy", "sleep"):
        judge_share(j, mode, load(folder, f"{mode}.stdout"), load(folder, f"summary_{mode}.json"))
    peak = link_peak(j, load(folder, "link.json"))
    judge_copies(j, load(folder, "copies.stdout"), load(folder, "summary_copies.json"), peak)
    return j


def check(folder: Path) -> int:
    try:
        j = judge(folder)
    except Unjudgeable as exc:
        print(f"activity_ok=no (the figures could not be judged: {exc})")
        return 1
    print("\n".join(j.lines()))
    return 0


def read_link(bus_id: str | None) -> dict[str, Any]:
    """The PCIe link of the GPU with this bus id (else NVML's device 0): its maximum generation and
    width, else its current ones; ``error`` says what NVML refused."""
    import pynvml as N

    link: dict[str, Any] = {"source": None, "gen": None, "width": None, "bus_id": bus_id}
    try:
        N.nvmlInit()
    except N.NVMLError as exc:
        link["error"] = f"nvmlInit: {exc}"
        return link
    try:
        try:
            handle = N.nvmlDeviceGetHandleByPciBusId(bus_id) if bus_id else N.nvmlDeviceGetHandleByIndex(0)
        except N.NVMLError as exc:
            link["error"] = f"no NVML device for bus id {bus_id}: {exc}; NVML's device 0 read instead"
            handle = N.nvmlDeviceGetHandleByIndex(0)
        for source, gen, width in (("max", N.nvmlDeviceGetMaxPcieLinkGeneration, N.nvmlDeviceGetMaxPcieLinkWidth),
                                   ("current", N.nvmlDeviceGetCurrPcieLinkGeneration,
                                    N.nvmlDeviceGetCurrPcieLinkWidth)):
            try:
                link.update(source=source, gen=int(gen(handle)), width=int(width(handle)))
                break
            except N.NVMLError as exc:
                link["error"] = f"{source} link: {exc}"
    except N.NVMLError as exc:
        link["error"] = str(exc)
    finally:
        N.nvmlShutdown()
    return link


def run_mode(binary: str, out_dir: Path, mode: str, args: list[str], timeout_s: float) -> bool:
    """One mode under gpuflow run: its stdout and summary kept; False (said why) if it failed."""
    summary = out_dir / f"summary_{mode}.json"
    summary.unlink(missing_ok=True)
    command = [sys.executable, "-m", "gpuflow", "run", "--port", "0", "--no-summary", "--summary-json",
               str(summary), "--", binary, mode, *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        (out_dir / f"{mode}.stdout").write_text(exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes)
                                                else exc.stdout or "")
        print(f"activity_ok=no (the {mode} workload under gpuflow run did not end within {timeout_s:.0f} s)")
        return False
    (out_dir / f"{mode}.stdout").write_text(done.stdout)
    sys.stderr.write(done.stderr)
    if done.returncode != 0 or not summary.exists():
        print(f"activity_ok=no (the {mode} workload under gpuflow run exited {done.returncode}"
              f"{'' if summary.exists() else ', no summary written'}; its stderr is above)")
        return False
    return True


def run(binary: str, out_dir: Path, busy_s: float, sleep_s: float) -> int:
    out_dir.mkdir(parents=True, exist_ok=True)
    plan: tuple[tuple[str, list[str], float], ...] = (
        ("busy", [f"{busy_s:g}"], busy_s), ("sleep", [f"{sleep_s:g}"], sleep_s), ("copies", [], 10.0))
    for mode, args, seconds in plan:
        if not run_mode(binary, out_dir, mode, args, seconds + RUN_MARGIN_S):
            return 1
    device = printed((out_dir / "copies.stdout").read_text(), "device")
    link = read_link(device[0].get("pci_bus_id") if device else None)
    (out_dir / "link.json").write_text(json.dumps(link, indent=1) + "\n")
    return check(out_dir)


def seconds_arg(text: str) -> float:
    value = float(text)
    if not 3 <= value <= 60:
        raise ValueError(f"{text}: a mode's seconds must be in [3, 60] (the busy window needs a second "
                         "inside the run)")
    return value


def main(argv: list[str]) -> int:
    try:
        if len(argv) in (3, 4, 5) and argv[0] == "run":
            times = [seconds_arg(a) for a in argv[3:]] + [5.0, 5.0]
            return run(argv[1], Path(argv[2]), times[0], times[1])
        if len(argv) == 2 and argv[0] == "check":
            return check(Path(argv[1]))
    except ValueError as exc:
        print(f"gpu_activity.py: {exc}", file=sys.stderr)
        return 2
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
