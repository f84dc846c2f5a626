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
agent asks for 0.5 ms while it runs.

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


def share_the_gil() -> float:
    """Lower the interpreter's switch interval to AGENT_SWITCH_INTERVAL_S if it is longer;
    return the interval it had."""
    before = sys.getswitchinterval()
    if before > AGENT_SWITCH_INTERVAL_S:
        sys.setswitchinterval(AGENT_SWITCH_INTERVAL_S)
    return before


def restore(before: float) -> None:
    """Put back the interval :func:`share_the_gil` found, unless someone changed it since."""
    if math.isclose(sys.getswitchinterval(), AGENT_SWITCH_INTERVAL_S) and before > AGENT_SWITCH_INTERVAL_S:
        sys.setswitchinterval(before)
