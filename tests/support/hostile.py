"""Hostile producers: record streams a traced program could write to make the agent hold too much.

What it is for: the caps tests (tests/cupti/test_hostile_rings.py) feed these streams to the
decoders on in-memory rings. Each attack is one of
the issue's: a million distinct names, 4 KiB names, 10,000 lanes, names announced and never
finished, timestamps of 0 and 2^64-1 and ends before starts, and all of them together (a ring's
header that lies is played on the real producer's header by the tests and the benchmark).

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
import sys
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


def long_names(n: int = 2_000, launches: int = 20_000) -> Iterator[bytes]:
    """``n`` distinct 4 KiB names (86 chunks each), then ``launches`` kernels cycling over them."""
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


def together(scale: float = 1.0) -> Iterator[bytes]:
    """Every attack at once, interleaved record by record (name ids kept apart per attack)."""
    parts = [shift_ids(distinct_names(int(1_000_000 * scale)), 0),
             shift_ids(long_names(max(1, int(2_000 * scale)), int(20_000 * scale)), 2_000_000),
             shift_ids(many_lanes(max(1, int(10_000 * scale))), 3_000_000),
             shift_ids(unfinished_names(int(200_000 * scale)), 4_000_000),
             shift_ids(extreme_times(int(20_000 * scale)), 5_000_000)]
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
    return {
        "decoded": decoded,
        "names": len(dec.names()),
        "longest_name": max((len(t.encode("utf-8", "surrogatepass")) for t, _ in dec.names().values()), default=0),
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
        "healthz_status": health,
        "snapshot_status": response.status_code,
        "snapshot_bytes": len(response.content),
        "served_pids": [t["pid"] for t in served],
        "served_kernel_entries": len(served[0]["kernels"]) if served else None,
        "peak_growth_bytes": (_status_kib("VmHWM") - before_kib) * 1024,
    }


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "measure" or sys.argv[2] not in ("c", "py") or sys.argv[3] not in ATTACKS:
        sys.exit(f"usage: python tests/support/hostile.py measure c|py ATTACK; ATTACK one of {', '.join(ATTACKS)}")
    import json

    print(json.dumps(measure(sys.argv[2], sys.argv[3])))
