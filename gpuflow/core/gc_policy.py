"""How CPython's cyclic garbage collector runs while an agent (or a hub) serves.

What it is for: an agent's heap is its latest snapshot and the parts it is built from, and a hub's
is every host's latest state: objects that hold no reference cycle, replaced whole from one frame
to the next and freed by reference counting. The cyclic collector finds nothing in them, but with
the interpreter's thresholds (a young collection every 700 tracked objects allocated beyond those
freed, an older one every 10 of those, a full one every 10 older ones) each object that lives as
long as one frame is promoted to the oldest generation, and the full collections that follow go
over the whole heap, holding the GIL throughout. A hub following 700 agents' summaries on the
development VM spent ~20 % of its CPU there, and paused its network thread for 60–95 ms every
1.4 s: its p99 lag from agent to hub was that pause (78 ms; docs/fleet.md, "The garbage
collector"). So while an agent runs:

* the objects made before it starts (modules, classes, the plugins, the app: ~125 k in a hub) are
  moved out of the collector's sight (``gc.freeze``); they live as long as the process anyway;
* the young generation's threshold is raised (``AgentConfig.gc_young_threshold``, 50,000 by
  default, ``GPUFLOW_GC_YOUNG_THRESHOLD``; 0 leaves the interpreter's policy as it is). A frame's
  objects are freed about as fast as the next frame's are made, so the count of objects allocated
  beyond those freed seldom reaches it: collections become rare;
* and rare collections must also be short: with nothing frozen after start, the young generation
  would hold every object made since the last collection and still alive, which after a second or
  so is every host's state, so a hub of 1,000 agents paused 147 ms in one young collection on an
  H200 host. So, at the agent's frames (:func:`tick`), what exists is frozen again every
  ``FREEZE_EVERY_S``: a collection goes over at most that long's objects. Frozen objects are still
  freed by reference counting as they go; only a reference cycle frozen before it became garbage
  waits, until the full collection that unfreezes everything every ``FULL_EVERY_S`` (one pause of
  a whole collection a minute, where the interpreter's thresholds made one every 1.4 s).

Constraints: the collector's settings are process-wide. :func:`settle` and :func:`restore` count
their callers, so the policy holds while any agent of the process runs, and the thresholds are put
back as found when the last one stops (a threshold someone else set meanwhile is left alone).
The permanent generation is the policy's while an agent runs: the full collections unfreeze it
whole, and the last stop leaves it empty, so objects a host program froze itself are frozen again
with the rest at each tick and unfrozen at the end (freezing only spares the collector work; it is
never needed for correctness; CPython 3.12 freezes a few hundred objects of its own at start-up).
``gc.freeze`` and ``gc.unfreeze`` move lists, whatever their length.
"""

from __future__ import annotations

import gc
import threading
import time

#: the young generation's threshold while an agent runs (the interpreter's own is 700)
AGENT_GC_YOUNG_THRESHOLD = 50_000
#: the range ``GPUFLOW_GC_YOUNG_THRESHOLD`` accepts besides 0
MIN_YOUNG_THRESHOLD = 100
MAX_YOUNG_THRESHOLD = 10_000_000
#: while an agent runs, what exists is frozen again at most this often (at its frames)
FREEZE_EVERY_S = 0.25
#: and everything is unfrozen and collected at once this often (the reference cycles frozen meanwhile)
FULL_EVERY_S = 60.0

_lock = threading.Lock()
_holders = 0
_threshold_before: tuple[int, ...] | None = None
_set_threshold: int | None = None
_last_freeze = 0.0
_last_full = 0.0


def settle(young_threshold: int = AGENT_GC_YOUNG_THRESHOLD) -> bool:
    """Apply the serving policy for one more running agent; False (nothing done, nothing to
    restore) when ``young_threshold`` is 0."""
    global _holders, _threshold_before, _set_threshold, _last_freeze, _last_full
    if young_threshold <= 0:
        return False
    with _lock:
        _holders += 1
        if _holders == 1:
            _last_freeze = _last_full = time.monotonic()
            _threshold_before = gc.get_threshold()
            _set_threshold = None
            if _threshold_before[0] < young_threshold:
                gc.set_threshold(young_threshold, *_threshold_before[1:])
                _set_threshold = young_threshold
        gc.freeze()     # what this agent's start made is long-lived too
    return True


def tick(now: float | None = None) -> None:
    """At an agent's frame: freeze what exists if ``FREEZE_EVERY_S`` passed since the last time,
    or, every ``FULL_EVERY_S``, unfreeze everything, collect it whole, and freeze it again.
    Nothing while no agent holds the policy."""
    global _last_freeze, _last_full
    now = time.monotonic() if now is None else now
    if not _holders or now - _last_freeze < FREEZE_EVERY_S:
        return
    with _lock:
        if not _holders:
            return
        if now - _last_full >= FULL_EVERY_S:
            gc.unfreeze()
            gc.collect()
            _last_full = now
        gc.freeze()
        _last_freeze = now


def restore() -> None:
    """One running agent fewer: the last one puts the collector back as :func:`settle` found it
    (a threshold changed meanwhile by someone else stays)."""
    global _holders, _threshold_before, _set_threshold
    with _lock:
        if _holders == 0:
            return
        _holders -= 1
        if _holders:
            return
        if _set_threshold is not None and _threshold_before is not None and gc.get_threshold()[0] == _set_threshold:
            gc.set_threshold(*_threshold_before)
        gc.unfreeze()
        _threshold_before = _set_threshold = None
