"""bench/hub.py's verdict: each of issue 22's goals against a run's figures, a missed or unmeasured
one named with its figure and bound (scripts/gpu-check's hub stage prints hub_ok= from it); and
the host's speed it and bench/ui_frame.py print beside their figures (bench/host_speed.py)."""

from __future__ import annotations

import math

import hub
from host_speed import host_speed

MET = {"c": 0.64, "m": 113.7, "l99": 51.7, "reconnect": 1.88, "t": 9.9}


def test_a_run_within_every_bound_meets_the_goals():
    assert hub.verdict(1000, MET) == "goals: every one met"


def test_each_figure_over_its_bound_is_named_with_both():
    said = hub.verdict(1000, {**MET, "t": 12.842, "m": 140.5})
    assert said.startswith("goals: missed: ")
    assert "traced_cpu_ms_per_agent_s 12.842 > 10" in said and "hub_rss_mb 140.500 > 140" in said
    assert "p99" not in said and "reconnect" not in said


def test_the_memory_bound_follows_the_agents():
    assert hub.verdict(300, {**MET, "m": 69.0}) == "goals: every one met"      # 40 + 30
    assert "hub_rss_mb 71.000 > 70" in hub.verdict(300, {**MET, "m": 71.0})
    assert hub.verdict(1000, {**MET, "m": 71.0}) == "goals: every one met"


def test_a_figure_not_measured_or_nan_is_missed_not_met():
    assert "reconnect_all_s nan > 30" in hub.verdict(1000, {k: v for k, v in MET.items() if k != "reconnect"})
    assert "p99_agent_to_hub_ms nan > 100" in hub.verdict(1000, {**MET, "l99": math.nan})


def test_the_host_speed_is_a_time():
    said = host_speed()
    assert said.startswith("this host's speed: 10 M Python additions in ") and float(said.split()[-2]) > 0
