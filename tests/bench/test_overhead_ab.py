"""bench/cost/ab_phases.py and bench/cost/overhead_ab.py: a program's speed with GPUFlow's per-record work
on vs off, read from its progress trace — exact on constructed traces, malformed traces refused
with the line, and the whole runner through a real ``gpuflow run`` on a program that slows itself
down by a known amount in the on periods (the GPU's part, the library stepping over records, is
tested against the fake CUPTI in tests/inject/test_inject_library.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ab_phases import MIN_PROCESSES, mean_interval, on_vs_off_pct, parse_trace, phase_totals

pytestmark = pytest.mark.serial   # times a run: alone, after the parallel pass

ROOT = Path(__file__).resolve().parents[2]

MS = 1_000_000


def trace_of(on_unit_ns: int, off_unit_ns: int, period_ns: int, total_ns: int, start_ns: int = 7 * MS):
    """A trace whose units take on_unit_ns in even periods and off_unit_ns in odd ones."""
    points = [(start_ns, 0.0)]
    t, units = start_ns, 0.0
    while t < start_ns + total_ns:
        t += on_unit_ns if (t // period_ns) % 2 == 0 else off_unit_ns
        units += 1
        points.append((t, units))
    return points


def test_a_known_slowdown_in_the_on_periods_is_read_back():
    points = trace_of(1_030_000, 1_000_000, 100 * MS, 5_000 * MS)
    totals = phase_totals(points, 100 * MS, 20 * MS)
    assert totals["on"][2] > 1000 and totals["off"][2] > 1000
    assert on_vs_off_pct(totals) == pytest.approx(3.0, abs=0.01)
    # the opposite way round reads as negative: nothing is assumed about the sign
    assert on_vs_off_pct(phase_totals(trace_of(1_000_000, 1_030_000, 100 * MS, 5_000 * MS),
                                      100 * MS, 20 * MS)) == pytest.approx(-2.91, abs=0.01)


def test_intervals_across_a_period_edge_or_inside_the_guard_are_left_out():
    period = 100 * MS
    points = [(0, 0), (10 * MS, 1), (30 * MS, 2), (90 * MS, 3), (130 * MS, 4),   # 90→130 straddles
              (150 * MS, 5), (190 * MS, 7)]
    totals = phase_totals(points, period, 25 * MS)
    # on: 30→90 only (0→10 and 10→30 start inside the guard); off: 150→190 only
    # (130→150 starts 30 ms in: counted too)
    assert totals["on"] == (pytest.approx(0.060), 1.0, 1)
    assert totals["off"] == (pytest.approx(0.060), 3.0, 2)


@pytest.mark.parametrize("text, message", [
    ("", "fewer than two"),
    ("5 0\n", "fewer than two"),
    ("5 0\nfive 1\n", "trace:2"),
    ("5 0\n6 1 2\n", "trace:2"),
    ("5 0\n5 1\n", "time must increase"),
    ("5 2\n6 1\n", "units must not decrease"),
])
def test_malformed_traces_are_refused_with_the_line(text, message):
    with pytest.raises(ValueError, match=message):
        parse_trace(text)


def test_a_run_too_short_for_both_sides_is_an_error_not_a_figure():
    points = [(0, 0), (10 * MS, 1), (50 * MS, 2)]   # all inside period 0
    with pytest.raises(ValueError, match="no whole interval"):
        on_vs_off_pct(phase_totals(points, 370 * MS, 10 * MS))
    with pytest.raises(ValueError, match="period"):
        phase_totals(points, 100 * MS, 100 * MS)


def test_no_interval_from_too_few_processes_and_a_fair_one_from_enough():
    assert mean_interval([1.0] * (MIN_PROCESSES - 1)) == (float("-inf"), float("inf"))
    lo, hi = mean_interval([0.5, 1.5, 1.0, 0.8, 1.2, 0.9, 1.1])
    assert lo < 1.0 < hi and hi - lo < 0.6


# A "workload" that honours PROGRESS_TRACE and does 50 % more work per unit whenever {condition}
# holds: what GPUFlow would look like if that part of it cost 50 %. Its units are CPU work (about
# 1-2 ms each on an idle machine), not wall-clock waits: a machine busy with other work stretches
# on and off units alike, while a wait that is preempted overshoots by the same few milliseconds
# whatever its length and so hides the difference (with three busy loops on a 2-CPU machine,
# wall-clock units read a 50 % cost as 7 to 19 %). The analysis's exactness is tested on
# constructed traces above; here the runner must find a large cost where it is and none where it
# is not, on a loaded CI machine too.
SLOWER_WHEN = r"""
import os, time
{setup}
points = [(time.monotonic_ns(), 0)]
end = time.monotonic() + 1.2
units = 0
while time.monotonic() < end:
    now = time.monotonic_ns()
    work = 30_000 if {condition} else 20_000
    x = 0
    for i in range(work):
        x += i
    units += 1
    points.append((time.monotonic_ns(), units))
