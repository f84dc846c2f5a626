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
