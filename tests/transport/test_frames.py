"""Frames: encoded once per snapshot, full vs delta exactly as docs/snapshot.md says, in the
stream's compact form (schema 2), which reads back to exactly the plain form of to_json_dict."""

from __future__ import annotations

import json
import math

from hypothesis import given, settings, strategies as st

from gpuflow.core.snapshot import (
    TRANSFER_DIRECTIONS, Device, KernelStat, Lane, Span, TracedProcess, kernel_order,
)
from gpuflow.transport.frames import FrameEncoder, dumps, fair_shares
from gpuflow.transport.wire import NameTable, StreamReader, decode_spans, encode_spans
from snapshots import board_with, lane, make_snapshot

LONG = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)"
LONG_MANGLED = "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_7MeanOpsIffffEEjfLi4EEEEEvT1_"


def body(event: bytes) -> dict:
    lines = event.decode().split("\n")
    data = [l[len("data: "):] for l in lines if l.startswith("data: ")]
    assert len(data) == 1 and event.endswith(b"\n\n")
    return json.loads(data[0])


def plain(snap) -> dict:
    return json.loads(json.dumps(snap.to_json_dict()))


def without(d: dict, *keys: str) -> dict:
    return {k: v for k, v in d.items() if k not in keys}


def lane_spans(doc: dict) -> dict[int, list[int]]:
    return {l["stream"]: [s["seq"] for s in l["spans"]] for t in doc["traced"] for l in t["lanes"]}


def kspan(seq: int, name: str = LONG, start_us: int = 1_000_000, grid=(256, 1, 1)) -> Span:
    return Span(seq=seq, kind="kernel", start_us=start_us + seq * 3, dur_ns=2000 + seq, name=name,
                grid=grid, block=(128, 1, 1))


def traced_snapshot(seq: int, lanes: tuple[Lane, ...], kernels=(), timestamp=1764473412.5, **kw):
    t = TracedProcess(pid=4242, session="s1", name="train", cupti_status="ok", records=seq,
                      kernels=kernels, lanes=lanes)
    return make_snapshot(seq=seq, traced=(t,), timestamp=timestamp, **kw)


def busy_lane(stream: int, seqs, executions: int) -> Lane:
    spans = tuple(kspan(s) for s in seqs)
    return Lane(device=0, context=1, stream=stream, label=str(stream), executions=executions,
                spans_elided=executions - len(spans), spans=spans)


# -- full and delta ---------------------------------------------------------------------------------
def test_first_frame_is_full_with_boot_epoch_id_and_reads_back_to_the_plain_snapshot():
    board = board_with(make_snapshot(seq=7, lanes=(lane(13, [1, 2, 3]),)))
    enc = FrameEncoder(board, boot_epoch=1234)
    f = enc.current()
    assert f.seq == 7 and f.delta is None and f.base_seq is None
    assert f.full.startswith(b"id: 1234-7\nevent: snapshot\ndata: ")
    doc = body(f.full)
    assert doc["frame"] == "full" and doc["base_seq"] is None and doc["schema"] == 4
    assert list(doc)[:2] == ["frame", "base_seq"]
    read = StreamReader().read(doc)
    assert without(read, "frame", "base_seq", "schema") == without(plain(board.latest()), "schema")


def test_spans_are_arrays_relative_to_the_span_before_with_names_by_id():
    spans = (Span(seq=10, kind="kernel", start_us=1000, dur_ns=5, name="k", grid=(256, 1, 1),
                  block=(128, 2, 1)),
             Span(seq=12, kind="memcpy", start_us=1003, dur_ns=7, bytes=4096, direction="d2h"),
             Span(seq=13, kind="memset", start_us=1002, dur_ns=9, bytes=64, direction="memset"),
             Span(seq=20, kind="kernel", start_us=1010, dur_ns=1),
             Span(seq=21, kind="graph", start_us=1011, dur_ns=2, name="k", bytes=8))
    table = NameTable()
    rows = encode_spans(spans, table)
    assert rows == [[10, 1000, 5, 0, 0, 256, [128, 2, 1]],
                    [2, 3, 7, 1, 4096, 1],
                    [1, -1, 9, 2, 64, 5],
                    [7, 8, 1, 0],
                    [1, 1, 2, "graph", 0, None, None, 8]]
    assert table.entries == [["k", None]]


