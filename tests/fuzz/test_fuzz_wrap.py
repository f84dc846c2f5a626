"""Wraparound at every offset: where in the ring a stream starts, and how its drains are cut, changes
nothing but the spans' sequence numbers.

The reference is the stream decoded from position 0 in one drain. The same stream is then placed
so that it starts at each of the ring's 1024 slots (so every record, and every chunk of a
multi-chunk name, in turn straddles the end of the ring), and drained in random batches; every
figure must be the reference's with each span's ``seq`` shifted by the start position.
"""

from __future__ import annotations

from array import array

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ringfuzz as F

CAP = 1024
LONG = b"_ZN5cutlass6KernelINS_4gemm6kernel4GemmINS1_11threadblock12MmaPipelined" + b"x" * 150  # 5 chunks


def stream() -> list[bytes]:
    recs = [F.context(0, 1, 7), F.clock_sync(1_000, 5_000)]
    recs += F.name_chunks(1, LONG)
    recs += F.name_chunks(2, b"compute", 0x0004) + [F.stream_name(2, 0, 1, 13)]
    recs += F.name_chunks(3, b"NVIDIA H200") + [F.device(0, 3)]
    for i in range(6):
        recs.append(F.kernel(1, 0, 1, 13 + i % 2, 100 + 50 * i, 130 + 50 * i, grid=(i + 1, 2, 3)))
        recs.append(F.copy(1 + i % 2, 4096 * (i + 1), stream=7, start=400 + i, end=450 + i))
    recs.append(F.memset(64, stream=7, start=900, end=901))
    recs += F.name_chunks(4, b"_Z4lastv") + [F.kernel(4, start=0, end=0, flags=0x10)]
    return recs


def shifted(out: dict, by: int) -> dict:
    """``out`` with every position moved by ``by`` (spans' seq, tail, header counters)."""
    out = dict(out)
    out["lanes"] = [lane[:6] + ([(s[0] + by,) + s[1:] for s in lane[6]],) for lane in out["lanes"]]
    # the columns' seq is an int64: a position past 2^63 reads negative
    out["lane_columns"] = [[lane[:6] + ((array("q", (((v + by + (1 << 63)) % (1 << 64)) - (1 << 63) for v in lane[6][0])),
                                        *lane[6][1:]),) + lane[7:] for lane in asked]
                           for asked in out["lane_columns"]]
    out["tail"] += by
    counters = dict(out["counters"])
    if counters["first_invalid_seq"] is not None:
        counters["first_invalid_seq"] += by
    out["counters"] = counters
    header = dict(out["header"])
    header["head"] += by
    header["tail"] += by
    out["header"] = header
    return out


def decode(cls, tail0, batches):
    recs = stream()
    steps = [("drain", n) for n in batches] + [("drain", None)]
    observed = F.run_case(cls, F.Case(capacity=CAP, tail0=tail0, records=recs, steps=steps))
    out = observed[-2]
    out.pop("lanes_after")
    return out


def test_every_start_offset_gives_the_same_figures(twin):
    reference = decode(twin, 0, [])
    assert reference["counters"]["invalid_records"] == 0 and reference["counters"]["pending_names"] == 0
    assert reference["names"][1] == (LONG.decode(), 0) and len(stream()) < CAP
    rng = random.Random(5)
    for start in range(CAP):
        tail0 = 3 * CAP + start
        batches = [rng.randrange(1, 8) for _ in range(rng.randrange(0, 4))]
        assert decode(twin, tail0, batches) == shifted(reference, tail0), (start, batches)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 1 << 30), start=st.integers(0, CAP - 1), laps=st.sampled_from([0, 1, 7, 1 << 30]),
       batches=st.lists(st.integers(1, 40), max_size=6), lane_cap=st.sampled_from([0, 1, 3, 512]))
def test_random_valid_streams_across_the_wrap_match_a_straight_decode(twin, seed, start, laps, batches, lane_cap):
    recs = F.valid_stream(random.Random(seed), 200)
    tail0 = laps * CAP + start
    straight = F.run_case(twin, F.Case(capacity=CAP, records=recs, lane_span_cap=lane_cap))[-2]
    steps = [("drain", n) for n in batches] + [("drain", None)]
    wrapped = F.run_case(twin, F.Case(capacity=CAP, tail0=tail0, records=recs, lane_span_cap=lane_cap,
                                      steps=steps))[-2]
    for out in (straight, wrapped):
        out.pop("lanes_after")
    assert wrapped == shifted(straight, tail0)
