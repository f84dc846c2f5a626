"""A snapshot's plain form without its traced processes, each item made plain once
(gpuflow.transport.plain_parts): exactly ``replace(snap, traced=()).to_json_dict()`` frame after
frame, the plain form of an item the snapshot before had (the very object) reused, that of a new
object made anew."""

from __future__ import annotations

import random
from dataclasses import replace

from gpuflow.core.snapshot import FleetHost, HostInfo, Problem, RetiredTraced
from gpuflow.transport.plain_parts import PlainParts
from snapshots import make_snapshot


def test_the_plain_form_is_to_json_dicts_and_an_items_is_made_once():
    rng = random.Random(7)
    base = make_snapshot()
    devices, processes = list(base.devices), list(base.processes)
    hosts = [FleetHost(info=HostInfo(name=f"node-{i}"), problems=(Problem("fleet", "late"),)) for i in range(3)]
    retired = [RetiredTraced(session="s1", processes=2, truncated=1)]
    parts = PlainParts()
    before = None
    for seq in range(1, 40):
        if rng.random() < 0.4:   # a new reading of one device, one host heard from
            i = rng.randrange(len(devices))
            devices[i] = replace(devices[i], temperature_c=float(seq))
            j = rng.randrange(len(hosts))
            hosts[j] = replace(hosts[j], seen=float(seq), lag_ms=float(seq))
        if seq % 7 == 0:
            retired.append(RetiredTraced(session=f"s{seq}", processes=1, dropped_ring=seq))
        snap = replace(base, seq=seq, devices=tuple(devices), processes=tuple(processes), hosts=tuple(hosts),
                       traced_retired=tuple(retired))
        doc = parts.of(snap)
        assert doc == replace(snap, traced=()).to_json_dict()
        assert list(doc) == list(replace(snap, traced=()).to_json_dict())
        if before is not None:
            for part, items in (("devices", snap.devices), ("hosts", snap.hosts), ("traced_retired", snap.traced_retired)):
                for k, item in enumerate(items):
                    old = before[0][part]
                    if k < len(old) and old[k] is item:
                        assert doc[part][k] is before[1][part][k]   # the same object: its plain form again
                    else:
                        assert all(doc[part][k] is not d for d in before[1][part])
        before = ({p: getattr(snap, p) for p in ("devices", "hosts", "traced_retired")}, doc)
