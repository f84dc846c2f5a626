"""A trace file is untrusted: crafted and fuzzed files make the reader and the recording collector
either show what is there or refuse the file with one TraceReadError line; never another
exception, never a value the snapshot or the routes cannot carry, and no more held than the
limits allow."""

from __future__ import annotations

import math
import random
import time

import pytest

from gpuflow.collectors.recording.final_state import final_part
from gpuflow.collectors.recording.loading import RecordingError, load
from gpuflow.core.snapshot import Snapshot, TRANSFER_DIRECTIONS
from gpuflow.export import protowire as w
from gpuflow.export import slice_layout as L
from gpuflow.export.perfetto import END_OF_TRACE, TraceWriter
from gpuflow.export.trace_read import TraceReadError, read_trace

from .traces import T0, Recorded

SEQ = w.int_field(w.PACKET_SEQUENCE_ID, L.SEQUENCE_ID)


def header() -> bytes:
    out: list[bytes] = []
    TraceWriter(out.append).header()
    return b"".join(out)


def track(uuid: int, name: str | None = None, parent: int | None = None, pid: int | None = None) -> bytes:
    body = w.int_field(w.TRACK_UUID, uuid)
    if name is not None:
        body += w.text_field(w.TRACK_NAME, name)
    if pid is not None:
        body += w.len_field(w.TRACK_PROCESS, w.int_field(w.PROCESS_PID, pid))
    if parent is not None:
        body += w.int_field(w.TRACK_PARENT_UUID, parent)
    return w.packet(w.len_field(w.PACKET_TRACK_DESCRIPTOR, body))


def arg(iid: int, value: int) -> bytes:
    return w.len_field(w.EVENT_DEBUG_ANNOTATIONS, w.int_field(w.ANNOTATION_NAME_IID, iid)
                       + w.int_field(w.ANNOTATION_INT_VALUE, value))


def begin(track_uuid: int, ts: int, *args: bytes, category: int = 1, name: int = L.NAME_UNNAMED_KERNEL) -> bytes:
    event = (w.int_field(w.EVENT_TYPE, w.TYPE_SLICE_BEGIN) + w.int_field(w.EVENT_TRACK_UUID, track_uuid)
             + w.int_field(w.EVENT_CATEGORY_IIDS, category) + w.int_field(w.EVENT_NAME_IID, name) + b"".join(args))
    return w.packet(w.int_field(w.PACKET_TIMESTAMP, ts) + w.len_field(w.PACKET_TRACK_EVENT, event) + SEQ)


LANE = track(1, pid=42) + track(2, "GPU 0", 1) + track(3, "compute (stream 7)", 2)
GOOD_SLICE = begin(3, int(T0 * 1e9), arg(L.ARG_SEQ, 1), arg(L.ARG_DUR_NS, 500))


@pytest.mark.parametrize("body, words", [
    (LANE + begin(9, 1000, arg(L.ARG_SEQ, 1), arg(L.ARG_DUR_NS, 5)), "not described before it"),
    (LANE + begin(3, 1000, arg(L.ARG_SEQ, 1)), "lacks its seq or dur_ns"),
    (LANE + begin(3, 1000, arg(L.ARG_SEQ, 1), arg(L.ARG_DUR_NS, 5), name=999), "never interned"),
    (LANE + begin(3, 1000, arg(99, 1), arg(L.ARG_DUR_NS, 5)), "name id the header does not define"),
    (LANE + begin(3, 1000, arg(L.ARG_SEQ, 1), arg(L.ARG_DUR_NS, 5), category=77), "no category GPUFlow defines"),
    (track(1, pid=42) + track(1, pid=43), "described twice"),
    (track(2, "GPU 0", 1), "not described before it"),
    (track(1, pid=42) + track(2, "a screen", 1), "not a GPU's"),
    (track(1, pid=42) + track(2, "GPU 0", 1) + track(3, "a stream", 2), "not a stream's"),
    (track(1, pid=-3), "no process id"),
    (LANE + w.packet(w.len_field(w.PACKET_INTERNED_DATA, w.len_field(
        w.INTERNED_EVENT_NAMES, w.int_field(1, 50) + w.text_field(2, "k")))), "packet sequence"),
    (LANE + w.packet(SEQ + w.int_field(w.PACKET_SEQUENCE_FLAGS, 1)), "clears the interned names again"),
    (w.packet(b"\x08" + b"\xff" * 10 + b"\x01"), "longer than ten bytes"),
    (w.packet(w.tag(60, 2) + w.varint(1 << 62)), "says"),
    (w.packet(w.tag(5, 3)), "wire type 3"),
])
def test_crafted_traces_are_refused_with_what_is_wrong(body, words):
    with pytest.raises(TraceReadError, match=words) as caught:
        read_trace(header() + body + END_OF_TRACE)
    assert "\n" not in str(caught.value)


def test_values_a_ring_or_a_forger_could_write_are_kept_within_what_the_columns_mean():
    copy = begin(3, (1 << 64) - 1000, arg(L.ARG_SEQ, -(1 << 63)), arg(L.ARG_DUR_NS, -5), arg(L.ARG_BYTES, 7),
                 arg(L.ARG_DIRECTION, 99), arg(L.ARG_GRID_X, 3), category=L.KIND_MEMCPY + 1, name=L.NAME_MEMCPY)
    kernel = begin(3, 5000, arg(L.ARG_SEQ, 2), arg(L.ARG_DUR_NS, 9), arg(L.ARG_BYTES, 7), arg(L.ARG_DIRECTION, 1))
    contents = read_trace(header() + LANE + copy + kernel + END_OF_TRACE)
    (lane,) = contents.processes[0].lanes
    c = lane.spans
    assert list(c.direction) == [-1, -1] and list(c.grid_x) == [-1, -1] and list(c.bytes) == [7, -1]
    assert c.start_us[0] == ((1 << 64) - 1000) // 1000 and c.seq[0] == -(1 << 63)
    assert [s.kind for s in c] == ["memcpy", "kernel"]


