"""The decoders' arguments, fuzzed: ``lane_span_cap`` and ``drain(max_records)`` are judged the same
way by both twins — an integer in range is used, anything else is refused before it can reach a
record (the compiled twin used to truncate floats and overflow at 2^32 where the Python twin
accepted them, or failed later, half-way through a drain).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuflow.collectors.cupti import _layout as L

import ringfuzz as F

values = st.one_of(st.integers(-(1 << 70), 1 << 70), st.sampled_from([0, 1, 512, L.MAX_LANE_SPAN_CAP,
                                                                     L.MAX_LANE_SPAN_CAP + 1, 1 << 32, -1]),
                   st.booleans(), st.floats(allow_nan=True), st.none(), st.text(max_size=3))
FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
RECORDS = F.name_chunks(1, b"_Z1kv") + [F.kernel(1, start=i, end=i + 2) for i in range(10)]


def outcome(fn):
    try:
        return ("ok", fn())
    except Exception as exc:  # noqa: BLE001 - compared, not judged
        return (type(exc).__name__, str(exc))


def expected_cap(value):
    if isinstance(value, bool) or isinstance(value, int):
        return ("ok", int(value)) if 0 <= value <= L.MAX_LANE_SPAN_CAP else ("ValueError",)
    return ("TypeError",)


@FAST
@given(value=values)
def test_lane_span_cap_is_an_integer_in_range(twin, value):
    got = outcome(lambda: twin(F.Case(records=RECORDS).build(), lane_span_cap=value).lane_span_cap)
    assert got[:len(expected_cap(value))] == expected_cap(value)


@FAST
@given(value=values)
def test_max_records_is_an_integer_or_none(twin, value):
    dec = twin(F.Case(records=RECORDS).build())
    got = outcome(lambda: dec.drain(value))
    if value is None:
        assert got == ("ok", 11)
    elif isinstance(value, int):
        assert got == ("ok", max(0, min(11, value))) and type(got[1]) is int
    else:
        assert got[0] == "TypeError" and dec.tail == 0
    dec.detach()


@pytest.mark.c_extension
@FAST
@given(cap=values, drains=st.lists(values, max_size=4))
def test_the_twins_judge_arguments_alike(twins, cap, drains):
    results = []
    for cls in twins:
        seen = [outcome(lambda: cls(F.Case(records=RECORDS).build(), lane_span_cap=cap).lane_span_cap)]
        if seen[0][0] == "ok":
            dec = cls(F.Case(records=RECORDS).build(), lane_span_cap=cap)
            seen += [outcome(lambda v=v: dec.drain(v)) for v in drains]
            seen.append(F.snapshot(dec))
            dec.detach()
        results.append(seen)
    assert results[0] == results[1]
