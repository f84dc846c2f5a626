"""GPUFLOW_AB_PERIOD_MS: the benchmarking switch that turns GPUFlow's work on and off in alternation.

``bench/cost/overhead_ab.py`` measures what GPUFlow costs a program inside one process: with
``GPUFLOW_AB_PERIOD_MS=P`` CLOCK_MONOTONIC is cut into periods of P ms, GPUFlow works as usual in
the even ones and stands aside in the odd ones — the injected library steps over kernel and copy
records (cupti_src/activity.c) and the NVML collector makes no NVML call — and the program's own
progress, timed on the same clock, is compared between the two. The parsing here matches the
injected library's: all digits and above 0, clamped to 10..60000; anything else is off.

Constraints: benchmarking only, never set by GPUFlow itself; reading it costs one environment
lookup at start; :func:`seconds_until_on` is called once per NVML poll, never on a hot path.
"""

from __future__ import annotations

import os
import time
from typing import Mapping

VARIABLE = "GPUFLOW_AB_PERIOD_MS"
MIN_MS, MAX_MS = 10, 60000


def ab_period_ms(env: Mapping[str, str] | None = None) -> int:
    """The period in ms, or 0 when the switch is off (unset, empty, not a positive integer)."""
    text = (os.environ if env is None else env).get(VARIABLE, "")
    if not text.isdigit() or int(text) == 0:
        return 0
    return min(MAX_MS, max(MIN_MS, int(text)))


def seconds_until_on(period_ms: int, now_ns: int | None = None) -> float:
    """0 in an on (even) period or with the switch off; else the seconds left of this off period."""
    if period_ms <= 0:
        return 0.0
    period_ns = period_ms * 1_000_000
    now = time.monotonic_ns() if now_ns is None else now_ns
    if (now // period_ns) % 2 == 0:
        return 0.0
    return (period_ns - now % period_ns) / 1e9
