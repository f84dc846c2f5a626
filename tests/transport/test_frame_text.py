"""A frame's text, put together from pieces (gpuflow.transport.frames: the top-level parts through
orjson, heads through json, span rows and kernel entries by gpuflow.transport.wire_text), is the
compact JSON of the frame as one dict (byte for byte but for how a float is written: orjson and
json may differ there, 0.00001 and 1e-05), with either writer twin, and reads back to the plain
snapshot; what orjson does not take is written as json writes it.

Histories of busy processes whose lanes are columns (and some whose spans are Span objects),
kernels that move or not, non-finite floats, values and shapes the compiled writer declines."""

from __future__ import annotations

import json
import math
import re
from array import array

import pytest

from unittest import mock

from hypothesis import given, settings, strategies as st

from gpuflow.core.recorded import SpanColumns
from gpuflow.core.snapshot import KernelStat, Lane, Span, TracedProcess, kernel_order
from gpuflow.transport import frames, wire_text
from gpuflow.transport.frames import FrameEncoder
from gpuflow.transport.wire import StreamReader
from snapshots import board_with, make_snapshot

COLUMNS = ("seq", "start_us", "dur_ns", "kind", "name", "grid_x", "grid_y", "grid_z",
           "block_x", "block_y", "block_z", "bytes", "direction")
NAMES = ("gemm<float>", "softmax \u00e9", 'quote " and \\', "k\u2028")


def data(event: bytes) -> str:
    lines = event.decode().split("\n")
    found = [l[len("data: "):] for l in lines if l.startswith("data: ")]
    assert len(found) == 1 and event.endswith(b"\n\n")
    return found[0]


def plain(snap) -> dict:
    """The plain form as a client reads it: non-finite floats are null on the wire."""
    return json.loads(json.dumps(frames._finite(snap.to_json_dict()), allow_nan=False))


@st.composite
def lane_of(draw, stream: int, step: int, seq_from: int) -> Lane:
    """A lane whose spans run up to ``seq_from + step * 7``: columns, or Span objects."""
    n = draw(st.integers(0, 12))
    last = seq_from + step * 7
    seqs = list(range(max(0, last - n + 1), last + 1))
    odd = draw(st.integers(0, 40)) == 0   # now and then a span outside the columns' two shapes
    rows = []
    for s in seqs:
        kind = draw(st.sampled_from([0, 0, 0, 1, 2]))
        if kind == 0:
            rows.append((s, 1_764_000_000_000_000 + 3 * s, 100 + s, 0, draw(st.integers(-1, len(NAMES) - 1)),
                         draw(st.sampled_from([1, 256, 65535])), draw(st.sampled_from([1, 1, 4])), 1, 128, 1, 1,
                         512 if odd else -1, -1))
        else:
            rows.append((s, 1_764_000_000_000_000 + 3 * s, 50, kind, -1, -1, -1, -1, -1, -1, -1,
                         draw(st.sampled_from([-1, 4096])), draw(st.integers(-1, 5))))
    columns = SpanColumns(**{c: array("q", (r[i] for r in rows)) for i, c in enumerate(COLUMNS)}, names=NAMES)
    spans: SpanColumns | tuple[Span, ...] = columns if draw(st.integers(0, 4)) else tuple(columns)
    return Lane(device=0, context=1, stream=stream, label=f"s{stream}", executions=last + 1,
                spans_elided=last + 1 - len(seqs), spans=spans)


@st.composite
def kernels_of(draw, step: int) -> tuple[KernelStat, ...]:
    n = draw(st.integers(0, 5))
    out = []
    for i in range(n):
        moved = draw(st.booleans())
        count = step * 10 + i if moved else 5 + i
        timed = draw(st.sampled_from([count, None, math.nan, math.inf, 1.5, True]))
        out.append(KernelStat(name=NAMES[i % len(NAMES)], mangled=f"_Z{i}k" if i < 4 else None, count=count,
                              total_ns=count * 100, min_ns=draw(st.sampled_from([None, 10, 2**64 - 1])),
                              max_ns=draw(st.sampled_from([None, 99, [1, 2]])), timed=timed))
    if n and draw(st.integers(0, 10)) == 0:   # the same kernel twice: ids repeat
        out.append(out[0])
    return tuple(sorted(out, key=kernel_order))


@st.composite
def history(draw) -> list:
    snaps = []
    for step in range(1, draw(st.integers(2, 6)) + 1):
        traced = []
        for pid in draw(st.sets(st.sampled_from([1, 2, 3]), max_size=3)):
            lanes = tuple(draw(lane_of(13 + j, step, 10 * pid)) for j in range(draw(st.integers(0, 3))))
            traced.append(TracedProcess(pid=pid, session="s1", name="p", cupti_status="ok", records=step * 100,
                                        kernels=draw(kernels_of(step)), lanes=lanes,
                                        behind_live_ms=draw(st.sampled_from([None, 1.5, math.nan]))))
        snaps.append(make_snapshot(seq=step, traced=tuple(sorted(traced, key=lambda t: t.pid)),
                                   timestamp=1764473412.5 + step * draw(st.sampled_from([0.01, 0.05, 0.3]))))
    return snaps


