"""The hub's kernel tables (kernel_tables.py): every entry a frame carries checked, an entry a delta
leaves out the very object checked before, the same table while nothing changed, the cap held
against an agent that sends new names without end; and what the hub takes is what the plain
reading took."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings, strategies as st

from gpuflow.collectors.fleet import parse
from gpuflow.collectors.fleet.kernel_tables import CheckedTable, CheckedTables
from gpuflow.collectors.fleet.lane_columns import read_rows
from gpuflow.collectors.fleet.link import Link, LinkError
from gpuflow.collectors.fleet.parse import LIST_CAPS, FrameRefused
from gpuflow.collectors.fleet.sse_events import SseParser
from gpuflow.collectors.fleet.targets import parse_url
from gpuflow.core.board import SnapshotBoard
from gpuflow.core.snapshot import KernelLaunch, KernelStat, TracedProcess
from gpuflow.transport.frames import FrameEncoder
from gpuflow.transport.wire import StreamReader
from link_host import LinkHost
from snapshots import make_snapshot

KERNEL_CAP = LIST_CAPS["kernels"]


def body(frame_bytes: bytes) -> dict:
    return json.loads(frame_bytes.split(b"\ndata: ", 1)[1])


def kernel(i: int, count: int) -> KernelStat:
    return KernelStat(f"k{i}(float*)", f"_Z2k{i}Pf", count, count * 1000 + i, 10, 2000, count)


def launch(i: int, configs: int) -> KernelLaunch:
    return KernelLaunch(mangled=f"_Z2k{i}Pf", configs=configs, block_threads=128, occupancy_pct=50.0 + i)


class Agent:
    """An agent's frames of one traced process whose kernels' counts change as told."""

    def __init__(self, n: int) -> None:
        self.counts = {i: 1 for i in range(n)}
        self.board, self.seq = SnapshotBoard(), 0
        self.encoder = FrameEncoder(self.board, span_rate=None)

    def frame(self, full: bool = False) -> dict:
        self.seq += 1
        kernels = sorted((kernel(i, c) for i, c in self.counts.items()), key=lambda k: (-k.total_ns, -k.count, k.name))
        launches = tuple(sorted((launch(i, 1 + c % 4) for i, c in self.counts.items() if i % 3 == 0),
                                key=lambda x: x.mangled))
        traced = TracedProcess(pid=7, session="s", name="p", cupti_status="ok", records=self.seq,
                               kernels=tuple(kernels), kernel_launches=launches)
        self.board.publish(make_snapshot(seq=self.seq, traced=(traced,), timestamp=1_764_000_000.0 + self.seq))
        frame = self.encoder.current()
        return body(frame.full if full or frame.delta is None else frame.delta)


def traced_of(plain: dict) -> TracedProcess:
    [t] = parse.traced(plain["traced"], "node")
    return t


def test_an_unchanged_entry_is_the_object_checked_before_and_a_changed_one_is_new():
    agent, hub = Agent(40), StreamReader(tables=CheckedTables())
    first = traced_of(hub.read(agent.frame()))
    agent.counts[5] += 3
    agent.counts[17] += 1
    delta = agent.frame()
    assert len(delta["traced"][0]["kernels"]) == 2   # the agent sends only those
    second = traced_of(hub.read(delta))
    before = {(k.name, k.mangled): k for k in first.kernels}
    for k in second.kernels:
        if k.name in ("k5(float*)", "k17(float*)"):
            assert k is not before[(k.name, k.mangled)] and k.count == agent.counts[int(k.name[1:-8])]
        else:
            assert k is before[(k.name, k.mangled)]
    third = traced_of(hub.read(agent.frame()))   # nothing changed: the very tuple, for the page's encoder
    assert third.kernels is second.kernels and third.kernel_launches is second.kernel_launches


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 29), st.integers(1, 50)), max_size=6), min_size=1, max_size=12),
       st.integers(0, 3))
def test_the_hub_takes_what_the_plain_reading_takes_frame_after_frame(changes, full_every):
    """Kernels whose counts change, are added (ids past the first 20), reorder the table: the hub's
    kept objects are the plain reading's, checked, in the same order."""
    agent = Agent(20)
    hub, plain = StreamReader(tables=CheckedTables()), StreamReader()
    for n, change in enumerate([[]] + changes):
        for i, by in change:
            agent.counts[i] = agent.counts.get(i, 0) + by
        frame = agent.frame(full=bool(full_every) and n % (full_every + 1) == 0)
        took, reference = traced_of(hub.read(json.loads(json.dumps(frame)))), traced_of(plain.read(frame))
        assert took == reference
        assert [k.count for k in took.kernels] == [agent.counts[int(k.name[1:-8])] for k in took.kernels]


