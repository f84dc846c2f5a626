"""The GPU check's `activity` stage without a GPU: bench/workloads/busy_copies.cu compiles cleanly
with nvcc (and, with no GPU, says which CUDA call failed and exits 1; bad arguments exit 2), and
scripts/gpu_activity.py's ``check`` judges the files its ``run`` leaves as the stage will on the
H200: plausible figures give activity_ok=yes, and each way of being wrong (a busy process under
95 %, a sleeper over 5 %, traced bytes unlike the printed ones, pageable faster than pinned, a
rate above the link's peak, a direction missing, no busy window, a kernel untraced, a file
missing) gives no and says what. The figures below are hand-made: what an H200 on PCIe gen 5 ×16
could show (the stage itself measures them).

nvcc missing skips the compile test only when CI is not set: CI has the toolkit.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
from cuda_toolkit import nvcc

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = ROOT / "bench" / "workloads" / "busy_copies.cu"
SCRIPT = ROOT / "scripts" / "gpu_activity.py"
GIB = 1 << 30
GEN5_X16_PEAK = 32e9 * 128 / 130 * 16 / 8   # docs/snapshot.md: 63.0 GB/s a direction




@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, str]:
    """The workload compiled with warnings on: (the binary, nvcc's stderr)."""
    out = tmp_path_factory.mktemp("busy_copies") / "busy_copies"
    done = subprocess.run([nvcc(), "-O2", "-Xcompiler", "-Wall", "-o", str(out), str(WORKLOAD)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return out, done.stderr


def test_the_workload_compiles_cleanly_and_without_a_gpu_names_the_failing_call(built):
    out, stderr = built
    assert "warning" not in stderr.lower(), stderr
    for bad in ([], ["spin", "1"], ["busy"], ["busy", "0"], ["sleep", "601"], ["busy", "2s"],
                ["copies", "0"], ["copies", "1.5"], ["copies", "256", "65"], ["copies", "1", "1", "1"]):
        refused = subprocess.run([str(out), *bad], capture_output=True, text=True, timeout=60)
        assert refused.returncode == 2 and refused.stderr.startswith("usage: busy_copies "), bad
    for mode in (["busy", "0.5"], ["sleep", "0.5"], ["copies", "1", "1"]):
        ran = subprocess.run([str(out), *mode], capture_output=True, text=True, timeout=120)
        if ran.returncode != 0:   # no GPU here (CI): a clear error naming the call
            assert ran.returncode == 1, ran.stderr
            assert ran.stderr.startswith("busy_copies: cudaGetDeviceProperties(&p, 0) failed: "), ran.stderr
        else:
            first, second = ran.stdout.splitlines()[:2]
            assert first.startswith("device index=0 pci_bus_id=") and second.split()[0] in ("busy", "sleep", "copy")


def test_run_without_a_gpu_says_which_mode_failed_under_gpuflow_run(built, tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "run", str(built[0]), str(tmp_path / "out"), "3", "3"],
                          capture_output=True, text=True, timeout=600)
    if done.returncode == 0:
        pytest.skip("this machine has a GPU: the stage ran (scripts/gpu-check's activity stage judges it)")
    assert done.returncode == 1
    assert done.stdout.splitlines()[-1] == ("activity_ok=no (the busy workload under gpuflow run exited 1; its "
                                            "stderr is above)")
    assert "busy_copies: cudaGetDeviceProperties(&p, 0) failed: " in done.stderr
    assert (tmp_path / "out" / "busy.stdout").exists()


# -- the files `run` leaves, hand-made ---------------------------------------------------------
def device(**fields) -> dict:
    base = {"device": 0, "uuid": "GPU-0", "name": "NVIDIA H200", "compute_capability": [9, 0], "sm_count": 132,
            "busy_pct": None, "busy_window_ms": None, "busy_window_end_us": None, "busy_ns": 0,
            "kernel_span_ns": None, "busy_late": 0, "copies": []}
    base.update(fields)
    return base


#: the busy and sleep runs' last kernel ends here (wall clock, µs); the busy window ends there too
LAST_END_US = 1_764_000_005_000_000


def summary(devices: list[dict], kernels: dict[str, int] | None = None, exit_status: int = 0,
            last_kernel: tuple[int, int] | None = None) -> dict:
    """A --summary-json document; ``last_kernel`` (start µs, duration ns) is the newest span shown."""
    entries = [{"name": n, "mangled": n, "count": c, "total_ns": c * 1000, "min_ns": 1000, "max_ns": 1000,
                "timed": c} for n, c in (kernels or {}).items()]
    spans = []
    if last_kernel is not None:
        name = next(iter(kernels or {"k": 1}))
        spans = [{"seq": s, "kind": "kernel", "start_us": start, "dur_ns": dur, "name": name, "grid": [132, 1, 1],
                  "block": [64, 1, 1], "bytes": None, "direction": None}
                 for s, (start, dur) in enumerate([(last_kernel[0] - 10_000, 5_000_000), last_kernel])]
    return {"exit_status": exit_status, "traced": [{"pid": 4242, "kernels": entries, "devices": devices,
                                                     "lanes": [{"label": "default", "spans": spans}]}],
            "traced_retired": []}


def copy_rate(direction, memory, nbytes, gb_per_s, count=4):
    total_ns = round(nbytes / gb_per_s)
    return {"direction": direction, "memory": memory, "count": count, "bytes": nbytes, "total_ns": total_ns,
            "bytes_per_s": round(nbytes * 1e9 / total_ns, 1)}


DEVICE_LINE = "device index=0 pci_bus_id=00000000:19:00.0 sms=132 name=NVIDIA H200"
COPIES_STDOUT = "\n".join([DEVICE_LINE] + [
    f"copy direction={d} memory={m} bytes={GIB} count=4 host_s={s} host_bytes_per_s={GIB / s:.0f}"
    for d, m, s in (("h2d", "pinned", 0.0205), ("d2h", "pinned", 0.0195), ("h2d", "pageable", 0.09),
                    ("d2h", "pageable", 0.11))]) + "\n"
#: GB/s per (direction, memory) traced: pinned near the gen 5 link, pageable well under
RATES = {("h2d", "pinned"): 53.0, ("d2h", "pinned"): 55.0, ("h2d", "pageable"): 12.5, ("d2h", "pageable"): 10.1}


def good_files() -> dict[str, object]:
    return {
        "busy.stdout": f"{DEVICE_LINE}\nbusy kernels=1000 kernel_ms=5 host_s=5.002\n",
        "summary_busy.json": summary([device(busy_pct=99.97, busy_window_ms=1040.5, busy_ns=4_999_100_000,
                                             kernel_span_ns=5_000_000_000, busy_window_end_us=LAST_END_US)],
                                     {"busy_spin": 1000}, last_kernel=(LAST_END_US - 5_000, 5_000_000)),
        "sleep.stdout": f"{DEVICE_LINE}\nsleep kernels=25 period_ms=200 host_s=5.0\n",
        "summary_sleep.json": summary([device(busy_pct=0.0011, busy_window_ms=1201.0, busy_ns=55_000,
                                              kernel_span_ns=4_800_000_000, busy_window_end_us=LAST_END_US)],
                                      {"sleep_tick": 25}, last_kernel=(LAST_END_US - 2, 2_200)),
        "copies.stdout": COPIES_STDOUT,
        "summary_copies.json": summary([device(copies=[copy_rate(d, m, GIB, r) for (d, m), r in RATES.items()])]),
        "link.json": {"source": "max", "gen": 5, "width": 16, "bus_id": "00000000:19:00.0"},
    }


def check(tmp_path: Path, files: dict[str, object]) -> tuple[int, list[str]]:
    for name, content in files.items():
        (tmp_path / name).write_text(content if isinstance(content, str) else json.dumps(content))
    done = subprocess.run([sys.executable, str(SCRIPT), "check", str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert not done.stderr, done.stderr
    return done.returncode, done.stdout.splitlines()


def figures(lines: list[str]) -> dict[str, str]:
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("activity_failed="))


def failures(lines: list[str]) -> list[str]:
    return [line.split("=", 1)[1] for line in lines if line.startswith("activity_failed=")]


def test_plausible_figures_are_ok_and_every_figure_is_printed(tmp_path):
    rc, lines = check(tmp_path, good_files())
    assert rc == 0 and lines[-1] == "activity_ok=yes" and failures(lines) == []
    f = figures(lines)
    assert (f["activity_busy_pct"], f["activity_busy_window_ms"], f["activity_busy_run_pct"]) == \
        ("99.9700", "1040.5000", "99.9820")
    assert (f["activity_busy_pct_judged"], f["activity_busy_window_past_last_kernel_ms"],
            f["activity_busy_window_before_first_kernel_ms"]) == ("yes", "0.0000", "-3959.5000")
    assert (f["activity_sleep_pct"], f["activity_sleep_kernels"], f["activity_sleep_traced_kernels"]) == \
        ("0.0011", "25", "25")
    assert (f["activity_link_source"], f["activity_link_peak_bytes_per_s"]) == ("max", f"{GEN5_X16_PEAK:.4f}")
    assert f["activity_h2d_pinned_traced_bytes"] == f["activity_h2d_pinned_bytes"] == str(GIB)
    assert abs(float(f["activity_d2h_pageable_bytes_per_s"]) - 10.1e9) < 1e3
    assert "activity_other_copies" not in f


def broken(mutate) -> dict[str, object]:
    files = copy.deepcopy(good_files())
    mutate(files)
    return files


def copies_of(files) -> list[dict]:
    return files["summary_copies.json"]["traced"][0]["devices"][0]["copies"]


def set_copy(files, direction, memory, **fields):
    for c in copies_of(files):
        if (c["direction"], c["memory"]) == (direction, memory):
            c.update(fields)


@pytest.mark.parametrize("mutate, reason", [
    (lambda f: f["summary_busy.json"]["traced"][0]["devices"][0].update(busy_pct=93.2),
     "busy: busy_pct 93.200 % < 95 % for a process that keeps the GPU busy"),
    (lambda f: f["summary_busy.json"]["traced"][0]["devices"][0].update(busy_ns=4_000_000_000),
     "busy: busy_ns/kernel_span_ns 80.000 % < 95 % for a process that keeps the GPU busy"),
    (lambda f: f["summary_sleep.json"]["traced"][0]["devices"][0].update(busy_pct=7.5),
     "sleep: busy_pct 7.500 % > 5 % for a process that mostly sleeps"),
    (lambda f: f["summary_sleep.json"]["traced"][0]["devices"][0].update(busy_ns=480_000_000),
     "sleep: busy_ns/kernel_span_ns 10.000 % > 5 % for a process that mostly sleeps"),
    (lambda f: f["summary_busy.json"]["traced"][0]["devices"][0].update(busy_pct=None, busy_window_ms=None),
     "busy: no busy window of a second or more (busy_pct None, window None ms)"),
    (lambda f: f["summary_sleep.json"]["traced"][0]["devices"][0].update(busy_window_ms=640.0),
     "sleep: no busy window of a second or more (busy_pct 0.0011, window 640.0 ms)"),
    (lambda f: f["summary_busy.json"]["traced"][0]["kernels"][0].update(count=998),
     "busy: 998 busy_spin launches traced, 1000 made"),
    (lambda f: f["summary_sleep.json"].update(exit_status=1),
     "sleep: the workload exited 1 under gpuflow run"),
    (lambda f: set_copy(f, "d2h", "pinned", bytes=GIB - 4096),
     f"copies: d2h pinned: {GIB - 4096} bytes traced, {GIB} copied"),
    (lambda f: set_copy(f, "h2d", "pageable", total_ns=round(GIB / 60.0)),
     "copies: h2d: pageable 60.000 GB/s is not slower than pinned 53.000 GB/s"),
    (lambda f: set_copy(f, "d2h", "pinned", total_ns=round(GIB / 70.0)),
     "copies: d2h pinned: 70.000 GB/s is above the link's peak of 63.015 GB/s"),
    (lambda f: set_copy(f, "h2d", "pageable", total_ns=round(GIB / 0.5)),
     "copies: h2d pageable: 0.500 GB/s is below the floor of 1 GB/s"),
    (lambda f: copies_of(f).pop(1),
     "copies: the trace has no d2h copies from pinned memory"),
    (lambda f: f.update({"copies.stdout": "\n".join(l for l in COPIES_STDOUT.splitlines() if "pageable" not in l
                                                    or "h2d" not in l)}),
     "copies: the workload printed no h2d pageable line"),
    (lambda f: f.update({"link.json": {"source": None, "gen": None, "width": None, "error": "nvmlInit: no driver"}}),
     "copies: the PCIe link's peak is not known (generation None, width None: nvmlInit: no driver)"),
])
def test_each_way_of_being_wrong_is_no_with_its_reason(tmp_path, mutate, reason):
    rc, lines = check(tmp_path, broken(mutate))
    assert rc == 0 and lines[-1] == "activity_ok=no"
    assert reason in failures(lines), failures(lines)


def busy_device(files, name="summary_busy.json") -> dict:
    return files[name]["traced"][0]["devices"][0]


def test_a_busy_window_reaching_past_the_run_is_printed_not_judged_and_the_run_share_is(tmp_path):
    # the program took 0.8 s to exit after its last kernel: a snapshot while it exited had settled
    # 0.3 s past it, so the window holds 0.3 s of idle after the run
    late = broken(lambda f: busy_device(f).update(busy_pct=70.9, busy_window_end_us=LAST_END_US + 300_000))
    rc, lines = check(tmp_path, late)
    f = figures(lines)
    assert lines[-1] == "activity_ok=yes" and f["activity_busy_pct"] == "70.9000"
    assert f["activity_busy_pct_judged"] == ("no (its window reaches 300.0 ms past the last kernel and 0.0 ms before "
                                             "the first: not a window of the run)")
    late = broken(lambda f: busy_device(f).update(busy_pct=70.9, busy_window_end_us=LAST_END_US + 300_000,
                                                  busy_ns=4_500_000_000))
    rc, lines = check(tmp_path, late)
    assert lines[-1] == "activity_ok=no"
    assert failures(lines) == ["busy: busy_ns/kernel_span_ns 90.000 % < 95 % for a process that keeps the GPU busy"]
    # a sleeper's idle tail only lowers its busy_pct: judged wherever its window lies
    late = broken(lambda f: busy_device(f, "summary_sleep.json").update(busy_pct=6.0,
                                                                         busy_window_end_us=LAST_END_US + 150_000))
    rc, lines = check(tmp_path, late)
    assert "sleep: busy_pct 6.000 % > 5 % for a process that mostly sleeps" in failures(lines)


def test_a_busy_window_that_cannot_be_placed_in_the_run_is_a_failure(tmp_path):
    files = broken(lambda f: f["summary_busy.json"]["traced"][0]["lanes"][0].update(spans=[]))
    rc, lines = check(tmp_path, files)
    assert failures(lines) == ["busy: the busy window's end or the last kernel's is not in the summary: the window "
                               "cannot be placed in the run"]


def test_the_link_read_now_serves_when_its_maximum_is_not_known_and_says_so(tmp_path):
    files = broken(lambda f: f.update({"link.json": {"source": "current", "gen": 4, "width": 16}}))
    rc, lines = check(tmp_path, files)
    f = figures(lines)
    assert f["activity_link_source"] == "current" and abs(float(f["activity_link_peak_bytes_per_s"]) - 16e9 * 128 / 130 * 2) < 1
    # at gen 4 (31.5 GB/s) the pinned rates of a gen 5 link are above the peak: judged by the link read
    assert "copies: h2d pinned: 53.000 GB/s is above the link's peak of 31.508 GB/s" in failures(lines)


def test_copies_the_workload_did_not_make_are_reported_beside(tmp_path):
    files = broken(lambda f: copies_of(f).append(copy_rate("d2d", "other", 4096, 100.0, count=1)))
    rc, lines = check(tmp_path, files)
    assert lines[-1] == "activity_ok=yes" and figures(lines)["activity_other_copies"] == "d2d_other"


def test_a_missing_file_cannot_be_judged(tmp_path):
    files = good_files()
    del files["summary_sleep.json"]
    rc, lines = check(tmp_path, files)
    assert rc == 1 and lines == ["activity_ok=no (the figures could not be judged: summary_sleep.json: "
                                 "No such file or directory)"]


def test_bad_arguments_are_refused():
    for argv in (["check"], ["run", "bin"], ["run", "bin", "out", "2"], ["run", "bin", "out", "5", "x"], ["what"]):
        done = subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and done.stdout == "" and done.stderr, argv