def frames_of(snaps) -> list[bytes]:
    """Every frame the encoder makes of ``snaps``: the full first, then per snapshot its delta and
    its full frame."""
    board = board_with(snaps[0])
    enc = FrameEncoder(board, boot_epoch=1, span_rate=40)
    out = [enc.current().full]
    for s in snaps[1:]:
        board.publish(s)
        f = enc.current()
        out += [f.delta, f.full]
    return out


def with_each_writer(snaps) -> list[list[bytes]]:
    """The frames of ``snaps`` with one twin of the writer, then the other."""
    twins = [wire_text.wire_text_py] + ([wire_text.wire_text_c] if wire_text.wire_text_c is not None else [])
    out = []
    for twin in twins:
        with mock.patch.object(frames.wire_text, "span_rows", twin.span_rows), \
                mock.patch.object(frames.wire_text, "kernel_delta", twin.kernel_delta):
            out.append(frames_of(snaps))
    return out


@settings(max_examples=150, deadline=None)
@given(history())
def test_a_frame_is_the_text_of_its_dict_and_reads_back_to_the_plain_snapshot(snaps):
    runs = with_each_writer(snaps)
    assert all(run == runs[0] for run in runs)   # both writer twins, byte for byte
    events = runs[0]
    plain_keys = list(plain(snaps[0]))
    for event in events:
        text = data(event)
        frame = json.loads(text)   # one line of compact JSON, its members in the order the dict had them
        assert not re.search(r"\s", re.sub(r'"(?:[^"\\]|\\.)*"', '""', text))   # compact: no space outside a string
        assert list(frame) == ["frame", "base_seq"] + [k for k in plain_keys if k in frame]
        for t in frame["traced"]:
            extra = [k for k in ("names", "reset", "kernels", "kernel_launches", "lanes") if k in t]
            assert list(t)[-len(extra):] == extra and "names" in extra
            for lane in t.get("lanes", []):
                assert list(lane) == ["device", "context", "stream", "label", "executions", "spans_elided",
                                      "spans"] + (["spans_skipped"] if frame["frame"] == "delta" else [])
    reader = StreamReader()
    got = reader.read(json.loads(data(events[0])))
    assert got["traced"] == plain(snaps[0])["traced"]
    for snap, delta in zip(snaps[1:], events[1::2]):
        got = reader.read(json.loads(data(delta)))
        want = plain(snap)["traced"]
        if any(len({(k.name, k.mangled) for k in t.kernels}) != len(t.kernels) for t in snap.traced):
            continue   # a kernel twice: a delta's reader keeps one entry per name (one per name is the contract)
        assert [(t["pid"], t["kernels"], [(l["stream"], l["executions"], l["spans_elided"]) for l in t["lanes"]])
                for t in got["traced"]] == [(t["pid"], t["kernels"], [(l["stream"], l["executions"],
                                            l["spans_elided"]) for l in t["lanes"]]) for t in want]
    for snap, full in zip(snaps[1:], events[2::2]):   # a full frame: every lane's whole sample
        assert StreamReader().read(json.loads(data(full)))["traced"] == plain(snap)["traced"]


@pytest.mark.parametrize("value", [1e-05, 1e-300, 1e300, -0.0, 0.1 + 0.2, 2.5e-7, 12345678.9])
def test_a_float_reads_back_as_itself(value):
    assert json.loads(frames.dumps({"x": value, "y": [value]})) == {"x": value, "y": [value]}


@pytest.mark.parametrize("doc", [{"big": 2 ** 70}, {1: "an int key"}, {"nan": math.nan, "big": -(2 ** 64)},
                                 {"t": (True, None, "é\u2028")}])
def test_what_orjson_does_not_take_is_written_as_json_writes_it(doc):
    want = json.dumps(frames._finite(doc), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    assert json.loads(frames.dumps(doc)) == json.loads(want)
    if doc != {"t": (True, None, "é\u2028")}:   # those orjson takes: the same text anyway
        assert frames.dumps(doc) == want.encode()


def test_text_utf8_cannot_hold_is_refused_as_before():
    with pytest.raises(UnicodeEncodeError):
        frames.dumps({"s": "\ud800"})


def test_a_lane_head_is_written_as_json_writes_its_dict():
    from gpuflow.transport.frames import compact, lane_head_text
    from gpuflow.transport.wire import lane_head

    lanes = [Lane(device=0, context=1, stream=13, label="compute \u00e9 \"q\" \u2028", executions=2**70,
                  spans_elided=-1),
             Lane(device=True, context=1, stream=7, label="default", executions=3, spans_elided=3),   # a bool: json's
             Lane(device=0, context=1, stream=7, label=None, executions=3, spans_elided=3)]   # no label: json's
    for lane in lanes:
        assert lane_head_text(lane) + "}" == compact(lane_head(lane))
