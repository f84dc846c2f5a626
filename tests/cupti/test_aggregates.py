"""Random record streams through the compiled producer: the decoder's figures equal a reference model.

Hypothesis generates operation sequences (kernels with and without timing, copies of every kind,
memsets, stream names, contexts, clock syncs, bursts that overflow the ring, drains of random
sizes); the ring starts at a random offset so records and name chunks wrap around its end. Each
twin is checked against tests/cupti/model.py (aggregates, lanes, spans, labels, seq numbers,
drop and invalid counts), and the twins are checked against each other on identical streams.
"""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import Rings, decode_all
from .model import Model

CAPACITY = 1024
LANE_CAP = 5

KERNEL_NAMES = [b"_Z3fooPf", b"_Z13attention_fwdPKfPfi", b"k" * 47, b"k" * 48, b"k" * 49, b"x" * 150,
                b"", None, "n\u00e4me_\u00fcber".encode()]
STREAM_NAMES = [b"compute", b"prefetch", b"", b"s" * 60]

devs = st.sampled_from([0, 1])
ctxs = st.sampled_from([1, 2])
streams = st.sampled_from([0, 7, 13])
# start 0 (with end 0: untimed) one time in four
times = st.integers(0, 3).flatmap(lambda k: st.just(0) if k == 0 else st.integers(1, 10**12))
# zero-length and tiny durations matter (min/max edge cases); negative ones make untimed records
durs = st.one_of(st.just(0), st.integers(1, 3), st.integers(0, 10**6), st.integers(-5, -1))


def _kernel(dev: int, ctx: int, stream: int, start: int, dur: int, name: bytes | None,
            gx: int, bx: int) -> tuple[Any, ...]:
    end = max(0, start + dur)
    return ("kernel", dev, ctx, stream, start, end, name, (gx, 1, 1), (bx, 1, 1))


def _copy(dev: int, ctx: int, stream: int, start: int, dur: int, kind: int, nbytes: int,
          peer: int | None) -> tuple[Any, ...]:
    src, dst = (dev, dev) if peer is None else (dev, peer)
    return ("memcpy", dev, ctx, stream, start, max(0, start + dur), kind, nbytes, src, dst)


def _memset(dev: int, ctx: int, stream: int, start: int, dur: int, nbytes: int) -> tuple[Any, ...]:
    return ("memset", dev, ctx, stream, start, max(0, start + dur), nbytes)


op = st.one_of(
    st.builds(_kernel, devs, ctxs, streams, times, durs, st.sampled_from(KERNEL_NAMES),
              st.integers(1, 70000), st.integers(1, 1024)),
    st.builds(_kernel, devs, ctxs, streams, times, durs, st.sampled_from(KERNEL_NAMES[:2]),
              st.just(1), st.just(32)),
    st.builds(_copy, devs, ctxs, streams, times, durs,
              st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]), st.integers(0, 1 << 40),
              st.none() | devs),
    st.builds(_memset, devs, ctxs, streams, times, durs, st.integers(0, 1 << 30)),
    st.tuples(st.just("stream_name"), devs, ctxs, streams, st.sampled_from(STREAM_NAMES)),
    st.tuples(st.just("context"), devs, ctxs, streams),
    st.tuples(st.just("clock_sync"), st.integers(0, 10**12), st.integers(1, 2 * 10**18)),
    st.tuples(st.just("drain"), st.sampled_from([None, 1, 2, 3, 7, 50])),
    st.tuples(st.just("burst"), st.integers(200, 1300)),
)
programs = st.tuples(st.integers(0, CAPACITY - 1), st.lists(op, max_size=60))


def push(producer: Any, o: tuple[Any, ...]) -> bool:
    kind = o[0]
    if kind == "kernel":
        _, dev, ctx, stream, start, end, name, grid, block = o
        return producer.kernel(dev, ctx, stream, start, end, name, grid, block)
    if kind == "memcpy":
        _, dev, ctx, stream, start, end, copy_kind, nbytes, src, dst = o
        return producer.memcpy(dev, ctx, stream, start, end, copy_kind, nbytes, src, dst)
    if kind == "memset":
        _, dev, ctx, stream, start, end, nbytes = o
        return producer.memset(dev, ctx, stream, start, end, nbytes)
    if kind == "stream_name":
        return producer.stream_name(*o[1:])
    if kind == "context":
        return producer.context(*o[1:])
    if kind == "clock_sync":
        return producer.clock_sync(*o[1:])
    raise AssertionError(o)


