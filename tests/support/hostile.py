"""Hostile producers: record streams a traced program could write to make the agent hold too much.

What it is for: the caps tests (tests/cupti/test_hostile_rings.py) feed these streams to the
decoders on in-memory rings, and the bounds benchmark (bench/hostile_rings.py) runs this file as
separate processes that write them into real rings handed to a real agent with the compiled test
producer (``python tests/support/hostile.py produce LIB SOCKET ATTACK SECONDS [RATE]``). Each attack is one of
the issue's: a million distinct names, 4 KiB names (as many as ``max_names`` keeps), 10,000 lanes,
names announced and never finished, timestamps of 0 and 2^64-1 and ends before starts, and all of
them together; names that each demangle to over 100,000 characters (the demangler's bounds); a ring's
header that lies (its head, tail or capacity) and a ring far larger than the agent's own are
played on the real producer's ring (:data:`HEADER_ATTACKS`).

* :data:`ATTACKS` — name → a function returning an iterator of 64-byte records (sizes as the
  issue states them, smaller on request).
* :class:`BufferRing` — a ring in a bytearray (laid out by ringfuzz): publish records a capacity
  at a time and drain them into a decoder, as the agent would between its passes.
* :func:`measure` — one attack against one decoder twin, in this process as the agent would hold
  it: drained, built into a TracedProcess (TracedBuilder), served by a real agent and the real app
  (``GET /api/snapshot``); returns what was kept, what was counted, the snapshot's size and this
  process's peak growth. Run it in a fresh process (``python tests/support/hostile.py measure
  TWIN ATTACK``) for a memory figure of its own.

Constraints: standard library and the other test helpers only; records are built by ringfuzz's
packers (the ring's layout as the test suite mirrors it); every stream is deterministic. Names are
made to cost the most they can in the snapshot's JSON: control characters, quotes and backslashes
are escaped there (``\\u0001`` is 6 bytes for 1).
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from typing import Any, Callable, Iterable, Iterator

import ringfuzz as F
from ringproducer import FLAG_NAME_STREAM, FLAG_NO_TIMING, HEADER_SIZE, RECORD_SIZE

U64_MAX = (1 << 64) - 1
#: a name of 4 KiB whose every byte is escaped in JSON, with its id in front to keep it distinct
_ESCAPED = b"\x01\"\\\x1b"


def heavy_name(i: int, length: int = F.NAME_MAX) -> bytes:
    """A distinct ``length``-byte name that costs up to 6 JSON bytes per byte."""
    head = b"_Z%d" % i
    return head + (_ESCAPED * (length // len(_ESCAPED) + 1))[:length - len(head)]


def distinct_names(n: int = 1_000_000) -> Iterator[bytes]:
    """``n`` short distinct kernel names, each defined then launched once, over four streams."""
    for i in range(1, n + 1):
        yield F.chunk(i, 0, len(text := b"_Z%dhostilev" % i), text)
        yield F.kernel(i, stream=13 + i % 4, start=1_000 + i, end=1_500 + i)


def long_names(n: int = 4_096, launches: int = 20_000) -> Iterator[bytes]:
    """``n`` distinct 4 KiB names (86 chunks each; as many as the default ``max_names`` keeps, each
    kept whole by the default ``max_name_bytes``), then ``launches`` kernels cycling over them."""
    for i in range(1, n + 1):
        yield from F.name_chunks(i, heavy_name(i))
    for j in range(launches):
        yield F.kernel(1 + j % n, stream=13 + j % 4, start=1_000 + j, end=1_700 + j)


def many_lanes(n: int = 10_000, spans: int = 512, named: int = 300) -> Iterator[bytes]:
    """``n`` lanes: a 4 KiB stream name on the first ``named``, one kernel on every lane, then
    ``spans`` more on each of the first 256 (a full span sample each, with a 4 KiB kernel name)."""
    yield F.context(0, 1, 7)
    yield from F.name_chunks(1, heavy_name(1))
    for s in range(named):
        yield from F.name_chunks(2 + s, heavy_name(2 + s), FLAG_NAME_STREAM)
        yield F.stream_name(2 + s, 0, 1, 100 + s)
    for s in range(n):
        yield F.kernel(1, 0, 1, 100 + s, 1_000 + s, 1_200 + s)
    t = 2_000_000
    for _ in range(spans):
        for s in range(256):
            t += 10
            yield F.kernel(1, 0, 1, 100 + s, t, t + 5)


def demangle_bomb(i: int, doublings: int = 12) -> bytes:
    """A distinct 144-byte C++ name whose demangled text doubles with each of its ``doublings``
    parameters (each repeats the previous one twice): 12 print 106,432 characters."""
    ident = b"hostile%d" % i
    return (b"_Z%d%s1PI1AS0_E" % (len(ident), ident)
            + b"".join(b"S_IS%X_S%X_E" % (j, j) for j in range(1, doublings + 1)))


def demangled_names(n: int = 4_096) -> Iterator[bytes]:
    """``n`` distinct names that each demangle to 106,432 characters, each launched once."""
    for i in range(1, n + 1):
        yield from F.name_chunks(i, demangle_bomb(i))
        yield F.kernel(i, stream=13 + i % 4, start=1_000 + i, end=1_500 + i)


def unfinished_names(n: int = 200_000) -> Iterator[bytes]:
    """``n`` names announced as 4 KiB by their first chunk and never finished; every tenth id is
    then used by a kernel (an undefined name)."""
    for i in range(1, n + 1):
        yield F.chunk(i, 0, F.NAME_MAX, b"u" * 48, 0)
        if i % 10 == 0:
            yield F.kernel(i)


def extreme_times(n: int = 20_000) -> Iterator[bytes]:
    """Kernels, copies, memsets and clock syncs at 0 and 2^64-1, ends before starts, untimed."""
    yield from F.name_chunks(1, b"_Z4timev")
    cases = (
        F.kernel(1, start=0, end=U64_MAX),
        F.kernel(1, start=U64_MAX, end=U64_MAX),
        F.kernel(1, start=U64_MAX, end=0),
        F.kernel(1, start=0, end=0),
        F.kernel(1, start=0, end=0, flags=FLAG_NO_TIMING),
        F.copy(1, U64_MAX, start=0, end=U64_MAX),
        F.copy(2, U64_MAX, start=U64_MAX, end=1),
        F.memset(U64_MAX, start=U64_MAX - 1, end=U64_MAX),
        F.clock_sync(0, U64_MAX),
        F.clock_sync(U64_MAX, 0),
    )
    for i in range(n):
        yield cases[i % len(cases)]


def benign(n: int = 10_000_000) -> Iterator[bytes]:
    """No attack: what a busy real program writes (200 names defined once, kernels on four named
    streams, copies on the null stream), the benchmark's point of comparison."""
    yield F.context(0, 1, 7)
    for i in range(1, 201):
        yield from F.name_chunks(i, b"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_%dFunctorIfEEEEviT0_" % i)
    for s in range(4):
        yield from F.name_chunks(300 + s, b"stream-%d" % s, FLAG_NAME_STREAM)
        yield F.stream_name(300 + s, 0, 1, 13 + s)
    t = 1_000_000
    for j in range(n):
        t += 2_000
        yield F.copy(1, 1 << 20, stream=7, start=t, end=t + 900) if j % 10 == 0 else \
            F.kernel(1 + (j * 7919) % 200, 0, 1, 13 + j % 4, t, t + 1_500)


