"""This host's speed for Python's own work, printed beside the benchmarks whose figures follow it.

The development VM and the lent GPU hosts are virtual machines on shared hosts: machines of one
kind differ by up to two in how fast they run Python, and one machine drifts by as much within
minutes (a neighbour's load). CPU and frame-time figures move with it, so ``bench/hub.py`` and
``bench/ui_frame.py`` print this before and after their runs, and a figure is read beside it.
The measure is the time of 10 M integer additions in a Python loop: the interpreter's dispatch,
which is what a hub's frame and a page's JavaScript-free parts spend most in.

Constraints: standard library only; ~1 s at the development VM's full speed.
"""

from __future__ import annotations

import time


def host_speed() -> str:
    """The seconds 10 M additions take in this interpreter, as one line."""
    t0, total = time.perf_counter(), 0
    for i in range(10_000_000):
        total += i
    return f"this host's speed: 10 M Python additions in {time.perf_counter() - t0:.2f} s"
