"""Deterministic edge cases of the decoder's semantics, each twin: the rules docs/decoder.md states.

Aggregates (min/max/total with zero-length and untimed executions), copy-kind mapping, lanes
(cap, spans_elided, after_seq, keys), clock pairs, the header's status fields, detach.
"""

from __future__ import annotations

import pytest

from gpuflow.collectors.cupti.errors import RingDetached

from .conftest import fake_pid


def kernel_stats(decoder):
    names = {nid: text for nid, (text, _f) in decoder.names().items()}
    return {names.get(nid): rest for nid, *rest in decoder.kernels()}


def transfers(decoder):
    return {d: (count, timed, nbytes, total) for d, count, timed, nbytes, total in decoder.transfers() if count}


def test_min_max_total_with_zero_length_and_untimed_kernels(decoder_impl, rings):
    p = rings.producer()
    p.kernel(0, 1, 13, 1000, 1500, "_Z1kv")   # 500
    p.kernel(0, 1, 13, 2000, 2000, "_Z1kv")   # 0: a measured zero, timed
    p.kernel(0, 1, 13, 0, 0, "_Z1kv")         # no timing: counted, not timed
    p.kernel(0, 1, 13, 3000, 2999, "_Z1kv")   # end < start: the producer sends it untimed
    p.kernel(0, 1, 13, 5000, 5700, "_Z1kv")   # 700
    p.kernel(0, 1, 13, 0, 0, "_Z5otherv")     # only untimed launches: min/max unknown
    d = decoder_impl.cls(rings.mapping(p))
    d.drain()
    assert kernel_stats(d) == {"_Z1kv": [5, 3, 1200, 0, 700], "_Z5otherv": [1, 0, 0, None, None]}
    lane = d.lanes()[0]
    assert lane[3] == 6 and lane[4] == 3  # executions, kept spans (untimed make no span)
    assert p.incomplete == 3 == d.header()["incomplete"]
    d.detach()


@pytest.mark.parametrize(("copy_kind", "src_dev", "dst_dev", "direction"), [
    (1, 0, 0, "h2d"), (3, 0, 0, "h2d"), (2, 0, 0, "d2h"), (4, 0, 0, "d2h"), (5, 0, 0, "d2d"),
    (6, 0, 0, "d2d"), (7, 0, 0, "d2d"), (8, 0, 0, "d2d"), (9, 0, 0, "h2h"), (10, 0, 1, "p2p"),
    (10, 0, 0, "p2p"), (8, 0, 1, "p2p"), (5, 1, 0, "p2p"), (1, 0, 1, "h2d"), (2, 1, 0, "d2h"),
])
def test_copy_kinds_map_to_directions(decoder_impl, rings, copy_kind, src_dev, dst_dev, direction):
    p = rings.producer()
    p.memcpy(0, 1, 7, 100, 150, copy_kind, 4096, src_dev, dst_dev)
    p.memcpy(0, 1, 7, 0, 0, copy_kind, 10, src_dev, dst_dev)  # untimed: counted with its bytes, no time
    p.memset(0, 1, 7, 200, 230, 64)
    d = decoder_impl.cls(rings.mapping(p))
    d.drain()
    assert transfers(d) == {direction: (2, 1, 4106, 50), "memset": (1, 1, 64, 30)}
    spans = d.lanes()[0][6]
    assert [(s[1], s[7], s[8]) for s in spans] == [("memcpy", 4096, direction), ("memset", 64, "memset")]
    assert d.counters()["invalid_records"] == 0
    d.detach()


def test_lane_cap_keeps_the_most_recent_spans_and_counts_the_rest(decoder_impl, rings):
    p = rings.producer()
    for i in range(100):
        p.kernel(0, 1, 13, 1000 + 10 * i, 1005 + 10 * i if i % 10 else 0, "_Z1kv")  # every 10th untimed
    d = decoder_impl.cls(rings.mapping(p), lane_span_cap=8)
    d.drain(37)
    d.drain()
    (dev, ctx, stream, executions, kept, name_id, spans), = d.lanes()
    assert (dev, ctx, stream, executions, kept) == (0, 1, 13, 100, 8)
    assert executions - kept == 92  # spans_elided
    # the last 8 timed launches, oldest first; seq = ring position (1 name chunk, then one record each)
    timed = [i for i in range(100) if i % 10]
    assert [s[0] for s in spans] == [1 + i for i in timed[-8:]]
    assert [s[2] for s in spans] == [1000 + 10 * i for i in timed[-8:]]
    assert [s[0] for s in d.lanes(after_seq=spans[5][0])[0][6]] == [s[0] for s in spans[6:]]
    assert d.lanes(after_seq=spans[-1][0])[0][6] == []
    d.detach()


