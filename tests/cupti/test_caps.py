"""The decoders' caps, one at a time, exactly (docs/decoder.md, "Caps"), in both twins.

Each test writes a small ring (ringfuzz's packers, an in-memory buffer), sets the cap it is about
low enough to reach, and checks that nothing is held beyond it while every record still counts:

* ``max_names``: the kernels of names beyond it are one exact aggregate (``OTHER_NAME_ID``); their
  chunks, stream names and device names are consumed without being invalid; names within it keep
  every rule (conflicts, undefined ids);
* ``max_name_bytes``: a longer name is kept cut, flagged NAME_TRUNCATED, counted once in
  ``names_cut``; its display text never ends inside a character;
* ``max_lanes``: executions beyond it count in ``lane_overflow``, contexts and devices beyond it
  are ``table_full``;
* ``max_pending_names``: the name continued least recently makes room and is counted in
  ``names_unfinished``, as is one announced more than a ring's worth of records ago;
* the caps' own values: both twins refuse the same wrong ones with the same message;
* ``lanes(newest=...)``: only the newest spans of each lane, the same in both twins.
"""

from __future__ import annotations

import pytest
import ringfuzz as F

from gpuflow.collectors.cupti import _layout as L

CAPACITY = 1024


def drained(cls, records, steps=None, capacity=CAPACITY, **caps):
    """A decoder of ``cls`` that drained ``records`` (then ``steps``), and its observations."""
    buf = F.Case(capacity=capacity, records=records).build()
    dec = cls(buf, **caps)
    dec.drain()
    for step in steps or ():
        F._place(buf, capacity, F.U64.unpack_from(buf, F.OFF["head"])[0], step)
        F.U64.pack_into(buf, F.OFF["head"], F.U64.unpack_from(buf, F.OFF["head"])[0] + len(step))
        dec.drain()
    return dec


def kernels_by_id(dec):
    return {k[0]: k[1:] for k in dec.kernels()}


# -- max_names -------------------------------------------------------------------------------------
def test_kernels_of_names_beyond_max_names_are_one_exact_aggregate(decoder_impl):
    recs = []
    for nid in range(1, 8):
        recs += F.name_chunks(nid, b"_Z%dkv" % nid)
        recs += [F.kernel(nid, start=100, end=100 + 10 * nid), F.kernel(nid, start=200, end=205)]
    recs.append(F.kernel(6, flags=F.FLAG_NO_TIMING, start=0, end=0))
    dec = drained(decoder_impl.cls, recs, max_names=3)
    assert sorted(dec.names()) == [1, 2, 3]
    by_id = kernels_by_id(dec)
    assert {nid: by_id[nid] for nid in (1, 2, 3)} == {1: (2, 2, 15, 5, 10), 2: (2, 2, 25, 5, 20), 3: (2, 2, 35, 5, 30)}
    # ids 4..7: 9 launches, 8 timed, 4 x 5 ns + 40 + 50 + 60 + 70 ns
    assert by_id[L.OTHER_NAME_ID] == (9, 8, 20 + 40 + 50 + 60 + 70, 5, 70)
    assert dec.counters()["names_folded"] == 4 and dec.counters()["invalid_records"] == 0
    assert sum(k[1] for k in dec.kernels()) == 15
    spans = dec.lanes()[0][6]
    assert [s[4] for s in spans if s[2] == 100] == [1, 2, 3, L.OTHER_NAME_ID, L.OTHER_NAME_ID,
                                                     L.OTHER_NAME_ID, L.OTHER_NAME_ID]


def test_names_beyond_max_names_are_consumed_without_being_invalid(decoder_impl):
    long = b"x" * 200  # five chunks, the later ones reach the decoder after the first was refused
    recs = (F.name_chunks(1, b"kept") + F.name_chunks(2, long) + F.name_chunks(3, b"side", F.FLAG_NAME_STREAM)
            + [F.stream_name(3, 0, 1, 13), F.device(0, 2), F.kernel(2, stream=13), F.kernel(99)]
            + F.name_chunks(2, long + b"!")  # "redefined": still beyond the cap, still consumed
            + F.name_chunks(1, b"kept!"))    # a kept name keeps its rules: a conflict
    dec = drained(decoder_impl.cls, recs, max_names=1)
    c = dec.counters()
    assert dec.names() == {1: ("kept", 0)} and c["names_folded"] == 2
    assert c["invalid"] == {"undefined_name": 1, "name_conflict": 1}  # id 99 was never defined
    assert [lane[:6] for lane in dec.lanes()] == [(0, 1, 13, 1, 1, 0)]  # the stream name reads as none
    assert dec.devices() == {0: 0} and kernels_by_id(dec)[L.OTHER_NAME_ID][0] == 1


