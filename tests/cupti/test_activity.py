"""Devices, launch configurations and GPU busy time as the decoders keep them (docs/decoder.md,
"Devices, configurations and busy time"), in both twins: the DEVICE record's facts, each kernel
name's configurations, each device's busy intervals (union, settling, late kernels, the bound on
what is kept) and timed copies by host memory; rings written by the compiled producer where the
producer writes the record, by hand where the test plays a hostile one.
"""

from __future__ import annotations

import random

import pytest

from gpuflow.collectors.cupti import _activity_layout as A
from gpuflow.collectors.cupti import _layout as L

import ringfuzz as F

UUID = bytes(range(0x10, 0x20))
UUID_TEXT = "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f"


def union(intervals: list[tuple[int, int]]) -> int:
    """The oracle: the length of the union of [start, end) intervals."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_s if cur_e is not None else 0)


def publish(buf: bytearray, head: int, records: list[bytes]) -> None:
    """The producer writes ``records`` after the ``head`` ones (a ring of 1,024) and publishes them."""
    for i, rec in enumerate(records):
        off = L.HEADER_SIZE + (head + i) * L.RECORD_SIZE
        buf[off:off + L.RECORD_SIZE] = rec
    L.U64.pack_into(buf, L.OFF_HEAD, head + len(records))


def drained(cls: type, records: list[bytes], **caps: int):
    cap = 1 << max(10, (len(records) - 1).bit_length())
    dec = cls(F.Case(capacity=cap, records=records).build(), **caps)
    assert dec.drain() == len(records)
    return dec


# -- the DEVICE record's facts ----------------------------------------------------------------
def test_the_producer_writes_a_devices_facts_and_both_twins_read_them(decoder_impl, rings):
    p = rings.producer()
    assert p.device(0, "NVIDIA H200", uuid=UUID, sm_count=132, compute_capability=(9, 0))
    assert p.device(1, "Older GPU")      # a DEVICE record as producers before the facts wrote it
    d = decoder_impl.cls(rings.mapping(p))
    d.drain()
    facts = d.device_facts()
    names = {nid: text for nid, (text, _f) in d.names().items()}
    assert names[facts[0].name_id] == "NVIDIA H200" and names[facts[1].name_id] == "Older GPU"
    assert facts[0][1:] == (UUID_TEXT, 132, (9, 0))
    assert facts[1][1:] == (None, None, None)
    assert d.devices() == {0: facts[0].name_id, 1: facts[1].name_id}


@pytest.mark.parametrize("sm_count, cc, expected", [
    (0, (9, 0), (None, (9, 0))),                  # 0: unknown
    (A.MAX_SM_COUNT, (12, 1), (A.MAX_SM_COUNT, (12, 1))),
    (A.MAX_SM_COUNT + 1, (9, 0), (None, (9, 0))),  # more SMs than any device: unknown
    ((1 << 32) - 1, (0, 5), (None, None)),         # major 0: unknown
    (132, (100, 0), (132, None)),                  # no such compute capability
    (132, (9, 100), (132, None)),
    (132, (65535, 65535), (132, None)),
])
def test_a_device_record_says_nothing_no_device_has(decoder_impl, sm_count, cc, expected):
    recs = F.name_chunks(1, b"gpu") + [F.device(3, 1, UUID, sm_count, cc)]
    facts = drained(decoder_impl.cls, recs).device_facts()[3]
    assert (facts.sm_count, facts.compute_capability) == expected and facts.uuid == UUID_TEXT


def test_a_device_record_of_an_undefined_name_is_invalid_and_keeps_nothing(decoder_impl):
    d = drained(decoder_impl.cls, [F.device(0, 7, UUID, 132, (9, 0))])
    assert d.device_facts() == {} and d.counters()["invalid"] == {"undefined_name": 1}


def test_device_facts_beyond_the_device_table_are_refused(decoder_impl):
    recs = F.name_chunks(1, b"gpu") + [F.device(dev, 1, UUID, 132, (9, 0)) for dev in range(5)]
    d = drained(decoder_impl.cls, recs, max_lanes=3)
    assert sorted(d.device_facts()) == [0, 1, 2] and d.counters()["invalid"] == {"table_full": 2}


# -- launch configurations --------------------------------------------------------------------
def test_a_names_configurations_count_every_launch(decoder_impl):
    recs = F.name_chunks(1, b"_Z1kv") + [F.launch(1, static=1024), F.launch(2, dynamic=4096)]
    recs += [F.kernel(1, block=(256, 1, 1), launch_id=1, grid=(10, 1, 1), start=0, end=5)] * 3
    recs += [F.kernel(1, block=(256, 1, 1), launch_id=1, grid=(40, 2, 1), start=0, end=7)]
    recs += [F.kernel(1, block=(128, 1, 1), launch_id=2, grid=(8, 1, 1), flags=L.FLAG_NO_TIMING, start=0, end=0)]
    recs += [F.kernel(1, block=(128, 1, 1), launch_id=2, grid=(8, 1, 1), registers=40, dev=1)]
    d = drained(decoder_impl.cls, recs)
    stamp, entries = d.kernel_configs()
    assert stamp > 0 and [e[0] for e in entries] == [1]
    _nid, configs, more = entries[0]
    assert configs == (A.KernelConfig(0, (256, 1, 1), 32, 1, 4, 4, 22, 10, 80),
                       A.KernelConfig(0, (128, 1, 1), 32, 2, 1, 0, 0, 8, 8),
                       A.KernelConfig(1, (128, 1, 1), 40, 2, 1, 1, 10, 8, 8))
    assert more == (0, 0, 0)
    assert d.launch_config(1) == (1024, 0, 0, 0, 0, None, 0, (0, 0, 0)) and d.launch_config(3) is None
    assert sum(c.count for c in configs) == d.kernels()[0][1]


def test_configurations_beyond_four_count_together_exactly(decoder_impl):
    recs = F.name_chunks(1, b"_Z1kv")
    recs += [F.kernel(1, block=(32 * (i % 7 + 1), 1, 1), start=100 * i, end=100 * i + i) for i in range(70)]
    d = drained(decoder_impl.cls, recs)
    _nid, configs, more = d.kernel_configs()[1][0]
    assert [c.block[0] for c in configs] == [32, 64, 96, 128]
    assert sum(c.count for c in configs) + more[0] == 70
    assert sum(c.total_ns for c in configs) + more[2] == sum(range(70))


def test_kernel_configs_since_a_stamp_gives_only_what_changed(decoder_impl):
    recs = F.name_chunks(1, b"_Z1av") + F.name_chunks(2, b"_Z1bv")
    recs += [F.kernel(1, grid=(4, 1, 1)), F.kernel(2, grid=(4, 1, 1))]
    buf = F.Case(capacity=1024, records=recs).build()
    d = decoder_impl.cls(buf)
    d.drain()
    stamp, entries = d.kernel_configs()
    assert [e[0] for e in entries] == [1, 2]
    assert d.kernel_configs(stamp) == (stamp, [])
    more = [F.kernel(1, grid=(4, 1, 1)), F.kernel(2, grid=(9, 1, 1))]   # only b's grid is new
    publish(buf, len(recs), more)
    d.drain()
    stamp2, entries = d.kernel_configs(stamp)
    assert stamp2 > stamp and [(e[0], e[1][0].grid_max) for e in entries] == [(2, 9)]
    with pytest.raises(ValueError):
        d.kernel_configs(-1)


# -- busy time ------------------------------------------------------------------------------------
def random_kernels(rng: random.Random, n: int, devices: int = 2, spread: int = 10_000_000) -> list[bytes]:
    out = []
    for _ in range(n):
        s = rng.randrange(spread)
        out.append(F.kernel(1, dev=rng.randrange(devices), start=s, end=s + rng.choice((0, rng.randrange(50_000)))))
    return out


def intervals(records: list[bytes], dev: int) -> list[tuple[int, int]]:
    out = []
    for r in records:
        rtype, flags, d, s, e = F.COMMON.unpack_from(r)[:5]
        if rtype == F.REC_KERNEL and d == dev and not flags & F.FLAG_NO_TIMING:
            out.append((s, e))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_busy_time_is_the_union_of_the_kernels_intervals(decoder_impl, seed):
    rng = random.Random(seed)
    kernels = random_kernels(rng, 3_000)
    d = drained(decoder_impl.cls, F.name_chunks(1, b"_Z1kv") + kernels)
    for dev in (0, 1):
        iv = intervals(kernels, dev)
        act = {a.device: a for a in d.activity()["devices"]}[dev]
        assert (act.first_start_ns, act.last_end_ns) == (min(s for s, _ in iv), max(e for _, e in iv))
    d.settle(10_000_000 + 60_000)
    for a in d.activity()["devices"]:
        assert a.busy_ns == union(intervals(kernels, a.device)) and a.late == 0


def test_settling_splits_an_interval_and_a_later_kernel_before_it_is_late(decoder_impl):
    recs = F.name_chunks(1, b"_Z1kv") + [F.kernel(1, start=100, end=300), F.kernel(1, start=500, end=900)]
    buf = F.Case(capacity=1024, records=recs).build()
    d = decoder_impl.cls(buf)
    d.drain()
    d.settle(600)
    act = d.activity()["devices"][0]
    assert (act.settled_to_ns, act.busy_ns, act.late) == (600, 200 + 100, 0)
    late = [F.kernel(1, start=250, end=700), F.kernel(1, start=50, end=80), F.kernel(1, start=950, end=1000)]
    publish(buf, len(recs), late)
    d.drain()
    d.settle(2_000)
    act = d.activity()["devices"][0]
    # after 600: [600, 900) and [950, 1000); before it, the late kernels' time is reported, not added
    assert (act.busy_ns, act.late, act.late_ns) == (300 + 300 + 50, 2, (600 - 250) + 30)
    assert (act.first_start_ns, act.last_end_ns) == (50, 1000)
    d.settle(1_000)   # never backwards
    assert d.activity()["devices"][0].settled_to_ns == 2_000


def test_busy_intervals_kept_are_bounded_and_the_older_half_settles(decoder_impl):
    """Kernels with gaps between them, in start order: each its own interval until, past
    BUSY_INTERVALS_MAX, the older half is settled; a hostile ring's kernels out of order can
    then only be late, never make the decoder hold more."""
    n = A.BUSY_INTERVALS_MAX + 1
    recs = F.name_chunks(1, b"_Z1kv") + [F.kernel(1, start=10 * i, end=10 * i + 5) for i in range(n)]
    d = drained(decoder_impl.cls, recs)
    act = d.activity()["devices"][0]
    half = A.BUSY_INTERVALS_MAX // 2
    assert (act.settled_to_ns, act.busy_ns) == (10 * (half - 1) + 5, 5 * half)
    rng = random.Random(7)
    hostile = F.name_chunks(1, b"_Z1kv") + [F.kernel(1, start=s, end=s + 3)
                                              for s in (rng.randrange(1 << 40) for _ in range(20_000))]
    d = drained(decoder_impl.cls, hostile)
    act = d.activity()["devices"][0]
    d.settle(1 << 41)
    after = d.activity()["devices"][0]
    truth = union(intervals(hostile, 0))
    assert after.busy_ns <= truth <= after.busy_ns + after.late_ns and act.late == after.late > 0


def test_devices_beyond_the_table_are_counted_in_overflow(decoder_impl):
    recs = F.name_chunks(1, b"_Z1kv") + [F.kernel(1, dev=dev) for dev in range(6)]
    recs += [F.copy(1, dev=9, src_kind=2)]
    act = drained(decoder_impl.cls, recs, max_lanes=4).activity()
    assert [a.device for a in act["devices"]] == [0, 1, 2, 3] and act["overflow"] == 3


# -- copies -----------------------------------------------------------------------------------------
def test_timed_copies_are_split_by_direction_and_host_memory(decoder_impl):
    recs = [F.copy(1, nbytes=1 << 20, start=0, end=100, src_kind=2, dst_kind=3),     # h2d pinned
            F.copy(1, nbytes=1 << 20, start=0, end=400, src_kind=1, dst_kind=3),     # h2d pageable
            F.copy(1, nbytes=1 << 20, start=0, end=500, src_kind=1, dst_kind=3),
            F.copy(2, nbytes=4096, start=0, end=10, src_kind=3, dst_kind=2),         # d2h pinned
            F.copy(2, nbytes=4096, start=0, end=0, flags=L.FLAG_NO_TIMING, src_kind=3, dst_kind=1),
            F.copy(0, nbytes=64, start=5, end=6, src_kind=1, dst_kind=3),            # unknown kind: by memory
            F.copy(8, nbytes=8, start=0, end=2),                                     # d2d
            F.memset(16, start=0, end=4)]
    act = drained(decoder_impl.cls, recs).activity()["devices"][0]
    H2D, D2H, D2D, MEMSET = 0, 1, 2, 5
    assert act.copies == ((H2D, A.MEM_PAGEABLE, 3, (2 << 20) + 64, 901), (H2D, A.MEM_PINNED, 1, 1 << 20, 100),
                          (D2H, A.MEM_PINNED, 1, 4096, 10), (D2D, A.MEM_OTHER, 1, 8, 2),
                          (MEMSET, A.MEM_OTHER, 1, 16, 4))
    assert act.first_start_ns is None and act.busy_ns == 0


def test_the_twins_agree_on_random_activity(both_impls):
    rng = random.Random(11)
    recs = F.name_chunks(1, b"_Z1av") + F.name_chunks(2, b"_Z1bv") + F.name_chunks(3, b"gpu")
    recs += [F.launch(1, static=4096), F.launch(2, dynamic=1 << 16, carveout=50), F.device(0, 3, UUID, 132, (9, 0))]
    for _ in range(4_000):
        s = rng.randrange(1 << 30)
        if rng.random() < 0.8:
            recs.append(F.kernel(rng.choice((1, 2)), dev=rng.randrange(3), start=s, end=s + rng.randrange(1 << 16),
                                 block=(rng.choice((64, 128, 256, 512, 1024)), 1, 1), grid=(rng.randrange(1, 5000), 1, 1),
                                 launch_id=rng.choice((0, 1, 2)), registers=rng.choice((32, 64, 255))))
        else:
            recs.append(F.copy(rng.choice((1, 2, 8)), nbytes=rng.randrange(1 << 30), dev=rng.randrange(3), start=s,
                               end=s + rng.randrange(1 << 20), src_kind=rng.randrange(8), dst_kind=rng.randrange(8)))
    F.compare(both_impls, F.Case(capacity=8192, records=recs, caps={"max_lanes": 2}))


# -- busy time: the union, exact, whatever the order and however it is drained ------------------
#: interval shapes on one device: (start, end) lists that overlap, nest, repeat, touch or leave gaps
SHAPES = {
    "gaps": [(100 * i, 100 * i + 60) for i in range(40)],
    "overlapping": [(100 * i, 100 * i + 250) for i in range(40)],
    "nested": [(0, 10_000)] + [(50 * i + 10, 50 * i + 30) for i in range(1, 150)] + [(2_000, 2_001)],
    "duplicates": [(500, 900)] * 7 + [(100, 200)] * 3 + [(900, 1_000)] * 2,
    "touching": [(10 * i, 10 * i + 10) for i in range(60)],
    "zero length": [(70, 70), (80, 80), (75, 90), (90, 90)],
}


def orders(rng: random.Random, ivs: list[tuple[int, int]]) -> dict[str, list[tuple[int, int]]]:
    """The same intervals in start order, reversed, shuffled, and as interleaved in-order streams
    (more of them than the compiled twin has runs)."""
    out = {"sorted": sorted(ivs), "reversed": sorted(ivs, reverse=True), "shuffled": rng.sample(ivs, len(ivs))}
    streams = [sorted(ivs)[k::7] for k in range(7)]
    mixed: list[tuple[int, int]] = []
    while any(streams):
        mixed.append(rng.choice([s for s in streams if s]).pop(0))
    out["7 streams interleaved"] = mixed
    return out


def drained_in_passes(cls: type, records: list[bytes], passes: int | None) -> object:
    cap = 1 << max(10, (len(records) - 1).bit_length())
    dec = cls(F.Case(capacity=cap, records=records).build())
    while dec.drain(passes):
        pass
    return dec


@pytest.mark.parametrize("shape", SHAPES)
def test_busy_time_is_the_exact_union_whatever_the_order_and_the_passes(decoder_impl, shape):
    rng = random.Random(shape)
    for order, ivs in orders(rng, SHAPES[shape]).items():
        kernels = [F.kernel(1, dev=dev, stream=13 + i % 3, start=s + dev * 7, end=e + dev * 7)
                   for i, (s, e) in enumerate(ivs) for dev in (0, 5)]   # two devices, interleaved
        for passes in (1, 3, 64, None):
            d = drained_in_passes(decoder_impl.cls, F.name_chunks(1, b"_Z1kv") + kernels, passes)
            last = max(e for _s, e in ivs) + 100   # after both devices' kernels
            d.settle(last)
            for a in d.activity()["devices"]:
                want = union([(s + a.device * 7, e + a.device * 7) for s, e in ivs])
                assert (a.busy_ns, a.late, a.settled_to_ns) == (want, 0, last), (order, passes, a)
                assert (a.first_start_ns, a.last_end_ns) == (min(s for s, _ in ivs) + a.device * 7,
                                                             max(e for _, e in ivs) + a.device * 7)


@pytest.mark.parametrize("streams", [1, 3, 4, 5, 9])
def test_busy_time_of_in_order_streams_interleaved_across_merge_points(decoder_impl, streams):
    """Streams each in start order, drifting apart, interleaved at random on one device: more
    kernels than a merge point takes (one pass, or passes of 500), fewer intervals than are kept
    (most kernels touch the one before on their stream), so nothing settles and the union is exact."""
    rng = random.Random(streams)
    n = A.BUSY_MERGE_KERNELS + 700
    cursor = [rng.randrange(50_000) for _ in range(streams)]
    ivs = []
    for _ in range(n):
        k = rng.randrange(streams)
        dur = rng.randrange(1, 400)
        ivs.append((cursor[k], cursor[k] + dur))
        cursor[k] += dur + rng.choice((0, 0, 0, 0, 0, 1, 30))
    recs = F.name_chunks(1, b"_Z1kv") + [F.kernel(1, stream=13 + i % 4, start=s, end=e) for i, (s, e) in enumerate(ivs)]
    for passes in (500, None):
        d = drained_in_passes(decoder_impl.cls, recs, passes)
        act = d.activity()["devices"][0]
        assert (act.settled_to_ns, act.late) == (0, 0)
        d.settle(max(cursor) + 1)
        act = d.activity()["devices"][0]
        assert (act.busy_ns, act.late) == (union(ivs), 0)


def merge_point_model(n: int, passes: int | None) -> int:
    """The rule for in-order kernels with gaps, stated plainly: the index of the last settled one
    (-1: none) after ``n`` of them, drained after a one-record preface in passes of ``passes``."""
    kept: list[int] = []
    noted: list[int] = []
    settled = -1

    def merge() -> None:
        nonlocal kept, noted, settled
        kept, noted = kept + noted, []
        if len(kept) > A.BUSY_INTERVALS_MAX:
            cut = len(kept) - A.BUSY_INTERVALS_MAX // 2 - 1
            settled, kept = kept[cut - 1], kept[cut:]

    seq = 1                                    # the name's record
    for i in range(n):
        noted.append(i)
        if len(noted) == A.BUSY_MERGE_KERNELS:
            merge()
        seq += 1
        if passes and seq % passes == 0:       # a drain() ends
            merge() if noted else None
    if noted:
        merge()
    return settled


@pytest.mark.parametrize("passes", [None, 1_000, 777, 5_000])
def test_merge_points_settle_the_older_intervals_where_the_rule_says(decoder_impl, passes):
    """In-order kernels with gaps: at each merge point (every BUSY_MERGE_KERNELS kernels noted, and
    each drain()'s end) more than BUSY_INTERVALS_MAX intervals settle all but the newest
    BUSY_INTERVALS_MAX // 2 + 1."""
    n = A.BUSY_MERGE_KERNELS + 952
    recs = F.name_chunks(1, b"_Z1kv") + [F.kernel(1, start=10 * i, end=10 * i + 5) for i in range(n)]
    act = drained_in_passes(decoder_impl.cls, recs, passes).activity()["devices"][0]
    last = merge_point_model(n, passes)
    assert last > 0 and (act.settled_to_ns, act.busy_ns, act.late) == (10 * last + 5, 5 * (last + 1), 0)


def test_kernels_reaching_back_past_a_merge_point_are_late_and_bounded(decoder_impl):
    """After the older intervals settled, a kernel before them is late: its time before the settled
    point is reported, not added; what it has after is."""
    n = A.BUSY_INTERVALS_MAX + 1
    recs = F.name_chunks(1, b"_Z1kv") + [F.kernel(1, start=10 * i, end=10 * i + 5) for i in range(n)]
    buf = F.Case(capacity=4096, records=recs).build()
    d = decoder_impl.cls(buf)
    d.drain()
    settled = d.activity()["devices"][0].settled_to_ns
    publish(buf, len(recs), [F.kernel(1, start=3, end=settled + 2), F.kernel(1, start=settled + 1, end=settled + 3)])
    d.drain()
    d.settle(10 * n)
    act = d.activity()["devices"][0]
    assert (act.late, act.late_ns) == (1, settled - 3)
    assert act.busy_ns == union([(10 * i, 10 * i + 5) for i in range(n)] + [(settled, settled + 3)])


def test_busy_time_through_the_compiled_producer_drained_as_it_writes(decoder_impl, rings):
    """The producer writes kernels of four streams on two devices, each stream in order, the
    streams out of order with each other; the decoder drains after every few hundred records."""
    rng = random.Random(3)
    p = rings.producer(capacity=1024)
    d = decoder_impl.cls(rings.mapping(p))
    cursor = {(dev, s): rng.randrange(1_000_000) for dev in (0, 1) for s in range(4)}
    ivs: dict[int, list[tuple[int, int]]] = {0: [], 1: []}
    for i in range(6_000):
        dev, s = key = rng.choice(list(cursor))
        dur = rng.randrange(100, 5_000)
        assert p.kernel(dev, 1, 13 + s, cursor[key], cursor[key] + dur, "_Z4stepv")
        ivs[dev].append((cursor[key], cursor[key] + dur))
        cursor[key] += dur + rng.choice((0, 10, 2_000))
        if i % 300 == 299:
            d.drain()
    d.drain()
    for a in d.activity()["devices"]:
        assert (a.first_start_ns, a.last_end_ns) == (min(s for s, _ in ivs[a.device]),
                                                     max(e for _, e in ivs[a.device]))
    d.settle(max(cursor.values()))
    for a in d.activity()["devices"]:
        assert a.busy_ns + a.late_ns >= union(ivs[a.device]) >= a.busy_ns
        assert a.late == 0 and a.busy_ns == union(ivs[a.device])


def test_configurations_of_many_devices_count_every_launch(decoder_impl):
    """Launches of one name round-robin over ten devices (ids sharing low bits among them) and two
    block sizes: four configurations kept, the rest counted in "more", every launch exactly once."""
    recs = F.name_chunks(1, b"_Z1kv")
    expect: dict[tuple[int, int], list[int]] = {}
    for i in range(400):
        dev, block = (0, 8, 16, 1, 9, 2, 3, 4, 5, 6)[i % 10], (64, 128)[i // 10 % 2]
        recs.append(F.kernel(1, dev=dev, block=(block, 1, 1), grid=(1 + i % 13, 1, 1), start=i, end=i + 1 + i % 3))
        e = expect.setdefault((dev, block), [0, 0, 1 << 60, 0])
        e[0] += 1
        e[1] += 1 + i % 3
        e[2] = min(e[2], 1 + i % 13)
        e[3] = max(e[3], 1 + i % 13)
    stamp, entries = drained(decoder_impl.cls, recs).kernel_configs()
    _nid, configs, more = entries[0]
    assert [(c.device, c.block[0]) for c in configs] == [(0, 64), (8, 64), (16, 64), (1, 64)]
    for c in configs:
        assert [c.count, c.total_ns, c.grid_min, c.grid_max] == expect[c.device, c.block[0]] and c.timed == c.count
    kept = {(c.device, c.block[0]) for c in configs}
    assert more == (sum(e[0] for k, e in expect.items() if k not in kept),) * 2 + (
        sum(e[1] for k, e in expect.items() if k not in kept),)


def test_the_twins_agree_pass_by_pass_on_out_of_order_streams(both_impls):
    """Both twins, drained in the same passes, report the same activity and configurations after
    each pass, and the same after settling in between: the merge points are the same."""
    rng = random.Random(5)
    recs = F.name_chunks(1, b"_Z1av") + F.name_chunks(2, b"_Z1bv")
    cursor = [rng.randrange(1 << 20) for _ in range(6)]
    for _ in range(9_000):
        k = rng.randrange(6)
        if rng.random() < 0.02:    # now and then one from long ago, or the same again
            s = rng.randrange(cursor[k])
        else:
            s = cursor[k]
            cursor[k] += rng.randrange(1, 3_000)
        recs.append(F.kernel(rng.choice((1, 2)), dev=k % 3, start=s, end=s + rng.randrange(0, 4_000),
                             block=(rng.choice((64, 128)), 1, 1), grid=(rng.randrange(1, 99), 1, 1)))
    cap = 1 << 14
    decs = [cls(F.Case(capacity=cap, records=recs).build()) for cls in both_impls]
    step = 0
    while True:
        got = [dec.drain((1, 17, 700, 3_000)[step % 4]) for dec in decs]
        assert got[0] == got[1]
        if not got[0]:
            break
        a, b = (dec.activity() for dec in decs)
        assert a == b and decs[0].kernel_configs() == decs[1].kernel_configs()
        if step % 3 == 2:
            until = min(cursor) - (1 << 18)
            for dec in decs:
                dec.settle(until)
        step += 1
    a, b = (dec.activity() for dec in decs)
    assert a == b and sum(d.late for d in a["devices"]) > 0


def test_configurations_keep_the_widest_launch_ids_and_device_ids_apart(decoder_impl):
    recs = F.name_chunks(1, b"_Z1kv") + [F.launch(1, static=16), F.launch(L.LAUNCH_ID_LIMIT, static=32)]
    for dev in (0, (1 << 32) - 1):
        for lid in (0, 1, L.LAUNCH_ID_LIMIT):
            recs.append(F.kernel(1, dev=dev, launch_id=lid, start=0, end=1 + lid % 7))
    configs = drained(decoder_impl.cls, recs).kernel_configs()[1][0][1:]
    assert [(c.device, c.launch_id, c.count, c.total_ns) for c in configs[0]] == [
        (0, 0, 1, 1), (0, 1, 1, 2), (0, L.LAUNCH_ID_LIMIT, 1, 1 + L.LAUNCH_ID_LIMIT % 7), ((1 << 32) - 1, 0, 1, 1)]
    assert configs[1] == (2, 2, 2 + 1 + L.LAUNCH_ID_LIMIT % 7)   # the device's other two: "more"