with open(os.environ["PROGRESS_TRACE"], "w") as fh:
    fh.writelines(f"{{ns}} {{u}}\n" for ns, u in points)
print(f"units={{units}}")
"""
#: slower in the even (on) periods, when it can see GPUFLOW_AB_PERIOD_MS: GPUFlow's per-record work
SLOW_WHEN_ON = SLOWER_WHEN.format(
    setup='period = int(os.environ.get("GPUFLOW_AB_PERIOD_MS") or 0) * 1_000_000',
    condition="period and (now // period) % 2 == 0")
#: slower whenever its parent — the gpuflow run agent — is running rather than stopped
SLOW_WHILE_AGENT_RUNS = SLOWER_WHEN.format(
    setup=("def parent_running():\n"
           "    with open(f\"/proc/{os.getppid()}/stat\") as fh:\n"
           "        return fh.read().rsplit(\")\", 1)[1].split()[0] != \"T\""),
    condition="parent_running()")


@pytest.fixture
def injection():
    """gpuflow run needs the injection library and a libcupti (no GPU): CI must have both."""
    from gpuflow.collectors.cupti.injection import InjectionUnavailable, find_injection_paths
    try:
        find_injection_paths()
    except InjectionUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must build the injection library and find a libcupti: {exc}")
        pytest.skip(str(exc))


def overhead_ab(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """bench/cost/overhead_ab.py with these arguments, its gpuflow run agents without NVML."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUFLOW_", "PROGRESS_TRACE"))}
    env.update({"GPUFLOW_DISABLED_PLUGINS": "nvml", "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1"})
    return subprocess.run([sys.executable, str(ROOT / "bench" / "cost" / "overhead_ab.py"), *args],
                          env=env, capture_output=True, text=True, timeout=timeout)


def run_ab_on(tmp_path: Path, source: str, name: str, *extra: str,
              rounds: int = 5) -> tuple[subprocess.CompletedProcess, dict]:
    """The runner on the stand-in workload ``source`` (100 ms periods, 10 ms guard): its output
    and the workload's entry of its JSON."""
    program = tmp_path / f"{name}.py"
    program.write_text(source)
    out = tmp_path / "ab.json"
    done = overhead_ab("--rounds", str(rounds), "--period-ms", "100", "--guard-ms", "10", "--json-out", str(out),
                       *extra, "--workload", f"{name}=units:{sys.executable} {program}")
    assert done.returncode == 0, done.stdout + done.stderr
    return done, json.loads(out.read_text())[name]


def test_the_runner_reads_a_known_cost_through_gpuflow_run_and_its_control_reads_none(tmp_path, injection):
    done, result = run_ab_on(tmp_path, SLOW_WHEN_ON, "slow")
    assert len(result["ab"]["per_process"]) == len(result["aa"]["per_process"]) == 5
    assert 35.0 < result["ab"]["pct"] < 65.0, result["ab"]
    assert abs(result["aa"]["pct"]) < 12.0, result["aa"]
    assert result["ab"]["verdict"] == "missed"
    last = dict(kv.split("=", 1) for kv in done.stdout.strip().splitlines()[-1].split())
    assert last["verdict"] == "missed" and last["workloads"] == "1" and last["processes"] == "10"
    assert float(last["ab_above_off_pct"]) == pytest.approx(result["ab"]["pct"], abs=0.001)


def test_the_control_runs_in_every_kth_round_only_when_asked(tmp_path, injection):
    traces = tmp_path / "traces"
    done, _ = run_ab_on(tmp_path, SLOW_WHEN_ON, "slow", "--control-every", "3", "--keep-traces", str(traces),
                        rounds=4)
    assert sorted(p.name for p in traces.iterdir()) == [
        "slow-aa-1.txt", "slow-aa-4.txt", "slow-ab-1.txt", "slow-ab-2.txt", "slow-ab-3.txt", "slow-ab-4.txt"]
    assert done.stdout.strip().splitlines()[-1].endswith("processes=6")
    refused = overhead_ab("--control-every", "0", "--workload", "x=y:true")
    assert refused.returncode == 2 and "--control-every must be at least 1" in refused.stderr


