"""bench/cost/ab_campaign.py: a fixed-rule campaign is interim below its target and read once at it,
from the first processes in the order run, scaled to bare time, with the verdict taken from the
scaled interval — checked on constructed progress traces with known slowdowns."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from ab_campaign import campaign_reading

ROOT = Path(__file__).resolve().parents[2]

MS = 1_000_000


def write_trace(path: Path, on_unit_ns: int, off_unit_ns: int = 1_000_000, period_ns: int = 100 * MS) -> None:
    """A trace whose units take on_unit_ns in even periods and off_unit_ns in odd ones."""
    t, units, lines = 7 * MS, 0, [f"{7 * MS} 0"]
    while t < 3_000 * MS:
        t += on_unit_ns if (t // period_ns) % 2 == 0 else off_unit_ns
        units += 1
        lines.append(f"{t} {units}")
    path.write_text("\n".join(lines) + "\n")


def campaign(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "bench" / "cost" / "ab_campaign.py"), *args, "--workload", "torch",
                           "--period-ms", "100", "--guard-ms", "10"], capture_output=True, text=True, timeout=60)


def last_fields(done: subprocess.CompletedProcess) -> dict[str, str]:
    assert done.returncode == 0, done.stderr
    return dict(f.split("=", 1) for f in done.stdout.strip().splitlines()[-1].split()[1:])


def test_interim_below_the_target_and_final_at_it(tmp_path):
    first, second = tmp_path / "call1", tmp_path / "call2"
    first.mkdir()
    second.mkdir()
    for r in range(1, 4):
        write_trace(first / f"torch-ab-{r}.txt", 1_002_000)     # +0.2 %
        write_trace(first / f"torch-aa-{r}.txt", 1_000_000)     # controls never count
        write_trace(first / f"storm-ab-{r}.txt", 1_500_000)     # nor other workloads
    interim = last_fields(campaign(str(first), "--target", "5", "--floor-over-bare", "1.25"))
    assert interim["processes"] == "3/5" and interim["state"] == "interim" and interim["verdict"] == "interim"
    for r in range(1, 5):
        write_trace(second / f"torch-ab-{r}.txt", 1_002_000 if r <= 2 else 1_300_000)
    archive = tmp_path / "call2.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(second, arcname="ab-traces")
    final = campaign(str(first), str(archive), "--target", "5", "--floor-over-bare", "1.25")
    fields = last_fields(final)
    # the first five in the order run: all at +0.2 %; the 30 % ones come after the target
    assert fields["processes"] == "5/5" and fields["state"] == "final"
    assert float(fields["on_vs_off_pct"]) == pytest.approx(0.2, abs=0.001)
    assert float(fields["overhead_above_floor_pct"]) == pytest.approx(0.25, abs=0.001)
    assert fields["verdict"] == "met"
    assert "2 processes past the target are not counted" in final.stdout


def test_the_verdict_is_read_on_bare_time():
    # 0.9 % of floor time is 1.17 % of bare time when the floor runs 30 % slower than bare
    r = campaign_reading([0.9] * 6, target=6, floor_over_bare=1.3)
    assert r["state"] == "final" and r["bare_pct"] == pytest.approx(1.17)
    assert r["verdict"] == "missed"
    assert campaign_reading([0.9] * 6, target=6, floor_over_bare=1.0)["verdict"] == "met"
    assert campaign_reading([0.9] * 3, target=6, floor_over_bare=1.0)["verdict"] == "interim"


@pytest.mark.parametrize("args, message", [
    (["--target", "4", "--floor-over-bare", "1.1"], "at least 5"),
    (["--target", "50", "--floor-over-bare", "0.9"], "at least 1"),
])
def test_bad_rules_are_refused(tmp_path, args, message):
    done = campaign(str(tmp_path), *args)
    assert done.returncode == 2 and message in done.stderr


def test_no_traces_or_a_broken_one_is_a_clear_error(tmp_path):
    done = campaign(str(tmp_path), "--target", "5", "--floor-over-bare", "1.1")
    assert done.returncode != 0 and "no torch-ab-N.txt traces" in done.stderr
    (tmp_path / "torch-ab-1.txt").write_text("5 0\nfive 1\n")
    done = campaign(str(tmp_path), "--target", "5", "--floor-over-bare", "1.1")
    assert done.returncode != 0 and "torch-ab-1.txt" in done.stderr and "Traceback" not in done.stderr


def test_processes_count_in_the_order_they_ran_not_by_file_name(tmp_path):
    # by file name torch-ab-10 and -11 sort before -2: the rule must take rounds 1..10
    for r in range(1, 12):
        write_trace(tmp_path / f"torch-ab-{r}.txt", 1_002_000 if r <= 10 else 1_300_000)
    fields = last_fields(campaign(str(tmp_path), "--target", "10", "--floor-over-bare", "1.0"))
    assert fields["state"] == "final"
    assert float(fields["on_vs_off_pct"]) == pytest.approx(0.2, abs=0.001)


STORM_CAMPAIGN = "2026-11-30-h200-8-key-epoch-library"
TORCH_FIRST = "2026-11-30-h200-6-frozen-agent-ab"
TORCH_LAST = "2026-11-30-h200-7-torch-campaign-frameworks"


def kept(folder: str, *runs: int) -> list[str]:
    return [str(ROOT / "measurements" / folder / f"ab-traces-run{r}.tar.gz") for r in runs]


@pytest.mark.parametrize("script, args", [
    ("ab_campaign.py", [*kept(STORM_CAMPAIGN, 1, 2, 3), "--workload", "storm", "--period-ms", "170",
                        "--guard-ms", "60", "--target", "22", "--floor-over-bare", "1.215"]),
    ("ab_campaign.py", [*kept(TORCH_FIRST, 2, 3, 4), *kept(TORCH_LAST, 1, 2), "--workload", "torch",
                        "--period-ms", "170", "--guard-ms", "60", "--target", "50", "--floor-over-bare", "1.134"]),
    ("ab_campaign.py", [*kept(TORCH_FIRST, 2, 3, 4), "--workload", "torch", "--period-ms", "170",
                        "--guard-ms", "60", "--target", "50", "--floor-over-bare", "1.134"]),
    ("ab_phases.py", [*kept(TORCH_FIRST, 2, 3), "--period-ms", "170", "--only", "torch"]),
    ("ab_phases.py", [*kept(TORCH_FIRST, 2, 3, 4), "--period-ms", "170", "--only", "torch"]),
    ("ab_phases.py", [*kept(TORCH_FIRST, 2, 3, 4), *kept(TORCH_LAST, 1, 2), "--period-ms", "170",
                      "--only", "torch"]),
], ids=["storm-campaign", "torch-campaign", "torch-interim", "torch-17", "torch-28", "torch-50"])
def test_the_readings_quoted_in_the_docs_are_what_the_committed_traces_give(script, args):
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "cost" / script), *args], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    doc = (ROOT / "docs" / "overhead.md").read_text()
    figures = [line for line in done.stdout.splitlines() if line.startswith(("campaign ", "torch "))]
    assert figures and all(line in doc for line in figures), done.stdout