def together(scale: float = 1.0) -> Iterator[bytes]:
    """Every attack at once, interleaved record by record (name ids kept apart per attack)."""
    parts = [shift_ids(distinct_names(int(1_000_000 * scale)), 0),
             shift_ids(long_names(max(1, int(4_096 * scale)), int(20_000 * scale)), 2_000_000),
             shift_ids(many_lanes(max(1, int(10_000 * scale))), 3_000_000),
             shift_ids(unfinished_names(int(200_000 * scale)), 4_000_000),
             shift_ids(extreme_times(int(20_000 * scale)), 5_000_000),
             shift_ids(demangled_names(int(4_096 * scale)), 6_000_000)]
    for batch in itertools.zip_longest(*parts):
        yield from (r for r in batch if r is not None)


def shift_ids(records: Iterable[bytes], offset: int) -> Iterator[bytes]:
    """The same records with every non-zero name id moved up by ``offset``."""
    for rec in records:
        rtype = int.from_bytes(rec[:2], "little")
        if rtype == F.REC_NAME_CHUNK:
            nid = int.from_bytes(rec[4:8], "little")
            rec = rec[:4] + (nid + offset).to_bytes(4, "little") + rec[8:]
        elif rtype in (F.REC_KERNEL, F.REC_STREAM_NAME, F.REC_DEVICE):
            nid = int.from_bytes(rec[36:40], "little")
            if nid:
                rec = rec[:36] + (nid + offset).to_bytes(4, "little") + rec[40:]
        yield rec


