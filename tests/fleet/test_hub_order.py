"""A host's items put in the snapshot's merge order as the hub takes a frame (host_order.py), and
the hub's part then taken as it is by the merge: the same snapshot as merging it, whatever order an
agent lists its items in; a key an agent lists twice refuses its frame."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from gpuflow.collectors.fleet.link import Link, LinkError
from gpuflow.collectors.fleet.sse_events import SseParser
from gpuflow.collectors.fleet.targets import parse_url
from gpuflow.core.board import SnapshotBoard
from gpuflow.core.merge import merge_parts
from gpuflow.core.snapshot import Attachment, Device, Process, RetiredTraced, TracedProcess
from gpuflow.transport.frames import FrameEncoder
from link_host import LinkHost
from snapshots import make_snapshot


def shuffled_snapshot(rng: random.Random, host: str):
    """An agent's snapshot whose items come in any order (an untrusted agent chooses it)."""
    devices = [Device(index=i, uuid=f"GPU-{host}-{i}", name="H200") for i in range(rng.randint(0, 8))]
    processes = [Process(pid=pid, name=f"p{pid}", attachments=tuple(rng.sample(
        [Attachment(d.index, d.uuid) for d in devices], k=min(len(devices), rng.randint(0, 3)))))
        for pid in rng.sample(range(2, 5000), rng.randint(0, 12))]
    traced = [TracedProcess(pid=pid, session=session, name="t", cupti_status="ok")
              for pid in rng.sample(range(2, 99), 3) for session in ("a", "b")]
    retired = [RetiredTraced(session=s) for s in ("x", "y", "z")]
    for items in (devices, processes, traced, retired):
        rng.shuffle(items)
    return make_snapshot(devices=tuple(devices), processes=tuple(processes), traced=tuple(traced),
                         traced_retired=tuple(retired), timestamp=1_764_000_000.0)


def frame(snap) -> bytes:
    board = SnapshotBoard()
    board.publish(snap)
    return FrameEncoder(board, span_rate=None).current().full


def follow(hub: LinkHost, name: str, *frames: bytes) -> Link:
    """A link taking ``frames`` from the agent at ``name`` (the host shows by its address)."""
    link = Link(parse_url(f"http://{name}:7717"), hub)
    parser, reader = SseParser(1 << 24), link.new_reader()
    for f in frames:
        link._on_bytes(f, parser, reader, "summary")
    return link


@pytest.mark.parametrize("seed", range(12))
def test_the_hubs_part_is_in_merge_order_and_gives_what_merging_it_gives(seed):
    rng = random.Random(seed)
    hub, sent = LinkHost(), []
    for name in rng.sample(["gpu-a", "gpu-b", "gpu-c", "gpu-d", "gpu-e"], 4):
        sent.append(shuffled_snapshot(rng, name))
        follow(hub, name, frame(sent[-1]))
    part = hub.table.part()
    assert part.in_merge_order and len(part.hosts) == 4
    taken, merged = merge_parts([part], 1, 1.0), merge_parts([replace(part, in_merge_order=False)], 1, 1.0)
    assert taken == merged and taken.devices is part.devices and taken.processes is part.processes
    names = [h.name for h in taken.hosts]
    assert names == sorted(names)
    for name in names:   # each host's items as its agent listed them, put in order
        pids = [p.pid for p in taken.processes if p.host == name]
        assert pids == sorted(pids)
    assert sum(len(s.processes) for s in sent) == len(taken.processes)
    assert any([p.pid for p in s.processes] != sorted(p.pid for p in s.processes) for s in sent)   # sorting was needed


@pytest.mark.parametrize("part, twice", [
    ("devices", lambda s: replace(s, devices=s.devices + (replace(s.devices[0], index=7),))),
    ("processes", lambda s: replace(s, processes=s.processes + (replace(s.processes[0], name="again"),))),
    ("traced", lambda s: replace(s, traced=s.traced + s.traced[:1])),
    ("traced_retired", lambda s: replace(s, traced_retired=s.traced_retired + s.traced_retired[:1])),
])
def test_a_key_listed_twice_refuses_the_frame_and_keeps_what_was_taken(part, twice):
    rng = random.Random(7)
    good = shuffled_snapshot(rng, "gpu-a")
    while not (good.devices and good.processes):
        good = shuffled_snapshot(rng, "gpu-a")
    hub = LinkHost()
    link = follow(hub, "gpu-a", frame(good))
    kept = (link.devices, link.processes, link.traced, link.retired)
    with pytest.raises(LinkError, match=rf"refuses \({part}: an entry listed twice\)"):
        follow_more = Link(parse_url("http://gpu-b:7717"), hub)
        parser, reader = SseParser(1 << 24), follow_more.new_reader()
        follow_more._on_bytes(frame(twice(good)), parser, reader, "summary")
    assert (link.devices, link.processes, link.traced, link.retired) == kept
    assert follow_more.frames == 0 and follow_more.devices == ()
