"""The fleet contract (docs/snapshot.md, "Hosts" and "Schemas"): every snapshot names its hosts.

A real agent (``gpuflow watch``, fake NVML backend, fake traced collector) is a fleet of one host
named by ``NODE_NAME`` (else the hostname), whose boot epoch is its event ids'. The merge keeps two
hosts' items apart however alike they are; the stream keeps their names tables apart; and
``StreamReader`` reads schema-2 frames (a real stream recorded from an agent before hosts were
named) as the schema-4 frames they would be.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from gpuflow.core.identity import Identity, check_host_name, host_name
from gpuflow.core.merge import merge_parts, tag_part
from gpuflow.core.options import OptionError
from gpuflow.core.snapshot import (
    SCHEMA_VERSION, Device, FleetHost, HostInfo, KernelStat, Lane, Process, SnapshotPart, Span,
    TracedProcess,
)
from gpuflow.testing.fake_collector import FakeOptions, FakeScenario
from gpuflow.transport.frames import FrameEncoder
from gpuflow.transport.wire import OLD_WIRE_SCHEMA, WIRE_SCHEMA, StreamReader
from cli_process import gpuflow, gpuflow_env
from fleet_agents import Agent
from servers import SseClient
from snapshots import board_with

DATA = Path(__file__).parent / "data"
#: what schema 3 and 4 add to the host object, and to each item
HOST_FIELDS = ("name", "boot_epoch", "interval_s")
ITEMS = ("devices", "processes", "traced", "traced_retired")


def events(path: Path) -> list[tuple[str, dict]]:
    """(id, data) of every event of a recorded stream."""
    out, ev_id = [], None
    for line in path.read_text().splitlines():
        if line.startswith("id: "):
            ev_id = line[4:]
        elif line.startswith("data: "):
            out.append((ev_id, json.loads(line[6:])))
    return out


def frame_body(event: bytes) -> dict:
    return json.loads(next(l[6:] for l in event.decode().split("\n") if l.startswith("data: ")))


# -- a real agent is a fleet of one ----------------------------------------------------------------
def test_an_agent_names_its_host_and_its_boot_epoch_is_its_event_ids():
    agent = Agent("gpu-node-7")
    try:
        snap = agent.snapshot()
        assert snap["schema"] == SCHEMA_VERSION == 3
        host = snap["host"]
        assert host["name"] == "gpu-node-7" and host["interval_s"] == 0.1
        stream = SseClient(agent.port)
        try:
            first = stream.next_frame()
        finally:
            stream.close()
        assert first.json["schema"] == WIRE_SCHEMA == 4
        assert first.id.split("-")[0] == str(host["boot_epoch"]) == str(first.json["host"]["boot_epoch"])
        [entry] = snap["hosts"]
        assert entry["name"] == "gpu-node-7" and entry["state"] == "up"
        assert entry["boot_epoch"] == host["boot_epoch"] and entry["address"] is None
        assert {k: v for k, v in entry.items() if k in host} == host
        tagged = [item["host"] for part in ITEMS for item in snap[part]]
        assert snap["devices"] and snap["traced"] and set(tagged) == {"gpu-node-7"}
        agent.stop()
        agent.start()   # the same port, a new agent: a new boot epoch
        again = agent.snapshot()["host"]
        assert again["name"] == "gpu-node-7" and again["boot_epoch"] > host["boot_epoch"]
    finally:
        agent.stop()


def test_without_node_name_the_host_is_named_by_its_hostname():
    agent = Agent(None)
    try:
        assert agent.snapshot()["host"]["name"] == socket.gethostname()
    finally:
        agent.stop()


@pytest.mark.parametrize("bad", ["gpu node", "-leading-dash", "a" * 254, "node/7", "nöde"])
def test_a_node_name_that_is_no_host_name_stops_the_agent_with_one_line(bad):
    result = gpuflow("watch", "--port", "0", env=gpuflow_env(NODE_NAME=bad, GPUFLOW_NVML_FAKE="single",
                                                           GPUFLOW_DISABLED_PLUGINS="cupti"))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuflow watch: error: NODE_NAME: "), result.stderr
    assert "Traceback" not in result.stderr


def test_host_names():
    assert host_name({"NODE_NAME": "  ip-10-0-0-5.ec2.internal "}) == "ip-10-0-0-5.ec2.internal"
    assert host_name({"NODE_NAME": ""}) == host_name({}) == socket.gethostname()
    with pytest.raises(OptionError, match="NODE_NAME"):
        host_name({"NODE_NAME": "a\nb"})
    assert check_host_name("a" * 253) and check_host_name("_x-1.y")
    for bad in ("", ".x", "x y", "x:1", None, 7, "x\x00"):
        with pytest.raises(ValueError):
            check_host_name(bad)


# -- two hosts in one snapshot ---------------------------------------------------------------------
def traced(host: str | None, kernel: str, seqs) -> TracedProcess:
    spans = tuple(Span(seq=s, kind="kernel", start_us=1_000_000 + s, dur_ns=500, name=kernel,
                       grid=(8, 1, 1), block=(32, 1, 1)) for s in seqs)
    records = max(seqs) * (10 if host == "b" else 1)   # "b" is far ahead of "a"
    return TracedProcess(pid=4242, session="s1", name="train", cupti_status="ok", records=records,
                         kernels=(KernelStat(kernel, "_Z" + kernel, len(seqs), 500 * len(seqs), 500, 500),),
                         lanes=(Lane(0, 1, 7, "7", len(seqs), 0, spans),), host=host)


def two_hosts(seq: int, seqs) -> object:
    """This agent ("a") and a host it follows ("b"), alike in every key but the host's."""
    local = SnapshotPart(source="nvml", host=HostInfo(hostname="a"),
                         devices=(Device(0, "GPU-same"),), processes=(Process(4242, "train"),),
                         traced=(traced(None, "local_kernel", seqs),))
    far = SnapshotPart(source="fleet", hosts=(FleetHost(HostInfo(name="b", hostname="b"),
                                                        address="http://b:7717", detail="full"),),
                       devices=(Device(0, "GPU-same", host="b"),),
                       processes=(Process(4242, "train", host="b"),),
                       traced=(traced("b", "remote_kernel", seqs),))
    return merge_parts([tag_part(local, "a"), far], seq=seq, timestamp=1000.0 + seq,
                       identity=Identity("a", 1234), interval_s=1.0)