def test_max_names_zero_keeps_no_name(decoder_impl):
    recs = F.name_chunks(1, b"a") + [F.kernel(1), F.kernel(0)]
    dec = drained(decoder_impl.cls, recs, max_names=0)
    assert dec.names() == {} and kernels_by_id(dec) == {0: (1, 1, 10, 10, 10), L.OTHER_NAME_ID: (1, 1, 10, 10, 10)}


def test_names_scattered_over_the_id_space_cost_little(decoder_impl):
    """One name in every 256-id page of the compiled twin's table: pages for kept names only."""
    recs = []
    for i in range(4000):
        recs += [F.chunk(1 + i * 4096, 0, 3, b"abc"), F.kernel(1 + i * 4096)]
    dec = drained(decoder_impl.cls, recs, capacity=8192, max_names=100)
    assert len(dec.names()) == 100 and dec.counters()["names_folded"] == 3900
    assert kernels_by_id(dec)[L.OTHER_NAME_ID][0] == 3900


# -- max_name_bytes --------------------------------------------------------------------------------
def test_a_name_longer_than_max_name_bytes_is_kept_cut_and_flagged(decoder_impl):
    text = b"_Z" + b"k" * 298
    recs = F.name_chunks(1, text) + F.name_chunks(2, b"short") + F.name_chunks(1, text) + [F.kernel(1)]
    recs += F.name_chunks(3, b"s" * 120, F.FLAG_NAME_STREAM)
    dec = drained(decoder_impl.cls, recs, max_name_bytes=100)
    assert dec.names() == {1: (text[:100].decode(), L.FLAG_NAME_TRUNCATED), 2: ("short", 0),
                           3: ("s" * 100, L.FLAG_NAME_TRUNCATED | L.FLAG_NAME_STREAM)}
    assert dec.counters()["names_cut"] == 2 and dec.counters()["invalid_records"] == 0  # the same name again


def test_a_redefinition_that_differs_beyond_the_cut_is_the_same_name(decoder_impl):
    recs = F.name_chunks(1, b"a" * 60 + b"X") + F.name_chunks(1, b"a" * 60 + b"Y")
    dec = drained(decoder_impl.cls, recs, max_name_bytes=50)
    assert dec.names() == {1: ("a" * 50, L.FLAG_NAME_TRUNCATED)} and dec.counters()["invalid_records"] == 0


def test_a_cut_name_never_ends_inside_a_character(decoder_impl):
    text = "ab€" * 20  # 5 bytes a unit: a cut at 8 bytes falls inside the second euro sign
    dec = drained(decoder_impl.cls, F.name_chunks(1, text.encode()), max_name_bytes=8)
    assert dec.names() == {1: ("ab€ab", L.FLAG_NAME_TRUNCATED)}


# -- max_lanes -------------------------------------------------------------------------------------
def test_executions_beyond_max_lanes_count_on_no_lane(decoder_impl):
    recs = F.name_chunks(1, b"k") + [F.kernel(1, stream=s, start=10 * s, end=10 * s + 5) for s in range(20)]
    recs += [F.copy(1, 64, stream=s) for s in range(20)] + [F.kernel(1, stream=2)]
    dec = drained(decoder_impl.cls, recs, max_lanes=3)
    lanes = dec.lanes()
    assert [(lane[2], lane[3]) for lane in lanes] == [(0, 2), (1, 2), (2, 3)]
    assert dec.counters()["lane_overflow"] == 34 and sum(lane[3] for lane in lanes) + 34 == 41
    assert kernels_by_id(dec)[1][0] == 21 and dec.transfers()[0][1] == 20


def test_contexts_and_devices_beyond_max_lanes_are_table_full(decoder_impl):
    recs = F.name_chunks(1, b"H200") + [F.context(d, 1, 7) for d in range(5)] + [F.device(d, 1) for d in range(5)]
    dec = drained(decoder_impl.cls, recs, max_lanes=2)
    assert len(dec.null_streams()) == len(dec.devices()) == 2
    assert dec.counters()["invalid"] == {"table_full": 6}


