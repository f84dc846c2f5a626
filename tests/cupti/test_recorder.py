"""The flight recorder's columns in the decoders, against a model of every record (both twins).

The model is the list of every timed execution the test writes into a ring, with its fields as
written: no code shared with the decoders. A window is checked column by column against the
model's executions starting in it; buckets against a brute-force count and overlap per bucket;
eviction (by bytes, by time) against the records the decoder says it still holds: always the
newest, whole chunks at a time, the aggregates complete whatever left, and a window reaching back
into what left says so.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
import ringfuzz as F

from gpuflow.collectors.cupti import _retain_layout as RL

WALL = 1_764_000_000_000_000_000  # the wall clock of the ring's CLOCK_SYNC, ns
CUPTI = 5_000_000_000             # and its CUPTI side
OFFSET = WALL - CUPTI
LANES = ((0, 1, 7), (0, 1, 13), (0, 1, 14), (1, 1, 13))
NAMES = {1: b"_Z4gemmv", 2: b"_Z13attention_fwdPKfPfi", 3: b"_Z7softmaxv"}
DIRECTIONS = ("h2d", "d2h", "d2d", "p2p", "h2h", "memset")


@dataclass(frozen=True)
class Execution:
    seq: int
    lane: tuple[int, int, int]
    kind: int            # 0 kernel, 1 memcpy, 2 memset
    start: int           # CUPTI ns
    end: int
    name_id: int = -1
    grid: tuple[int, int, int] = (-1, -1, -1)
    block: tuple[int, int, int] = (-1, -1, -1)
    nbytes: int = -1
    direction: int = -1
    launch: int = -1

    @property
    def start_us(self) -> int:
        return (self.start + OFFSET) // 1000


def make_ring(n: int, seed: int = 1, *, long_every: int = 0, jump_every: int = 0, capacity: int = 1 << 16):
    """A ring of ``n`` executions (kernels, copies, memsets on LANES) after its names and clock
    pair, and the model: every timed execution as written, in seq order."""
    rng = random.Random(seed)
    records = [F.clock_sync(CUPTI, WALL), F.launch(1, static=1024), F.launch(2, dynamic=4096)]
    for nid, text in NAMES.items():
        records += F.name_chunks(nid, text)
    model = []
    t = CUPTI + 1_000_000
    for i in range(n):
        t += rng.randrange(0, 20_000)
        if jump_every and i % jump_every == jump_every - 1:
            t += 3_000_000_000          # beyond a chunk's 32-bit start delta: a new chunk
        lane = rng.choice(LANES)
        dur = rng.choice((0, 1, 700, 5_000, 40_000))
        if long_every and i % long_every == long_every - 1:
            dur = (1 << 32) + rng.randrange(1 << 20)   # longer than 32 bits of ns
        seq = len(records)
        r = rng.random()
        untimed = rng.random() < 0.03
        flags = F.FLAG_NO_TIMING if untimed else 0
        if r < 0.7:
            nid = rng.choice(list(NAMES))
            grid = (rng.choice((1, 64, 1 << 20)), rng.choice((1, 2)), 1)
            block = (rng.choice((128, 256)), 1, 1)
            launch = rng.choice((0, 1, 2))
            records.append(F.kernel(nid, *lane, t, t + dur, flags, grid, block, launch_id=launch))
            ex = Execution(seq, lane, 0, t, t + dur, nid, grid, block, launch=launch)
        elif r < 0.9:
            kind = rng.choice((1, 2, 8))
            nbytes = rng.choice((4096, 1 << 20, rng.randrange(1 << 30)))
            records.append(F.copy(kind, nbytes, *lane, start=t, end=t + dur, flags=flags))
            ex = Execution(seq, lane, 1, t, t + dur, nbytes=nbytes, direction={1: 0, 2: 1, 8: 2}[kind])
        else:
            nbytes = rng.randrange(1 << 16)
            records.append(F.memset(nbytes, dev=lane[0], ctx=lane[1], stream=lane[2], start=t, end=t + dur, flags=flags))
            ex = Execution(seq, lane, 2, t, t + dur, nbytes=nbytes, direction=5)
        if not untimed:
            model.append(ex)
    assert len(records) <= capacity
    return F.Case(capacity=capacity, records=records).build(), model


def retention_for(cls, budget: int, chunk: int = RL.MAX_CHUNK_RECORDS):
    return F.retention_class(cls)(budget, chunk)


def drained(cls, buf, retention, step: int | None = None):
    dec = cls(buf, retention=retention)
    if step is None:
        dec.drain()
    else:
        while dec.drain(step):
            pass
    return dec


def expected_lane(executions: list[Execution]) -> tuple[tuple[list[int], ...], tuple[int, ...]]:
    """The 14 columns and the lane's kernel name ids (in order of first appearance) of the model."""
    names: dict[int, int] = {}
    columns: tuple[list[int], ...] = tuple([] for _ in range(14))
    for e in executions:
        local = names.setdefault(e.name_id, len(names)) if e.kind == 0 else -1
        row = (e.seq, e.start_us, e.end - e.start, e.kind, local, *e.grid, *e.block, e.nbytes, e.direction, e.launch)
        for column, value in zip(columns, row):
            column.append(value)
    return columns, tuple(names)


