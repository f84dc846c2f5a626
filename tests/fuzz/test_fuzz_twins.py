"""The compiled and Python twins observe exactly the same on fuzzed rings: every step's result or
exception (type and message), every aggregate, lane, span, name, counter and header field.

Two sources of cases: the long-run fuzzer's generator (ringfuzz.random_case: damaged headers, torn
counters, producer-shaped streams with mistakes, mangled names, mutated valid rings, wraparound,
rings published in several steps), driven here by hypothesis for a few hundred cases; and rings
written by the real compiled producer (tests/support/ringproducer.py), copied out of its memory file
and then mutated. tests/fuzz/fuzz_decoder.py runs the first kind by the million.
"""

from __future__ import annotations

import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ringfuzz as F

pytestmark = pytest.mark.c_extension


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False))
def test_random_cases_the_twins_agree(twins, rng):
    _family, case = F.random_case(rng)
    F.compare(twins, case)


@pytest.fixture(scope="module")
def producer_rings(tmp_path_factory):
    """A few rings as the compiled producer writes them (bytes of the whole memory file)."""
    from ringproducer import RingProducer, build_producer

    lib = build_producer(tmp_path_factory.mktemp("producer"))
    out = []
    rng = random.Random(3)
    for k in range(3):
        with RingProducer(lib, 4_100_000 + k, 1024) as p:
            if k:  # the stream starts just before the wrap: consume most of the ring first
                for _ in range(1000 - 7 * k):
                    p.context(9, 9, 0)
                os.pwrite(p.fd, p.head.to_bytes(8, "little"), F.OFF["tail"])
            p.set_status(1, "ok")
            p.context(0, 1, 7)
            p.device(0, "NVIDIA H200")
            p.clock_sync(1_000, 2_000)
            p.stream_name(0, 1, 13, "compute")
            names = ["_ZN2at6native" + "x" * rng.randrange(0, 200) + f"{i}Ev" for i in range(12)]
            for i in range(150):
                r = rng.random()
                if r < 0.7:
                    p.kernel(0, 1, rng.choice((7, 13, 14)), 1000 + i * 10, 1005 + i * 10, rng.choice(names))
                elif r < 0.9:
                    p.memcpy(0, 1, 7, 1000 + i * 10, 1009 + i * 10, rng.choice((1, 2, 8, 10)), 4096, 0, rng.randrange(2))
                else:
                    p.memset(0, 1, 14, 1000 + i * 10, 1001 + i * 10, 256)
            out.append(os.pread(p.fd, os.fstat(p.fd).st_size, 0))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.integers(0, 2), seed=st.integers(0, 1 << 30), mutations=st.integers(0, 8),
       batches=st.lists(st.integers(1, 64), max_size=5), lane_cap=st.sampled_from([0, 2, 512]))
def test_mutated_producer_rings_the_twins_agree(twins, producer_rings, which, seed, mutations, batches, lane_cap):
    raw = producer_rings[which]
    head = int.from_bytes(raw[512:520], "little")
    tail = int.from_bytes(raw[576:584], "little")
    records = [raw[4096 + (s & 1023) * 64:4096 + (s & 1023) * 64 + 64] for s in range(tail, head)]
    rng = random.Random(seed)
    records = F.mutate(rng, records, mutations)[:1024]
    case = F.Case(capacity=1024, tail0=tail, records=records, lane_span_cap=lane_cap,
                  steps=[("drain", n) for n in batches] + [("drain", None)])
    a, _b = F.compare(twins, case)
    if mutations == 0:  # the producer's own ring: nothing invalid, every name complete
        out = a[-2]
        assert out["counters"]["invalid_records"] == 0 and out["counters"]["pending_names"] == 0
        assert out["counters"]["records"] == head - tail
