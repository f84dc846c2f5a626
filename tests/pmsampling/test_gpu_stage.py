"""scripts/gpu_pmsampling.py (the GPU check's pmsampling stage) judges made-up rows as it will judge
the H200's: the expected figures follow the workload's geometry, a phase's mean leaves its edges
out, a row's edge is found where it crosses half its plateau, and a figure that could not be
measured misses its criterion."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def stage():
    spec = importlib.util.spec_from_file_location("gpu_pmsampling", ROOT / "scripts" / "gpu_pmsampling.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_expectations_follow_the_workloads_geometry():
    want = stage().expected(132)
    assert want["all"] == (100, 100, 100, 100, 100, 100)
    assert want["half"] == (50, 0, 100, 25, 0, 50)     # one 32-warp block on each of 66 SMs
    assert want["low"][3] == pytest.approx(3.125)      # 2 warps of 64
    assert stage().expected(133)["half"][0] == pytest.approx(66 / 133 * 100)


def test_a_phases_mean_is_of_the_samples_wholly_inside_it_past_its_first_moments():
    s = stage()
    t = [10 + i * 0.001 for i in range(2000)]          # 10 s .. 12 s, 1 ms samples
    v = [0.0 if ts < 10.5 else 100.0 for ts in t]      # the phase's ramp in its first 0.5 s
    m = s.phase_means({"pm_sm_active_pct": (t, v)}, 0.001, 10.2, 11.5)
    assert m["pm_sm_active_pct"] == 100.0              # 10.5 .. 11.499: the ramp left out
    assert 999 <= m["samples"] <= 1000                 # (the edges' float sums may drop one)


def test_an_edge_is_where_the_row_crosses_half_its_plateau():
    s = stage()
    t = [i * 0.001 for i in range(100)]
    v = [0.0] * 40 + [50.0] + [100.0] * 59             # the kernels start inside sample 40
    rise = s.crossing(t, v, 0.001, 50.0, 0.0, 0.1, True)
    assert rise == pytest.approx(0.0405)               # sample 40's middle
    fall = s.crossing(t, list(reversed(v)), 0.001, 50.0, 0.0, 0.1, False)
    assert fall == pytest.approx(0.0595)
    assert math.isnan(s.crossing(t, [0.0] * 100, 0.001, 50.0, 0.0, 0.1, True))


def test_the_kernels_edges_are_the_phases_first_start_and_last_end():
    spans = [(9.0, 9.1), (10.01, 10.03), (10.03, 10.05), (13.9, 14.02), (20.0, 20.1)]
    assert stage().kernel_edges(spans, 10.0, 14.0) == (10.01, 14.02)
    assert all(math.isnan(x) for x in stage().kernel_edges(spans, 30.0, 31.0))


def test_figures_within_five_points_pass_and_unmeasured_ones_fail():
    s = stage()
    metrics = s.METRICS[:6]
    means = {phase: dict(zip(metrics, (x + 4.9 if x < 50 else x - 4.9 for x in want)))
             for phase, want in s.expected(132).items()}
    assert s.missed(s.criteria(means, 132)) == []
    means["half"]["pm_warps_active_max_pct"] = 100.0   # every busy SM at 64 warps: not this workload's half
    del means["low"]["pm_warps_active_pct"]
    failed = {k for k, _v, _w in s.missed(s.criteria(means, 132))}
    assert failed == {"half_warps_active_max", "low_warps_active"}
