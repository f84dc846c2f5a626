"""A PM-sampling collector plugin for the browser tests (tests/ui/test_sm_grid.py), with the real
sampler's samples: those an NVIDIA H200 gave in the "half the SMs" phase of ``scripts/gpu-check``'s
pmsampling stage (measurements/2026-12-01-h200-11-gil-occupancy/pmsampling-run3.json: one
1,024-thread block on half the SMs, 1 ms apart), kept in the agent's own store
(gpuflow.collectors.pmsampling.store.SampleStore) and answered through ``query_history`` as the
pmsampling collector answers them: per GPU and metric a series of float32 values at the sampler's
interval, entity ``["device", uuid]``.

The phase's samples (about 4 s) are laid end to end, their times moved, from a minute before the
agent's start up to the present, for GPU 0 of tests/ui/grid_scene.py, and go on arriving as time
passes: so whatever moment or window the page asks about holds the phase, and the figures it draws
are the phase's. The part says what the
real collector said for that GPU (the capture's own line), with the source ``pmsampling``, so the
page knows the agent samples GPU metrics.

Loaded with ``--plugin tests.ui.grid_pm`` beside ``--plugin tests.ui.grid_scene``.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from gpuflow import hookimpl
from gpuflow.collectors.pmsampling import samples_layout as L
from gpuflow.collectors.pmsampling.store import SampleStore
from gpuflow.core.snapshot import Problem, SnapshotPart

from .grid_scene import UUIDS

CAPTURE = Path(__file__).resolve().parents[2] / "measurements" / "2026-12-01-h200-11-gil-occupancy" / "pmsampling-run3.json"
PHASE = "half"
SLOT, STORE_SLOT = __name__, __name__ + ".store"
BEFORE_S = 60.0   #: the samples begin this long before the agent's start


def phase_samples() -> tuple[list[float], list[tuple[float, ...]], float, list[dict]]:
    """The capture's samples of the phase: their starts, each one's values in the store's slot order,
    the sampler's interval (s), and the capture's lines from the pmsampling collector."""
    doc = json.loads(CAPTURE.read_text())
    (t0, t1), = [(a, b) for name, a, b in doc["phases"] if name == PHASE]
    series = doc["series"]
    times = series[L.METRICS[0]][0]
    keep = [i for i, t in enumerate(times) if t0 <= t < t1]
    for metric in L.METRICS:   # every metric on the same sample times
        assert series[metric][0] == times, metric
    rows = [tuple(series[m][1][i] for m in L.METRICS) for i in keep]
    return [times[i] for i in keep], rows, doc["resolution_s"], doc["pm_lines"]


def phase_figures() -> dict[str, dict[str, float]]:
    """Per metric, the phase's samples' least, greatest and mean: what the page must draw from them."""
    _, rows, _, _ = phase_samples()
    out = {}
    for k, metric in enumerate(L.METRICS):
        values = [r[k] for r in rows]
        out[metric] = {"min": min(values), "max": max(values), "mean": sum(values) / len(values)}
    return out


class Replay:
    """The phase's samples laid end to end from ``BEFORE_S`` before the start, added to the store up
    to the present every ``PASS_S``, as the collector's drain adds what its samplers wrote."""

    PASS_S = 0.05

    def __init__(self) -> None:
        self.starts, self.rows, self.resolution, self.lines = phase_samples()
        self.span = self.starts[-1] + self.resolution - self.starts[0]
        self.store = SampleStore(64 << 20)
        self.origin = time.time() - BEFORE_S - self.starts[0]   #: lap 0's shift
        self.lap, self.next = 0, 0                             #: the next sample to add
        self.stop = threading.Event()
        self.add_until(time.time())
        self.thread = threading.Thread(target=self.run, name="grid-pm-replay", daemon=True)
        self.thread.start()

    def add_until(self, now: float) -> None:
        starts, rows = [], []
        while True:
            t = self.starts[self.next] + self.origin + self.lap * self.span
            if t > now:
                break
            starts.append(t)
            rows.append(self.rows[self.next])
            self.next += 1
            if self.next == len(self.starts):
                self.lap, self.next = self.lap + 1, 0
        self.store.add(UUIDS[0], 4, int(self.resolution * 1e9), (1 << L.SLOT_COUNT) - 1, starts, rows)

    def run(self) -> None:
        while not self.stop.wait(self.PASS_S):
            self.add_until(time.time())


@hookimpl
def start_collecting(context) -> None:
    replay = context.slots[STORE_SLOT] = Replay()
    context.slots[SLOT] = SnapshotPart(source="pmsampling", problems=tuple(
        Problem(p["source"], p["message"], p["severity"]) for p in replay.lines))
    context.notify()


@hookimpl
def produce_snapshot(context) -> SnapshotPart | None:
    return context.slots.get(SLOT)


@hookimpl
def stop_collecting(context) -> None:
    replay = context.slots.get(STORE_SLOT)
    if replay is not None:
        replay.stop.set()


@hookimpl
def query_history(context, start_s: float, end_s: float):
    replay = context.slots.get(STORE_SLOT)
    return replay.store.query(start_s, end_s, "pmsampling") if replay is not None else None
