"""A watched host's span rows read into columns (gpuflow.collectors.fleet.lane_columns and its
twins ``_rows_py``/``_rows_c``) and its lanes' samples joined: what the hub takes or refuses is
what the reference reading took or refused (``wire.decode_spans``, each span checked by parse.py),
span for span; both twins agree on every input, hostile ones included; a join of kept and new
columns is the last spans of both, with no more names than it uses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from array import array
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gpuflow.collectors.fleet import _rows_py, lane_columns, parse
from gpuflow.collectors.fleet.lane_columns import joined, read_rows
from gpuflow.collectors.fleet.lane_keeper import LaneKeeper
from gpuflow.collectors.fleet.parse import MAX_TEXT, FrameRefused
from gpuflow.core.board import SnapshotBoard
from gpuflow.core.recorded import SpanColumns
from gpuflow.core.snapshot import Lane, Span
from gpuflow.transport.frames import FrameEncoder
from gpuflow.transport.wire import NameTable, StreamReader, decode_spans, encode_spans
from snapshots import make_snapshot

TWINS = [pytest.param(_rows_py, id="py"),
         pytest.param(lane_columns.rows_c, id="c",
                      marks=pytest.mark.skipif(lane_columns.rows_c is None, reason="not built"))]
COLUMNS = ("seq", "start_us", "dur_ns", "kind", "name", "grid_x", "grid_y", "grid_z",
           "block_x", "block_y", "block_z", "bytes", "direction")
SPANS = parse._items(parse._SPAN, parse.LIST_CAPS["spans"])   # what parse.py makes of a lane's spans

INT64 = st.integers(-2**63, 2**63 - 1)
#: numbers an agent may send: mostly fitting, some at and past the 64-bit bounds, bools, floats
NUMBER = st.one_of(st.integers(1, 5000), st.integers(-3, 3), INT64, st.sampled_from([2**63, -2**63 - 1, 2**64]),
                   st.booleans(), st.floats(allow_nan=False, allow_infinity=False), st.none())
GOOD = st.integers(1, 1 << 40)
DIMENSION = st.one_of(st.integers(1, 1024), st.lists(st.integers(1, 64), min_size=3, max_size=3),
                      st.sampled_from([None, True, [1, 2], [1, 2, 3, 4], [1, True, 1], "4", 2**63]))
NAME_ID = st.one_of(st.integers(0, 6), st.none(), st.sampled_from([-1, 99, True, 2**70, "0", [0]]))


def kernel_row(fitting: bool) -> st.SearchStrategy:
    if fitting:
        return st.tuples(GOOD, GOOD, GOOD, st.just(0), st.one_of(st.integers(0, 3), st.none()),
                         st.one_of(st.integers(1, 1024), st.lists(st.integers(1, 64), min_size=3, max_size=3)),
                         st.integers(1, 1024)).map(list)
    return st.tuples(NUMBER, NUMBER, NUMBER, st.just(0), NAME_ID, DIMENSION, DIMENSION).map(list).flatmap(
        lambda r: st.integers(4, 8).map(lambda n: (r + [None])[:n]))


def copy_row(fitting: bool) -> st.SearchStrategy:
    if fitting:
        return st.tuples(GOOD, GOOD, GOOD, st.sampled_from([1, 2]), st.one_of(st.integers(0, 1 << 40), st.none()),
                         st.one_of(st.integers(0, 5), st.none())).map(list).map(_trailing_nulls_left_out)
    return st.tuples(NUMBER, NUMBER, NUMBER, st.sampled_from([1, 2, 3, -1, True, "memcpy"]), NUMBER,
                     st.one_of(st.integers(-2, 7), st.none(), st.just(True))).map(list).flatmap(
        lambda r: st.integers(3, 7).map(lambda n: (r + [None])[:n]))


def _trailing_nulls_left_out(row: list) -> list:
    while row[-1] is None:
        row.pop()
    return row


#: a process's names table as an agent may send it: [name, mangled] pairs, and worse
NAMES = st.lists(st.one_of(st.tuples(st.text(max_size=12), st.one_of(st.text(max_size=12), st.none())).map(list),
                           st.just([None, "_Z1fv"]), st.just(["x" * (MAX_TEXT + 1), None]),
                           st.sampled_from(["abc", 5, [], {}, None, [7, None]])), max_size=7)


def rows_of(fitting: bool) -> st.SearchStrategy:
    row = st.one_of(kernel_row(fitting), copy_row(fitting))
    if not fitting:
        row = st.one_of(row, st.sampled_from([{"seq": 1}, "row", 3, [], [1, 2]]),
                        st.tuples(GOOD, GOOD, GOOD, st.just("kernel"), st.just(0)).map(list))
    return st.lists(row, min_size=1, max_size=12)


def reference(rows, names):
    """What the hub made of a lane before: decode_spans, then parse.py's check (None: refused)."""
    try:
        return SPANS(decode_spans(rows, names), "spans")
    except (FrameRefused, ValueError, TypeError, IndexError, KeyError, AttributeError):
        return None


