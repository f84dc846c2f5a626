"""A recorded lane answers windows as the CUPTI collector's recorder does (docs/recorder.md,
"Window queries"), checked against a brute-force model of that definition: the executions
starting in ``[lo, hi)`` exactly, in the recorded order, with the names they use in order of
first use; or per bucket j of ``[lo + ⌊j·W/width⌋, lo + ⌊(j+1)·W/width⌋)`` ns the executions
starting there and the busy time inside it (executions that started before the window
included), capped at the bucket's width. Lanes out of time order, executions longer than the
window and buckets narrower than a nanosecond included."""

from __future__ import annotations

import random
from array import array

import pytest

from gpuflow.collectors.recording.lanes import LaneIndex
from gpuflow.core.recorded import LaneWindow, SpanColumns

T0_US = 1_764_000_000_000_000
NAMES = tuple(f"kernel_{i}" for i in range(80))


def lane_of(rows: list[tuple[int, int, int, int]], names: tuple[str, ...] = NAMES) -> LaneWindow:
    """rows: (seq, start_us, dur_ns, name index or -1)."""
    cols = {c: array("q") for c in ("seq", "start_us", "dur_ns", "kind", "name", "grid_x", "grid_y", "grid_z",
                                     "block_x", "block_y", "block_z", "bytes", "direction")}
    for seq, start, dur, name in rows:
        kernel = name >= 0
        for c, v in (("seq", seq), ("start_us", start), ("dur_ns", dur), ("kind", 0 if kernel else 1),
                     ("name", name), ("grid_x", seq % 9), ("grid_y", 1), ("grid_z", 1), ("block_x", 32),
                     ("block_y", 1), ("block_z", 1), ("bytes", -1 if kernel else 64),
                     ("direction", -1 if kernel else 0)):
            cols[c].append(v)
    spans = SpanColumns(**cols, names=names)
    return LaneWindow(0, 1, 7, "compute", len(spans), spans=spans)


def model_buckets(rows, lo_us: int, hi_us: int, width: int) -> tuple[list[int], list[int]]:
    lo, W = lo_us * 1000, (hi_us - lo_us) * 1000
    edge = [lo + j * W // width for j in range(width + 1)]
    count, busy = [0] * width, [0] * width
    for _, start, dur, _ in rows:
        s, e = start * 1000, start * 1000 + dur
        if lo_us <= start < hi_us:
            count[next(j for j in range(width) if edge[j] <= s < edge[j + 1])] += 1
        for j in range(width):
            busy[j] += max(0, min(e, edge[j + 1]) - max(s, edge[j]))
    return count, [min(b, edge[j + 1] - edge[j]) for j, b in enumerate(busy)]


def random_rows(rng: random.Random, n: int, shuffled: bool, names: int) -> list[tuple[int, int, int, int]]:
    t = T0_US
    rows = []
    for seq in range(n):
        t += rng.choice((0, 1, 3, 40, 700))
        dur = rng.choice((0, 500, 2_000, 90_000, 3_000_000))
        rows.append((seq, t, dur, rng.randrange(-1, names)))
    if shuffled:   # a recorder's order need not be time order (a hostile ring's, or overlapping work)
        for _ in range(n // 5):
            i, j = rng.randrange(n), rng.randrange(n)
            rows[i], rows[j] = rows[j], rows[i]
    return rows


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("shuffled", [False, True])
def test_windows_equal_the_definition(seed, shuffled):
    rng = random.Random(seed)
    names = (3, 80)[seed % 2]   # both ways of finding the names a window uses
    rows = random_rows(rng, 400, shuffled, names)
    index = LaneIndex(lane_of(rows))
    first, last = min(r[1] for r in rows), max(r[1] for r in rows)
    for _ in range(25):
        lo = rng.randrange(first - 3_000, last + 10)
        hi = lo + rng.choice((1, 2, 7, 150, 5_000, last - first + 9_000))
        inside = [r for r in rows if lo <= r[1] < hi]
        width = rng.choice((None, 1, 3, 64, 5_000, 20_000))
        got = index.window(lo, hi, width)
        if not inside:
            assert got is None
            continue
        assert got is not None and got.executions == len(inside)
        if width is None or len(inside) <= width:
            c = got.spans
            assert c is not None and got.buckets is None
            assert list(zip(c.seq, c.start_us, c.dur_ns)) == [(r[0], r[1], r[2]) for r in inside]
            assert [c.names[i] if i >= 0 else None for i in c.name] == [NAMES[r[3]] if r[3] >= 0 else None
                                                                          for r in inside]
            used = list(dict.fromkeys(r[3] for r in inside if r[3] >= 0))
            assert c.names == tuple(NAMES[i] for i in used)
        else:
            b = got.buckets
            assert b is not None and got.spans is None
            assert b.start_us == float(lo) and b.width_us == (hi - lo) / width
            count, busy = model_buckets(rows, lo, hi, width)
            assert list(b.count) == count and list(b.busy_ns) == busy


def test_executions_far_longer_than_the_window_at_the_widest_answer():
    # a hostile trace's lane: thousands of executions each covering the whole window, asked at the
    # most buckets the API allows: every bucket is busy whole, the one start inside is counted
    rows = [(i, T0_US - 10 + i % 5, 10 ** 12, 0) for i in range(3_000)]
    rows += [(5_000, T0_US + 3, 10, 1), (5_001, T0_US + 4, 10, 1)]
    lo, hi, width = T0_US, T0_US + 1_000_000, 16_384
    W = (hi - lo) * 1000
    got = LaneIndex(lane_of(rows)).window(lo, hi, 1)
    assert got is not None and got.executions == 2 and got.buckets is not None
    assert list(got.buckets.busy_ns) == [W] and list(got.buckets.count) == [2]
    crowded = rows + [(6_000 + i, T0_US + 7, 1, 0) for i in range(width)]   # more starts than buckets
    got = LaneIndex(lane_of(crowded)).window(lo, hi, width)
    assert got is not None
    b = got.buckets
    assert b is not None and sum(b.count) == width + 2
    assert list(b.busy_ns) == [(j + 1) * W // width - j * W // width for j in range(width)]