def in_window(model: list[Execution], lo_us: int, hi_us: int) -> dict[tuple[int, int, int], list[Execution]]:
    per_lane: dict[tuple[int, int, int], list[Execution]] = {}
    for e in model:
        if lo_us <= e.start_us < hi_us:
            per_lane.setdefault(e.lane, []).append(e)
    return per_lane


def expected_buckets(model: list[Execution], lane, lo_us: int, hi_us: int, width: int):
    lo_ns, W = lo_us * 1000, (hi_us - lo_us) * 1000
    edges = [lo_ns + j * W // width for j in range(width + 1)]
    count, busy = [0] * width, [0] * width
    for e in model:
        if e.lane != lane:
            continue
        s, end = e.start + OFFSET, e.end + OFFSET
        for j in range(width):
            if edges[j] <= s < edges[j + 1]:
                count[j] += 1
            if s < hi_us * 1000:   # executions that started before the window count as busy too
                busy[j] += max(0, min(end, edges[j + 1]) - max(s, edges[j]))
    return count, [min(b, edges[j + 1] - edges[j]) for j, b in enumerate(busy)]


def check_window(dec, model, lo_us, hi_us, width=None):
    lanes = dec.window(lo_us, hi_us, OFFSET, width)
    expected = in_window(model, lo_us, hi_us)
    assert [lane[:4] for lane in lanes] == [(*key, len(expected[key])) for key in sorted(expected)]
    for device, context, stream, executions, columns, names, buckets in lanes:
        key = (device, context, stream)
        if width is None or executions <= width:
            assert buckets is None
            want, want_names = expected_lane(expected[key])
            assert [list(c) for c in columns] == [list(c) for c in want]
            assert names == want_names
        else:
            assert columns is None and names == ()
            count, busy = buckets
            assert (list(count), list(busy)) == expected_buckets(model, key, lo_us, hi_us, width)
            assert sum(count) == executions
    return lanes


def test_every_timed_execution_is_retained_exactly(decoder_impl):
    buf, model = make_ring(5_000, long_every=97, jump_every=1_500)
    dec = drained(decoder_impl.cls, buf, retention_for(decoder_impl.cls, 1 << 30), step=333)
    figures = dec.retained()
    assert figures["records"] == len(model) and figures["evicted_records"] == 0
    assert figures["from_ns"] == min(e.start for e in model) and figures["to_ns"] == max(e.end for e in model)
    first, last = model[0].start_us, model[-1].start_us + 1
    check_window(dec, model, first, last)                              # the whole run, exact
    check_window(dec, model, first + 20_000, first + 60_000)          # a stretch inside
    check_window(dec, model, last, last + 1_000_000)                  # after everything: empty
    assert dec.window(first - 10, first, OFFSET) == []


@pytest.mark.parametrize("width", [1, 7, 64, 1000])
def test_dense_lanes_are_reduced_to_buckets_with_exact_counts_and_busy_time(decoder_impl, width):
    buf, model = make_ring(3_000, seed=2, long_every=50)
    dec = drained(decoder_impl.cls, buf, retention_for(decoder_impl.cls, 1 << 30))
    first, last = model[0].start_us, model[-1].start_us + 1
    lanes = check_window(dec, model, first + 3_000, last - 5_000, width)
    assert any(lane[6] is not None for lane in lanes) == (width < 1000)


def test_a_window_is_answered_while_records_keep_arriving(decoder_impl):
    """What a drain has published is answered; a later drain adds to it (the chunk being written is
    read up to its published count)."""
    buf, model = make_ring(2_000, seed=3)
    dec = decoder_impl.cls(buf, retention=retention_for(decoder_impl.cls, 1 << 30, 1024))
    dec.drain(1_000)
    seen = dec.retained()["records"]
    published = [e for e in model if e.seq < dec.tail]
    assert seen == len(published)
    check_window(dec, published, model[0].start_us, model[-1].start_us + 1)
    dec.drain()
    check_window(dec, model, model[0].start_us, model[-1].start_us + 1)


def test_the_budget_evicts_the_oldest_chunks_and_windows_say_so(decoder_impl):
    buf, model = make_ring(20_000, seed=4)
    budget = 200_000
    retention = retention_for(decoder_impl.cls, budget, 1024)
    dec = drained(decoder_impl.cls, buf, retention, step=1_000)
    figures = dec.retained()
    kept = figures["records"]
    assert 0 < kept < len(model) and figures["evicted_records"] == len(model) - kept
    assert retention.figures()["used_bytes"] <= budget
    assert retention.figures()["evicted_chunks"] > 0
    # the newest records are what is left, and exactly: the model's last `kept` executions
    survivors = model[len(model) - kept:]
    assert figures["evicted_through_ns"] == max(e.start for e in model[:len(model) - kept])
    assert figures["from_ns"] == min(e.start for e in survivors)
    check_window(dec, survivors, model[0].start_us, model[-1].start_us + 1)
    check_window(dec, survivors, model[0].start_us, model[-1].start_us + 1, width=16)
    # aggregates stay complete whatever left
    assert sum(k[1] for k in dec.kernels()) == sum(1 for e in model if e.kind == 0) + untimed_kernels(buf)


def untimed_kernels(buf) -> int:
    """Kernels written without timing (counted by the aggregates, never retained)."""
    n = 0
    for off in range(F.HEADER_SIZE, len(buf), F.RECORD_SIZE):
        rtype, flags = buf[off] | buf[off + 1] << 8, buf[off + 2] | buf[off + 3] << 8
        if rtype == F.REC_KERNEL and flags & F.FLAG_NO_TIMING:
            n += 1
    return n


def test_the_budget_is_shared_by_processes_oldest_chunk_of_any_out_first(decoder_impl):
    retention = retention_for(decoder_impl.cls, 150_000, 1024)
    buf_a, model_a = make_ring(6_000, seed=5)
    buf_b, model_b = make_ring(6_000, seed=6)
    a = decoder_impl.cls(buf_a, retention=retention)
    b = decoder_impl.cls(buf_b, retention=retention)
    a.drain()           # a's chunks are all older than b's
    b.drain()
    assert a.retained()["records"] == 0 and a.retained()["evicted_records"] == len(model_a)
    assert 0 < b.retained()["records"] < len(model_b)
    assert retention.figures()["used_bytes"] <= 150_000
    b.drop_retained()   # a process forgotten hands its bytes back
    assert retention.figures()["used_bytes"] == 0 and retention.figures()["chunks"] == 0


def test_retain_s_evicts_what_ended_before_the_cutoff(decoder_impl):
    buf, model = make_ring(8_000, seed=7)
    retention = retention_for(decoder_impl.cls, 1 << 30, 1024)
    dec = drained(decoder_impl.cls, buf, retention)
    cutoff = model[len(model) // 2].end + OFFSET
    gone = retention.evict_older_than(cutoff)
    assert gone > 0
    figures = dec.retained()
    survivors = model[len(model) - figures["records"]:]
    # the oldest records went, whole chunks of them, each of whose records ended before the cutoff;
    # what stays holds every record that ended after it
    assert 0 < figures["records"] < len(model)
    assert max(e.end for e in model[:len(model) - figures["records"]]) + OFFSET < cutoff
    assert all(e in survivors for e in model if e.end + OFFSET >= cutoff)
    check_window(dec, survivors, model[0].start_us, model[-1].start_us + 1)


def agent_rss_mix(executions: int, seed: int = 8) -> list[bytes]:
    """bench/agent_rss.py's record mix, ``executions`` of them after the names: kernels (85 %) on 4
    streams over 200 names, a few hot, each launch with its own grid x; copies of 4 KiB .. 8 MiB
    (12 %); memsets (3 %)."""
    rng = random.Random(seed)
    records = [F.clock_sync(CUPTI, WALL)]
    for nid in range(1, 201):
        records += F.name_chunks(nid, b"_ZN2at6native29vectorized_elementwise_kernelILi4E" + str(nid).encode() + b"v")
    t = CUPTI
    n = len(records) + executions
    while len(records) < n:
        t += rng.randrange(1_000, 20_000)
        r = rng.random()
        if r < 0.85:
            nid = rng.randrange(1, 201) if rng.random() < 0.25 else rng.randrange(1, 13)
            records.append(F.kernel(nid, 0, 1, 13 + rng.randrange(4), t, t + 2_000 + rng.randrange(200_000), 0,
                                    (128 + rng.randrange(4096), 1, 1), (256, 1, 1)))
        elif r < 0.97:
            nbytes = 4096 << rng.randrange(12)
            records.append(F.copy(rng.choice((1, 2, 8)), nbytes, 0, 1, 7, start=t, end=t + nbytes // 20))
        else:
            records.append(F.memset(1 << 20, dev=0, ctx=1, stream=13 + rng.randrange(4), start=t, end=t + 1_500))
    return records


def feed(dec, buf, records: list[bytes], batch: int) -> None:
    """Publish ``records`` into an open decoder's ring a batch at a time, draining each and then
    compacting what the drain sealed, as the collector does after each pass."""
    for i in range(0, len(records), batch):
        head = F.U64.unpack_from(buf, F.OFF["head"])[0]
        part = records[i:i + batch]
        F._place(buf, dec.capacity, head, part)
        F.U64.pack_into(buf, F.OFF["head"], head + len(part))
        assert dec.drain() == len(part)
        dec.retention.compact()


def test_bytes_per_record_on_the_agent_rss_mix_are_within_24(decoder_impl):
    """Chunk and index overhead included: every byte the budget counts, over the records kept, once
    the chunk being written is full (it counts whole: a program running on fills it): chunks of
    1 Ki, 2 Ki, ... 32 Ki records, then five of 64 Ki."""
    n = (1 << 16) - 1024 + 5 * (1 << 16)
    buf = F.Case(capacity=1 << 16).build()
    retention = retention_for(decoder_impl.cls, 1 << 30)
    dec = decoder_impl.cls(buf, retention=retention)
    feed(dec, buf, agent_rss_mix(n), 1 << 15)
    figures = dec.retained()
    assert figures["records"] == sum(k[2] for k in dec.kernels()) + sum(t[2] for t in dec.transfers())
    assert figures["bytes"] == retention.figures()["used_bytes"]
    assert figures["bytes"] / figures["records"] <= 24, figures


def test_the_twins_retain_and_answer_alike(both_impls):
    buf, _model = make_ring(12_000, seed=9, long_every=300, jump_every=4_000)
    answers = []
    for cls in both_impls:
        retention = retention_for(cls, 120_000, 256)
        dec = drained(cls, bytearray(buf), retention, step=777)
        lo, hi = (CUPTI + OFFSET) // 1000, (CUPTI + OFFSET) // 1000 + 400_000_000
        answers.append((dec.retained(), retention.figures(), dec.window(lo, hi, OFFSET),
                        dec.window(lo, hi, OFFSET, 50)))
    assert answers[0] == answers[1]


def test_bad_window_arguments_are_refused_alike(decoder_impl):
    buf, _ = make_ring(10)
    dec = drained(decoder_impl.cls, buf, retention_for(decoder_impl.cls, 1 << 20))
    for args in ((5, 5, 0, None), (6, 5, 0, None), (0, 10, 0, 0), (0, 10, 1 << 63, None), (-1, 5, 0, None)):
        with pytest.raises(ValueError):
            dec.window(*args)
    with pytest.raises(TypeError):
        dec.window(0.5, 10, 0)
    with pytest.raises(ValueError):
        F.retention_class(decoder_impl.cls)(10)
    with pytest.raises(ValueError):
        F.retention_class(decoder_impl.cls)(1 << 20, 1000)


def test_without_retention_nothing_is_kept(decoder_impl):
    buf, _ = make_ring(100)
    dec = decoder_impl.cls(buf)
    dec.drain()
    assert dec.retained() is None and dec.retention is None
    assert dec.window(0, 10, 0) == []


@pytest.mark.c_extension
def test_the_compiled_retention_uses_the_layouts_numbers(both_impls):
    from gpuflow.collectors.cupti import _decoder_c

    constants = dict(_decoder_c.RETAIN_CONSTANTS)
    assert constants.pop("sizeof_Chunk") <= RL.CHUNK_OVERHEAD   # a chunk's header is within its fixed bytes
    assert constants == {
        "RECORD_BYTES": RL.RECORD_BYTES, "RAW_ROW_BYTES": RL.RAW_ROW_BYTES, "SHAPE_BYTES": RL.SHAPE_BYTES,
        "CHUNK_OVERHEAD": RL.CHUNK_OVERHEAD, "LONG_BYTES": RL.LONG_BYTES,
        "FIRST_CHUNK_RECORDS": RL.FIRST_CHUNK_RECORDS, "SEQ_GAP_MAX": RL.SEQ_GAP_MAX, "DUR_LONG": RL.DUR_LONG,
        "TIME_LIMIT": RL.TIME_LIMIT, "sizeof_RawRow": RL.RAW_ROW_BYTES, "sizeof_Shape": RL.SHAPE_BYTES,
        "sizeof_LongDur": RL.LONG_BYTES}
