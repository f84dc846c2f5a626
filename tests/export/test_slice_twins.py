"""The compiled slice encoder (_slices_c) writes exactly the bytes of its pure-Python twin, on
generated columns and launch configurations (hostile values included: keys that match and keys that
do not, grids beyond 32 bits, wave sizes up to 2^53, no launch ids at all), refuses malformed
tables the same way, keeps the layout's numbers, and is the one in use where it should be.

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

from gpuflow.core.recorded import LaneWindow, LaunchFigures, SpanColumns
from gpuflow.export import _slices_py, protowire, slice_layout, slices
from gpuflow.export.launch_args import ArgPieces, LaunchArgs

FIELDS = ("seq", "start_us", "dur_ns", "kind", "name", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
          "block_z", "bytes", "direction")
I64 = st.integers(min_value=-(2 ** 63), max_value=2 ** 63 - 1)
#: blocks the generated spans and configurations share, so that some kernels find their row
BLOCKS = [(1, 1, 1), (256, 1, 1), (32, 4, 2)]


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
        *[st.one_of(st.integers(-1, 4096), draw_value)] * 3,            # grid
        st.one_of(st.sampled_from(BLOCKS), st.tuples(*[st.one_of(st.integers(-1, 4096), draw_value)] * 3)),
        st.one_of(st.integers(-1, 4096), draw_value),                  # bytes
        st.one_of(st.integers(-1, 7), I64),                            # direction
    )


def columns_of(raw: list[tuple]) -> SpanColumns:
    cols = {f: array("q") for f in FIELDS}
    t = 1_764_000_000_000_000
    for row in raw:
        if len(row) == 11:   # a generated row: its block as a tuple
            row = (*row[:8], *row[8], *row[9:])
        offset = row[1]
        start = t + offset if 0 <= offset <= 400 else offset
        if 0 <= offset <= 400:
            t += offset // 2
        for f, v in zip(FIELDS, (row[0], start, *row[2:])):
            cols[f].append(v)
    return SpanColumns(**cols, names=("a", "ß∂", "c" * 300))


def figures():
    """A launch configuration's figures as a collector might give them (or a hostile one)."""
    return st.builds(
        LaunchFigures, launch_id=st.one_of(st.integers(0, 3), I64),
        block=st.one_of(st.sampled_from(BLOCKS), st.tuples(I64, I64, I64)),
        occupancy_pct=st.one_of(st.none(), st.floats(0, 100), st.floats(allow_nan=True)),
        blocks_per_sm=st.one_of(st.none(), st.integers(0, 32), I64),
        limiters=st.one_of(st.none(), st.sampled_from(["registers", "warps+blocks", "\x00é"])),
        wave_blocks=st.one_of(st.none(), st.integers(-2, 5000), st.integers(2 ** 53 - 2, 2 ** 53 + 2), I64),
        waves_unavailable=st.one_of(st.none(), st.text(max_size=20)),
        unavailable=st.one_of(st.none(), st.text(max_size=20)))


def launch_args(pieces: list[SpanColumns], launches: list | None) -> list[LaunchArgs]:
    """Each piece's LaunchArgs (``launches`` None: no launch ids given; else per name its figures),
    launch ids drawn from the same few values as the figures' so that some match."""
    strings: dict[str, int] = {}
    arg_pieces = ArgPieces(lambda text: strings.setdefault(text, len(strings) + 1))
    out = []
    for n, c in enumerate(pieces):
        ids = None if launches is None else array("q", ((i * 7 + n) % 5 - 1 for i in range(len(c))))
        per_name = () if launches is None else tuple(tuple(launches[i]) if i < len(launches) else ()
                                                     for i in range(len(c.names)))
        window = LaneWindow(0, 1, 7, "x", len(c), spans=c, launch_ids=ids, launches=per_name)
        out.append(arg_pieces.lane(window))
    return out


def encode(module, pieces: list[SpanColumns], launches: list | None = None) -> tuple[bytes, list[list[int]], int]:
    made = []

    def new_subtrack(k):
        made.append(k)
        return 1000 + len(made), b"<descriptor %d>" % k

    lane = module.LaneSlices(7, new_subtrack)
    out, counts = [], []
    for c, args in zip(pieces, launch_args(pieces, launches)):
        kernel_counts = array("q", [0] * (len(c.names) + 1))
        out.append(module.encode_spans(lane, c, array("q", [20, 21, 2 ** 40]), kernel_counts, args))
        counts.append(list(kernel_counts))
    out.append(module.finish(lane))
    return b"".join(out), counts, lane.subtracks


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(rows(I64), max_size=60), min_size=1, max_size=3),
       st.one_of(st.none(), st.lists(st.lists(figures(), max_size=5), max_size=4)))