def test_a_workload_without_a_progress_trace_is_named(injection):
    done = overhead_ab("--rounds", "1", "--workload", "mute=x:echo x=1", timeout=120)
    assert done.returncode == 1 and "wrote no progress trace" in done.stderr
    assert "Traceback" not in done.stderr


def test_kept_traces_are_analysed_again_at_other_guards(tmp_path):
    for arm, on in (("ab", 1_030_000), ("aa", 1_000_000)):
        for r in range(1, 6):
            points = trace_of(on, 1_000_000, 100 * MS, 3_000 * MS, start_ns=(7 + r) * MS)
            (tmp_path / f"storm-{arm}-{r}.txt").write_text("".join(f"{t} {u}\n" for t, u in points))
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "cost" / "ab_phases.py"), str(tmp_path),
                           "--period-ms", "100", "--guards", "0,20,150"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    rows = {line.split()[1]: line for line in done.stdout.splitlines()[1:]}
    assert "guard 0 ms: +3.00" in rows["ab"] and "guard 20 ms: +3.00" in rows["ab"]
    assert "guard 0 ms: +0.00" in rows["aa"] and "150 ms" not in rows["aa"]   # guard >= period: skipped
    empty = subprocess.run([sys.executable, str(ROOT / "bench" / "cost" / "ab_phases.py"), str(tmp_path / "none"),
                            "--period-ms", "100"], capture_output=True, text=True, timeout=60)
    assert empty.returncode != 0 and "no NAME-ARM-ROUND.txt traces" in empty.stderr


def test_kept_traces_pool_across_directories_and_archives(tmp_path):
    import tarfile
    first, second = tmp_path / "run1" / "ab-traces", tmp_path / "run2" / "ab-traces"
    for folder, rounds in ((first, range(1, 4)), (second, range(1, 4))):
        folder.mkdir(parents=True)
        for r in rounds:   # the same names in both runs: pooled, never overwritten
            points = trace_of(1_050_000 if folder is first else 1_010_000, 1_000_000, 100 * MS, 3_000 * MS)
            (folder / f"torch-ab-{r}.txt").write_text("".join(f"{t} {u}\n" for t, u in points))
            (folder / f"storm-ab-{r}.txt").write_text("".join(f"{t} {u}\n" for t, u in points))
    archive = tmp_path / "run2.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(second, arcname="ab-traces")

    def analyse(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(ROOT / "bench" / "cost" / "ab_phases.py"), *args, "--period-ms", "100",
                               "--guards", "20"], capture_output=True, text=True, timeout=60)

    done = analyse(str(first), str(archive), "--only", "torch")
    assert done.returncode == 0, done.stderr
    (row,) = done.stdout.splitlines()[1:]
    assert row.startswith("torch    ab (6 processes)") and "guard 20 ms: +3.00" in row   # mean of 5 % and 1 %
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "torch-ab-1.txt").write_text("5 0\nfive 1\n")
    done = analyse(str(first), str(broken))
    assert done.returncode != 0 and "torch-ab-1.txt:2" in done.stderr and "Traceback" not in done.stderr
    (broken / "torch-ab-1.txt").write_text("5 0\n6 1\n")   # well formed, but inside one period
    done = analyse(str(broken))
    assert done.returncode != 0 and "torch-ab-1.txt: the run left no whole interval" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("freeze", [True, False])
def test_freeze_agent_stops_the_agent_in_off_periods_only(tmp_path, injection, freeze):
    _, result = run_ab_on(tmp_path, SLOW_WHILE_AGENT_RUNS, "agent", *(["--freeze-agent"] if freeze else []))
    assert result["freeze_agent"] is freeze
    assert abs(result["aa"]["pct"]) < 12.0, result["aa"]          # never frozen: always slow
    if freeze:
        assert 35.0 < result["ab"]["pct"] < 65.0, result["ab"]     # slow only while it runs
    else:
        assert abs(result["ab"]["pct"]) < 12.0, result["ab"]
