"""The snapshot builder's kernel table helper (gpuflow.collectors.cupti.kernel_table): both twins
bring the shown KernelStats up to date with the decoder's rows in the same way, make a new object
only for a kernel whose figures moved (keeping its type and every other field), give the sort keys
that put a table in kernel_order, and hand back the rows of names not shown."""

from __future__ import annotations

import copy
import gc
from array import array
from dataclasses import dataclass, fields

import pytest
from hypothesis import given, settings, strategies as st

from gpuflow.collectors.cupti import kernel_table
from gpuflow.core.snapshot import KernelStat, kernel_order

TWINS = [pytest.param(kernel_table.kernel_table_py, id="py"),
         pytest.param(kernel_table.kernel_table_c, id="c",
                      marks=pytest.mark.skipif(kernel_table.kernel_table_c is None, reason="not built"))]
FIGURE = st.one_of(st.integers(0, 2**64 - 1), st.integers(0, 50))


@dataclass(frozen=True, slots=True)
class WithOccupancy:
    """A kernel table entry as another issue may grow it: the five figures and more."""

    name: str
    mangled: str
    count: int
    total_ns: int
    min_ns: int | None
    max_ns: int | None
    timed: int | None = None
    occupancy_pct: float | None = None
    limiter: str | None = None


@dataclass(frozen=True)
class Unslotted:
    """A frozen dataclass without slots: copied field by field by name."""

    name: str
    mangled: str
    count: int
    total_ns: int
    min_ns: int | None
    max_ns: int | None
    timed: int | None = None
    note: str = "kept"


def as_fields(stat) -> tuple:
    return (type(stat), *(getattr(stat, f.name) for f in fields(stat)))


@st.composite
def table(draw) -> tuple[dict, list[tuple]]:
    kind = draw(st.sampled_from([KernelStat, WithOccupancy, Unslotted]))
    ids = draw(st.lists(st.integers(0, 5000), unique=True, max_size=30))
    shown, rows = {}, []
    for name_id in ids:
        figures = (draw(FIGURE), draw(FIGURE), draw(FIGURE), draw(st.none() | FIGURE), draw(st.none() | FIGURE))
        count, timed, total, mn, mx = figures
        if draw(st.booleans()):   # a shown name; its figures as in the row, or not
            extra = {"occupancy_pct": 37.5, "limiter": "registers"} if kind is WithOccupancy else {}
            same = draw(st.booleans())
            shown[name_id] = kind(name=draw(st.sampled_from(["gemm", "gemm", "softmax"])), mangled=f"_Z{name_id}",
                                  count=count if same else draw(FIGURE), total_ns=total, min_ns=mn, max_ns=mx,
                                  timed=timed, **extra)
        rows.append((name_id, count, timed, total, mn, mx))
    return shown, rows


@settings(max_examples=300, deadline=None)
@given(table())
def test_both_twins_refresh_alike_and_copy_only_what_moved(case):
    shown, rows = case
    answers = []
    for twin in (kernel_table.kernel_table_py, kernel_table.kernel_table_c or kernel_table.kernel_table_py):
        mine = dict(shown)
        stats, ids, unknown = twin.refresh(rows, mine)
        table = twin.ordered(stats, ids)
        answers.append(([as_fields(s) for s in stats], ids, unknown, {i: as_fields(s) for i, s in mine.items()},
                        [as_fields(s) for s in table]))
        assert list(table) == sorted(stats, key=kernel_order) or any(
            kernel_order(a) == kernel_order(b) for a in stats for b in stats if a is not b)
        for name_id, stat in mine.items():   # an unchanged kernel keeps its object, a moved one is new
            row = next(r for r in rows if r[0] == name_id)
            old = shown[name_id]
            moved = (old.count, old.timed, old.total_ns, old.min_ns, old.max_ns) != row[1:]
            assert (stat is old) is not moved
            assert (stat.count, stat.timed, stat.total_ns, stat.min_ns, stat.max_ns) == row[1:]
            assert [getattr(stat, f.name) for f in fields(stat) if f.name not in ("count", "timed", "total_ns",
                    "min_ns", "max_ns")] == [getattr(old, f.name) for f in fields(old) if f.name not in (
                        "count", "timed", "total_ns", "min_ns", "max_ns")]
        assert stats == [mine[r[0]] for r in rows if r[0] in shown]
        assert ids == [r[0] for r in rows if r[0] in shown]
        assert unknown == [r for r in rows if r[0] not in shown]
    assert answers[0] == answers[1]


