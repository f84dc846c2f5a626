"""The recorder's contract types: columns that hold exactly the spans they were made from, and
answers that cannot be built inconsistent."""

from __future__ import annotations

from array import array

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gpuflow.core.recorded import LaneWindow, Series, SpanBuckets, SpanColumns
from gpuflow.core.snapshot import SPAN_KINDS, TRANSFER_DIRECTIONS, Span, _span_json

dims = st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 65535), st.integers(0, 65535))
kernels = st.builds(Span, seq=st.integers(0, 2**62), kind=st.just("kernel"), start_us=st.integers(0, 2**62),
                    dur_ns=st.integers(0, 2**62), name=st.text(max_size=40), grid=dims, block=dims)
copies = st.builds(Span, seq=st.integers(0, 2**62), kind=st.sampled_from(SPAN_KINDS[1:]),
                   start_us=st.integers(0, 2**62), dur_ns=st.integers(0, 2**62),
                   bytes=st.integers(0, 2**62), direction=st.sampled_from(TRANSFER_DIRECTIONS))


# generating 30 spans of 40-character names is slow on a loaded machine: not what is tested
@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(st.one_of(kernels, copies), max_size=30))
def test_columns_give_back_exactly_the_spans_they_were_made_from(spans):
    columns = SpanColumns.from_spans(spans)
    assert len(columns) == len(spans)
    assert list(columns) == spans
    assert columns.to_json_list() == [_span_json(s) for s in spans]
    assert len(set(columns.names)) == len(columns.names)  # each name once


def test_columns_refuse_other_types_and_ragged_lengths():
    good = SpanColumns.from_spans([Span(seq=1, kind="kernel", start_us=1, dur_ns=1, name="k",
                                        grid=(1, 1, 1), block=(1, 1, 1))])
    fields = {f: getattr(good, f) for f in ("seq", "start_us", "dur_ns", "kind", "name", "grid_x", "grid_y",
                                            "grid_z", "block_x", "block_y", "block_z", "bytes", "direction")}
    with pytest.raises(TypeError, match="dur_ns"):
        SpanColumns(**{**fields, "dur_ns": array("d", [1.0])}, names=good.names)
    with pytest.raises(TypeError, match="kind"):
        SpanColumns(**{**fields, "kind": [0]}, names=good.names)
    with pytest.raises(ValueError, match="bytes has 2 values"):
        SpanColumns(**{**fields, "bytes": array("q", [1, 2])}, names=good.names)


def test_buckets_lanes_and_series_cannot_be_built_inconsistent():
    with pytest.raises(ValueError):
        SpanBuckets(start_us=0, width_us=0, count=array("q"), busy_ns=array("q"))
    with pytest.raises(ValueError):
        SpanBuckets(start_us=0, width_us=float("nan"))
    with pytest.raises(ValueError):
        SpanBuckets(start_us=0, width_us=1, count=array("q", [1]), busy_ns=array("q"))
    buckets = SpanBuckets(start_us=0, width_us=1, count=array("q", [1]), busy_ns=array("q", [1]))
    with pytest.raises(ValueError, match="either spans or buckets"):
        LaneWindow(device=0, context=0, stream=0, label="x", executions=1)
    with pytest.raises(ValueError, match="either spans or buckets"):
        LaneWindow(device=0, context=0, stream=0, label="x", executions=1, spans=SpanColumns(), buckets=buckets)
    assert len(LaneWindow(device=0, context=0, stream=0, label="x", executions=1, buckets=buckets).buckets) == 1
    with pytest.raises(ValueError):
        Series(entity=("device", "u"), metric="m", unit="%", resolution_s=1, t_s=array("d", [1.0]))