def run_program(producers: list[Any], decoders: list[Any], models: list[Model], filler: int,
                ops: list[tuple[Any, ...]]) -> None:
    """Feed the same operations to every (producer, decoder, model); drains where the program says."""
    for _ in range(filler):  # start the ring at an offset: records and names wrap around its end
        for p, m in zip(producers, models):
            m.push(p.context(99, 99, 0), ("context", 99, 99, 0))
    for d in decoders:
        d.drain()
    for o in ops:
        if o[0] == "drain":
            for d in decoders:
                d.drain(o[1])
        elif o[0] == "burst":
            for i in range(o[1]):
                k = ("kernel", i % 2, 1, 13, 1000 + i, 1500 + i, b"_Z5burstv", (1, 1, 1), (32, 1, 1))
                for p, m in zip(producers, models):
                    m.push(push(p, k), k)
        else:
            for p, m in zip(producers, models):
                m.push(push(p, o), o)
    for d in decoders:
        d.drain()


def check_against_model(decoder: Any, producer: Any, model: Model) -> None:
    names = {nid: text.encode() for nid, (text, _flags) in decoder.names().items()}
    names[0] = None

    kernels = {names[nid]: (count, timed, total, mn, mx) for nid, count, timed, total, mn, mx in decoder.kernels()}
    assert kernels == model.expected_kernels()
    assert decoder.transfers() == model.expected_transfers()

    got_lanes = {}
    for dev, ctx, stream, executions, kept, name_id, spans in decoder.lanes():
        spans = [(seq, kind, s, e, names[nid] if kind == "kernel" else None, grid, block, nbytes, direction)
                 for seq, kind, s, e, nid, grid, block, nbytes, direction in spans]
        got_lanes[(dev, ctx, stream)] = (executions, kept, spans)
        assert names[name_id] == model.stream_names.get((dev, ctx, stream)), (dev, ctx, stream)
    assert got_lanes == model.expected_lanes()

    assert decoder.null_streams() == model.null_streams
    assert decoder.clock() == model.expected_clock()
    counters = decoder.counters()
    assert counters["records"] == model.head
    assert counters["invalid_records"] == model.invalid
    assert set(counters["invalid"]) <= {"bad_copy_kind"}
    header = decoder.header()
    assert header["dropped_ring"] == model.dropped == producer.dropped
    assert header["head"] == header["tail"] == decoder.tail == model.head


def _rings(producer_lib: str) -> Rings:
    return Rings(producer_lib, "h" + secrets.token_hex(6))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=programs)
def test_random_streams_match_the_model(decoder_impl, producer_lib, program):
    filler, ops = program
    rings = _rings(producer_lib)
    try:
        producer = rings.producer(capacity=CAPACITY)
        decoder = decoder_impl.cls(rings.mapping(producer), lane_span_cap=LANE_CAP)
        model = Model(cap=LANE_CAP)
        run_program([producer], [decoder], [model], filler, ops)
        check_against_model(decoder, producer, model)
        decoder.detach()
    finally:
        rings.cleanup()


@pytest.mark.c_extension
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=programs, cap=st.sampled_from([0, 1, 3, 512]))
def test_twins_agree_on_random_streams(both_impls, producer_lib, program, cap):
    compiled, python = both_impls
    filler, ops = program
    rings = _rings(producer_lib)
    try:
        producers = [rings.producer(pid=1_000_001, capacity=CAPACITY), rings.producer(pid=1_000_002, capacity=CAPACITY)]
        decoders = [compiled(rings.mapping(producers[0]), lane_span_cap=cap),
                    python(rings.mapping(producers[1]), lane_span_cap=cap)]
        run_program(producers, decoders, [Model(cap), Model(cap)], filler, ops)
        out_c, out_py = (decode_all(d) for d in decoders)
        for out in (out_c, out_py):
            out["header"].pop("producer_pid")
        assert out_c == out_py
        for after in (-1, 0, out_c["tail"] // 2, out_c["tail"]):
            assert decoders[0].lanes(after) == decoders[1].lanes(after)
        for d in decoders:
            d.detach()
    finally:
        rings.cleanup()
