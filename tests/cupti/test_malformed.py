"""Malformed rings: header problems raise RingFormatError (or RingNotReady) with a clear message;
bad records are counted by reason, never crash a twin, and never disturb the valid records' figures.
A fuzz test pushes arbitrary 64-byte records and requires both twins to agree on everything.
"""

from __future__ import annotations

import secrets
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ringproducer import pack_record

from gpuflow.collectors.cupti.errors import RingFormatError, RingNotReady

from .conftest import Rings, decode_all

KERNEL_PAYLOAD = struct.Struct("<IIIHHHHHHII")
COPY_PAYLOAD = struct.Struct("<IBBBxQIIII")
NAME = struct.Struct("<HHIII48s")


def kernel_rec(name_id, start=10, end=20, dev=0, ctx=1, stream=13, rtype=1, flags=0):
    return pack_record(rtype, flags, dev, start, end, ctx, stream,
                       KERNEL_PAYLOAD.pack(1, name_id, 1, 1, 1, 32, 1, 1, 0, 0, 0))


def copy_rec(kind, src=0, dst=0, nbytes=100, start=10, end=20, rtype=2):
    return pack_record(rtype, 0, 0, start, end, 1, 7, COPY_PAYLOAD.pack(1, kind, src, dst, nbytes, 0, 0, 0, 0))


def chunk(name_id, offset, total, text=b"", flags=1):
    return NAME.pack(4, flags, name_id, offset, total, text)


# -- header problems ---------------------------------------------------------------------------
@pytest.mark.parametrize(("field", "value", "message"), [
    ("magic", 0x1234, "bad magic"),
    ("version", 1, "unsupported ring version 1"),
    # version 2 (before launch configurations): a library from another GPUFlow, said so
    ("version", 2, r"unsupported ring version 2 \(this decoder reads version 3: the traced program loaded "
                   r"another GPUFlow's injection library\)"),
    ("header_size", 2048, "header_size is 2048"),
    ("record_size", 128, "record_size is 128"),
    ("capacity", 1000, "capacity 1000 is not a power of two"),
    ("capacity", 512, "capacity 512 is not a power of two in"),
    ("capacity", 1 << 27, "is not a power of two in"),
    ("capacity", 2048, "too small for 2048 records"),
])
def test_bad_header_fields_raise_a_clear_error(decoder_impl, rings, field, value, message):
    p = rings.producer()
    p.corrupt_header(**{field: value})
    with pytest.raises(RingFormatError, match=message):
        decoder_impl.cls(rings.mapping(p))


def test_a_ring_still_being_created_is_not_ready(decoder_impl, rings):
    p = rings.producer()
    p.corrupt_header(magic=0)
    with pytest.raises(RingNotReady, match="magic is 0"):
        decoder_impl.cls(rings.mapping(p))
    with pytest.raises(RingNotReady):
        decoder_impl.cls(bytearray())


def test_short_and_read_only_buffers(decoder_impl, rings):
    p = rings.producer()
    mm = rings.mapping(p)
    with pytest.raises(RingFormatError, match="smaller than its 4096-byte header"):
        decoder_impl.cls(bytearray(mm[:2000]))
    with pytest.raises(RingFormatError, match="too small for 1024 records"):
        decoder_impl.cls(bytearray(mm[:10000]))
    with pytest.raises(TypeError, match="writable"):
        decoder_impl.cls(bytes(mm))


def test_torn_counters_at_open(decoder_impl, rings):
    p = rings.producer()
    p.set_head(1025)
    with pytest.raises(RingFormatError, match="exceeds capacity"):
        decoder_impl.cls(rings.mapping(p))


def test_torn_counters_mid_session_raise_and_keep_the_figures(decoder_impl, rings):
    p = rings.producer()
    for _ in range(10):
        p.kernel(0, 1, 13, 10, 20, "_Z1kv")
    d = decoder_impl.cls(rings.mapping(p))
    assert d.drain() == 11
    p.set_head(5)
    with pytest.raises(RingFormatError, match="head 5 is behind tail 11"):
        d.drain()
    p.set_head(11 + 1025)
    with pytest.raises(RingFormatError, match="exceeds capacity"):
        d.drain()
    assert d.kernels()[0][1] == 10 and d.tail == 11
    d.detach()


def test_header_rewritten_under_the_decoder(decoder_impl, rings):
    p = rings.producer()
    d = decoder_impl.cls(rings.mapping(p))
    p.corrupt_header(version=4)
    with pytest.raises(RingFormatError, match="changed under the decoder"):
        d.drain()
    d.detach()