def test_delta_carries_only_spans_newer_than_the_base_lane_and_everything_else_whole():
    board = board_with(make_snapshot(seq=1, lanes=(lane(13, [1, 2, 3]), lane(14, [4]))))
    enc = FrameEncoder(board, boot_epoch=1)
    reader = StreamReader()
    reader.read(body(enc.current().full))
    # lane 13 keeps 2..3 and adds 5, 6; lane 14 unchanged; lane 15 is new
    second = make_snapshot(seq=2, lanes=(lane(13, [2, 3, 5, 6]), lane(14, [4]), lane(15, [7, 8])))
    board.publish(second)
    f = enc.current()
    assert f.base_seq == 1
    full, delta = StreamReader().read(body(f.full)), reader.read(body(f.delta))
    assert delta["frame"] == "delta" and delta["base_seq"] == 1
    assert lane_spans(full) == {13: [2, 3, 5, 6], 14: [4], 15: [7, 8]}
    assert lane_spans(delta) == {13: [5, 6], 14: [], 15: [7, 8]}
    assert without(full, "frame", "base_seq", "schema", "traced") == \
        without(plain(second), "schema", "traced")
    for key in ("devices", "processes", "host", "seq", "timestamp", "sources"):
        assert delta[key] == full[key]
    t_full, t_delta = full["traced"][0], delta["traced"][0]
    assert without(t_delta, "lanes") == without(t_full, "lanes")
    assert [without(l, "spans", "spans_skipped") for l in t_delta["lanes"]] == \
        [without(l, "spans") for l in t_full["lanes"]]


def test_delta_base_is_the_previous_encoded_frame_even_if_snapshots_were_skipped():
    board = board_with(make_snapshot(seq=1, lanes=(lane(13, [1]),)))
    enc = FrameEncoder(board, boot_epoch=1)
    reader = StreamReader()
    reader.read(body(enc.current().full))
    board.publish(make_snapshot(seq=2, lanes=(lane(13, [1, 2]),)))  # never encoded
    board.publish(make_snapshot(seq=3, lanes=(lane(13, [1, 2, 3]),)))
    f = enc.current()
    assert f.base_seq == 1 and lane_spans(reader.read(body(f.delta))) == {13: [2, 3]}


def test_each_snapshot_is_encoded_once_for_all_callers():
    board = board_with(make_snapshot(seq=1))
    enc = FrameEncoder(board)
    a, b = enc.current(), enc.current()
    assert a is b and a.full is b.full
    j1, j2 = enc.snapshot_json(), enc.snapshot_json()
    assert j1[1] is j2[1]
    board.publish(make_snapshot(seq=2))
    assert enc.current() is not a and enc.current().seq == 2


def test_no_snapshot_no_frame():
    enc = FrameEncoder(board_with())
    assert enc.current() is None and enc.snapshot_json() is None


def test_json_is_compact_one_line_and_nan_becomes_null():
    odd = make_snapshot(seq=1, devices=(Device(index=0, uuid="u", name="line\nbreak",
                                               temperature_c=math.nan, power_draw_w=math.inf),))
    f = FrameEncoder(board_with(odd)).current()
    assert f.full.count(b"\n") == 4  # id, event, data, blank line
    doc = body(f.full)
    assert doc["devices"][0]["temperature_c"] is None and doc["devices"][0]["power_draw_w"] is None
    assert doc["devices"][0]["name"] == "line\nbreak"
    assert dumps({"a": [1, 2]}) == b'{"a":[1,2]}'


def test_api_snapshot_body_stays_the_plain_form():
    snap = make_snapshot(seq=3, lanes=(lane(13, [1, 2]),))
    assert json.loads(FrameEncoder(board_with(snap)).snapshot_json()[1]) == plain(snap)