def test_the_twins_write_the_same_bytes(compiled, pieces, launches):
    columns = [columns_of(p) for p in pieces]
    assert encode(compiled, columns, launches) == encode(_slices_py, columns, launches)


def test_matching_configurations_give_their_rows_and_waves_in_both_twins(compiled):
    # kernels of name 0 with block (256, 1, 1) and launch ids 0..3 (column: (i * 7) % 5 - 1), one
    # configuration per launch id: every kernel with launch id 0..3 finds its row
    raw = [(i, i, 1000, 0, 0, 528 + i, 1, 1, 256, 1, 1, -1, -1) for i in range(20)]
    launches = [[LaunchFigures(lid, (256, 1, 1), occupancy_pct=25.0 * (lid + 1), blocks_per_sm=lid + 1,
                               limiters="registers", wave_blocks=132 * (lid + 1)) for lid in range(4)]]
    data = encode(compiled, [columns_of(raw)], launches)
    assert data == encode(_slices_py, [columns_of(raw)], launches)
    for i in range(20):
        lid = (i * 7) % 5 - 1
        if lid >= 0:   # the wave is written as its double: grid / (blocks per SM x 132)
            assert protowire.double_field(protowire.ANNOTATION_DOUBLE_VALUE,
                                          (528 + i) / (132 * (lid + 1))) in data[0]


def test_the_twins_agree_on_many_overlapping_spans(compiled):
    raw = [(i, (i * 37) % 400, 10 ** 6 * (i % 3), i % 3, i % 4 - 1, 1, 2, 3, 4, 5, 6, 4096, i % 7 - 1)
           for i in range(3000)]
    columns = [columns_of(raw[:1000]), columns_of(raw[1000:])]
    launches = [[LaunchFigures(1, (4, 5, 6), occupancy_pct=50.0, blocks_per_sm=3, wave_blocks=9)] for _ in range(3)]
    data, _, subtracks = encode(compiled, columns, launches)
    assert subtracks == slice_layout.MAX_SUBTRACKS
    assert (data, subtracks) == encode(_slices_py, columns, launches)[::2]


def test_bad_arguments_are_refused_the_same_way(compiled):
    c = columns_of([(1, 0, 5, 0, 0, 1, 1, 1, 1, 1, 1, -1, -1)])
    (good,) = launch_args([c], [[LaunchFigures(1, (1, 1, 1), occupancy_pct=50.0, blocks_per_sm=2, wave_blocks=4)]])
    for module in (compiled, _slices_py):
        with pytest.raises(ValueError, match="kernel_counts"):
            module.encode_spans(module.LaneSlices(1, None), c, array("q", [1, 2, 3]), array("q", [0]), good)
    q = lambda *v: array("q", v)   # noqa: E731
    bad = {"args.launch_ids needs one id per span": dict(launch_ids=q(1, 2)),
           "args' tables differ in length": dict(keys=q(1, 1, 1)),
           "args.first is not a run of entries": dict(first=q(0, 2, 1, 1)),
           "args.row_at does not cut args.blob into pieces": dict(blob=good.blob + b"x"),
           "an argument piece or a wave size is out of range": dict(wave_blocks=q(-1, 0))}
    bad["args.row_at does not cut args.blob into pieces "] = dict(row_at=q(0, 200, 200, 200, 200), blob=bytes(200))
    bad["an argument piece or a wave size is out of range "] = dict(no_rate=bytes(slice_layout.MAX_ARG_PIECE + 1))
    for message, change in bad.items():
        args = LaunchArgs(**{**{f: getattr(good, f) for f in LaunchArgs.__dataclass_fields__}, **change})
        for module in (compiled, _slices_py):
            with pytest.raises(ValueError, match=message.strip().replace("(", r"\(")):
                module.encode_spans(module.LaneSlices(1, None), c, array("q", [1, 2, 3]), array("q", [0, 0, 0, 0]),
                                    args)


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