# -- bad records -------------------------------------------------------------------------------
DEFINED = 1  # the name id "_Z1kv" gets from the first valid kernel push below

RECORD_CASES = {
    "zeroed slot": ([bytes(64)], {"bad_type": 1}),
    "unknown type": ([pack_record(99), pack_record(10)], {"bad_type": 2}),
    "launch id 0": ([pack_record(9)], {"bad_launch": 1}),
    "end before start": ([kernel_rec(DEFINED, start=50, end=40), copy_rec(1, start=9, end=8),
                          copy_rec(0, nbytes=5, start=9, end=8, rtype=3)], {"end_before_start": 3}),
    "undefined kernel name": ([kernel_rec(777), kernel_rec(1 << 31)], {"undefined_name": 2}),
    "undefined stream / device name": ([kernel_rec(55, rtype=5), kernel_rec(56, rtype=8)],
                                       {"undefined_name": 2}),
    "chunk id 0 or too large": ([chunk(0, 0, 3, b"abc"), chunk(1 << 24, 0, 3, b"abc")],
                                {"bad_name_chunk": 2}),
    "chunk longer than NAME_MAX": ([chunk(40, 0, 5000, b"x" * 48)], {"bad_name_chunk": 1}),
    "chunk offset without a start": ([chunk(41, 48, 100, b"x" * 48)], {"bad_name_chunk": 1}),
    "chunk offset beyond total_len": ([chunk(42, 10, 5, b"x")], {"bad_name_chunk": 1}),
    "chunks out of order, then used": ([chunk(43, 0, 100, b"a" * 48, flags=0), chunk(43, 96, 100, b"zzzz"),
                                        kernel_rec(43)], {"bad_name_chunk": 1, "undefined_name": 1}),
    "chunk total_len changes": ([chunk(44, 0, 100, b"a" * 48, flags=0), chunk(44, 48, 120, b"b" * 48)],
                                {"bad_name_chunk": 1}),
    "final chunk with text missing": ([chunk(45, 0, 100, b"a" * 48, flags=0), chunk(45, 48, 100, b"b" * 48)],
                                      {"incomplete_name": 1}),
    "name redefined differently": ([chunk(46, 0, 3, b"abc"), chunk(46, 0, 3, b"abd"), chunk(46, 0, 3, b"abc")],
                                   {"name_conflict": 1}),
    "copy kinds": ([copy_rec(11), copy_rec(0), copy_rec(0, src=5, dst=3), copy_rec(255)], {"bad_copy_kind": 4}),
}


@pytest.mark.parametrize("case", list(RECORD_CASES))
def test_bad_records_are_counted_and_the_rest_stays_exact(decoder_impl, rings, case):
    raw, expected = RECORD_CASES[case]
    p = rings.producer()
    assert p.kernel(0, 1, 13, 100, 130, "_Z1kv")  # defines name id 1 (DEFINED) at seq 0, kernel at 1
    for rec in raw:
        assert p.push_raw(rec)
    assert p.kernel(0, 1, 13, 200, 210, "_Z1kv")
    d = decoder_impl.cls(rings.mapping(p))
    d.drain()
    counters = d.counters()
    assert counters["invalid"] == expected
    assert counters["invalid_records"] == sum(expected.values())
    assert counters["first_invalid_seq"] is not None and counters["first_invalid_seq"] >= 2
    assert counters["records"] == 3 + len(raw)
    names = d.names()
    assert [(names[nid][0], *rest) for nid, *rest in d.kernels()] == [("_Z1kv", 2, 2, 40, 10, 30)]
    d.detach()


def test_first_invalid_seq_is_the_ring_position(decoder_impl, rings):
    p = rings.producer()
    for _ in range(5):
        p.context(0, 1, 7)
    p.push_raw(bytes(64))
    d = decoder_impl.cls(rings.mapping(p))
    d.drain()
    assert d.counters()["first_invalid_seq"] == 5
    d.detach()


def test_redefinition_with_the_same_text_is_fine(decoder_impl, rings):
    p = rings.producer()
    for rec in (chunk(9, 0, 3, b"abc", flags=1 | 4), chunk(9, 0, 3, b"abc", flags=1 | 4), kernel_rec(9, rtype=5)):
        p.push_raw(rec)
    p.kernel(0, 1, 13, 1, 2, "_Z1kv")
    d = decoder_impl.cls(rings.mapping(p))
    d.drain()
    assert d.counters()["invalid_records"] == 0
    assert d.names()[9] == ("abc", 4)
    assert d.lanes()[0][5] == 9
    d.detach()


