"""The compiled slice encoder (_slices_c) writes exactly the bytes of its pure-Python twin, on
generated columns (hostile values included), keeps the layout's numbers, and is the one in use
where it should be.

As the ring decoder's twins are checked (tests/cupti/test_extension.py): under
GPUFLOW_REQUIRE_EXTENSIONS=1 or CI=true a missing build fails instead of quietly falling back.
"""

from __future__ import annotations

import os
import subprocess
import sys
from array import array

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuflow.core.recorded import SpanColumns
from gpuflow.export import _slices_py, protowire, slice_layout, slices

FIELDS = ("seq", "start_us", "dur_ns", "kind", "name", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
          "block_z", "bytes", "direction")
I64 = st.integers(min_value=-(2 ** 63), max_value=2 ** 63 - 1)


def required() -> bool:
    return os.environ.get("GPUFLOW_REQUIRE_EXTENSIONS") == "1" or os.environ.get("CI") == "true"


@pytest.fixture(scope="module")
def compiled():
    if slices.slices_c is None:
        msg = f"the compiled slice encoder did not load: {slices.EXTENSION_IMPORT_ERROR}"
        if required():
            pytest.fail(msg)
        pytest.skip(msg)
    return slices.slices_c


def rows(draw_value):
    """A span row: mostly plausible (increasing starts, real kinds), sometimes anything."""
    return st.tuples(
        st.integers(0, 10 ** 6),                                       # seq
        st.one_of(st.integers(0, 400), I64),                           # start offset (µs) or anything
        st.one_of(st.integers(0, 5_000), st.integers(0, 10 ** 7), I64),  # dur_ns
        st.one_of(st.sampled_from([0, 0, 1, 2]), I64),                 # kind
        st.one_of(st.integers(-1, 3), I64),                            # name id (3 names)
        *[st.one_of(st.integers(-1, 4096), draw_value)] * 7,            # grid, block, bytes
        st.one_of(st.integers(-1, 7), I64),                            # direction
    )


def columns_of(raw: list[tuple]) -> SpanColumns:
    cols = {f: array("q") for f in FIELDS}
    t = 1_764_000_000_000_000
    for row in raw:
        offset = row[1]
        start = t + offset if 0 <= offset <= 400 else offset
        if 0 <= offset <= 400:
            t += offset // 2
        for f, v in zip(FIELDS, (row[0], start, *row[2:])):
            cols[f].append(v)
    return SpanColumns(**cols, names=("a", "ß∂", "c" * 300))


def encode(module, pieces: list[SpanColumns]) -> tuple[bytes, list[list[int]], int]:
    made = []

    def new_subtrack(k):
        made.append(k)
        return 1000 + len(made), b"<descriptor %d>" % k

    lane = module.LaneSlices(7, new_subtrack)
    out, counts = [], []
    for c in pieces:
        kernel_counts = array("q", [0] * (len(c.names) + 1))
        out.append(module.encode_spans(lane, c, array("q", [20, 21, 2 ** 40]), kernel_counts))
        counts.append(list(kernel_counts))
    out.append(module.finish(lane))
    return b"".join(out), counts, lane.subtracks


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(rows(I64), max_size=60), min_size=1, max_size=3))
def test_the_twins_write_the_same_bytes(compiled, pieces):
    columns = [columns_of(p) for p in pieces]
    assert encode(compiled, columns) == encode(_slices_py, columns)


def test_the_twins_agree_on_many_overlapping_spans(compiled):
    raw = [(i, (i * 37) % 400, 10 ** 6 * (i % 3), i % 3, i % 4 - 1, 1, 2, 3, 4, 5, 6, 4096, i % 7 - 1)
           for i in range(3000)]
    columns = [columns_of(raw[:1000]), columns_of(raw[1000:])]
    data, _, subtracks = encode(compiled, columns)
    assert subtracks == slice_layout.MAX_SUBTRACKS
    assert (data, subtracks) == encode(_slices_py, columns)[::2]


def test_bad_arguments_are_refused_the_same_way(compiled):
    c = columns_of([(1, 0, 5, 0, 0, 1, 1, 1, 1, 1, 1, -1, -1)])
    for module in (compiled, _slices_py):
        with pytest.raises(ValueError, match="kernel_counts"):
            module.encode_spans(module.LaneSlices(1, None), c, array("q", [1, 2, 3]), array("q", [0]))


def test_the_compiled_numbers_are_the_layouts(compiled):
    expected = {name: getattr(slice_layout, name) for name in compiled.LAYOUT if hasattr(slice_layout, name)}
    expected["N_DIRECTIONS"] = len(_slices_py._DIRECTION_ARGS)
    assert compiled.LAYOUT == expected
    assert protowire.tag(protowire.PACKET_TRACK_EVENT, protowire.LEN) == b"\x5a"
    assert protowire.tag(protowire.EVENT_DEBUG_ANNOTATIONS, protowire.LEN) == b"\x22"


def _selected(extra: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items() if k != "GPUFLOW_NO_EXTENSIONS"}
    env.update(extra)
    code = "from gpuflow.export import slices as s; print(s.USING_EXTENSION, s.encode_spans.__module__)"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_gpuflow_no_extensions_selects_the_python_twin():
    assert _selected({"GPUFLOW_NO_EXTENSIONS": "1"}) == "False gpuflow.export._slices_py"


@pytest.mark.c_extension
def test_the_compiled_twin_is_the_default(compiled):
    assert _selected({}) == "True gpuflow.export._slices_c"
