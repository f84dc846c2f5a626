"""PM samples in a Perfetto export (issue 21: "the Perfetto export carries them as counter tracks").

The samples the pmsampling collector keeps (store.py) reach an export through the same history
answer the page reads; each kept metric becomes one counter track under its GPU's track, named by
the metric, in its unit, holding exactly the samples of the exported range at their start times.
A "not available" slot (a metric the one pass could not hold) has no track; another GPU's samples
stay under their own GPU. The file is decoded with Perfetto's own protobuf schema.
"""

from __future__ import annotations

import pytest
from perfetto_read import read

from gpuflow.collectors.pmsampling import samples_layout as L
from gpuflow.collectors.pmsampling.store import BYTES_PER_SAMPLE, SampleStore
from gpuflow.core.recorded import WindowPart
from gpuflow.export.window_export import WindowExport

T0 = 1_764_000_000.0
INTERVAL_S = 0.001
SAMPLES = 500


def value(uuid: str, k: int, slot: int) -> float:
    """A distinct value per GPU, sample and slot, in each slot's own range."""
    base = 0 if uuid == "GPU-a" else 1
    if L.SLOT_METRICS[slot][1] == "%":
        return float((k * 7 + slot * 11 + base * 5) % 101)
    return float(1e9 + k * 1e6 + slot * 1e3 + base)


def store_with(slots: int) -> SampleStore:
    store = SampleStore(4 * SAMPLES * BYTES_PER_SAMPLE)
    for uuid in ("GPU-a", "GPU-b"):
        starts = [T0 + k * INTERVAL_S for k in range(SAMPLES)]
        values = [tuple(value(uuid, k, s) if slots >> s & 1 else float("nan") for s in range(L.SLOT_COUNT))
                  for k in range(SAMPLES)]
        for lo in range(0, SAMPLES, 64):   # as the collector adds them: a decode's batch at a time
            store.add(uuid, 2, int(INTERVAL_S * 1e9), slots, starts[lo:lo + 64], values[lo:lo + 64])
    return store


def exported(store: SampleStore, start_s: float, end_s: float) -> bytes:
    def no_window(start, end, pid, width):
        return (WindowPart(source="pmsampling", processes=()),)

    def history(start, end):
        part = store.query(start, end, "pmsampling")
        return () if part is None else (part,)

    out: list[bytes] = []
    WindowExport(no_window, history, start_s, end_s).write(out.append)
    return b"".join(out)


@pytest.mark.parametrize("slots", [(1 << L.SLOT_COUNT) - 1, 0b000111000])
def test_each_kept_metric_is_a_counter_track_under_its_gpu_with_exactly_the_ranges_samples(slots):
    lo, hi = 120, 380                                  # a range inside what is kept
    t = read(exported(store_with(slots), T0 + lo * INTERVAL_S, T0 + hi * INTERVAL_S))
    assert t.whole
    kept = [m for s, m in enumerate(L.METRICS) if slots >> s & 1]
    by_gpu: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for uuid, track in t.tracks.items():
        if not track.is_counter:
            continue
        path = t.path(uuid)
        assert path[-1] in L.METRICS and any(p.startswith("GPU-") for p in path[:-1]), path
        gpu = next(p for p in path if p in ("GPU-a", "GPU-b"))
        by_gpu.setdefault(gpu, {})[path[-1]] = t.counters.get(uuid, [])
        unit = dict((m, u) for m, u, _b in L.SLOT_METRICS)[path[-1]]
        assert track.counter_unit == unit
    assert set(by_gpu) == {"GPU-a", "GPU-b"}
    for gpu, tracks in by_gpu.items():
        assert sorted(tracks) == sorted(kept)     # a slot the pass left out has no track
        for metric, points in tracks.items():
            slot = L.METRICS.index(metric)
            want = [(round((T0 + k * INTERVAL_S) * 1e9), value(gpu, k, slot)) for k in range(lo, hi)]
            assert len(points) == len(want)
            for (ts, v), (wts, wv) in zip(points, want):
                assert abs(ts - wts) <= 1 and v == pytest.approx(wv, rel=1e-6)