@pytest.mark.parametrize("twin", TWINS)
def test_a_table_is_put_in_kernel_order_ties_by_name_id(twin):
    shown = {i: KernelStat(name=n, mangled=f"_Z{i}", count=0, total_ns=0, min_ns=None, max_ns=None, timed=0)
             for i, n in enumerate(["b", "a", "c", "a", "d", "a"], start=1)}
    shown[6] = KernelStat(name="a", mangled="_Z2", count=0, total_ns=0, min_ns=None, max_ns=None)  # as 2's
    rows = [(1, 3, 3, 500, 1, 300), (2, 4, 4, 500, 1, 300), (3, 9, 9, 900, 1, 300), (4, 4, 4, 500, 1, 300),
            (5, 0, 0, 0, None, None), (6, 4, 4, 500, 1, 300), (7, 1, 1, 100, 100, 100),
            (8, 2**64 - 1, 1, 2**64 - 1, 1, 1)]
    shown[8] = KernelStat(name="huge", mangled="_Z4hugev", count=0, total_ns=0, min_ns=None, max_ns=None)
    stats, ids, unknown = twin.refresh(rows, shown)
    table = twin.ordered(stats, ids)
    assert [(k.name, k.mangled) for k in table] == [("huge", "_Z4hugev"), ("c", "_Z3"), ("a", "_Z2"), ("a", "_Z2"),
                                                    ("a", "_Z4"), ("b", "_Z1"), ("d", "_Z5")]
    assert table[2] is shown[2] and table[3] is shown[6]   # the same order keys: by name id
    assert unknown == [(7, 1, 1, 100, 100, 100)]
    assert table == tuple(key[5] for key in sorted(twin.sort_key(s, i) for s, i in zip(stats, ids)))
    # what the compiled sort does not take (a negative total, a name that is not text) sorts as the twin does
    odd = [KernelStat(name="x", mangled="_Zx", count=1, total_ns=-5, min_ns=None, max_ns=None),
           KernelStat(name="y", mangled="_Zy", count=1, total_ns=7, min_ns=None, max_ns=None)]
    assert [k.name for k in twin.ordered(odd, [1, 2])] == ["y", "x"]


@pytest.mark.parametrize("twin", TWINS)
def test_a_row_that_is_not_six_figures_is_refused(twin):
    shown = {1: KernelStat(name="k", mangled="_Z1kv", count=0, total_ns=0, min_ns=None, max_ns=None)}
    with pytest.raises((ValueError, TypeError)):
        twin.refresh([(1, 2, 3)], copy.copy(shown))


@st.composite
def packed_table(draw) -> tuple[dict, list[tuple]]:
    """A decoder's rows (min and max None exactly while untimed) and shown stats whose figures are
    the row's, other ints, or equal values of other types (a float, a bool)."""
    kind = draw(st.sampled_from([KernelStat, WithOccupancy, Unslotted]))
    ids = draw(st.lists(st.integers(0, 2**24), unique=True, max_size=30))
    shown, rows = {}, []
    for name_id in sorted(ids):
        count, timed, total = draw(FIGURE), draw(FIGURE), draw(FIGURE)
        mn, mx = (None, None) if timed == 0 else (draw(FIGURE), draw(FIGURE))
        row = (name_id, count, timed, total, mn, mx)
        rows.append(row)
        if draw(st.booleans()):
            figures = [draw(st.sampled_from([v, draw(st.none() | FIGURE), float(v) if v is not None else v,
                                             bool(v) if v in (0, 1) else v])) for v in row[1:]]
            extra = {"occupancy_pct": 37.5, "limiter": draw(st.sampled_from(["registers", ("a", "tuple")]))} \
                if kind is WithOccupancy else {}
            shown[name_id] = kind(name="gemm", mangled=f"_Z{name_id}", count=figures[0], timed=figures[1],
                                  total_ns=figures[2], min_ns=figures[3], max_ns=figures[4], **extra)
    return shown, rows


def packed(rows: list[tuple]) -> array:
    return array("Q", [v or 0 if i >= 4 else v for row in rows for i, v in enumerate(row)])


@settings(max_examples=300, deadline=None)
@given(packed_table())
def test_packed_rows_refresh_as_their_tuples_do_in_both_twins(case):
    """A decoder's kernel_rows() (what the builder passes) gives what its kernels() gives: the same
    stats, ids, unknown rows and shown table, field for field and type for type (a figure equal in
    another type, 5.0 for 5, is unchanged); the compiled copies that hold only ints, text and None are
    left to reference counting, the others stay with the garbage collector."""
    shown, rows = case
    answers = []
    for twin in (kernel_table.kernel_table_py, kernel_table.kernel_table_c or kernel_table.kernel_table_py):
        for given_rows in (rows, packed(rows)):
            mine = dict(shown)
            stats, ids, unknown = twin.refresh(given_rows, mine)
            answers.append(([as_fields(s) for s in stats], ids, unknown, {i: as_fields(s) for i, s in mine.items()},
                            [as_fields(s) for s in twin.ordered(stats, ids)]))
            for name_id, stat in mine.items():
                if stat is not shown[name_id] and twin is kernel_table.kernel_table_c:
                    atomic = all(v is None or type(v) in (int, str, float, bool)
                                 for v in (getattr(stat, f.name) for f in fields(stat)))
                    assert gc.is_tracked(stat) is not (atomic and type(stat) is not Unslotted)
    assert all(answer == answers[0] for answer in answers)


@pytest.mark.parametrize("twin", TWINS)
def test_packed_rows_are_six_unsigned_values_a_row(twin):
    shown = {1: KernelStat(name="k", mangled="_Z1kv", count=0, total_ns=0, min_ns=None, max_ns=None)}
    with pytest.raises(ValueError):
        twin.refresh(array("Q", [1, 2, 3]), dict(shown))
    with pytest.raises(TypeError):
        twin.refresh(array("q", [1, 2, 3, 4, 5, 6]), dict(shown))
    stats, ids, unknown = twin.refresh(array("Q", [1, 2, 2, 900, 400, 500, 7, 1, 0, 0, 0, 0]), dict(shown))
    assert [(s.count, s.timed, s.total_ns, s.min_ns, s.max_ns) for s in stats] == [(2, 2, 900, 400, 500)]
    assert ids == [1] and unknown == [(7, 1, 0, 0, None, None)]