# -- names ------------------------------------------------------------------------------------------
def test_a_kernel_name_travels_once_per_stream_and_kernels_refer_to_it_by_id():
    k1 = KernelStat(LONG, LONG_MANGLED, 3, 6000, 1900, 2100, timed=3)
    board = board_with(traced_snapshot(1, (busy_lane(13, [1, 2, 3], 3),), kernels=(k1,)))
    enc = FrameEncoder(board, boot_epoch=1)
    reader = StreamReader()
    f1 = enc.current()
    assert f1.full.count(LONG.encode()) == 1 and f1.full.count(LONG_MANGLED.encode()) == 1
    t = body(f1.full)["traced"][0]
    assert t["names"] == [[LONG, LONG_MANGLED]]
    assert t["kernels"] == [{"id": 0, "count": 3, "total_ns": 6000, "min_ns": 1900, "max_ns": 2100,
                             "timed": 3}]
    assert {row[4] for row in t["lanes"][0]["spans"]} == {0}
    reader.read(body(f1.full))
    # a new kernel: the delta names only it; the old name is not repeated
    k1b = KernelStat(LONG, LONG_MANGLED, 4, 8000, 1900, 2100, timed=4)
    k2 = KernelStat("gemm(float*)", "_Z4gemmPf", 1, 500, 500, 500, timed=1)
    spans = (busy_lane(13, [2, 3, 4], 4).spans[:-1] +
             (kspan(4), kspan(5, name="gemm(float*)")))
    lane2 = Lane(device=0, context=1, stream=13, label="13", executions=5, spans_elided=0, spans=spans)
    board.publish(traced_snapshot(2, (lane2,), kernels=(k1b, k2)))
    f2 = enc.current()
    assert LONG.encode() not in f2.delta and LONG_MANGLED.encode() not in f2.delta
    t2 = body(f2.delta)["traced"][0]
    assert t2["names"] == [["gemm(float*)", "_Z4gemmPf"]]
    assert [k["id"] for k in t2["kernels"]] == [0, 1]
    got = reader.read(body(f2.delta))["traced"][0]
    assert [(k["name"], k["mangled"], k["count"]) for k in got["kernels"]] == \
        [(LONG, LONG_MANGLED, 4), ("gemm(float*)", "_Z4gemmPf", 1)]
    assert [(s["seq"], s["name"]) for s in got["lanes"][0]["spans"]] == [(4, LONG), (5, "gemm(float*)")]
    # the full frame of the same snapshot carries the whole table
    assert body(f2.full)["traced"][0]["names"] == [[LONG, LONG_MANGLED], ["gemm(float*)", "_Z4gemmPf"]]


def test_a_traced_process_that_leaves_and_comes_back_gets_its_names_again():
    k = (KernelStat(LONG, LONG_MANGLED, 1, 10, 10, 10),)
    board = board_with(traced_snapshot(1, (busy_lane(13, [1], 1),), kernels=k))
    enc = FrameEncoder(board, boot_epoch=1)
    reader = StreamReader()
    reader.read(body(enc.current().full))
    board.publish(make_snapshot(seq=2))   # gone
    assert reader.read(body(enc.current().delta))["traced"] == []
    board.publish(traced_snapshot(3, (busy_lane(13, [1, 2], 2),), kernels=k))
    d = body(enc.current().delta)
    assert d["traced"][0]["names"] == [[LONG, LONG_MANGLED]]
    assert reader.read(d)["traced"][0]["kernels"][0]["name"] == LONG


def test_a_full_frame_built_late_matches_its_own_snapshot_and_the_deltas_after_it():
    board = board_with(traced_snapshot(1, (busy_lane(13, [1], 1),)))
    enc = FrameEncoder(board, boot_epoch=1)
    f1 = enc.current()
    board.publish(traced_snapshot(2, (Lane(0, 1, 13, "13", 2, 0, (kspan(1), kspan(2, name="new()"))),)))
    f2 = enc.current()   # encodes 2 and gives "new()" an id before anyone built f1's full frame
    reader = StreamReader()
    first = reader.read(body(f1.full))
    assert body(f1.full)["traced"][0]["names"] == [[LONG, None]]
    assert lane_spans(first) == {13: [1]}
    second = reader.read(body(f2.delta))
    assert [s["name"] for s in second["traced"][0]["lanes"][0]["spans"]] == ["new()"]


