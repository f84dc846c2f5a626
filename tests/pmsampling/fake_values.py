"""What the fake driver (fake_pm_driver.cpp) reports for sample k, per slot, as the helper hands it
on: its sm__cycles_active ratios made percentages, its PCIe bytes made bytes a second; PCIe writes
never fit the fake chip's one pass."""

from __future__ import annotations

import math


def fake_slots(k: int, interval_s: float) -> list[float]:
    b = (k % 50) * 2.0
    return [100 - b, (100 - b) / 2, 100 - b / 4,          # SM active: mean, least, greatest SM
            b, b / 2, min(100.0, b + 1),                   # warps in flight
            7.5,                                           # DRAM
            1000.0 * (k % 10) / interval_s,                # PCIe reads, bytes/s
            math.nan]                                      # PCIe writes: not collected
