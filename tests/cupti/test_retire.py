"""gpuflow.collectors.cupti.retire: folding exited traced processes loses nothing and invents nothing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from gpuflow.core.merge import merge_parts
from gpuflow.collectors.cupti.retire import fold, merge_kernels
from gpuflow.core.snapshot import KernelStat, RetiredTraced, SnapshotPart, TracedProcess, TransferStat


def proc(pid, kernels=(), transfers=(), **kw):
    return TracedProcess(pid=pid, session="s", state="exited", cupti_status=kw.pop("cupti_status", "ok"),
                         kernels=kernels, transfers=transfers, **kw)


def test_fold_sums_counts_and_combines_extremes():
    a = proc(1, (KernelStat("k", "_Z1kv", 2, 300, 100, 200, 2),), (TransferStat("d2h", 1, 10, 5, 1),),
             records=5, exit_status=0)
    b = proc(2, (KernelStat("k", "_Z1kv", 3, 30, 5, 20, 3), KernelStat("g", "_Z1gv", 1, 0, None, None, 0)),
             (TransferStat("h2d", 2, 20, 6, 2), TransferStat("d2h", 1, 7, 1, 1)),
             records=7, exit_status=139, truncated=True, dropped_ring=4, cupti_status="stolen")
    r = fold(fold(None, a), b)
    assert (r.processes, r.failed, r.truncated, r.not_traced, r.records, r.dropped_ring) == (2, 1, 1, 1, 12, 4)
    assert r.kernels == (KernelStat("k", "_Z1kv", 5, 330, 5, 200, 5), KernelStat("g", "_Z1gv", 1, 0, None, None, 0))
    assert r.transfers == (TransferStat("h2d", 2, 20, 6, 2), TransferStat("d2h", 2, 17, 6, 2))
    assert not r.complete


def test_fold_refuses_another_session():
    with pytest.raises(ValueError):
        fold(RetiredTraced(session="other"), proc(1))


def test_merge_takes_the_first_roll_up_per_session():
    r1, r2 = RetiredTraced(session="s", processes=1), RetiredTraced(session="s", processes=2)
    snap = merge_parts([SnapshotPart(source="b", traced_retired=(r2,)),
                        SnapshotPart(source="a", traced_retired=(r1, RetiredTraced(session="q")))], 1, 0.0)
    assert [r.session for r in snap.traced_retired] == ["q", "s"] and snap.traced_retired[1] is r1


stats = st.builds(lambda name, c, t, mn, span: KernelStat(name, "_Z" + name, c, t, mn, mn + span, c),
                  st.sampled_from("abc"), st.integers(1, 10**6), st.integers(0, 10**12),
                  st.integers(0, 10**6), st.integers(0, 10**6))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(stats, max_size=3, unique_by=lambda k: k.name), max_size=8))
def test_folded_counts_equal_the_sum_of_the_processes(tables):
    r = None
    for i, table in enumerate(tables):
        r = fold(r, proc(i, tuple(table)))
    expected: dict[str, int] = {}
    for table in tables:
        for k in table:
            expected[k.name] = expected.get(k.name, 0) + k.count
    got = {k.name: k.count for k in (r.kernels if r else ())}
    assert got == expected
    assert merge_kernels((), ()) == ()
