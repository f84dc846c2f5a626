"""``gpuflow run --trace-out FILE``: the whole run as a Perfetto trace once the collectors drained,
with the fake collector retaining (the CUPTI collector's own recorder is checked on a GPU,
scripts/gpu-check's export stage): exactly the complete aggregates, FILE checked before the program
starts, and plain words when retention could not keep the whole run."""

from __future__ import annotations

import collections
import sys

from perfetto_read import read

from cli_process import gpuflow, gpuflow_env
from gpuflow.testing import fake_collector as fc
from servers import FAKE_ENV

FAKE = ["--plugin", "gpuflow.testing.fake_collector"]


def env(**extra: str):
    return gpuflow_env(**{k: v for k, v in FAKE_ENV.items() if k != "GPUFLOW_PLUGINS"}, **extra)


def test_the_whole_run_is_written_with_exactly_the_complete_aggregates(tmp_path):
    out = tmp_path / "run.perfetto-trace"
    r = gpuflow("run", "--port", "0", *FAKE, "--no-summary", "--trace-out", str(out), "--",
                sys.executable, "-c", "pass",
                env=env(GPUFLOW_FAKE_RATE_HZ="0", GPUFLOW_FAKE_SPANS="30", GPUFLOW_FAKE_LANES="5",
                        GPUFLOW_FAKE_TRACED="2"))
    assert r.returncode == 0, r.stderr
    t = read(out.read_bytes())
    # with rate 0 the fake makes one part: its aggregates are the scenario's first step's
    part = fc.FakeScenario(fc.FakeOptions(rate_hz=0, spans=30, lanes=5, traced=2), show_cmdline=False).step(1.0)
    for traced in part.traced:
        mine = [s for s in t.slices if t.path(s.track)[0] == f"pid {traced.pid}"]
        assert collections.Counter(s.name for s in mine if s.category == "kernel") == {
            k.name: k.count for k in traced.kernels}
        assert collections.Counter(s.args["direction"] for s in mine if s.category != "kernel") == {
            tr.direction: tr.count for tr in traced.transfers}
    assert len(t.slices) == sum(tp.records for tp in part.traced)
    assert f"wrote --trace-out {out}: {len(t.slices)} executions of 2 traced process(es)" in r.stderr
    assert "only from" not in r.stderr


def test_a_run_the_recorder_could_not_keep_whole_says_what_the_file_holds(tmp_path):
    out = tmp_path / "run.perfetto-trace"
    r = gpuflow("run", "--port", "0", *FAKE, "--no-summary", "--trace-out", str(out), "--",
                sys.executable, "-c", "import time; time.sleep(1.5)",
                env=env(GPUFLOW_FAKE_RATE_HZ="20", GPUFLOW_FAKE_RETAIN_SPANS="200", GPUFLOW_FAKE_SPANS="10"))
    assert r.returncode == 0, r.stderr
    assert read(out.read_bytes()).whole
    line = next(line for line in r.stderr.splitlines() if "only from" in line)
    assert "pid 5000 (fake_workload)" in line and "raise --retain-mb (or --retain-s) to keep more" in line


def test_the_file_is_checked_before_the_program_starts(tmp_path):
    marker = tmp_path / "started"
    r = gpuflow("run", "--port", "0", *FAKE, "--trace-out", str(tmp_path / "no" / "such" / "f"), "--",
                sys.executable, "-c", f"open({str(marker)!r}, 'w')", env=env())
    assert r.returncode == 2 and "--trace-out" in r.stderr and "does not exist" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not marker.exists()


def test_nothing_retained_still_writes_a_whole_empty_trace_and_says_so(tmp_path):
    out = tmp_path / "run.perfetto-trace"
    r = gpuflow("run", "--port", "0", "--no-summary", "--trace-out", str(out), "--", sys.executable, "-c", "pass",
                env=gpuflow_env(GPUFLOW_DISABLED_PLUGINS="nvml,cupti"))
    assert r.returncode == 0, r.stderr
    assert read(out.read_bytes()).whole and not read(out.read_bytes()).slices
    assert "without executions: no collector retained any" in r.stderr
