"""The integer-column JSON writers (gpuflow.transport.json_ints) and the window answer they make:
both twins byte-identical to ``json.dumps`` of the column's list, the int64 extremes included,
and /api/window's body byte-identical to encoding its documented dict whole."""

from __future__ import annotations

import json
import random
from array import array

import pytest

from gpuflow.core.recorded import LaneWindow, ProcessWindow, SpanBuckets, SpanColumns, WindowPart
from gpuflow.core.snapshot import Problem, Span
from gpuflow.transport import json_ints
from gpuflow.transport.frames import dumps
from gpuflow.transport.recorded_api import window_body, window_json

TWINS = [pytest.param(json_ints.json_ints_py.int64_json, id="py"),
         pytest.param(json_ints.json_ints_c.int64_json if json_ints.json_ints_c else None, id="c",
                      marks=pytest.mark.skipif(json_ints.json_ints_c is None, reason="not built"))]


def compact(values: array) -> bytes:
    return json.dumps(values.tolist(), separators=(",", ":")).encode()


def columns(rng: random.Random) -> list[array]:
    extremes = [-2**63, -2**63 + 1, -10, -9, -1, 0, 1, 9, 10, 99, 100, 2**63 - 1]
    return [array("q"), array("q", [0]), array("q", extremes),
            array("q", (rng.randrange(-2**63, 2**63) for _ in range(5_000))),
            array("q", (rng.randrange(-1, 4096) for _ in range(5_000))),
            array("q", (10 ** rng.randrange(19) * rng.choice((-1, 1)) for _ in range(1_000)))]


@pytest.mark.parametrize("int64_json", TWINS)
def test_a_column_is_written_as_json_dumps_writes_its_list(int64_json):
    for values in columns(random.Random(11)):
        assert int64_json(values) == compact(values)


@pytest.mark.skipif(json_ints.json_ints_c is None, reason="the compiled writer is not built")
def test_the_compiled_writer_takes_only_int64_columns():
    with pytest.raises((TypeError, ValueError)):
        json_ints.json_ints_c.int64_json(array("i", [1, 2]))
    with pytest.raises((TypeError, ValueError)):
        json_ints.json_ints_c.int64_json(array("d", [1.0]))


def window(rng: random.Random) -> tuple[WindowPart, ...]:
    spans = [Span(seq=i, kind=rng.choice(("kernel", "memcpy", "memset")), start_us=1_764_000_000_000_000 + i,
                  dur_ns=rng.randrange(10**9), name=rng.choice(("gemm", "äöü \"quoted\"", "k\u2028")),
                  grid=(rng.randrange(1, 1 << 31), 1, 1), block=(256, 1, 1), bytes=rng.randrange(1 << 40),
                  direction=rng.choice((None, "h2d", "d2h")))
             for i in range(300)]
    exact = LaneWindow(device=0, context=1, stream=7, label="compute \u00e9", executions=300,
                       spans=SpanColumns.from_spans(spans))
    empty = LaneWindow(device=1, context=2, stream=9, label="idle", executions=0, spans=SpanColumns())
    reduced = LaneWindow(device=0, context=1, stream=8, label="copies", executions=900,
                         buckets=SpanBuckets(start_us=1e6, width_us=250.5, count=array("q", [600, 300]),
                                             busy_ns=array("q", [250_000, 12_000])))
    process = ProcessWindow(pid=42, session="s1", name="train", retained_from_s=0.5, retained_to_s=None,
                            lanes=(exact, empty, reduced), complete=False)
    bare = ProcessWindow(pid=43, session="s2", name="idle", retained_from_s=None, retained_to_s=None,
                         lanes=(), complete=True)
    lost = Problem(source="other", message="ring lost")
    return (WindowPart(source="rec", processes=(process, bare)), WindowPart(source="other", problems=(lost,)))


@pytest.mark.parametrize("pid,width", [(None, None), (42, 1920)])
def test_the_window_body_is_the_documented_json_byte_for_byte(pid, width):
    parts = window(random.Random(5))
    assert window_body(parts, 1.25, 2.5, pid, width) == dumps(window_json(parts, 1.25, 2.5, pid, width))
    assert window_body((), 1.25, 2.5, pid, width) == dumps(window_json((), 1.25, 2.5, pid, width))
