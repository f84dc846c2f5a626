"""Overflow and producer death, end to end through the collector, with the compiled producer.

* A rate beyond the consumer: the producer (a real process writing its own ring, as a traced
  program does) bursts far faster than the 20 ms drain, then slows down. Every record it could
  not place is counted exactly (decoded + dropped = pushed), the process is reported incomplete
  (``complete`` false in the snapshot and its JSON, DROPPED in the summary), and once the rate
  falls every later record is decoded.
* A producer that dies without its exit flush (SIGKILL, SIGSEGV, SIGABRT, ``os._exit``): the
  records it published are drained one last time, the process is marked truncated, and its ring
  is released after that final drain (its memory goes with the last mapping).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuflow.cli.summary import format_summary
from gpuflow.collectors.cupti.collector import CuptiCollector
from gpuflow.collectors.cupti.handover import RingSocket, plan_private_directory
from gpuflow.core.snapshot import Snapshot

from child_env import with_support

# A traced program stand-in: creates its own ring with the compiled producer and hands it over
# from its own pid, then follows commands from stdin, one per line, answering each with one JSON
# line.
PRODUCER = r"""
import json, os, signal, sys, time
from ringproducer import RingProducer
lib, socket_path, capacity = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = RingProducer(lib, os.getpid(), capacity)
connection = p.hand_over(socket_path)
p.set_status(1, "overflow test")
p.context(0, 1, 7)
p.clock_sync(1_000, 1_764_000_000_000_000_000)
t = 10_000
for line in sys.stdin:
    cmd = line.split()
    if cmd[0] == "burst":  # n kernels as fast as the producer takes them
        n, ok = int(cmd[1]), 0
        for _ in range(n):
            t += 10
            ok += p.kernel(0, 1, 13, t, t + 5, "_Z5burstv")
        print(json.dumps({"pushed": n, "written": ok, "dropped": p.dropped}), flush=True)
    elif cmd[0] == "steady":  # n kernels, one every `gap` seconds
        n, gap, ok = int(cmd[1]), float(cmd[2]), 0
        for i in range(n):
            t += 10
            ok += p.kernel(0, 1, 14, t, t + 5, "_Z6steadyv")
            p.memcpy(0, 1, 7, t, t + 3, 1, 256) if i % 10 == 0 else None
            time.sleep(gap)
        print(json.dumps({"pushed": n, "written": ok, "dropped": p.dropped}), flush=True)
    elif cmd[0] == "exit":  # the exit flush, then a normal exit
        p.mark_exited()
        print(json.dumps({"head": p.head}), flush=True)
        sys.exit(int(cmd[1]))
    elif cmd[0] == "die":  # no exit flush
        print(json.dumps({"head": p.head}), flush=True)
        how = cmd[1]
        if how == "exit":
            os._exit(3)
        os.kill(os.getpid(), getattr(signal, how))
        time.sleep(30)