# -- the span budget ----------------------------------------------------------------------------------
def test_fair_shares_give_small_lanes_all_and_split_the_rest():
    assert fair_shares([100, 10, 60], 50) == [20, 10, 20]
    assert fair_shares([5, 5], 50) == [5, 5]
    assert fair_shares([30, 30, 30], 50) == [16, 17, 17]
    assert fair_shares([7, 900], None) == [7, 900]
    assert sum(fair_shares([3, 1000, 1000, 0], 101)) == 101


def test_the_budget_follows_the_time_between_snapshots():
    enc = FrameEncoder(board_with(), span_rate=1000)
    at = lambda t: make_snapshot(seq=1, timestamp=t)  # noqa: E731
    assert enc.allowance(at(10.05), at(10.0)) == 50
    assert enc.allowance(at(10.001), at(10.0)) == 50      # at least 50 ms' worth
    assert enc.allowance(at(10.2), at(10.0)) == 200
    assert enc.allowance(at(15.0), at(10.0)) == 1000      # at most one second's
    assert FrameEncoder(board_with(), span_rate=None).allowance(at(10.05), at(10.0)) is None


def test_a_busy_delta_carries_the_newest_spans_within_budget_and_counts_what_it_skipped():
    # 1,000 spans/s and 50 ms between snapshots: 50 spans in all this delta
    base = (busy_lane(13, range(0, 10), 10), busy_lane(14, range(100, 110), 10),
            busy_lane(15, range(200, 210), 10))
    board = board_with(traced_snapshot(1, base, timestamp=100.0))
    enc = FrameEncoder(board, boot_epoch=1, span_rate=1000)
    reader = StreamReader()
    reader.read(body(enc.current().full))
    # lane 13: 100 new executions (sample cap 64); lane 14: 10 new; lane 15: 60 new
    now = (busy_lane(13, range(46, 110), 110), busy_lane(14, range(100, 120), 20),
           busy_lane(15, range(206, 270), 70))
    board.publish(traced_snapshot(2, now, timestamp=100.05))
    got = {l["stream"]: l for l in reader.read(body(enc.current().delta))["traced"][0]["lanes"]}
    assert [s["seq"] for s in got[14]["spans"]] == list(range(110, 120))
    assert [s["seq"] for s in got[13]["spans"]] == list(range(90, 110))   # the newest 20
    assert [s["seq"] for s in got[15]["spans"]] == list(range(250, 270))
    assert {k: l["spans_skipped"] for k, l in got.items()} == {13: 80, 14: 0, 15: 40}
    # the counters stay the agent's, exact
    assert {k: (l["executions"], l["spans_elided"]) for k, l in got.items()} == \
        {13: (110, 46), 14: (20, 0), 15: (70, 6)}


def test_without_a_budget_every_new_span_travels():
    board = board_with(traced_snapshot(1, (busy_lane(13, range(10), 10),), timestamp=1.0))
    enc = FrameEncoder(board, boot_epoch=1, span_rate=None)
    reader = StreamReader()
    reader.read(body(enc.current().full))
    board.publish(traced_snapshot(2, (busy_lane(13, range(10, 500), 500),), timestamp=1.05))
    (l,) = reader.read(body(enc.current().delta))["traced"][0]["lanes"]
    assert len(l["spans"]) == 490 and l["spans_skipped"] == 0


# -- parts that did not change ----------------------------------------------------------------------
def test_unchanged_host_devices_and_processes_are_left_out_of_a_delta():
    board = board_with(make_snapshot(seq=1, lanes=(lane(13, [1]),)))
    enc = FrameEncoder(board, boot_epoch=1)
    reader = StreamReader()
    reader.read(body(enc.current().full))
    board.publish(make_snapshot(seq=2, lanes=(lane(13, [1, 2]),)))
    d = body(enc.current().delta)
    assert not {"host", "sources", "devices", "processes"} & set(d)
    assert reader.read(d)["devices"] == plain(board.latest())["devices"]
    hot = Device(index=0, uuid="GPU-a", name="Test GPU", temperature_c=90.0)
    board.publish(make_snapshot(seq=3, lanes=(lane(13, [1, 2, 3]),), devices=(hot,)))
    d = body(enc.current().delta)
    assert d["devices"][0]["temperature_c"] == 90.0 and "processes" not in d
    assert reader.read(d)["processes"] == plain(board.latest())["processes"]


