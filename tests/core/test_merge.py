"""Merging collector parts is deterministic and follows the rules in hookspecs.py."""

from __future__ import annotations

import itertools
import json

from gpuflow.core.merge import merge_parts
from gpuflow.core.snapshot import (Attachment, Device, HostInfo, Problem, Process, SnapshotPart,
                                   TracedProcess)


def parts():
    return [
        SnapshotPart(source="nvml", host=HostInfo(hostname="box", driver_version="580.1"),
                     devices=(Device(index=1, uuid="GPU-b"), Device(index=0, uuid="GPU-a", name="A")),
                     processes=(Process(pid=20, name="train", attachments=(
                         Attachment(1, "GPU-b", memory_used_bytes=5), Attachment(0, "GPU-a"))),),
                     problems=(Problem("nvml", "slow"),)),
        SnapshotPart(source="extra", host=HostInfo(hostname="other", nvml_version="13"),
                     devices=(Device(index=0, uuid="GPU-a", name="shadowed"), Device(index=2, uuid="GPU-c")),
                     processes=(Process(pid=20, user="alice", attachments=(Attachment(2, "GPU-c"),)),
                                Process(pid=3)),
                     problems=(Problem("extra", "note"),)),
        SnapshotPart(source="cupti", traced=(TracedProcess(pid=20, session="s"),
                                             TracedProcess(pid=9, session="s"))),
    ]


def test_merge_is_independent_of_registration_order():
    encoded = {json.dumps(merge_parts(list(order), 1, 0.0).to_json_dict(), sort_keys=True)
               for order in itertools.permutations(parts())}
    assert len(encoded) == 1


def test_merge_rules():
    snap = merge_parts(parts(), 5, 12.5)
    assert snap.seq == 5 and snap.timestamp == 12.5
    assert snap.sources == ("cupti", "extra", "nvml")
    # host: first part in source order that knows a field
    assert snap.host == HostInfo(hostname="other", driver_version="580.1", nvml_version="13")
    # devices keyed by uuid, first source wins, sorted by index
    assert [(d.index, d.uuid, d.name) for d in snap.devices] == [
        (0, "GPU-a", "shadowed"), (1, "GPU-b", None), (2, "GPU-c", None)]
    # one process, attachments unioned and sorted, fields from the first part that knows them
    p20 = next(p for p in snap.processes if p.pid == 20)
    assert (p20.name, p20.user) == ("train", "alice")
    assert [a.device_uuid for a in p20.attachments] == ["GPU-a", "GPU-b", "GPU-c"]
    assert [p.pid for p in snap.processes] == [3, 20]
    assert [t.pid for t in snap.traced] == [9, 20]
    assert [p.message for p in snap.problems] == ["note", "slow"]


def test_unavailable_is_null_in_json_never_zero():
    snap = merge_parts([SnapshotPart(source="x", devices=(Device(index=0, uuid="u", memory_used_bytes=0),))], 1, 0)
    d = snap.to_json_dict()["devices"][0]
    assert d["memory_used_bytes"] == 0
    assert d["temperature_c"] is None and d["power_draw_w"] is None


def test_span_json_has_every_field_of_span():
    from dataclasses import asdict, fields

    from gpuflow.core.snapshot import Lane, Snapshot, Span, TracedProcess

    span = Span(seq=3, kind="memcpy", start_us=10, dur_ns=7, bytes=64, direction="h2d", grid=(1, 2, 3))
    snap = Snapshot(seq=1, timestamp=0.0, traced=(TracedProcess(
        pid=1, session="s", lanes=(Lane(device=0, context=1, stream=2, label="x", executions=1,
                                        spans_elided=0, spans=(span,)),)),))
    encoded = snap.to_json_dict()["traced"][0]["lanes"][0]["spans"][0]
    assert list(encoded) == [f.name for f in fields(Span)]
    expected = asdict(span)
    expected["grid"] = [1, 2, 3]
    assert encoded == expected


def fleet_part(in_merge_order: bool) -> SnapshotPart:
    """A hub's part: two hosts' items, each host's in the snapshot's order, the hosts by name."""
    items = []
    for host in ("gpu-a", "gpu-b"):
        items.append((
            (Device(index=0, uuid=f"{host}-0", host=host), Device(index=1, uuid=f"{host}-1", host=host)),
            (Process(pid=7, host=host, attachments=(Attachment(0, f"{host}-0"), Attachment(1, f"{host}-1"))),
             Process(pid=40, host=host)),
            (TracedProcess(pid=7, session="r", host=host), TracedProcess(pid=7, session="s", host=host)),
        ))
    return SnapshotPart(source="fleet", devices=tuple(d for i in items for d in i[0]),
                        processes=tuple(p for i in items for p in i[1]),
                        traced=tuple(t for i in items for t in i[2]),
                        problems=(Problem("fleet", "one down"),), in_merge_order=in_merge_order)


def test_a_part_in_merge_order_is_taken_as_it_is_and_gives_what_merging_it_gives():
    taken = merge_parts([fleet_part(True)], 3, 1.0)
    merged = merge_parts([fleet_part(False)], 3, 1.0)
    assert taken == merged
    part = fleet_part(True)
    taken = merge_parts([part, SnapshotPart(source="nvml", problems=(Problem("nvml", "x"),))], 3, 1.0)
    assert taken.devices is part.devices and taken.processes is part.processes and taken.traced is part.traced
    assert [p.message for p in taken.problems] == ["one down", "x"]


def test_a_part_in_merge_order_is_merged_with_another_that_has_items():
    other = SnapshotPart(source="extra", devices=(Device(index=5, uuid="gpu-a-0", name="shadow", host="gpu-a"),
                                                  Device(index=0, uuid="gpu-0", host="gpu-0")))
    snap = merge_parts([fleet_part(True), other], 1, 0.0)
    assert snap == merge_parts([fleet_part(False), other], 1, 0.0)
    assert [d.uuid for d in snap.devices][:3] == ["gpu-0", "gpu-a-1", "gpu-a-0"] and snap.devices[2].name == "shadow"
