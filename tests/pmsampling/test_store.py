"""The samples kept (store.py): a fixed budget shared by the GPUs, the newest overwriting the
oldest once full, and any range answered exactly across the wrap, against a plain list model."""

from __future__ import annotations

import pytest

from gpuflow.collectors.pmsampling import samples_layout as L
from gpuflow.collectors.pmsampling.store import BYTES_PER_SAMPLE, SampleStore

ALL = (1 << L.SLOT_COUNT) - 1


def rows(ks):
    return [float(k) for k in ks], [tuple(float(k + i) for i in range(L.SLOT_COUNT)) for k in ks]


@pytest.mark.parametrize("added", [10, 100, 101, 157, 250, 1000])
def test_ranges_are_exact_across_the_wrap(added):
    store = SampleStore(100 * BYTES_PER_SAMPLE)           # 100 samples of one GPU
    for lo in range(0, added, 7):                          # in uneven batches
        starts, values = rows(range(lo, min(added, lo + 7)))
        store.add("GPU-a", 1, 1_000_000_000, ALL, starts, values)
    kept = list(range(max(0, added - 100), added))
    assert store.held() == len(kept) and store.bytes_held() <= 100 * BYTES_PER_SAMPLE
    for a, b in [(0, 10_000), (kept[0] + 3, kept[-1] - 2), (kept[-1], kept[-1] + 1), (-5, kept[0]), (kept[0] + 0.5, kept[0] + 1.5)]:
        part = store.query(a, b, "pmsampling")
        want = [k for k in kept if a <= k < b]
        got = part.series[0].t_s.tolist() if part.series else []
        assert got == want, (a, b)
        for i, s in enumerate(part.series):
            assert s.metric == L.METRICS[i] and s.t_s is part.series[0].t_s
            assert s.value.tolist() == [k + i for k in want]
    whole = store.query(0, 10_000, "pmsampling")
    assert whole.retained_from_s == kept[0] and whole.retained_to_s == kept[-1] + 1.0


def test_the_budget_is_shared_by_the_gpus_and_only_collected_slots_are_answered():
    store = SampleStore(200 * BYTES_PER_SAMPLE)
    for uuid in ("GPU-a", "GPU-b"):
        starts, values = rows(range(300))
        store.add(uuid, 2, 1_000_000, 0b1000, starts, values)   # two GPUs: 100 samples each
    assert store.held() == 200
    part = store.query(0, 1e9, "pmsampling")
    assert {(s.entity, s.metric) for s in part.series} == {(("device", u), "pm_warps_active_pct")
                                                            for u in ("GPU-a", "GPU-b")}
    assert all(s.t_s.tolist() == [float(k) for k in range(200, 300)] for s in part.series)


def test_older_samples_never_enter_and_nothing_is_kept_without_a_budget():
    store = SampleStore(10 * BYTES_PER_SAMPLE)
    store.add("GPU-a", 1, 1, ALL, *rows([5, 6]))
    store.add("GPU-a", 1, 1, ALL, *rows([3, 7]))          # 3 is older than what is kept: left out
    assert store.query(0, 100, "pmsampling").series[0].t_s.tolist() == [5.0, 6.0, 7.0]
    none = SampleStore(0)
    none.add("GPU-a", 1, 1, ALL, *rows([1]))
    assert none.query(0, 100, "pmsampling") is None and none.held() == 0