def counter_trace(values: list[tuple[int, float]]) -> bytes:
    counter = w.packet(w.len_field(w.PACKET_TRACK_DESCRIPTOR, w.int_field(w.TRACK_UUID, 6) + w.text_field(
        w.TRACK_NAME, "power_draw_w") + w.int_field(w.TRACK_PARENT_UUID, 5) + w.len_field(
        w.TRACK_COUNTER, w.text_field(w.COUNTER_UNIT_NAME, "W"))))
    points = b"".join(w.packet(w.int_field(w.PACKET_TIMESTAMP, ts) + w.len_field(w.PACKET_TRACK_EVENT, w.int_field(
        w.EVENT_TYPE, w.TYPE_COUNTER) + w.int_field(w.EVENT_TRACK_UUID, 6) + w.double_field(
        w.EVENT_DOUBLE_COUNTER_VALUE, v)) + SEQ) for ts, v in values)
    return header() + track(5, "GPU-x") + counter + points + END_OF_TRACE


def test_counter_values_out_of_order_or_infinite_become_what_a_series_can_say():
    (s,) = read_trace(counter_trace([(3_000_000_000, 2.0), (1_000_000_000, math.inf), (2_000_000_000, 5.0)])).series
    assert s.entity == ("device", "GPU-x") and s.unit == "W"
    assert list(s.t_s) == [1.0, 2.0, 3.0] and math.isnan(s.value[0]) and list(s.value[1:]) == [5.0, 2.0]


def mutations(data: bytes, rng: random.Random):
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(data))
        how = rng.randrange(5)
        if how == 0:
            data = data[:i] + bytes([rng.randrange(256)]) + data[i + 1:]
        elif how == 1:
            data = data[:i] + data[i + rng.randint(1, 9):]
        elif how == 2:
            data = data[:i] + rng.randbytes(rng.randint(1, 9)) + data[i:]
        elif how == 3:
            data = data[:i] + bytes([data[i] | 0x80]) + data[i + 1:]   # a varint made longer
        else:
            j = rng.randrange(len(data))
            data = data[:i] + data[j:j + 40] + data[i:]   # a piece of the trace repeated elsewhere
    return data


def test_fuzzed_traces_are_shown_or_refused_never_anything_else(tmp_path):
    good = Recorded(ticks=2, traced=1, lanes=3, spans=6).trace()
    rng = random.Random(20261201)
    shown = refused = 0
    slowest = 0.0
    for case in range(1500):
        data = mutations(good, rng)
        started = time.perf_counter()
        try:
            contents = read_trace(data)
        except TraceReadError as exc:
            assert "\n" not in str(exc)
            refused += 1
            continue
        finally:
            slowest = max(slowest, time.perf_counter() - started)
        shown += 1
        path = tmp_path / f"case{case}"
        path.write_bytes(data)
        recording = load(str(path), 1 << 20)
        part = final_part(recording, "recording", T0 + 100)
        snapshot = Snapshot(seq=1, timestamp=T0, devices=part.devices, processes=part.processes, traced=part.traced,
                            problems=part.problems)
        snapshot.to_json_dict()
        for t in part.traced:
            assert all(tr.direction in TRANSFER_DIRECTIONS for tr in t.transfers)
        lo, hi = recording.start_s or T0, recording.end_s or T0 + 1
        for width in (None, 7):
            recording.window(lo - 1, hi + 1, None, width, "recording")
        recording.readings.query(lo - 1, hi + 1, "recording")
    assert refused > 1000 and shown > 10, (shown, refused)
    print(f"fuzz: {shown} shown, {refused} refused, slowest read {slowest * 1e3:.1f} ms")


def test_a_file_swapped_for_a_fifo_is_refused_not_waited_on(tmp_path):
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(RecordingError, match="not a regular file"):
        load(str(fifo), 1 << 20)


def test_arguments_in_any_protobuf_form_read_as_gpuflows_own():
    # GPUFlow writes an argument as a one-byte name id, then its value; the reader's quick path
    # takes that form, and any other valid one (a padded varint id, an unknown field, the value
    # first) must read the same
    def odd(iid: int, value: int, form: int) -> bytes:
        name, val = w.int_field(w.ANNOTATION_NAME_IID, iid), w.int_field(w.ANNOTATION_INT_VALUE, value)
        body = {0: name + val, 1: w.tag(w.ANNOTATION_NAME_IID, w.VARINT) + bytes([0x80 | iid, 0x00]) + val,
                2: name + val + w.int_field(99, 7), 3: val + name}[form]
        return w.len_field(w.EVENT_DEBUG_ANNOTATIONS, body)
    seen = set()
    for form in range(4):
        data = header() + LANE + begin(3, 7_000, odd(L.ARG_SEQ, 41, form), odd(L.ARG_DUR_NS, 300, form),
                                       odd(L.ARG_GRID_X, -2, form)) + END_OF_TRACE
        (lane,) = read_trace(data).processes[0].lanes
        seen.add((lane.spans.seq[0], lane.spans.dur_ns[0], lane.spans.grid_x[0]))
    assert seen == {(41, 300, -2)}