def test_unknown_copy_kind_is_classified_by_memory_kinds(decoder_impl, rings):
    p = rings.producer()
    for src, dst in ((2, 3), (1, 4), (3, 2), (6, 3), (1, 2)):  # pinned/pageable host, device/array/static
        p.push_raw(copy_rec(0, src=src, dst=dst))
    d = decoder_impl.cls(rings.mapping(p))
    d.drain()
    assert {t[0]: t[1] for t in d.transfers() if t[1]} == {"h2d": 2, "d2h": 1, "d2d": 1, "h2h": 1}
    assert d.counters()["invalid_records"] == 0
    d.detach()


def test_torn_records_past_a_published_head(decoder_impl, rings):
    p = rings.producer()
    p.kernel(0, 1, 13, 10, 20, "_Z1kv")
    p.set_head(p.head + 10)  # ten slots never written (zeros) published
    d = decoder_impl.cls(rings.mapping(p))
    assert d.drain() == 12
    assert d.counters()["invalid"] == {"bad_type": 10}
    d.detach()


def test_names_longer_than_name_max_arrive_truncated(decoder_impl, rings):
    p = rings.producer()
    p.kernel(0, 1, 13, 10, 20, "_Z" + "k" * 5000)
    d = decoder_impl.cls(rings.mapping(p), max_name_bytes=4096)  # the producer's cut, not the decoder's cap
    d.drain()
    (text, flags), = d.names().values()
    assert len(text) == 4096 and flags == 0x0002 and d.counters()["invalid_records"] == 0
    d.detach()


# -- fuzz: arbitrary records, both twins -------------------------------------------------------
u64s = st.sampled_from([0, 1, 10, 20, 1 << 40, (1 << 63) - 1, (1 << 64) - 1]) | st.integers(0, (1 << 64) - 1)
small = st.integers(0, 5)


def _structured(rtype, flags, dev, start, end, ctx, stream, name_id, rest):
    payload = struct.pack("<II", rest & 0xFFFFFFFF, name_id) + rest.to_bytes(32, "little")[:24]
    return pack_record(rtype, flags, dev, start, end, ctx, stream, payload)


def _copyish(rtype, flags, dev, start, end, kind, src, dst, nbytes):
    return pack_record(rtype, flags, dev, start, end, 1, 7, COPY_PAYLOAD.pack(0, kind, src, dst, nbytes, 0, 0, 0, 0))


def _chunkish(flags, name_id, offset, total, text):
    return NAME.pack(4, flags, name_id, offset, total, text)


records = st.one_of(
    st.binary(min_size=64, max_size=64),
    st.builds(_structured, st.integers(0, 10), st.integers(0, 0xFFFF), small, u64s, u64s, small, small,
              small, st.integers(0, (1 << 256) - 1)),
    st.builds(_copyish, st.sampled_from([2, 3]), st.integers(0, 0xFFFF), small, u64s, u64s,
              st.integers(0, 255), st.integers(0, 8), st.integers(0, 8), u64s),
    st.builds(_chunkish, st.integers(0, 7), small, st.sampled_from([0, 48, 96, 4096, 1 << 31]),
              st.sampled_from([0, 3, 48, 60, 100, 4096, 4097, 1 << 32 - 1]), st.binary(min_size=48, max_size=48)),
)


@pytest.mark.c_extension
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(records, max_size=80), drains=st.lists(st.integers(1, 40), max_size=5),
       cap=st.sampled_from([0, 2, 512]))
def test_fuzzed_records_never_crash_and_the_twins_agree(both_impls, producer_lib, batch, drains, cap):
    compiled, python = both_impls
    rings = Rings(producer_lib, "f" + secrets.token_hex(6))
    try:
        producers = [rings.producer(pid=1_000_001), rings.producer(pid=1_000_002)]
        for p in producers:
            for rec in batch:
                assert p.push_raw(rec)
        decoders = [compiled(rings.mapping(producers[0]), lane_span_cap=cap),
                    python(rings.mapping(producers[1]), lane_span_cap=cap)]
        for n in drains:
            assert decoders[0].drain(n) == decoders[1].drain(n)
        for d in decoders:
            d.drain()
        out_c, out_py = (decode_all(d) for d in decoders)
        for out in (out_c, out_py):
            out["header"].pop("producer_pid")
        assert out_c == out_py
        assert out_c["counters"]["records"] == len(batch)
        for d in decoders:
            d.detach()
    finally:
        rings.cleanup()