def test_the_merge_keeps_two_hosts_items_apart_and_lists_the_hosts():
    snap = two_hosts(1, [1, 2])
    assert [d.host for d in snap.devices] == ["a", "b"]
    assert [p.host for p in snap.processes] == ["a", "b"]
    assert [(t.host, t.kernels[0].name) for t in snap.traced] == [("a", "local_kernel"), ("b", "remote_kernel")]
    own, far = snap.hosts
    assert (own.name, own.state, own.address, own.info.boot_epoch) == ("a", "up", None, 1234)
    assert (far.name, far.address, far.detail) == ("b", "http://b:7717", "full")
    assert snap.host.name == "a" and snap.host.interval_s == 1.0


def test_the_stream_keeps_the_names_tables_of_two_hosts_same_pid_and_session_apart():
    board = board_with(two_hosts(1, [1, 2]))
    enc, reader = FrameEncoder(board, boot_epoch=1234), StreamReader()
    first = reader.read(frame_body(enc.current().full))
    assert first["hosts"] == two_hosts(1, [1, 2]).to_json_dict()["hosts"]
    board.publish(two_hosts(2, [1, 2, 3, 4]))
    delta = enc.current().delta
    assert delta is not None
    # neither host's process is taken for a new one under the other's (session, pid)
    assert not any(t.get("reset") for t in frame_body(delta)["traced"])
    read = reader.read(frame_body(delta))
    expected = json.loads(json.dumps(two_hosts(2, [1, 2, 3, 4]).to_json_dict()))
    for t in read["traced"]:
        for lane in t["lanes"]:
            lane.pop("spans_skipped")
    # a delta carries only the new spans; their names are each host's own
    got = {t["host"]: {s["name"] for l in t["lanes"] for s in l["spans"]} for t in read["traced"]}
    assert got == {"a": {"local_kernel"}, "b": {"remote_kernel"}}
    assert [t["kernels"] for t in read["traced"]] == [t["kernels"] for t in expected["traced"]]