ATTACKS: dict[str, Callable[..., Iterator[bytes]]] = {
    "distinct_names": distinct_names,
    "long_names": long_names,
    "many_lanes": many_lanes,
    "unfinished_names": unfinished_names,
    "extreme_times": extreme_times,
    "demangled_names": demangled_names,
    "together": together,
}


class BufferRing:
    """A ring in memory that a decoder drains: records are published a batch at a time."""

    def __init__(self, capacity: int = 1 << 16) -> None:
        self.capacity = capacity
        self.buffer = F.Case(capacity=capacity, records=[]).build()
        self.head = 0

    def publish(self, records: list[bytes]) -> None:
        """Write up to ``capacity`` records at the head and publish them (the consumer must have
        drained what was there)."""
        assert len(records) <= self.capacity
        mask = self.capacity - 1
        start = self.head & mask
        first = min(len(records), self.capacity - start)
        off = HEADER_SIZE + start * RECORD_SIZE
        self.buffer[off:off + first * RECORD_SIZE] = b"".join(records[:first])
        if first < len(records):
            rest = b"".join(records[first:])
            self.buffer[HEADER_SIZE:HEADER_SIZE + len(rest)] = rest
        self.head += len(records)
        F.U64.pack_into(self.buffer, F.OFF["head"], self.head)

    def feed(self, decoder: Any, records: Iterable[bytes], after_batch: Callable[[], None] | None = None) -> int:
        """Publish ``records`` a ring-full at a time, draining each batch; returns how many."""
        total = 0
        it = iter(records)
        while batch := list(itertools.islice(it, self.capacity)):
            self.publish(batch)
            assert decoder.drain() == len(batch)
            total += len(batch)
            if after_batch is not None:
                after_batch()
        return total


#: attacks on the ring itself rather than on its records, played by :func:`produce` only
HEADER_ATTACKS = ("head_lies", "tail_lies", "capacity_lies", "huge_ring")
#: what :func:`produce` can write: the attacks, and a benign program to compare them with
PRODUCED = {**ATTACKS, "benign": benign}
#: the ring a producer makes (huge_ring's is 64 times larger)
PRODUCER_CAPACITY = 1 << 16


def produce(lib: str, socket_path: str, attack: str, seconds: float, rate: float = 0.0) -> None:
    """Hand a real ring (compiled test producer) to the agent at ``socket_path`` and write
    ``attack`` into it for ``seconds``, ``rate`` records a second (0: as fast as the agent drains
    it; a stream that ends starts again: the same ids, defined again the same), then the exit flush."""
    from ringproducer import RingProducer

    capacity = PRODUCER_CAPACITY * (64 if attack == "huge_ring" else 1)
    producer = RingProducer(lib, os.getpid(), capacity)
    connection = producer.hand_over(socket_path)  # open as long as this process lives
    producer.set_status(1, f"hostile producer: {attack}")
    producer.clock_sync(1_000, time.time_ns())
    deadline = time.monotonic() + seconds
    if attack in HEADER_ATTACKS:
        _lie(producer, attack, deadline)
    else:
        paced = _Pace(rate)
        while time.monotonic() < deadline:
            _push(producer, PRODUCED[attack](), deadline, paced)
    producer.mark_exited()
    connection.close()