def hub(rows, names):
    """What the hub makes of it now: read_rows, then parse.py's check (None: refused)."""
    try:
        made = read_rows(rows, names)
        return tuple(made) if isinstance(made, SpanColumns) else SPANS(made, "spans")
    except (FrameRefused, ValueError, TypeError, IndexError, KeyError, AttributeError):
        return None


def same_columns(a: SpanColumns | None, b: SpanColumns | None) -> bool:
    if a is None or b is None:
        return a is b
    return all(getattr(a, c) == getattr(b, c) for c in COLUMNS) and a.names == b.names


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.booleans().flatmap(lambda fitting: st.tuples(rows_of(fitting), NAMES)))
def test_the_hub_takes_or_refuses_a_lane_as_the_reference_reading_did(case):
    rows, names = case
    assert hub(rows, names) == reference(rows, names)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.booleans().flatmap(lambda fitting: st.tuples(rows_of(fitting), NAMES)))
def test_both_twins_read_the_same_columns_or_both_decline(case):
    rows, names = case
    made = [twin.columns(rows, names, MAX_TEXT) for twin in (_rows_py, lane_columns.rows_c or _rows_py)]
    assert same_columns(*made)
    if made[0] is not None:   # columns only where they hold the reference's spans exactly
        assert tuple(made[0]) == reference(rows, names)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows_of(True), NAMES, st.integers(0, 80), st.integers(0, 40))
def test_columns_made_without_the_constructors_checks_are_what_it_would_make(rows, names, size, cut):
    """Every SpanColumns the readers, joins and tails make (``_rows_py.made``) holds what the
    constructor checks: thirteen array('q') of one length; and equals the one it makes."""
    made = [twin.columns(rows, names, MAX_TEXT) for twin in (_rows_py, lane_columns.rows_c or _rows_py)]
    if made[0] is None:
        return
    later = SpanColumns.from_spans(replace(s, seq=s.seq + made[0].seq[-1] + 1) for s in tuple(made[0])[cut:])
    for columns in made + [joined(made[0], later, size), joined(made[0], (), size), joined((), made[0], size)]:
        if isinstance(columns, SpanColumns):
            rebuilt = SpanColumns(*[getattr(columns, c) for c in COLUMNS], names=columns.names)   # checks
            assert rebuilt == columns and type(columns.names) is tuple


@pytest.mark.parametrize("twin", TWINS)
def test_a_real_lanes_rows_become_columns(twin):
    spans = [Span(seq=10 + i, kind="kernel", start_us=1_000_000 + 7 * i, dur_ns=3_000 + i, name=f"k{i % 3}",
                  grid=(128, 1, 1) if i % 2 else (8, 4, 2), block=(256, 1, 1)) for i in range(40)]
    spans += [Span(seq=60, kind="memcpy", start_us=1_000_400, dur_ns=900, bytes=1 << 20, direction="h2d"),
              Span(seq=61, kind="memset", start_us=1_000_401, dur_ns=90, bytes=None, direction=None)]
    table = NameTable()
    rows = encode_spans(spans, table)
    made = twin.columns(rows, table.entries, MAX_TEXT)
    assert isinstance(made, SpanColumns) and tuple(made) == tuple(spans)
    assert made.names == ("k0", "k1", "k2")
    kernels_only = twin.columns(rows[:40], table.entries, MAX_TEXT)
    assert tuple(kernels_only) == tuple(spans[:40])