# -- old frames --------------------------------------------------------------------------------------
def test_the_reader_reads_a_recorded_schema_2_stream_as_schema_4():
    recorded = events(DATA / "agent-schema2.sse")
    assert [d["schema"] for _, d in recorded] == [OLD_WIRE_SCHEMA] * len(recorded)
    assert [d["frame"] for _, d in recorded] == ["full"] + ["delta"] * (len(recorded) - 1)
    reader = StreamReader()
    for _, data in recorded:
        frame = reader.read(data)
        assert frame["host"]["name"] == "fakehost" and frame["host"]["boot_epoch"] is None
        assert [h["name"] for h in frame["hosts"]] == ["fakehost"]
        assert {item["host"] for part in ITEMS for item in frame[part]} == {"fakehost"}
        assert all(k["name"] and k["mangled"] for t in frame["traced"] for k in t["kernels"])
        spans = [s for t in frame["traced"] for l in t["lanes"] for s in l["spans"]]
        assert spans and all(s["kind"] in ("kernel", "memcpy", "memset") for s in spans)
    # a delta that leaves the host out gets it, named, from the frame before
    assert "host" not in recorded[-1][1] and frame["host"]["name"] == "fakehost"
    assert len(frame["devices"]) == 2


def test_an_old_agent_without_a_usable_hostname_takes_the_readers_fallback_name():
    (_, full), (_, delta) = events(DATA / "agent-schema2.sse")[:2]
    for hostname, fallback, name in ((None, "node-b", "node-b"), ("bad name", "node-b", "node-b"),
                                     (None, None, "localhost"), ("ok-host", "node-b", "ok-host")):
        reader = StreamReader(fallback_host=fallback)
        first = reader.read({**full, "host": {**full["host"], "hostname": hostname}})
        second = reader.read(delta)   # no host in it: the name given before holds
        for frame in (first, second):
            assert frame["host"]["name"] == name if "host" in frame else True
            assert {t["host"] for t in frame["traced"]} == {d["host"] for d in frame["devices"]} == {name}


def strip_hosts(frame: dict) -> dict:
    """A schema-4 frame as an agent from before hosts were named sent it (schema 2)."""
    old = {k: v for k, v in frame.items() if k != "hosts"}
    old["schema"] = OLD_WIRE_SCHEMA
    if "host" in old:
        old["host"] = {k: v for k, v in old["host"].items() if k not in HOST_FIELDS}
    for part in ITEMS:
        if part in old:
            old[part] = [{k: v for k, v in item.items() if k != "host"} for item in old[part]]
    return old


def test_reading_an_old_frame_gives_what_reading_the_new_one_gives_but_the_agents_epoch():
    scenario = FakeScenario(FakeOptions(gpus=2, procs=2, traced=2, lanes=3, spans=5), False)
    board = board_with()
    enc = FrameEncoder(board, boot_epoch=1234)
    new_reader, old_reader = StreamReader(), StreamReader()
    for seq in range(1, 13):
        part = tag_part(scenario.step(1000.0 + seq * 0.1), "fakehost")
        board.publish(merge_parts([part], seq, 1000.0 + seq * 0.1, Identity("fakehost", 1234), 0.1))
        frame = enc.current()
        data = frame_body(frame.full if seq % 5 == 1 else frame.delta)
        new, old = new_reader.read(data), old_reader.read(strip_hosts(data))
        for h in [new["host"]] + new["hosts"]:
            h.update(boot_epoch=None, interval_s=None)   # what an old frame cannot say
        assert old == new