# -- the encoding is lossless -----------------------------------------------------------------------
names = st.one_of(st.none(), st.sampled_from(["k", "gemm<float>(float*)", "", "ß∂ƒ"]), st.text(max_size=8))
dims = st.one_of(st.none(), st.tuples(*[st.integers(0, 1 << 31)] * 3),
                 st.tuples(st.integers(0, 99), st.just(1), st.just(1)))
span_fields = st.tuples(
    st.integers(0, 50), st.integers(-1_000_000, 1_000_000), st.integers(0, 10**12),
    st.sampled_from(["kernel", "memcpy", "memset", "graph"]), names, dims, dims,
    st.one_of(st.none(), st.integers(0, 1 << 50)),
    st.one_of(st.none(), st.sampled_from(TRANSFER_DIRECTIONS + ("sideways",))))


@settings(max_examples=300, deadline=None)
@given(st.lists(span_fields, max_size=30), st.booleans())
def test_span_arrays_read_back_to_exactly_the_plain_spans(rows, typical):
    spans, seq, start = [], 1000, 1_764_473_412_000_000
    for dseq, dstart, dur, kind, name, grid, block, nbytes, direction in rows:
        seq, start = seq + dseq, start + dstart
        if typical:   # the shapes collectors produce: geometry for kernels, bytes for the rest
            if kind == "kernel":
                nbytes = direction = None
            else:
                name = grid = block = None
        spans.append(Span(seq=seq, kind=kind, start_us=start, dur_ns=dur, name=name, grid=grid,
                          block=block, bytes=nbytes, direction=direction))
    table = NameTable()
    wire = json.loads(json.dumps(encode_spans(spans, table)))
    expected = json.loads(json.dumps(plain(make_snapshot(lanes=(
        Lane(0, 1, 7, "7", len(spans), 0, tuple(spans)),)))["traced"][0]["lanes"][0]["spans"]))
    assert decode_spans(wire, json.loads(json.dumps(table.entries))) == expected


def test_the_retired_roll_up_travels_whole_when_it_changes_and_is_left_out_when_not():
    from gpuflow.core.snapshot import RetiredTraced, TransferStat
    r1 = RetiredTraced(session="s1", processes=3, records=30,
                       kernels=(KernelStat("k", "_Z1kv", 9, 900, 100, 100, 9),),
                       transfers=(TransferStat("h2d", 3, 3000, 30, 3),))
    board = board_with(make_snapshot(seq=1, lanes=(lane(13, [1]),), traced_retired=(r1,)))
    enc = FrameEncoder(board, boot_epoch=1)
    reader = StreamReader()
    assert reader.read(body(enc.current().full))["traced_retired"] == plain(board.latest())["traced_retired"]
    board.publish(make_snapshot(seq=2, lanes=(lane(13, [1, 2]),), traced_retired=(r1,)))
    d = body(enc.current().delta)
    assert "traced_retired" not in d
    assert reader.read(d)["traced_retired"][0]["processes"] == 3
    r2 = RetiredTraced(session="s1", processes=4, records=40, kernels=r1.kernels, transfers=r1.transfers)
    board.publish(make_snapshot(seq=3, lanes=(lane(13, [1, 2, 3]),), traced_retired=(r2,)))
    d = body(enc.current().delta)
    assert d["traced_retired"][0]["processes"] == 4
    assert reader.read(d)["traced_retired"] == plain(board.latest())["traced_retired"]


