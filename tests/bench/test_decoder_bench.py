"""bench/decoder.py runs end to end on a small ring: both decoders agree, the frame-time lines are
printed and the last line has the documented form. Needs the compiled decoder (CI builds it);
timings are printed, never asserted. (Its span-constructor comparison went with the Span objects
the builder no longer makes: the snapshot's lanes are columns since issue 17.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpuflow.collectors.cupti import decoder

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not decoder.USING_EXTENSION, reason="needs the compiled decoder")
def test_the_benchmark_runs_and_prints_its_result_line():
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "decoder.py"), "--records", "60000",
                           "--repeat", "1"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert "results identical" in done.stdout
    assert re.search(r"new records: .* spans shown on \d+ lanes", done.stdout)
    assert re.fullmatch(r"records_per_s=\d+ ratio_vs_python=\d+\.\d", lines[-1])