# -- max_pending_names -----------------------------------------------------------------------------
def test_the_name_continued_least_recently_makes_room(decoder_impl):
    def part(nid, i):  # chunk i of a three-chunk name
        return F.chunk(nid, 48 * i, 144, bytes([96 + nid]) * 48, F.FLAG_NAME_LAST if i == 2 else 0)

    recs = [part(1, 0), part(2, 0), part(1, 1),  # 2 is now the one continued least recently
            part(3, 0),                          # so it makes room for 3
            part(1, 2), part(2, 1), part(3, 1), part(3, 2), F.kernel(2)]
    dec = drained(decoder_impl.cls, recs, max_pending_names=2)
    c = dec.counters()
    assert sorted(dec.names()) == [1, 3] and (c["pending_names"], c["names_unfinished"]) == (0, 1)
    assert c["invalid"] == {"bad_name_chunk": 1, "undefined_name": 1}  # 2's next chunk, then its kernel


def test_a_name_announced_a_ring_ago_and_never_finished_expires(decoder_impl):
    filler = [F.clock_sync(1, 2)] * 700
    dec = drained(decoder_impl.cls, [F.chunk(7, 0, 96, b"a" * 48, 0)], steps=[filler, filler])
    c = dec.counters()
    assert (c["pending_names"], c["names_unfinished"]) == (0, 1)
    dec = drained(decoder_impl.cls, [F.chunk(7, 0, 96, b"a" * 48, 0)], steps=[filler, [F.chunk(7, 48, 96, b"b" * 48)]])
    assert dec.names() == {7: ("a" * 48 + "b" * 48, 0)}  # within a ring's worth: finished normally


# -- the caps themselves ---------------------------------------------------------------------------
@pytest.mark.parametrize(("caps", "error", "message"), [
    ({"max_names": -1}, ValueError, "max_names must be in [0, 1048576], not -1"),
    ({"max_names": (1 << 20) + 1}, ValueError, "max_names must be in [0, 1048576]"),
    ({"max_name_bytes": 0}, ValueError, "max_name_bytes must be in [1, 4096], not 0"),
    ({"max_name_bytes": 4097}, ValueError, "max_name_bytes must be in [1, 4096]"),
    ({"max_lanes": 0}, ValueError, "max_lanes must be in [1, 65536], not 0"),
    ({"max_pending_names": 0}, ValueError, "max_pending_names must be in [1, 65536], not 0"),
    ({"max_lanes": 2.0}, TypeError, "integer"),
    ({"max_names": "9"}, TypeError, "integer"),
])
def test_wrong_caps_are_refused_alike(decoder_impl, caps, error, message):
    buf = F.Case(records=[]).build()
    with pytest.raises(error, match=message.replace("[", r"\[").replace("]", r"\]")):
        decoder_impl.cls(buf, **caps)


def test_the_caps_are_the_decoders_own(decoder_impl):
    buf = F.Case(records=[]).build()
    assert decoder_impl.cls(buf).caps == L.Caps(L.DEFAULT_MAX_NAMES, L.DEFAULT_MAX_NAME_BYTES,
                                                 L.DEFAULT_MAX_LANES, L.DEFAULT_MAX_PENDING_NAMES)
    assert decoder_impl.cls(buf, max_lanes=9).caps.max_lanes == 9


# -- lanes(newest=...) -----------------------------------------------------------------------------
def test_lanes_newest_lists_only_the_newest_new_spans(decoder_impl):
    recs = F.name_chunks(1, b"k") + [F.kernel(1, stream=13, start=t, end=t + 1) for t in range(10)]
    recs += [F.kernel(1, stream=14, start=t, end=t + 1) for t in range(3)]
    dec = drained(decoder_impl.cls, recs, lane_span_cap=8)
    assert [[s[2] for s in lane[6]] for lane in dec.lanes(newest=3)] == [[7, 8, 9], [0, 1, 2]]
    assert [[s[2] for s in lane[6]] for lane in dec.lanes(after_seq=8, newest=2)] == [[8, 9], [1, 2]]
    assert [lane[6] for lane in dec.lanes(newest=0)] == [[], []]
    assert [lane[4] for lane in dec.lanes(newest=0)] == [8, 3]  # kept is still the lane's
    with pytest.raises(TypeError):
        dec.lanes(newest=1.5)


@pytest.mark.c_extension
def test_the_compiled_twin_names_the_other_kernels_as_layout_does(both_impls):
    from gpuflow.collectors.cupti import _decoder_c

    assert _decoder_c.LIMITS["OTHER_NAME_ID"] == L.OTHER_NAME_ID == L.NAME_ID_LIMIT
