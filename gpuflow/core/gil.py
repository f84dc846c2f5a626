"""How often the agent's threads hand each other the GIL, so that its server answers while the
collectors work.

What it is for: one agent process runs the collectors' threads (draining rings, building
snapshots) beside the server's threads (``/healthz``, the page, the streams). A request makes
several blocking calls (accept, read, write), and after each one its thread must take the GIL
back. CPython makes a thread that wants the GIL wait for the switch interval (5 ms by default)
before it asks the holder to let go, so a request that needs the GIL ten times while two
collector threads keep it busy can wait ~50 ms in all without any single long hold: the convoy
effect. Under hostile rings on a 16-core H200 host, ``bench/hostile_rings.py`` measured
``/healthz`` at up to 170 ms with the default interval, 41 ms at 1 ms and 34 ms at 0.5 ms, and
the agent itself at 1 ms up to 51 ms over a whole run of the bench (docs/reliability.md). The
agent asks for 0.5 ms while it runs (``AgentConfig.switch_interval_s``, ``GPUFLOW_SWITCH_INTERVAL_MS``).
A hub, whose threads are its network thread and its pages' streams, asks for the interpreter's own
5 ms (``gpuflow hub``): at 64 watched agents on the GPU host the 0.5 ms cost it 1.16–1.23 times the
CPU, and its ``/healthz`` was neither reliably quicker nor slower (docs/fleet.md, "The hub's switch
interval").

Constraints: the interval is process-wide, so :func:`share_the_gil` only ever lowers it (a host
program that chose a shorter one keeps it) and gives back the value it found, for
:func:`restore` when the agent stops. Shorter intervals cost CPU-bound threads a little throughput
in switches; the figures above were measured with it.
"""

from __future__ import annotations

import math
import sys

#: the switch interval the agent runs with, in seconds
AGENT_SWITCH_INTERVAL_S = 0.0005


def share_the_gil(interval_s: float = AGENT_SWITCH_INTERVAL_S) -> float:
    """Lower the interpreter's switch interval to ``interval_s`` if it is longer; return the
    interval it had."""
    before = sys.getswitchinterval()
    if before > interval_s:
        sys.setswitchinterval(interval_s)
    return before


def restore(before: float, interval_s: float = AGENT_SWITCH_INTERVAL_S) -> None:
    """Put back the interval :func:`share_the_gil` found (it lowered it to ``interval_s``), unless
    someone changed it since."""
    if math.isclose(sys.getswitchinterval(), interval_s) and before > interval_s:
        sys.setswitchinterval(before)