def test_cap_zero_keeps_no_spans(decoder_impl, rings):
    p = rings.producer()
    for i in range(5):
        p.kernel(0, 1, 13, 10 + i, 20 + i, "_Z1kv")
    d = decoder_impl.cls(rings.mapping(p), lane_span_cap=0)
    d.drain()
    assert d.lanes() == [(0, 1, 13, 5, 0, 0, [])]
    d.detach()


def test_lanes_are_keyed_by_device_context_and_stream(decoder_impl, rings):
    p = rings.producer()
    for key in [(1, 2, 7), (0, 1, 7), (0, 2, 7), (0, 1, 13), (0, 1, 7)]:
        p.kernel(*key, 10, 20, "_Z1kv")
    p.stream_name(0, 2, 9, "named but idle")  # a name alone makes no lane
    d = decoder_impl.cls(rings.mapping(p))
    d.drain()
    assert [(l[0], l[1], l[2], l[3]) for l in d.lanes()] == [
        (0, 1, 7, 2), (0, 1, 13, 1), (0, 2, 7, 1), (1, 2, 7, 1)]
    d.detach()


def test_stream_names_contexts_devices_and_the_latest_clock_pair(decoder_impl, rings):
    p = rings.producer()
    assert d_clock(decoder_impl, rings, p) is None  # nothing yet: no pair at all
    p.device(0, "NVIDIA H200")
    p.context(0, 1, 7)
    p.stream_name(0, 1, 13, "compute")
    p.stream_name(0, 1, 13, "compute2")  # renamed: the latest name wins
    p.kernel(0, 1, 13, 10, 20, "_Z1kv")
    p.clock_sync(1000, 5000)
    p.clock_sync(2000, 7000)
    d = decoder_impl.cls(rings.mapping(p))
    d.drain()
    names = d.names()
    lane = d.lanes()[0]
    assert names[lane[5]] == ("compute2", 0x0004)  # FLAG_NAME_STREAM
    assert d.null_streams() == {(0, 1): 7}
    assert {dev: names[nid][0] for dev, nid in d.devices().items()} == {0: "NVIDIA H200"}
    assert d.clock() == (2000, 7000)
    d.detach()


def d_clock(decoder_impl, rings, p):
    d = decoder_impl.cls(rings.mapping(p))
    try:
        return d.clock()
    finally:
        d.detach()


def test_header_pair_is_the_fallback_clock(decoder_impl, rings):
    p = rings.producer()
    p.header.clock_cupti_ns = 111
    p.header.clock_wall_ns = 999
    d = decoder_impl.cls(rings.mapping(p))
    assert d.clock() == (111, 999)
    d.detach()


def test_header_status_drops_and_exit_flag_are_reported(decoder_impl, rings):
    p = rings.producer()
    p.set_status(4, "another subscriber (nsys) holds CUPTI")
    p.add_cupti_dropped(17)
    d = decoder_impl.cls(rings.mapping(p))
    h = d.header()
    assert (h["status_name"], h["status_detail"], h["dropped_cupti"], h["producer_exited"]) == (
        "cupti_in_use", "another subscriber (nsys) holds CUPTI", 17, 0)
    p.mark_exited()
    assert d.header()["producer_exited"] == 1
    assert (d.producer_pid, d.session, d.capacity) == (p.pid, "", 1024)   # no session: nothing names a ring
    d.detach()


def test_unknown_status_is_named_not_hidden(decoder_impl, rings):
    p = rings.producer()
    p.set_status(42, "")
    d = decoder_impl.cls(rings.mapping(p))
    assert (d.header()["status_name"], d.header()["status_detail"]) == ("unknown_42", None)
    d.detach()


def test_detach_keeps_figures_and_releases_the_mapping(decoder_impl, rings):
    p = rings.producer(pid=fake_pid())
    p.kernel(0, 1, 13, 10, 20, "_Z1kv")
    mm = rings.mapping(p)
    d = decoder_impl.cls(mm)
    d.drain()
    before = (d.kernels(), d.lanes(), d.counters())
    p.mark_exited()
    d.detach()
    mm.close()  # would raise BufferError if the decoder still held the buffer
    assert (d.kernels(), d.lanes(), d.counters()) == before
    assert d.detached and d.header()["producer_exited"] == 1
    with pytest.raises(RingDetached):
        d.drain()
    d.detach()  # idempotent


def test_drain_limits(decoder_impl, rings):
    p = rings.producer()
    for i in range(10):
        p.context(0, i, 7)
    d = decoder_impl.cls(rings.mapping(p))
    assert d.drain(0) == 0 and d.drain(-3) == 0
    assert d.drain(4) == 4 and d.tail == 4 == p.tail
    assert d.drain() == 6 and d.tail == 10 == p.tail
    assert d.drain() == 0
    d.detach()


def test_negative_lane_span_cap_is_refused(decoder_impl, rings):
    p = rings.producer()
    with pytest.raises(ValueError):
        decoder_impl.cls(rings.mapping(p), lane_span_cap=-1)
