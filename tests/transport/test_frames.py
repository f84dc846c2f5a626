"""Frames: encoded once per snapshot, full vs delta exactly as docs/snapshot.md says."""

from __future__ import annotations

import json
import math

from gpuflow.core.snapshot import Device
from gpuflow.transport.frames import FrameEncoder, dumps
from tests.transport.conftest import hub_with, lane, make_snapshot


def body(event: bytes) -> dict:
    lines = event.decode().split("\n")
    data = [l[len("data: "):] for l in lines if l.startswith("data: ")]
    assert len(data) == 1 and event.endswith(b"\n\n")
    return json.loads(data[0])


def lane_spans(doc: dict) -> dict[int, list[int]]:
    return {l["stream"]: [s["seq"] for s in l["spans"]] for t in doc["traced"] for l in t["lanes"]}


def test_first_frame_is_full_with_boot_epoch_id_and_no_delta():
    hub = hub_with(make_snapshot(seq=7, lanes=(lane(13, [1, 2, 3]),)))
    enc = FrameEncoder(hub, boot_epoch=1234)
    f = enc.current()
    assert f.seq == 7 and f.delta is None and f.base_seq is None
    assert f.full.startswith(b"id: 1234-7\nevent: snapshot\ndata: ")
    doc = body(f.full)
    assert doc["frame"] == "full" and doc["base_seq"] is None
    assert list(doc)[:2] == ["frame", "base_seq"]
    assert {k: v for k, v in doc.items() if k not in ("frame", "base_seq")} == \
        json.loads(json.dumps(hub.latest().to_json_dict()))


def test_delta_carries_only_spans_newer_than_the_base_lane_and_everything_else_whole():
    hub = hub_with(make_snapshot(seq=1, lanes=(lane(13, [1, 2, 3]), lane(14, [4]))))
    enc = FrameEncoder(hub, boot_epoch=1)
    enc.current()
    # lane 13 keeps 2..3 and adds 5, 6; lane 14 unchanged; lane 15 is new
    second = make_snapshot(seq=2, lanes=(lane(13, [2, 3, 5, 6]), lane(14, [4]), lane(15, [7, 8])))
    hub.publish(second)
    f = enc.current()
    assert f.base_seq == 1
    full, delta = body(f.full), body(f.delta)
    assert delta["frame"] == "delta" and delta["base_seq"] == 1
    assert lane_spans(full) == {13: [2, 3, 5, 6], 14: [4], 15: [7, 8]}
    assert lane_spans(delta) == {13: [5, 6], 14: [], 15: [7, 8]}
    for key in ("devices", "processes", "host", "seq", "timestamp", "sources"):
        assert delta[key] == full[key]
    t_full, t_delta = full["traced"][0], delta["traced"][0]
    assert {k: v for k, v in t_delta.items() if k != "lanes"} == \
        {k: v for k, v in t_full.items() if k != "lanes"}
    assert [{k: v for k, v in l.items() if k != "spans"} for l in t_delta["lanes"]] == \
        [{k: v for k, v in l.items() if k != "spans"} for l in t_full["lanes"]]


def test_delta_base_is_the_previous_encoded_frame_even_if_snapshots_were_skipped():
    hub = hub_with(make_snapshot(seq=1, lanes=(lane(13, [1]),)))
    enc = FrameEncoder(hub, boot_epoch=1)
    enc.current()
    hub.publish(make_snapshot(seq=2, lanes=(lane(13, [1, 2]),)))  # never encoded
    hub.publish(make_snapshot(seq=3, lanes=(lane(13, [1, 2, 3]),)))
    f = enc.current()
    assert f.base_seq == 1 and lane_spans(body(f.delta)) == {13: [2, 3]}


def test_each_snapshot_is_encoded_once_for_all_callers():
    hub = hub_with(make_snapshot(seq=1))
    enc = FrameEncoder(hub)
    a, b = enc.current(), enc.current()
    assert a is b and a.full is b.full
    j1, j2 = enc.snapshot_json(), enc.snapshot_json()
    assert j1[1] is j2[1]
    hub.publish(make_snapshot(seq=2))
    assert enc.current() is not a and enc.current().seq == 2


def test_no_snapshot_no_frame():
    enc = FrameEncoder(hub_with())
    assert enc.current() is None and enc.snapshot_json() is None


def test_json_is_compact_one_line_and_nan_becomes_null():
    odd = make_snapshot(seq=1, devices=(Device(index=0, uuid="u", name="line\nbreak",
                                               temperature_c=math.nan, power_draw_w=math.inf),))
    f = FrameEncoder(hub_with(odd)).current()
    assert f.full.count(b"\n") == 4  # id, event, data, blank line
    doc = body(f.full)
    assert doc["devices"][0]["temperature_c"] is None and doc["devices"][0]["power_draw_w"] is None
    assert doc["devices"][0]["name"] == "line\nbreak"
    assert dumps({"a": [1, 2]}) == b'{"a":[1,2]}'