def test_unchanged_kernels_are_left_out_of_a_delta_and_read_back():
    k1 = (KernelStat(LONG, LONG_MANGLED, 3, 300, 100, 100, 3),)
    k2 = (KernelStat(LONG, LONG_MANGLED, 4, 400, 100, 100, 4),)
    board = board_with(traced_snapshot(1, (busy_lane(13, [1], 1),), kernels=k1))
    enc = FrameEncoder(board, boot_epoch=1)
    reader = StreamReader()
    reader.read(body(enc.current().full))
    board.publish(traced_snapshot(2, (busy_lane(13, [1, 2], 2),), kernels=k1))
    d = body(enc.current().delta)
    assert "kernels" not in d["traced"][0]
    kernels = [t["kernels"] for t in plain(board.latest())["traced"]]
    assert [t["kernels"] for t in reader.read(d)["traced"]] == kernels
    board.publish(traced_snapshot(3, (busy_lane(13, [1, 2, 3], 3),), kernels=k2))
    d = body(enc.current().delta)
    assert d["traced"][0]["kernels"][0]["count"] == 4
    assert [t["kernels"] for t in reader.read(d)["traced"]] == [t["kernels"] for t in plain(board.latest())["traced"]]


def test_a_delta_leaving_out_kernels_of_a_process_it_never_had_is_refused():
    import pytest
    board = board_with(traced_snapshot(1, (busy_lane(13, [1], 1),)))
    enc = FrameEncoder(board, boot_epoch=1)
    reader = StreamReader()
    reader.read(body(enc.current().full))
    board.publish(traced_snapshot(2, (busy_lane(13, [1, 2], 2),)))
    d = body(enc.current().delta)
    d["traced"][0]["pid"] = 99
    with pytest.raises(ValueError):
        reader.read(d)


def test_lanes_with_nothing_new_are_left_out_of_a_delta_and_read_back_as_empty_lanes():
    board = board_with(traced_snapshot(1, (busy_lane(13, [1, 2], 2), busy_lane(14, [3], 1))))
    enc = FrameEncoder(board, boot_epoch=1)
    reader = StreamReader()
    reader.read(body(enc.current().full))
    board.publish(traced_snapshot(2, (busy_lane(13, [1, 2], 2), busy_lane(14, [3], 1))))
    d = body(enc.current().delta)
    assert "lanes" not in d["traced"][0]
    lanes = reader.read(d)["traced"][0]["lanes"]
    assert [(l["stream"], l["executions"], l["spans"], l["spans_skipped"]) for l in lanes] == [
        (13, 2, [], 0), (14, 1, [], 0)]
    board.publish(traced_snapshot(3, (busy_lane(13, [1, 2, 4], 3), busy_lane(14, [3], 1))))
    d = body(enc.current().delta)
    assert [len(l["spans"]) for l in d["traced"][0]["lanes"]] == [1, 0]


def test_a_delta_carries_only_the_kernels_that_changed_and_reads_back_in_order():
    def table(b_count):   # A's time overtakes B's in the third snapshot: the order changes
        return tuple(sorted((KernelStat("a", "_Z1av", 3, 300, 100, 100, 3),
                             KernelStat("b", "_Z1bv", b_count, 100 * b_count, 100, 100, b_count),
                             KernelStat("c", "_Z1cv", 1, 50, 50, 50, 1)),
                            key=kernel_order))
    board = board_with(traced_snapshot(1, (busy_lane(13, [1], 1),), kernels=table(5)))
    enc = FrameEncoder(board, boot_epoch=1)
    reader = StreamReader()
    reader.read(body(enc.current().full))
    for seq, b_count in ((2, 6), (3, 2)):
        board.publish(traced_snapshot(seq, (busy_lane(13, list(range(1, seq + 1)), seq),), kernels=table(b_count)))
        d = body(enc.current().delta)
        assert [k["count"] for k in d["traced"][0]["kernels"]] == [b_count]   # only b changed
        got = reader.read(d)["traced"][0]["kernels"]
        assert got == plain(board.latest())["traced"][0]["kernels"]
    assert [k["name"] for k in got] == ["a", "b", "c"]


def test_a_process_new_to_a_delta_travels_whole_even_with_no_kernels_and_no_lanes():
    # seen on the H200: a traced process appears (its ring found, nothing decoded yet) in a delta;
    # "no kernel changed" must not leave out the kernels the client has never had
    board = board_with(make_snapshot(seq=1))
    enc = FrameEncoder(board, boot_epoch=1)
    reader = StreamReader()
    reader.read(body(enc.current().full))
    board.publish(traced_snapshot(2, ()))
    d = body(enc.current().delta)
    assert d["traced"][0]["kernels"] == [] and d["traced"][0]["lanes"] == []
    assert reader.read(d)["traced"][0]["kernels"] == []
    board.publish(traced_snapshot(3, ()))   # now known: nothing changed, both left out
    d = body(enc.current().delta)
    assert "kernels" not in d["traced"][0] and "lanes" not in d["traced"][0]
    assert reader.read(d)["traced"][0]["lanes"] == []