@pytest.mark.parametrize("field, hostile", [
    ("count", True), ("count", "12"), ("count", 1 << 64), ("count", None), ("total_ns", 1.5), ("min_ns", [1]),
])
def test_a_changed_entry_is_checked_again_and_its_hostile_form_refused(field, hostile):
    agent, hub = Agent(10), StreamReader(tables=CheckedTables())
    hub.read(agent.frame())
    agent.counts[3] += 1
    delta = agent.frame()
    [entry] = delta["traced"][0]["kernels"]
    entry[field] = hostile
    with pytest.raises(FrameRefused, match=rf"^traced\[0\]\.kernels\[0\]\.{field}: ") as refused:
        hub.read(delta)
    assert repr(hostile) not in str(refused.value)


def test_an_entry_repeated_unchanged_is_checked_as_any_other():
    """An agent's word that an entry is as before is never taken: it is checked."""
    agent, hub = Agent(10), StreamReader(tables=CheckedTables())
    t = hub.read(agent.frame())["traced"][0]
    agent.counts[4] += 1
    delta = agent.frame()
    again = {"id": 0, **{f: getattr(t["kernels"].items[0], f) for f in ("count", "total_ns", "min_ns", "max_ns", "timed")}}
    delta["traced"][0]["kernels"].append({**again, "count": False})
    with pytest.raises(FrameRefused, match=r"kernels\[1\]\.count"):
        hub.read(delta)


def test_a_launch_entry_is_checked_and_kept_as_a_kernel_is():
    agent, hub = Agent(9), StreamReader(tables=CheckedTables())
    first = traced_of(hub.read(agent.frame()))
    agent.counts[3] += 1   # k3's launch entry changes (configs = 1 + count % 4)
    delta = agent.frame()
    assert len(delta["traced"][0]["kernel_launches"]) == 1
    second = traced_of(hub.read(json.loads(json.dumps(delta))))
    assert [x is y for x, y in zip(first.kernel_launches, second.kernel_launches)] == [True, False, True]
    agent.counts[6] += 1
    delta = agent.frame()
    delta["traced"][0]["kernel_launches"][0]["occupancy_pct"] = "high"
    with pytest.raises(FrameRefused, match=r"kernel_launches\[0\]\.occupancy_pct"):
        hub.read(delta)


def hostile_frames(per_frame: int):
    """An agent's frames that name ``per_frame`` new kernels each, without end."""
    names, seq = [], 0
    while True:
        first = len(names)
        new = [[f"k{i}", f"_Z{i}"] for i in range(first, first + per_frame)]
        names += new
        seq += 1
        yield {"frame": "full" if seq == 1 else "delta", "base_seq": seq - 1 if seq > 1 else None, "schema": 4,
               "seq": seq, "timestamp": 1.0, "traced": [{
                   "pid": 1, "session": "s", "names": new, "transfers": [], "complete": True,
                   "kernels": [{"id": i, "count": 1, "total_ns": i, "min_ns": 1, "max_ns": 1} for i in range(first, first + per_frame)],
                   **({"lanes": [], "kernel_launches": []} if seq == 1 else {})}],
               **({"host": {"name": "h"}, "hosts": [], "sources": [], "devices": [], "processes": [],
                   "traced_retired": []} if seq == 1 else {})}


def test_a_table_never_grows_past_its_cap_whatever_an_agent_sends():
    hub, sizes = StreamReader(tables=CheckedTables()), []
    frames = hostile_frames(1000)
    with pytest.raises(FrameRefused, match=rf"^traced\[0\]\.kernels: more than {KERNEL_CAP} entries"):
        for _ in range(KERNEL_CAP // 1000 + 2):
            table = hub.read(next(frames))["traced"][0]["kernels"]
            assert type(table) is CheckedTable
            sizes.append(len(table))
    assert sizes == [1000 * (n + 1) for n in range(KERNEL_CAP // 1000)]
    assert max(sizes) <= KERNEL_CAP


def test_a_full_frame_past_the_cap_is_refused_before_any_entry_is_kept():
    hub = StreamReader(tables=CheckedTables())
    with pytest.raises(FrameRefused, match="more than"):
        hub.read(next(hostile_frames(KERNEL_CAP + 1)))
    assert hub.last == {}


def test_the_hub_drops_an_agent_whose_changed_kernel_is_hostile_saying_where_never_what():
    """Through a link, as the hub reads a followed agent's bytes."""
    agent = Agent(6)
    link = Link(parse_url("http://127.0.0.1:9"), LinkHost(watched=True))
    parser = SseParser(1 << 20)
    reader = StreamReader(fallback_host=link.target.fallback_name, spans=read_rows, tables=CheckedTables())

    def send(doc: dict) -> None:
        link._on_bytes(b"id: 1-1\nevent: snapshot\ndata: " + json.dumps(doc).encode() + b"\n\n", parser, reader, "full")
    send(agent.frame())
    kernels = link.traced[0].kernels
    send(agent.frame())
    assert link.traced[0].kernels is kernels
    agent.counts[2] += random.randint(1, 9)
    delta = agent.frame()
    delta["traced"][0]["kernels"][0]["max_ns"] = "evil-value"
    with pytest.raises(LinkError, match=r"refuses \(traced\[0\]\.kernels\[0\]\.max_ns: expected a whole number\)") as err:
        send(delta)
    assert "evil-value" not in str(err.value)
    assert link.traced[0].kernels is kernels   # nothing of the refused frame taken
