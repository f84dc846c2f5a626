"""``/api/stream?detail=hosts``: a tile per host, full then deltas of the changed tiles only, read back
by HostsReader into exactly the tiles of the snapshot; from a real hub, a killed agent's tile turns
down in the next delta."""

from __future__ import annotations

import json

from gpuflow.core.identity import Identity
from gpuflow.core.merge import merge_parts
from gpuflow.core.snapshot import (
    Attachment, Device, FleetHost, HostInfo, Process, SnapshotPart, TracedProcess,
)
from gpuflow.transport.hosts_view import HostsFrames, HostsReader, tiles
from fleet_agents import Agent, Hub, wait_for
from servers import SseClient, http_get
from snapshots import board_with


def body(event: bytes) -> dict:
    return json.loads(next(l[6:] for l in event.decode().split("\n") if l.startswith("data: ")))


def fleet(seq: int, hosts: dict[str, float], gone: tuple[str, ...] = ()) -> object:
    """A hub's snapshot: one 2-GPU host per name, at the given utilization."""
    devices, processes, traced, entries = [], [], [], []
    for name, util in hosts.items():
        if name in gone:
            continue
        entries.append(FleetHost(HostInfo(name=name), address=f"http://{name}:7717/", detail="summary"))
        devices += [Device(i, f"GPU-{i}", utilization_gpu_pct=util, memory_used_bytes=1 << 30,
                           memory_total_bytes=80 << 30, host=name) for i in (1, 0)]
        processes.append(Process(4242, "train", attachments=(Attachment(0, "GPU-0"),), host=name))
        traced.append(TracedProcess(4242, "s", state="running", host=name))
    part = SnapshotPart(source="fleet", hosts=tuple(entries), devices=tuple(devices),
                        processes=tuple(processes), traced=tuple(traced))
    return merge_parts([part], seq, 1000.0 + seq, Identity("hub", 1), 1.0)


def test_deltas_carry_the_changed_tiles_only_and_read_back_to_every_tile():
    board = board_with(fleet(1, {"a": 10.0, "b": 20.0, "c": 30.0}))
    frames, reader = HostsFrames(board, boot_epoch=7), HostsReader()
    first = body(frames.current().full)
    assert first["detail"] == "hosts" and first["frame"] == "full"
    read = reader.read(first)
    assert read == tiles(board.latest()) and read["a"]["gpus"] == [[0, 10.0, 1 << 30, 80 << 30, False],
                                                                   [1, 10.0, 1 << 30, 80 << 30, False]]
    assert read["a"]["process_count"] == 1 and read["a"]["traced_running"] == 1
    board.publish(fleet(2, {"a": 10.0, "b": 25.0, "c": 30.0}, gone=("c",)))
    delta = body(frames.current().delta)
    assert [t["name"] for t in delta["hosts"]] == ["b"] and delta["hosts_gone"] == ["c"]
    assert "host" not in delta   # the hub's own host did not change
    assert reader.read(delta) == tiles(board.latest())


def test_a_real_hubs_overview_turns_a_killed_agent_down_in_a_delta():
    a, b = Agent("tile-a", interval_ms=200), Agent("tile-b", interval_ms=200)
    hub = Hub(a.url, b.url)
    try:
        wait_for(lambda: {h["state"] for h in hub.hosts().values()} == {"up"} and len(hub.hosts()) == 2, 10,
                 what="both up")
        stream = SseClient(hub.port, "/api/stream?detail=hosts")
        reader = HostsReader()
        try:
            read = reader.read(stream.next_frame().json)
            assert set(read) == {"tile-a", "tile-b"} and len(read["tile-a"]["gpus"]) == 1
            a.kill()
            while reader.tiles["tile-a"]["state"] != "down":
                frame = stream.next_frame().json
                assert frame["frame"] == "delta"
                reader.read(frame)
            assert reader.tiles["tile-b"]["state"] == "up"
        finally:
            stream.resp.close()
            stream.close()
        status, _, answer = http_get(hub.port, "/api/stream?detail=hosts&host=tile-b")
        assert status == 400 and b"takes no host" in answer
    finally:
        hub.stop()
        a.stop()
        b.stop()