"""


class Producer:
    def __init__(self, lib: str, socket_path: Path, capacity: int) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", PRODUCER, lib, str(socket_path), str(capacity)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=with_support())
        self.pid = self.proc.pid

    def ask(self, line: str) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        assert answer, f"the producer died on {line!r} (exit {self.proc.wait(timeout=10)})"
        return json.loads(answer)

    def wait(self) -> int:
        return self.proc.wait(timeout=30)


@pytest.fixture
def producers(producer_lib):
    made: list[Producer] = []

    def make(collector: CuptiCollector, capacity: int = 1024) -> Producer:
        p = Producer(producer_lib, collector.ring_socket.path, capacity)
        made.append(p)
        return p

    yield make
    for p in made:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait(timeout=10)


@pytest.fixture
def collector(decoder_impl, session_id):
    made: list[CuptiCollector] = []

    def make(**kw) -> CuptiCollector:
        kw.setdefault("kernel_table_gap_s", 0.0)   # each snapshot's kernel counts are compared with its records
        c = CuptiCollector(session_id, RingSocket.in_private_directory(plan_private_directory(os.environ)),
                           decoder_class=decoder_impl.cls, **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        c.stop()


def wait_for(c: CuptiCollector, predicate, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        part = c.part()
        if part.traced and predicate(part.traced[0]):
            return part.traced[0]
        time.sleep(0.02)
    raise AssertionError(f"condition not met; last part {c.part()}")


def counts(t) -> dict[str, int]:
    return {k.mangled: k.count for k in t.kernels}


def test_a_rate_beyond_the_consumer_drops_exactly_reports_it_and_recovers(collector, producers):
    c = collector()
    c.start()  # the real drain thread, every 20 ms
    p = producers(c, capacity=1024)
    wait_for(c, lambda t: t.records >= 2)
    burst = p.ask("burst 60000")  # ~0.1-0.3 s of ctypes calls: dozens of ring-fulls per drain interval
    assert burst["dropped"] > 0 and burst["written"] + burst["dropped"] == burst["pushed"]
    t = wait_for(c, lambda t: counts(t).get("_Z5burstv") == burst["written"])
    assert t.dropped_ring == burst["dropped"] and not t.complete
    # the rate falls below what the consumer drains: nothing more is lost, everything is decoded
    steady = p.ask("steady 300 0.001")
    assert steady["dropped"] == burst["dropped"] and steady["written"] == 300
    t = wait_for(c, lambda t: counts(t).get("_Z6steadyv") == 300)
    assert counts(t) == {"_Z5burstv": burst["written"], "_Z6steadyv": 300}
    assert {x.direction: x.count for x in t.transfers} == {"h2d": 30}
    lanes = {lane.stream: lane.executions for lane in t.lanes}
    assert lanes == {13: burst["written"], 14: 300, 7: 30}
    p.ask("exit 0")
    assert p.wait() == 0
    c.record_exit(p.pid, 0)
    t = wait_for(c, lambda t: t.state == "exited" and t.exit_status == 0)
    # 2 setup records + 2 name chunks + the kernels and copies written: decoded + dropped = pushed
    assert t.records == 2 + 2 + burst["written"] + 300 + 30
    assert t.records - 4 - 30 + t.dropped_ring == burst["pushed"] + steady["pushed"]
    assert (t.dropped_ring, t.complete, t.truncated) == (burst["dropped"], False, False)
    snap = Snapshot(seq=1, timestamp=0.0, traced=(t,)).to_json_dict()
    assert (snap["traced"][0]["complete"], snap["traced"][0]["dropped_ring"]) == (False, burst["dropped"])
    assert f"DROPPED: {burst['dropped']} records (ring full)" in format_summary((t,))


def test_overflow_between_two_drains_is_counted_exactly(collector, producers):
    """No drain thread: the consumer is simply not there while the producer overflows it."""
    c = collector()
    p = producers(c, capacity=1024)
    burst = p.ask("burst 5000")
    assert (burst["written"], burst["dropped"]) == (1024 - 2 - 1, 5000 - 1021)  # 2 setup + 1 name chunk
    c.poll()
    (t,) = c.part().traced
    assert counts(t) == {"_Z5burstv": 1021} and t.dropped_ring == 3979 and not t.complete
    again = p.ask("burst 2000")  # the consumer freed the ring: the next 1024 fit, the rest drop
    assert (again["written"], again["dropped"]) == (1024, 3979 + 976)
    time.sleep(0.06)  # past the collector's 50 ms build gap
    c.poll()
    (t,) = c.part().traced
    assert counts(t) == {"_Z5burstv": 2045} and t.dropped_ring == 4955


@pytest.mark.parametrize("how, status", [("SIGKILL", -9), ("SIGSEGV", -11), ("SIGABRT", -6), ("exit", 3)])
def test_a_producer_that_dies_without_its_exit_flush_is_truncated(collector, producers,
                                                                                         how, status):
    c = collector()
    c.start()
    p = producers(c, capacity=4096)
    first = p.ask("steady 20 0")
    wait_for(c, lambda t: counts(t).get("_Z6steadyv") == 20)
    second = p.ask("burst 700")  # published just before the death: only the final drain sees them
    assert second["dropped"] == 0
    died = p.ask(f"die {how}")
    assert p.wait() == status
    c.record_exit(p.pid, 128 - status if status < 0 else status)
    t = wait_for(c, lambda t: t.state == "exited" and t.exit_status is not None)
    assert t.truncated and t.exit_status == (128 - status if status < 0 else status)
    assert counts(t) == {"_Z6steadyv": 20, "_Z5burstv": 700} and t.records == died["head"]
    assert first["written"] == 20 and t.complete  # nothing was dropped: truncated, not incomplete
    assert "TRUNCATED" in format_summary((t,))
    assert ring_mappings() == 0   # released after the final drain


#: how the memory file of a ring shows in /proc/<pid>/maps (memfd_create's name)
RING_MAPPING = "/memfd:gpuflow-ring (deleted)"


def ring_mappings() -> int:
    """This process's mappings of rings (the producers here are other processes)."""
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if line.rstrip().endswith(RING_MAPPING))


def resident_kb() -> int:
    """Rss of this process's mappings of rings (/proc/self/smaps), 0 if none."""
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            if "-" in line.split(" ", 1)[0] and not line.startswith(("Rss", "Pss")) and ":" not in line.split()[0]:
                inside = line.rstrip().endswith(RING_MAPPING)
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1])
    return total


def test_decoded_records_do_not_stay_resident_in_the_agent(collector, producers):
    """The rings are memory files of their producers; the agent keeps resident only the pages it
    has not finished reading (plus the header page and what the kernel maps around a fault, 64 KiB by default),
    not every page it ever read: 8 busy rings of the default 16 MiB used to add 128 MB to the
    agent's RSS."""
    c = collector()
    p = producers(c, capacity=32768)  # 2 MiB of records
    bound_kb = 256
    for _ in range(3):  # three times round the ring, drained between bursts
        assert p.ask("burst 30000")["dropped"] == 0
        c.poll()
        assert ring_mappings() == 1 and resident_kb() <= bound_kb, resident_kb()
    (t,) = c.part().traced
    assert counts(t) == {"_Z5burstv": 90000} and t.complete
    p.ask("burst 33")  # an unfinished page (64 records to a 4 KiB page) waits for the next drain
    c.poll()
    assert resident_kb() <= bound_kb
    time.sleep(0.06)
    c.poll()
    assert counts(c.part().traced[0]) == {"_Z5burstv": 90033}
