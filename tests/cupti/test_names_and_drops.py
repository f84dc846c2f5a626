"""Interned names split across the ring's wraparound and across drains; exact drop counts."""

from __future__ import annotations

import pytest

LONG_KERNEL = "_Z" + "n" * 200  # 202 bytes: 5 NAME_CHUNK records
LONG_STREAM = "s" * 100          # 3 chunks


@pytest.mark.parametrize("before_wrap", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("batch", [1, 2, 3, None])
def test_names_split_across_the_wrap_and_across_drains(decoder_impl, rings, before_wrap, batch):
    p = rings.producer(capacity=1024)
    d = decoder_impl.cls(rings.mapping(p))
    for _ in range(1024 - before_wrap):
        p.context(9, 9, 0)
    d.drain()
    assert p.stream_name(0, 1, 13, LONG_STREAM)
    assert p.kernel(0, 1, 13, 10, 20, LONG_KERNEL)
    seen_partial = False
    while True:
        n = d.drain(batch)
        if n == 0:
            break
        if d.counters()["pending_names"]:  # a name half-way through: not visible, nothing uses it yet
            seen_partial = True
            assert d.kernels() == [] and len(d.names()) < 2
    assert seen_partial or batch is None
    names = d.names()
    assert sorted(t for t, _ in names.values()) == sorted([LONG_KERNEL, LONG_STREAM])
    (nid, count, *_), = d.kernels()
    assert names[nid][0] == LONG_KERNEL and count == 1
    lane = d.lanes()[0]
    assert names[lane[5]] == (LONG_STREAM, 0x0004)
    counters = d.counters()
    assert counters["invalid_records"] == 0 and counters["pending_names"] == 0
    assert d.tail == p.head == 1024 - before_wrap + 3 + 1 + 5 + 1
    d.detach()


def test_exact_drop_counts_when_the_ring_overflows(decoder_impl, rings):
    p = rings.producer(capacity=1024)
    results = [p.kernel(0, 1, 13, i + 1, i + 2, "_Z1kv") for i in range(1500)]
    assert sum(results) == 1023 and results[:1023] == [True] * 1023  # 1 name chunk + 1023 kernels
    assert p.dropped == 477
    d = decoder_impl.cls(rings.mapping(p))
    d.drain()
    assert d.kernels()[0][1] == 1023
    assert d.header()["dropped_ring"] == 477
    assert d.lanes()[0][3] == 1023
    # space again: a new name dropped with its record is sent again, chunks first, with the next use
    assert p.kernel(0, 1, 13, 5, 6, "_Z5laterv")
    d.drain()
    assert sorted(c for _, c, *_ in d.kernels()) == [1, 1023]
    assert d.counters()["invalid_records"] == 0
    d.detach()


def test_a_dropped_first_use_resends_the_name(decoder_impl, rings):
    p = rings.producer(capacity=1024)
    while p.context(9, 9, 0):
        pass
    assert p.dropped == 1
    assert not p.kernel(0, 1, 13, 1, 2, "_Z3newv")  # its chunks and record are dropped together
    d = decoder_impl.cls(rings.mapping(p))
    d.drain()
    assert p.kernel(0, 1, 13, 1, 2, "_Z3newv")
    d.drain()
    assert [(d.names()[nid][0], count) for nid, count, *_ in d.kernels()] == [("_Z3newv", 1)]
    assert d.header()["dropped_ring"] == 2 and d.counters()["invalid_records"] == 0
    d.detach()


def test_cupti_drops_and_a_frozen_ring(decoder_impl, rings):
    p = rings.producer()
    p.add_cupti_dropped(5)
    p.add_cupti_dropped(7)
    p.kernel(0, 1, 13, 1, 2, "_Z1kv")
    p.mark_exited()
    assert not p.kernel(0, 1, 13, 1, 2, "_Z1kv")  # frozen after the exit flush: nothing changes
    d = decoder_impl.cls(rings.mapping(p))
    d.drain()
    h = d.header()
    assert (h["dropped_cupti"], h["dropped_ring"], h["producer_exited"]) == (12, 0, 1)
    assert d.kernels()[0][1] == 1
    d.detach()