def _history_snapshot(seq: int, procs: dict[int, tuple[int, int]], step: int) -> object:
    """pid -> (kernel count, lane count): a snapshot whose traced processes have those, with
    kernel counts and lane executions that grow with ``step``."""
    traced = []
    for pid, (n_kernels, n_lanes) in sorted(procs.items()):
        kernels = tuple(sorted((KernelStat(f"k{i}", f"_Z1k{i}v", step + i, 100 * (step + i), 100, 100)
                                for i in range(n_kernels)),
                               key=kernel_order))
        lanes = tuple(busy_lane(13 + j, [step], step) for j in range(n_lanes))
        traced.append(TracedProcess(pid=pid, session="s1", name="p", cupti_status="ok", records=step,
                                    kernels=kernels, lanes=lanes))
    return make_snapshot(seq=seq, traced=tuple(traced))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from([1, 2, 3]),
                                st.tuples(st.integers(0, 2), st.integers(0, 2)), max_size=3),
                min_size=2, max_size=6),
       st.lists(st.booleans(), min_size=6, max_size=6))
def test_any_history_of_processes_coming_and_going_reads_back_exactly(history, repeat):
    # processes appear, leave, come back, with or without kernels and lanes; a snapshot may repeat
    # the one before (nothing changed); every delta must read back to the plain snapshot
    seq = 0
    board = enc = reader = None
    for step, (procs, again) in enumerate(zip(history, repeat), 1):
        for _ in range(2 if again else 1):   # again: the same contents in the next snapshot
            seq += 1
            snap = _history_snapshot(seq, procs, step)
            if board is None:
                board = board_with(snap)
                enc = FrameEncoder(board, boot_epoch=1, span_rate=None)
                reader = StreamReader()
                got = reader.read(body(enc.current().full))
            else:
                board.publish(snap)
                got = reader.read(body(enc.current().delta))
            want = plain(snap)["traced"]
            assert [(t["pid"], t["kernels"]) for t in got["traced"]] == [(t["pid"], t["kernels"]) for t in want]
            assert [[(l["stream"], l["executions"]) for l in t["lanes"]] for t in got["traced"]] == \
                [[(l["stream"], l["executions"]) for l in t["lanes"]] for t in want]


def test_a_process_that_reuses_a_pid_replaces_its_namesake_instead_of_merging_into_it():
    from dataclasses import replace
    old_k = (KernelStat("old", "_Z3oldv", 50, 5000, 100, 100, 50),)
    new_k = (KernelStat("new", "_Z3newv", 2, 200, 100, 100, 2),)
    board = board_with(traced_snapshot(1, (busy_lane(13, range(40, 51), 50),), kernels=old_k))
    enc = FrameEncoder(board, boot_epoch=1, span_rate=None)
    reader = StreamReader()
    reader.read(body(enc.current().full))
    # the same pid, a new process: 2 launches, its spans' seqs start again from 1
    fresh = traced_snapshot(2, (busy_lane(13, [1, 2], 2),), kernels=new_k)
    board.publish(fresh)
    d = body(enc.current().delta)
    t = d["traced"][0]
    assert t["reset"] is True and [n[0] for n in t["names"]] == ["new", LONG]   # a fresh table
    got = reader.read(d)["traced"][0]
    assert [(k["name"], k["count"]) for k in got["kernels"]] == [("new", 2)]
    assert [s["seq"] for s in got["lanes"][0]["spans"]] == [1, 2]
    board.publish(replace(fresh, seq=3))   # and after that, ordinary deltas again
    d = body(enc.current().delta)
    assert "reset" not in d["traced"][0]
    assert [(k["name"], k["count"]) for k in reader.read(d)["traced"][0]["kernels"]] == [("new", 2)]
