"""With retention on, a lane's newest spans come from the flight recorder's rows (the compiled
decoder writes each execution once, into its row, and its lanes read only the newest ``cap`` of
each back at the end of a drain: ``lanes_sync``); what the lanes show must be what a decoder
without retention shows, whatever the drain's passes, the chunks' size, the lanes' cap, eviction,
or a record the recorder cannot place in time.

Both twins are checked against a decoder of the same twin without retention (the Python twin keeps
every span as it drains, retention or not; the fuzz compares the twins with retention too).
"""

from __future__ import annotations

import random

import pytest
import ringfuzz as F

from gpuflow.collectors.cupti import _retain_layout as RL

WALL = 1_764_000_000_000_000_000  # the wall clock of the ring's CLOCK_SYNC, ns
CUPTI = 5_000_000_000             # and its CUPTI side
OFFSET = WALL - CUPTI
LANES = ((0, 1, 7), (0, 1, 13), (0, 1, 14), (1, 1, 13))
NAMES = {1: b"_Z4gemmv", 2: b"_Z13attention_fwdPKfPfi", 3: b"_Z7softmaxv"}


def make_ring(n: int, seed: int, *, jump_every: int = 0) -> bytearray:
    """``n`` kernels, copies and memsets on LANES after their names and a clock pair, a few
    untimed; every ``jump_every``-th one seconds after the one before (a new chunk)."""
    rng = random.Random(seed)
    records = [F.clock_sync(CUPTI, WALL)]
    for nid, text in NAMES.items():
        records += F.name_chunks(nid, text)
    t = CUPTI + 1_000_000
    for i in range(n):
        t += rng.randrange(0, 20_000) + (3_000_000_000 if jump_every and i % jump_every == jump_every - 1 else 0)
        dev, ctx, stream = rng.choice(LANES)
        dur = rng.choice((0, 1, 700, 5_000, 40_000))
        flags = F.FLAG_NO_TIMING if rng.random() < 0.03 else 0
        r = rng.random()
        if r < 0.7:
            records.append(F.kernel(rng.choice(list(NAMES)), dev, ctx, stream, t, t + dur, flags,
                                    (rng.choice((1, 64, 1 << 20)), rng.choice((1, 2)), 1), (rng.choice((128, 256)), 1, 1)))
        elif r < 0.9:
            records.append(F.copy(rng.choice((1, 2, 8)), rng.randrange(1 << 30), dev, ctx, stream, start=t,
                                  end=t + dur, flags=flags))
        else:
            records.append(F.memset(rng.randrange(1 << 16), dev=dev, ctx=ctx, stream=stream, start=t, end=t + dur,
                                    flags=flags))
    return F.Case(capacity=1 << max(10, (len(records) - 1).bit_length()), records=records).build()


def shown(dec) -> tuple:
    """What the lanes show: every span, the newest few, those after a seq, and the columns."""
    tail = dec.tail
    return (dec.lanes(), dec.lanes(newest=5), dec.lanes(after_seq=max(0, tail - 40)),
            dec.lane_columns(OFFSET, None), dec.lane_columns(OFFSET, 7))


def side_by_side(cls, buf, *, budget: int, chunk: int, cap: int, passes: list[int]) -> None:
    """A retaining decoder and a plain one drain copies of ``buf`` in the same passes; after each,
    their lanes show the same."""
    plain = cls(bytearray(buf), lane_span_cap=cap)
    retaining = cls(bytearray(buf), lane_span_cap=cap, retention=F.retention_class(cls)(budget, chunk))
    i = 0
    while True:
        n = passes[i % len(passes)]
        i += 1
        got = plain.drain(n)
        assert retaining.drain(n) == got
        if i % 3 == 0:
            retaining.retention.compact()
        assert shown(retaining) == shown(plain), f"after pass {i}"
        if not got:
            break
    assert retaining.retained()["records"] > 0


