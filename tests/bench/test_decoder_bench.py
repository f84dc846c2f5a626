"""bench/decoder.py runs end to end on a small ring: both decoders agree, the frame-time lines
and the span-constructor comparison are printed, the last line has the documented form, and
the benchmark leaves traced_builder.py's Span constructor as it found it. Needs the compiled decoder
(CI builds it); timings are printed, never asserted."""

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
    assert re.search(r"span constructor, side by side: .* ratio \d+\.\d\d$", done.stdout, re.M)
    assert re.fullmatch(r"records_per_s=\d+ ratio_vs_python=\d+\.\d", lines[-1])


@pytest.mark.skipif(not decoder.USING_EXTENSION, reason="needs the compiled decoder")
def test_the_comparison_restores_the_constructor_it_swapped():
    import decoder as decoder_bench  # bench/decoder.py

    from gpuflow.collectors.cupti import traced_builder as build

    before = build._make_span
    decoder_bench.span_constructor_costs(decoder_bench.build_ring(30_000), rounds=1)
    assert build._make_span is before