@pytest.mark.parametrize("twin", TWINS)
@pytest.mark.parametrize("rows, why", [
    ([[1, 1, 1, 0, 0, 1, 1], [0, 1, 1, 0, 0, 1, 1]], "a seq that does not rise"),
    ([[2**63 - 1, 1, 1, 0, None, 1, 1], [1, 1, 1, 0, None, 1, 1]], "a running seq past int64"),
    ([[1, 1, 1, 0, None, True, 1]], "a bool for a grid"),
    ([[1, 1, 1, 0, None, 1]], "a kernel without its block"),
    ([[1, 1, 1, 1, -5, 0]], "a negative byte count"),
    ([[1, 1, 1, 1, 5, 6]], "a direction past the known ones"),
    ([[1, 1, 1, 0, 9, 1, 1]], "a name id past the table"),
    ([[1, 1, 1, 0, 1, 1, 1]], "a name that is not text"),
    ([[1, 1, 1, "memcpy", None, None, None, 5, "h2d"]], "a kind outside the codes"),
])
def test_rows_the_columns_cannot_hold_exactly_are_declined(twin, rows, why):
    assert twin.columns(rows, [["k", "_Z1kv"], [7, None]], MAX_TEXT) is None, why


def columns(first_seq: int, n: int, names: tuple[str, ...]) -> SpanColumns:
    return SpanColumns.from_spans(Span(seq=first_seq + i, kind="kernel", start_us=first_seq + i, dur_ns=1,
                                       name=names[i % len(names)], grid=(1, 1, 1), block=(1, 1, 1))
                                  for i in range(n))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.lists(st.sampled_from("abcdefg"), min_size=1, max_size=4),
                          st.integers(0, 12), st.integers(1, 3)), min_size=1, max_size=12))
def test_joined_lanes_are_the_last_spans_of_kept_and_new_and_name_no_more_than_they_use(frames):
    kept: SpanColumns | tuple = ()
    reference_kept: tuple = ()
    seq = 1
    for new_n, names, size, gap in frames:
        new = columns(seq, new_n, tuple(names)) if new_n else ()
        seq += new_n + gap - 1
        kept = joined(kept, new, size)
        reference_kept = (reference_kept + tuple(new))[-size:] if size else ()
        assert tuple(kept) == reference_kept
        if isinstance(kept, SpanColumns):
            assert len(kept.names) <= max(len(kept), len(names) + 4)
            assert set(kept.names) >= {s.name for s in kept}


def test_spans_that_do_not_continue_the_kept_ones_are_joined_as_spans():
    kept = columns(10, 5, ("a",))
    out_of_order = columns(12, 3, ("b",))
    assert joined(kept, out_of_order, 6) == (tuple(kept) + tuple(out_of_order))[-6:]
    as_spans = tuple(columns(20, 2, ("c",)))
    assert joined(kept, as_spans, 4) == (tuple(kept) + as_spans)[-4:]


def test_a_join_leaves_the_columns_it_was_given_as_they_were():
    kept, new = columns(1, 6, ("a", "b")), columns(7, 3, ("c", "a"))
    before = [array("q", getattr(c, name)) for c in (kept, new) for name in COLUMNS]
    out = joined(kept, new, 7)
    assert [s.seq for s in out] == list(range(3, 10)) and set(out.names) == {"a", "b", "c"}
    assert [getattr(c, name) for c in (kept, new) for name in COLUMNS] == before


def test_a_watched_hosts_lanes_are_columns_frame_after_frame_as_its_agent_holds_them():
    """An agent's frames (a full one, then deltas), read as the hub reads a watched host's: every
    lane is columns straight from the rows, joined frame after frame, holding the agent's sample."""
    board, reader, keeper = SnapshotBoard(), StreamReader(spans=read_rows), LaneKeeper()
    encoder = FrameEncoder(board, span_rate=None)
    done = {7: 0, 13: 0}
    for k in range(12):
        lanes = []
        for stream, per_frame in ((7, 3), (13, 5)):
            done[stream] += per_frame + k % 2
            shown = [Span(seq=1000 * stream + i, kind="memcpy" if i % 4 == 3 else "kernel", start_us=10 * i,
                          dur_ns=5, name=None if i % 4 == 3 else f"k{i % 3}",
                          grid=None if i % 4 == 3 else (i, 1, 1), block=None if i % 4 == 3 else (32, 2, 1),
                          bytes=64 if i % 4 == 3 else None, direction="h2d" if i % 4 == 3 else None)
                     for i in range(max(0, done[stream] - 9), done[stream])]
            lanes.append(Lane(device=0, context=1, stream=stream, label=str(stream), executions=done[stream],
                              spans_elided=done[stream] - len(shown), spans=SpanColumns.from_spans(shown)))
        board.publish(make_snapshot(seq=k + 1, lanes=tuple(lanes), timestamp=1_764_000_000.0 + k))
        frame = encoder.current()
        text = frame.full if frame.delta is None else frame.delta
        plain = reader.read(json.loads(text.split(b"\ndata: ", 1)[1]))
        [traced] = keeper.apply(parse.traced(plain["traced"], "node"), plain["frame"] != "delta", plain)
        for held, agents in zip(traced.lanes, lanes):
            assert isinstance(held.spans, SpanColumns), k
            assert tuple(held.spans) == tuple(agents.spans), k