class _Pace:
    """Keeps a producer at ``rate`` records a second (0: no pacing), checked every 1,000 records."""

    def __init__(self, rate: float) -> None:
        self.rate, self.started, self.count = rate, time.monotonic(), 0

    def tick(self) -> None:
        self.count += 1
        if self.rate and self.count % 1000 == 0:
            ahead = self.count / self.rate - (time.monotonic() - self.started)
            if ahead > 0:
                time.sleep(ahead)


def _push(producer: Any, records: Iterable[bytes], deadline: float, paced: _Pace | None = None) -> None:
    for rec in records:
        while not producer.push_raw(rec):  # full: wait for the agent, as a real ring would drop
            if time.monotonic() > deadline:
                return
            time.sleep(0.002)
        if paced is not None:
            paced.tick()
        if time.monotonic() > deadline:
            return
    while producer.head != producer.tail and time.monotonic() < deadline:
        time.sleep(0.01)


def _flood(producer: Any, block: bytes, deadline: float) -> None:
    """Fill the whole ring at memory speed, as native code can, and publish all of it at once,
    each time the agent has taken the last: a ring-full for every one of the agent's passes."""
    import mmap

    with mmap.mmap(producer.fd, 0) as mm:
        body = HEADER_SIZE + producer.capacity * RECORD_SIZE
        mm[HEADER_SIZE:body] = block * (producer.capacity * RECORD_SIZE // len(block))
        while time.monotonic() < deadline:
            if producer.tail == producer.head:
                producer.set_head(producer.head + producer.capacity)
            time.sleep(0.001)


def _lie(producer: Any, attack: str, deadline: float) -> None:
    """Valid records, then the lie, again and again until ``deadline``."""
    kernels = itertools.cycle([F.kernel(0, stream=13 + i % 4, start=1_000 + i, end=1_100 + i) for i in range(64)])
    if attack == "huge_ring":
        _flood(producer, b"".join(next(kernels) for _ in range(64)), deadline)
        return
    while time.monotonic() < deadline:
        for _ in range(1000):
            producer.push_raw(next(kernels))
        while producer.tail != producer.head and time.monotonic() < deadline:
            time.sleep(0.005)  # the agent has taken the ring and drained it: now the lie
        if attack == "head_lies":      # past the capacity, behind the tail, the largest value
            producer.set_head(producer.head + producer.capacity * 3 + 7)
        elif attack == "tail_lies":    # the agent's own counter, rewritten: it keeps its own
            producer.header.tail = (1 << 64) - 1
        else:                          # a capacity the mapping does not have
            producer.corrupt_header(capacity=producer.capacity * 64)
        time.sleep(0.05)


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def measure(twin: str, attack: str) -> dict[str, Any]:
    """Drain ``attack`` with decoder twin ``twin`` ("c" or "py") at the default configuration,
    build its TracedProcess every fourth pass and at the end (as the collector does), serve it
    through a real agent and app; return the figures (see the module docstring)."""
    import json

    from falcon import testing

    from gpuflow.collectors.cupti import decoder as decoder_mod
    from gpuflow.collectors.cupti.traced_builder import TracedBuilder
    from gpuflow.core.agent import Agent
    from gpuflow.core.context import AgentConfig
    from gpuflow.core.hookspecs import hookimpl
    from gpuflow.core.plugins import get_plugin_manager
    from gpuflow.core.snapshot import SnapshotPart
    from gpuflow.transport.app import AppSettings, create_app

    cls = decoder_mod.RingDecoderC if twin == "c" else decoder_mod.RingDecoderPy
    if cls is None:
        raise RuntimeError(f"the compiled decoder did not load: {decoder_mod.EXTENSION_IMPORT_ERROR}")
    ring = BufferRing()
    records = ATTACKS[attack]()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak (VmHWM) starts again from what is resident now
    before_kib = _status_kib("VmRSS")
    dec = cls(ring.buffer)
    builder = TracedBuilder(4_000_001, "hostile", dec.lane_span_cap)
    passes = itertools.count(1)

    def build() -> Any:
        return builder.build(dec, name="hostile", state="running", exit_status=None, truncated=False,
                             now_ns=1_764_000_000_000_000_000)

    decoded = ring.feed(dec, records, after_batch=lambda: next(passes) % 4 == 0 and build())
    traced = build()

    class Part:
        @hookimpl
        def produce_snapshot(self, context: Any) -> SnapshotPart:  # noqa: ARG002 - the hook's signature
            return SnapshotPart(source="cupti", traced=(traced,))

    pm = get_plugin_manager(environ={"GPUFLOW_DISABLED_PLUGINS": "nvml,cupti",
                                     "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1"})
    pm.register(Part(), name="hostile")
    app = create_app(Agent(AgentConfig(), pm), settings=AppSettings(first_snapshot_wait_s=5))
    try:
        client = testing.TestClient(app, headers={"Host": "127.0.0.1:7717"})
        health = client.simulate_get("/healthz").status_code
        response = client.simulate_get("/api/snapshot")
    finally:
        app.close()
    served = json.loads(response.content)["traced"]
    kernels, lanes, counters = dec.kernels(), dec.lanes(), dec.counters()
    grown = (_status_kib("VmHWM") - before_kib) * 1024  # not what the figures below take to gather
    names = dec.names()
    return {
        "decoded": decoded,
        "names": len(names),
        "longest_name": max((len(t.encode("utf-8", "surrogatepass")) for t, _ in names.values()), default=0),
        "kernel_entries": len(kernels),
        "lanes": len(lanes),
        "pending_names": counters["pending_names"],
        "counters": counters,
        "launched": sum(k[1] for k in kernels),
        "moved": sum(t[1] for t in dec.transfers()),
        "lane_executions": sum(lane[3] for lane in lanes),
        "table_launches": sum(k.count for k in traced.kernels),
        "shown_lane_executions": sum(lane.executions for lane in traced.lanes),
        "shown_kernel_entries": len(traced.kernels),
        "shown_lanes": len(traced.lanes),
        "spans_shown": sum(len(lane.spans) for lane in traced.lanes),
        "longest_shown_name": max((len(k.name) for k in traced.kernels), default=0),
        "demangled_chars": builder.demangled_chars,
        "served_kernels_bytes": len(json.dumps(served[0]["kernels"], separators=(",", ":"))) if served else 0,
        "served_lanes_bytes": len(json.dumps(served[0]["lanes"], separators=(",", ":"))) if served else 0,
        "healthz_status": health,
        "snapshot_status": response.status_code,
        "snapshot_bytes": len(response.content),
        "served_pids": [t["pid"] for t in served],
        "served_kernel_entries": len(served[0]["kernels"]) if served else None,
        "peak_growth_bytes": grown,
    }


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "measure" and sys.argv[2] in ("c", "py") and sys.argv[3] in ATTACKS:
        import json

        print(json.dumps(measure(sys.argv[2], sys.argv[3])))
    elif len(sys.argv) in (6, 7) and sys.argv[1] == "produce" and sys.argv[4] in (*PRODUCED, *HEADER_ATTACKS):
        produce(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]), float(sys.argv[6]) if len(sys.argv) == 7 else 0.0)
    else:
        sys.exit("usage: python tests/support/hostile.py measure c|py ATTACK | produce LIB SOCKET ATTACK SECONDS [RATE]; "
                 f"ATTACK one of {', '.join(ATTACKS)} (and {', '.join((*HEADER_ATTACKS, 'benign'))} for produce)")
