"""Torn and impossible records, one at a time, against the documented verdicts; the table limits.

Each fuzzed record follows a fixed, valid prelude (a context, two names, a kernel, a copy) and is
followed by the same kernel again. The record's verdict is computed here from docs/decoder.md
(record types, the copy-kind table, FLAG_NO_TIMING, end < start, undefined names and launch
configurations, LAUNCH records' ids): it is either
counted where it belongs or counted as invalid for that reason, and nothing else moves — the
prelude's and the trailer's figures stay exact.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ringfuzz as F

from gpuflow.collectors.cupti._layout import LIMIT_CAPS

PRELUDE = [F.context(0, 1, 7)] + F.name_chunks(1, b"_Z1kv") + F.name_chunks(2, b"side", F.FLAG_NAME_STREAM) + [
    F.kernel(1, 0, 1, 13, 100, 200), F.copy(1, 64, 0, 1, 7, 300, 400)]
TRAILER = [F.kernel(1, 0, 1, 13, 1000, 1001)]
DEFINED = {0, 1, 2}
# docs/decoder.md, the copy-kind table
KIND_DIRECTION = {1: "h2d", 3: "h2d", 2: "d2h", 4: "d2h", 9: "h2h", 10: "p2p"}
DEVICE_KINDS = {5: "d2d", 6: "d2d", 7: "d2d", 8: "d2d"}
HOST_MEMORY, DEVICE_MEMORY = {1, 2}, {3, 4, 6}


def verdict(rec: bytes) -> tuple[str, str | None]:
    """('invalid', reason) | ('kernel', None) | ('transfer', direction) | ('other', None)."""
    rtype, flags, dev, start, end, ctx, stream = F.COMMON.unpack_from(rec)
    timed = not flags & F.FLAG_NO_TIMING
    if rtype == F.REC_KERNEL:
        payload = F.KERNEL_PAYLOAD.unpack_from(rec, 32)
        if payload[1] not in DEFINED:
            return "invalid", "undefined_name"
        if payload[9]:   # a launch id: the prelude defines none
            return "invalid", "undefined_launch"
        return ("invalid", "end_before_start") if timed and end < start else ("kernel", None)
    if rtype == F.REC_LAUNCH:   # its id is in the device field
        return ("invalid", "bad_launch") if dev == 0 or dev > F.LAUNCH_ID_LIMIT else ("other", None)
    if rtype in (F.REC_MEMCPY, F.REC_MEMSET):
        _corr, kind, src_kind, dst_kind, _n, src_dev, dst_dev, _v, _g = F.COPY_PAYLOAD.unpack_from(rec, 32)
        if rtype == F.REC_MEMSET:
            direction = "memset"
        elif kind in KIND_DIRECTION:
            direction = KIND_DIRECTION[kind]
        elif kind in DEVICE_KINDS:
            direction = "p2p" if src_dev != dst_dev else "d2d"
        elif kind == 0:
            src = "h" if src_kind in HOST_MEMORY else "d" if src_kind in DEVICE_MEMORY else None
            dst = "h" if dst_kind in HOST_MEMORY else "d" if dst_kind in DEVICE_MEMORY else None
            if src is None or dst is None:
                return "invalid", "bad_copy_kind"
            direction = f"{src}2{dst}"
            if direction == "d2d" and src_dev != dst_dev:
                direction = "p2p"
        else:
            return "invalid", "bad_copy_kind"
        return ("invalid", "end_before_start") if timed and end < start else ("transfer", direction)
    if rtype in (F.REC_STREAM_NAME, F.REC_DEVICE):
        nid = F.KERNEL_PAYLOAD.unpack_from(rec, 32)[1]
        return ("other", None) if nid in DEFINED else ("invalid", "undefined_name")
    if rtype in (F.REC_CONTEXT, F.REC_CLOCK_SYNC):
        return "other", None
    if rtype == F.REC_NAME_CHUNK:
        return "other", None  # judged by test_fuzz_names
    return "invalid", "bad_type"


u64 = st.sampled_from(F.BOUNDARY_U64) | st.integers(0, F.U64_MAX)
u32 = st.sampled_from(F.BOUNDARY_U32) | st.integers(0, (1 << 32) - 1)
small = st.integers(0, 3)
records = st.one_of(
    st.binary(min_size=64, max_size=64),
    st.builds(F.kernel, st.sampled_from([0, 1, 2, 3, F.NAME_ID_LIMIT + 1]) | u32, small, small, small, u64, u64,
              st.integers(0, 0xFFFF), st.tuples(u32, st.integers(0, 0xFFFF), st.integers(0, 0xFFFF)),
              rtype=st.sampled_from([0, 1, 5, 8, 9, 10, 0xFFFF]), launch_id=st.sampled_from([0, 0, 1, 7]) | u32),
    st.builds(F.launch, st.sampled_from([0, 1, 2, F.LAUNCH_ID_LIMIT, F.LAUNCH_ID_LIMIT + 1]) | u32, u32, u32, u32,
              st.tuples(u32, u32, u32), st.integers(0, 255), st.integers(0, 255),
              st.none() | st.integers(0, 255), st.integers(0, 255)),
    st.builds(F.copy, st.integers(0, 255), u64, small, small, small, u64, u64, st.integers(0, 0xFFFF),
              st.integers(0, 8), st.integers(0, 8), small, small, rtype=st.sampled_from([2, 3])),
    st.builds(F.context, small, small, u32), st.builds(F.clock_sync, u64, u64),
    st.just(bytes(64)),  # a torn, zeroed slot
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rec=records, start=st.integers(0, 1023))
def test_a_fuzzed_record_is_counted_or_rejected_as_documented_and_nothing_else_moves(twin, rec, start):
    recs = PRELUDE + [rec] + TRAILER
    out = F.run_case(twin, F.Case(tail0=start, records=recs, lane_span_cap=4))[-2]
    kind, what = verdict(rec)
    invalid = out["counters"]["invalid"]
    if kind == "invalid":
        assert invalid == {what: 1}
        assert out["counters"]["first_invalid_seq"] == start + len(PRELUDE)
    elif F.COMMON.unpack_from(rec)[0] != F.REC_NAME_CHUNK:
        assert invalid == {}
    kernels = {k[0]: k[1] for k in out["kernels"]}
    transfers = {t[0]: t[1] for t in out["transfers"] if t[1]}
    expected_kernels = {1: 2}
    expected_transfers = {"h2d": 1}
    if kind == "kernel":
        nid = F.KERNEL_PAYLOAD.unpack_from(rec, 32)[1]
        expected_kernels[nid] = expected_kernels.get(nid, 0) + 1
    elif kind == "transfer":
        expected_transfers[what] = expected_transfers.get(what, 0) + 1
    assert kernels == expected_kernels and transfers == expected_transfers
    # the prelude's kernel and the trailer are on lane (0, 1, 13), exactly as pushed
    lane = next(l for l in out["lanes"] if l[:3] == (0, 1, 13))
    spans_1 = [s for s in lane[6] if s[4] == 1 and s[2] in (100, 1000)]
    assert [(s[2], s[3]) for s in spans_1] == [(100, 200), (1000, 1001)]


def test_table_limits_overflow_into_counters_not_memory(twin):
    """65,536 lanes, contexts and devices at most; beyond them executions still count (on no lane)
    and the table records are ``table_full``."""
    extra = 300
    n = 65536 + extra
    cap = 1 << 17
    recs = F.name_chunks(1, b"_Z1kv") + [F.kernel(1, 0, 1, s, 10, 20) for s in range(n)]
    uncapped = LIMIT_CAPS._asdict()  # the tables' own limits, the caps (docs/decoder.md) out of reach
    out = F.run_case(twin, F.Case(capacity=cap, records=recs, lane_span_cap=1, caps=uncapped))[-2]
    assert len(out["lanes"]) == 65536 and out["counters"]["lane_overflow"] == extra
    assert out["kernels"][0][1] == n and out["counters"]["invalid"] == {}
    recs = [F.context(0, c, 7) for c in range(n)] + [F.device(d, 0) for d in range(n)]
    out = F.run_case(twin, F.Case(capacity=cap * 2, records=recs, caps=uncapped))[-2]
    assert len(out["null_streams"]) == len(out["devices"]) == 65536
    assert out["counters"]["invalid"] == {"table_full": 2 * extra}
    # a known key still updates when the table is full
    recs = [F.context(0, c, 7) for c in range(n)] + [F.context(0, 5, 99)]
    out = F.run_case(twin, F.Case(capacity=cap * 2, records=recs, caps=uncapped))[-2]
    assert out["null_streams"][(0, 5)] == 99