def test_the_compiled_reader_is_used_where_built_and_no_extensions_picks_the_twin():
    """Under GPUFLOW_REQUIRE_EXTENSIONS=1 or CI=true a missing build fails here instead of the hub
    quietly reading rows the slow way."""
    if os.environ.get("GPUFLOW_REQUIRE_EXTENSIONS") or os.environ.get("CI") == "true":
        assert lane_columns.rows_c is not None and lane_columns.rows_c.is_compiled
    code = "from gpuflow.collectors.fleet import lane_columns as l; print(l.USING_EXTENSION)"
    env = {k: v for k, v in os.environ.items() if k != "GPUFLOW_NO_EXTENSIONS"}
    picked = [subprocess.run([sys.executable, "-c", code], env={**env, **extra}, capture_output=True, text=True,
                             check=True).stdout.strip() for extra in ({}, {"GPUFLOW_NO_EXTENSIONS": "1"})]
    assert picked == [str(lane_columns.rows_c is not None), "False"]


def test_a_join_concatenates_every_column_past_the_cut_with_the_new_name_column():
    kept, new = columns(1, 6, ("a", "b")), columns(7, 3, ("c",))
    new_name = array("q", [2, 2, -1])
    joined_columns = _rows_py.concat(kept, 4, new, new_name)
    assert joined_columns == [getattr(kept, c)[4:] + (new_name if c == "name" else getattr(new, c)) for c in COLUMNS]


def raw_columns(seqs: list[int], name: list[int], names: tuple[str, ...]) -> SpanColumns:
    """Columns as a reader makes them (no constructor checks): any name column, any names."""
    n = len(seqs)
    return _rows_py.made([array("q", seqs) if c == "seq" else array("q", name) if c == "name"
                          else array("q", range(i, i + n)) for i, c in enumerate(COLUMNS)], names)


def joined_by(twin, kept, new, size):
    try:
        out = twin.join(kept, new, size)
    except Exception as exc:  # noqa: BLE001 - the same error from both twins
        return type(exc).__name__
    if type(out) is not SpanColumns:
        return out
    return [getattr(out, c) for c in COLUMNS], out.names


@pytest.mark.skipif(lane_columns.rows_c is None, reason="not built")
@settings(max_examples=500, deadline=None)
@given(st.data())
def test_both_twins_join_any_two_lanes_columns_alike(data):
    """Names a prefix of the kept ones' or not, more names than spans, ids out of range, seqs out
    of order, trims that drop every kept span: the compiled join gives the twin's answer."""
    pool = ["a", "b", "c", "d", "e"]
    lanes = []
    for _ in range(2):
        n = data.draw(st.integers(0, 8))
        names = tuple(data.draw(st.lists(st.sampled_from(pool), unique=True, max_size=5)))
        ids = st.integers(-1, len(names) - 1) if names else st.just(-1)
        name = data.draw(st.lists(st.one_of(ids, st.sampled_from([-2, 7])) if data.draw(st.integers(0, 4)) == 0
                                  else ids, min_size=n, max_size=n))
        start = data.draw(st.integers(0, 30))
        lanes.append(raw_columns(list(range(start, start + n)), name, names))
    size = data.draw(st.integers(-1, 20))
    assert joined_by(lane_columns.rows_c, *lanes, size) == joined_by(_rows_py, *lanes, size)