@pytest.mark.parametrize("cap", [1, 3, 512])
@pytest.mark.parametrize("chunk", [16, 1024, RL.MAX_CHUNK_RECORDS])
def test_a_retaining_decoder_shows_the_lanes_of_one_that_does_not(decoder_impl, cap, chunk):
    buf = make_ring(6_000, seed=cap * 7 + chunk, jump_every=1_500)
    side_by_side(decoder_impl.cls, buf, budget=1 << 30, chunk=chunk, cap=cap, passes=[1, 7, 500, 2_000, None])


def test_while_the_budget_evicts_every_few_chunks(decoder_impl):
    buf = make_ring(8_000, seed=11)
    side_by_side(decoder_impl.cls, buf, budget=30_000, chunk=16, cap=16, passes=[3, 900, None])


def test_a_sparse_lane_keeps_its_spans_among_a_busy_one(decoder_impl):
    """One lane runs a kernel in a thousand: its few spans are far back in the pass's rows."""
    records = [F.clock_sync(CUPTI, WALL), *F.name_chunks(1, NAMES[1])]
    t = CUPTI + 1_000
    for i in range(20_000):
        t += 500
        lane = LANES[1] if i % 1_000 == 3 else LANES[0]
        records.append(F.kernel(1, *lane, t, t + 300, 0, (i % 97 + 1, 1, 1), (128, 1, 1)))
    buf = F.Case(capacity=1 << 15, records=records).build()
    side_by_side(decoder_impl.cls, buf, budget=1 << 30, chunk=1024, cap=8, passes=[None])
    side_by_side(decoder_impl.cls, buf, budget=1 << 30, chunk=RL.MAX_CHUNK_RECORDS, cap=512,
                 passes=[4_096, 5_000])


def test_a_record_the_recorder_cannot_place_stays_on_its_lane_in_order(decoder_impl):
    """An execution ending beyond the recorder's time limit is not retained; it is kept on its lane
    as without retention, after the rows drained before it and before those after it."""
    rng = random.Random(5)
    records = [F.clock_sync(CUPTI, WALL), *F.name_chunks(1, NAMES[1])]
    t = CUPTI
    for i in range(300):
        t += rng.randrange(100, 5_000)
        lane = rng.choice(LANES[:2])
        end = RL.TIME_LIMIT + 10 if i % 37 == 5 else t + 200
        records.append(F.kernel(1, *lane, t, end, 0, (1, 1, 1), (32, 1, 1)))
    buf = F.Case(capacity=1 << 10, records=records).build()
    side_by_side(decoder_impl.cls, buf, budget=1 << 30, chunk=16, cap=4, passes=[13, None])
    dec = decoder_impl.cls(bytearray(buf), lane_span_cap=512, retention=F.retention_class(decoder_impl.cls)(1 << 30))
    dec.drain()
    assert dec.retained()["unplaced"] == len(range(5, 300, 37))
    assert sum(len(lane[6]) for lane in dec.lanes()) == 300


def test_a_lane_cap_of_zero_keeps_no_span(decoder_impl):
    buf = make_ring(500, seed=3)
    side_by_side(decoder_impl.cls, buf, budget=1 << 30, chunk=16, cap=0, passes=[50, None])


def test_many_records_the_recorder_cannot_place_before_any_it_can(decoder_impl):
    """Thousands of unplaceable executions on one lane before the first chunk exists, then more
    between placeable ones: each is kept on its lane, and the decoder's bookkeeping of the lanes
    waiting for their rows stays one entry a lane (it once grew by one per such record)."""
    records = [F.clock_sync(CUPTI, WALL), *F.name_chunks(1, NAMES[1])]
    t = CUPTI
    for i in range(6_000):
        t += 100
        end = RL.TIME_LIMIT + 1 if i < 4_000 or i % 3 == 0 else t + 50
        records.append(F.kernel(1, *LANES[i % 2], t, end, 0, (1, 1, 1), (32, 1, 1)))
    buf = F.Case(capacity=1 << 13, records=records).build()
    side_by_side(decoder_impl.cls, buf, budget=1 << 30, chunk=16, cap=5_000, passes=[None])
    side_by_side(decoder_impl.cls, buf, budget=1 << 30, chunk=1024, cap=0, passes=[1_000])
