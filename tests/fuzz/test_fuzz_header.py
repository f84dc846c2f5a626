"""Fuzzed headers and counters: every damaged header is refused with the same error by both twins,
and exactly the headers docs/decoder.md calls readable are accepted.

The verdict is computed here, independently of the decoders' shared check in ``_layout``: a ring
opens iff its magic, version, header size, record size, capacity (a power of two in [1024, 2^26])
and length are right and ``tail <= head <= tail + capacity``. Counters that go bad mid-session
make the next drain raise and leave the figures as they were; when they come right again,
draining resumes where it stopped.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pytest

import ringfuzz as F

U32 = st.integers(0, (1 << 32) - 1)
U64 = st.integers(0, F.U64_MAX)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def expected_verdict(case: F.Case) -> str:
    """'ok', 'RingNotReady', 'RingFormatError' or 'TypeError', from the documented rules alone."""
    buf = bytes(case.build())
    if len(buf) == 0:
        return "RingNotReady"
    if len(buf) < F.HEADER_SIZE:
        return "RingFormatError"
    magic, version, header_size, record_size, cap = (int.from_bytes(buf[o:o + w], "little") for o, w in
                                                     ((0, 8), (8, 4), (12, 4), (16, 4), (20, 4)))
    head = int.from_bytes(buf[512:520], "little")
    tail = int.from_bytes(buf[576:584], "little")
    if magic == 0:
        return "RingNotReady"
    if (magic != F.MAGIC or version != F.VERSION or header_size != 4096 or record_size != 64
            or cap not in [1 << k for k in range(10, 27)] or len(buf) < 4096 + 64 * cap
            or not tail <= head <= tail + cap):
        return "RingFormatError"
    return "TypeError" if case.readonly else "ok"


damage = st.fixed_dictionaries({}, optional={
    "magic": st.sampled_from([0, 1, F.MAGIC ^ 1, F.MAGIC ^ (1 << 63), F.MAGIC]) | U64,
    "version": st.sampled_from([0, 1, 2, 3, (1 << 32) - 1]) | U32,
    "header_size": st.sampled_from([0, 4095, 4096, 4097, 8192]) | U32,
    "record_size": st.sampled_from([0, 32, 63, 64, 65, 128]) | U32,
    "capacity": st.sampled_from([0, 1, 512, 1000, 1023, 1024, 1025, 2048, 1 << 26, 1 << 27]) | U32,
    "head": st.sampled_from([0, 1, 5, 1023, 1024, 1025, 1 << 40, F.U64_MAX]) | U64,
    "tail": st.sampled_from([0, 1, 5, 1024, F.U64_MAX]) | U64,
    "status": U32, "producer_pid": st.integers(-(1 << 31), (1 << 31) - 1), "producer_exited": U32,
    "dropped_ring": U64, "dropped_cupti": U64,
})
sizes = st.one_of(st.none(), st.sampled_from([0, 1, 64, 4095, 4096, 4097, 4096 + 64 * 1024 - 1, 4096 + 64 * 2048]))
garbage_text = st.binary(min_size=0, max_size=32)


def header_case(header, size, readonly, session, records):
    return F.Case(capacity=1024, tail0=0, records=records, header=header, size=size, readonly=readonly,
                  header_bytes={"session": session, "status_detail": session * 8},
                  steps=[("drain", None)])


header_cases = st.builds(header_case, damage, sizes, st.booleans(), garbage_text,
                         st.lists(st.sampled_from([F.kernel(0), F.context(), bytes(64)]), max_size=6))


@FAST
@given(case=header_cases)
def test_a_damaged_header_is_refused_exactly_when_the_rules_say(twin, case):
    observed = F.run_case(twin, case)
    verdict = observed[0][1] if observed[0][1] != "ok" else "ok"
    kind = observed[0][2] if verdict == "raise" else "ok"
    assert kind == expected_verdict(case), observed[0]
    if kind == "RingFormatError":
        assert observed[0][3]  # a message that says what was found


@pytest.mark.c_extension
@FAST
@given(case=header_cases)
def test_both_twins_refuse_a_header_with_the_same_error_and_message(twins, case):
    F.compare(twins, case)


fields_under_the_decoder = st.sampled_from([("magic", F.MAGIC ^ 4), ("version", F.VERSION + 1), ("header_size", 8192),
                                            ("record_size", 32), ("capacity", 2048), ("capacity", 512)])


@FAST
@given(change=fields_under_the_decoder, before=st.integers(0, 20), restore=st.booleans())
def test_a_header_rewritten_under_an_open_decoder_stops_draining_and_keeps_the_figures(twin, change, before,
                                                                                        restore):
    name, value = change
    width = F.WIDTH.get(name, 4)
    original = {"magic": F.MAGIC, "version": F.VERSION, "header_size": 4096, "record_size": 64, "capacity": 1024}[name]
    records = F.name_chunks(1, b"_Z1kv") + [F.kernel(1, start=i, end=i + 5) for i in range(before)]
    steps = [("drain", None), ("poke", F.OFF[name], value.to_bytes(width, "little")),
             ("publish", [F.kernel(1)]), ("drain", None)]
    if restore:
        steps += [("poke", F.OFF[name], original.to_bytes(width, "little")), ("drain", None)]
    observed = F.run_case(twin, F.Case(records=records, steps=steps))
    assert observed[1] == ("drain", before + 1)
    assert observed[2][:2] == ("drain", "raise") and observed[2][2] == "RingFormatError"
    assert "changed under the decoder" in observed[2][3]
    out = observed[-2]
    if restore:  # the field is right again: the record published meanwhile is decoded
        assert observed[3] == ("drain", 1) and out["kernels"][0][1] == before + 1
    else:
        assert out["kernels"] == ([(1, before, before, 5 * before, 5, 5)] if before else [])


torn = st.sampled_from(["behind", "too_far", "u64_wrap"])


@FAST
@given(kind=torn, tail0=st.sampled_from([0, 1, 1023, 1024, 5000, F.U64_MAX - 2048]),
       n=st.integers(0, 30), when=st.sampled_from(["open", "mid"]), heal=st.booleans())
def test_torn_counters_raise_at_open_and_mid_session_and_draining_resumes_once_healed(twin, kind, tail0, n, when,
                                                                                       heal):
    records = [F.context(0, 1, 7 + i) for i in range(n)]
    head = tail0 + n
    tail = tail0 if when == "open" else head  # the decoder's tail when it meets the torn head
    bad_head = {"behind": tail - 1 if tail else None, "too_far": tail + 1025,
                "u64_wrap": (tail + 1025) & F.U64_MAX}[kind]
    if bad_head is None or not (bad_head < tail or bad_head - tail > 1024):
        return  # not torn from this position (e.g. nothing behind 0, no wrap this far from 2^64)
    poke = ("poke", F.OFF["head"], bad_head.to_bytes(8, "little"))
    fix = ("poke", F.OFF["head"], head.to_bytes(8, "little"))
    if when == "open":
        case = F.Case(tail0=tail0, records=records, header={"head": bad_head}, steps=[("drain", None)])
        observed = F.run_case(twin, case)
        assert observed[0][1:3] == ("raise", "RingFormatError") and "torn counters" in observed[0][3]
        return
    steps = [("drain", None), poke, ("drain", None)]
    if heal:  # the producer puts head right again and publishes one more record
        steps += [fix, ("publish", [F.context(5, 5, 5)]), ("drain", None)]
    observed = F.run_case(twin, F.Case(tail0=tail0, records=records, steps=steps))
    assert observed[1] == ("drain", n)
    assert observed[2][1:3] == ("raise", "RingFormatError") and "torn counters" in observed[2][3]
    out = observed[-2]
    decoded = n + (1 if heal else 0)
    assert out["tail"] == tail0 + decoded and out["counters"]["records"] == decoded
    expected = {(0, 1): 7 + n - 1} if n else {}
    if heal:
        assert observed[3] == ("drain", 1)
        expected[(5, 5)] = 5
    assert out["null_streams"] == expected
