"""The decoder fuzzing engine: ring cases, their random generation, and the twin comparison.

What it is for: the hypothesis tests in tests/fuzz/, the long-run fuzzer
(tests/fuzz/fuzz_decoder.py) and the atheris harness (tests/fuzz/atheris_decoder.py) all build
rings here and judge them here.

* A :class:`Case` is a ring laid out byte for byte as cupti_src/gpuflow_ring.h says (4096-byte
  header, 64-byte records in slots ``n & (capacity - 1)``), possibly damaged (header fields,
  a short mapping, torn counters), plus a plan of what happens while a decoder drains it: drains
  of given sizes, records published later, header bytes poked mid-session.
* :func:`run_case` plays a case against one decoder class and returns everything it observed
  (each step's result or exception type and message, then every accessor's output), after
  checking invariants any correct decoder holds (see :func:`check_invariants`).
* :func:`compare` plays it against both twins; they must observe exactly the same.
* A case may also retain (``Case.retention``: the flight recorder's budget and chunk size): the
  twins must then retain the same records, evict the same chunks and answer the same windows,
  exact and reduced (:func:`recorded`). The chunks sealed are compacted after every other drain,
  as the collector compacts after a pass, and at the end; compaction changes no answer.
* :func:`random_case` draws a case from a ``random.Random``: malformed headers, wrong versions,
  torn and impossible records, wraparound at every offset, name chunks out of order / overlapping
  / oversized, torn counters, and mutations of valid, producer-shaped rings.

Constraints: standard library only (plus the decoders under test); the layout constants come from
ringproducer.py, the test suite's own mirror of the C header, not from the decoder package, except
the header's field layout, which has one definition (``_layout.HEADER_STRUCT``).
Rings live in bytearrays: the decoders accept any writable buffer and this keeps a case cheap
(~70 KB at capacity 1024). A case is reproducible from its seed.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field
from typing import Any

from ringproducer import (FLAG_CARVEOUT, FLAG_NAME_LAST, FLAG_NAME_STREAM, FLAG_NAME_TRUNCATED,
                          FLAG_NO_TIMING, HEADER_SIZE, MAGIC, MIN_CAPACITY, NAME_CHUNK_TEXT, NAME_MAX,
                          RECORD_SIZE, REC_CLOCK_SYNC, REC_CONTEXT, REC_DEVICE, REC_KERNEL, REC_LAUNCH,
                          REC_MEMCPY, REC_MEMSET, REC_NAME_CHUNK, REC_STREAM_NAME, VERSION)

from gpuflow.collectors.cupti._layout import HEADER_STRUCT

U64_MAX = (1 << 64) - 1
NAME_ID_LIMIT = 1 << 24
OTHER_NAME_ID = NAME_ID_LIMIT  # the kernels of names beyond max_names (docs/decoder.md, "Caps")
#: byte offsets of the header fields a case may damage
OFF = {"magic": 0, "version": 8, "header_size": 12, "record_size": 16, "capacity": 20,
       "producer_pid": 24, "status": 28, "head": 512, "tail": 576, "dropped_ring": 640,
       "dropped_cupti": 648, "incomplete": 656, "producer_exited": 664, "buffers_completed": 672,
       "translate_cpu_ns": 680}
WIDTH = {"magic": 8, "head": 8, "tail": 8, "dropped_ring": 8, "dropped_cupti": 8, "incomplete": 8,
         "buffers_completed": 8, "translate_cpu_ns": 8}
COMMON = struct.Struct("<HHIQQII")           # type, flags, device, start, end, context, stream
KERNEL_PAYLOAD = struct.Struct("<IIIHHHHHHII")  # corr, name_id, grid x/y/z, block x/y/z, regs, launch_id, graph
LAUNCH = struct.Struct("<HHIIIIIIIBBBB28x")    # type, flags, launch id, static/dynamic/executed smem, cluster, 4 bytes
LAUNCH_ID_LIMIT = 1 << 16
COPY_PAYLOAD = struct.Struct("<IBBBxQIIII")     # corr, copy/src/dst kind, bytes, src/dst dev, value, graph
NAME = struct.Struct("<HHIII48s")               # type, flags, name id, offset, total_len, text
U64 = struct.Struct("<Q")

#: What a decoder may legitimately raise for a ring (anything else is a crash).
EXPECTED_ERRORS = ("RingFormatError", "RingNotReady", "TypeError")


# -- records ---------------------------------------------------------------------------------
def kernel(name_id: int, dev: int = 0, ctx: int = 1, stream: int = 13, start: int = 10, end: int = 20,
           flags: int = 0, grid: tuple[int, int, int] = (1, 1, 1), block: tuple[int, int, int] = (32, 1, 1),
           rtype: int = REC_KERNEL, launch_id: int = 0, registers: int = 32) -> bytes:
    return COMMON.pack(rtype, flags, dev, start, end, ctx, stream) + KERNEL_PAYLOAD.pack(
        7, name_id, grid[0], grid[1], grid[2], block[0], block[1], block[2], registers, launch_id, 0)


def launch(launch_id: int, static: int = 0, dynamic: int = 0, executed: int = 0,
           cluster: tuple[int, int, int] = (0, 0, 0), config: int = 0, limit: int = 0,
           carveout: int | None = None, cache: int = 0) -> bytes:
    """A LAUNCH record (version 3): launch configuration ``launch_id``."""
    return LAUNCH.pack(REC_LAUNCH, 0 if carveout is None else FLAG_CARVEOUT, launch_id, static, dynamic, executed,
                       *cluster, config, limit, carveout or 0, cache)


def copy(copy_kind: int, nbytes: int = 4096, dev: int = 0, ctx: int = 1, stream: int = 7, start: int = 10,
         end: int = 20, flags: int = 0, src_kind: int = 0, dst_kind: int = 0, src_dev: int | None = None,
         dst_dev: int | None = None, rtype: int = REC_MEMCPY) -> bytes:
    return COMMON.pack(rtype, flags, dev, start, end, ctx, stream) + COPY_PAYLOAD.pack(
        7, copy_kind, src_kind, dst_kind, nbytes, dev if src_dev is None else src_dev,
        dev if dst_dev is None else dst_dev, 0, 0)


def memset(nbytes: int = 4096, **kw: Any) -> bytes:
    return copy(0, nbytes, rtype=REC_MEMSET, **kw)


def chunk(name_id: int, offset: int, total: int, text: bytes = b"", flags: int = FLAG_NAME_LAST) -> bytes:
    return NAME.pack(REC_NAME_CHUNK, flags, name_id, offset, total, text[:NAME_CHUNK_TEXT])


def name_chunks(name_id: int, text: bytes, flags: int = 0) -> list[bytes]:
    """A name as the producer sends it: ceil(len/48) chunks (at least one), the last flagged."""
    if len(text) > NAME_MAX:
        text, flags = text[:NAME_MAX], flags | FLAG_NAME_TRUNCATED
    n = max(1, -(-len(text) // NAME_CHUNK_TEXT))
    return [chunk(name_id, i * NAME_CHUNK_TEXT, len(text), text[i * NAME_CHUNK_TEXT:(i + 1) * NAME_CHUNK_TEXT],
                  flags | (FLAG_NAME_LAST if i == n - 1 else 0)) for i in range(n)]


def stream_name(name_id: int, dev: int = 0, ctx: int = 1, stream: int = 13) -> bytes:
    return kernel(name_id, dev, ctx, stream, 0, 0, rtype=REC_STREAM_NAME)


def context(dev: int = 0, ctx: int = 1, null_stream: int = 7) -> bytes:
    return COMMON.pack(REC_CONTEXT, 0, dev, 0, 0, ctx, null_stream) + bytes(32)


def device(dev: int, name_id: int, uuid: bytes = bytes(16), sm_count: int = 0, cc: tuple[int, int] = (0, 0)) -> bytes:
    """A DEVICE record; its facts (UUID, SMs, compute capability) 0 unless given: unknown."""
    return struct.pack("<HHI16sIHHII24x", REC_DEVICE, 0, dev, uuid, sm_count, cc[0], cc[1], 0, name_id)


def clock_sync(cupti_ns: int, wall_ns: int) -> bytes:
    return COMMON.pack(REC_CLOCK_SYNC, 0, 0, cupti_ns, wall_ns, 0, 0) + bytes(32)


# -- cases -----------------------------------------------------------------------------------
@dataclass
class Case:
    """A ring and what happens to it while a decoder drains it.

    The records are published at ring positions ``[tail0, tail0 + len(records))`` before the
    decoder opens (``head`` = their end unless ``header`` overrides it). ``steps``:

    * ``("drain", n)``: ``decoder.drain(n)`` (``None``: everything);
    * ``("publish", [records])``: the producer writes records at ``head`` and stores the new head;
    * ``("poke", offset, bytes)``: arbitrary bytes written into the mapping (a rogue producer);
    * ``("write", position, record)``: a slot overwritten without publishing (a torn write).
    """

    capacity: int = MIN_CAPACITY
    tail0: int = 0
    records: list[bytes] = field(default_factory=list)
    header: dict[str, int] = field(default_factory=dict)
    header_bytes: dict[str, bytes] = field(default_factory=dict)  # session, status_detail
    size_delta: int = 0          # added to the buffer's length (negative: a short mapping)
    size: int | None = None      # the buffer's length, when the header's capacity is not the truth
    lane_span_cap: int = 512
    caps: dict[str, int] = field(default_factory=dict)  # max_names, max_name_bytes, ... (decoder defaults)
    steps: list[tuple[Any, ...]] = field(default_factory=lambda: [("drain", None)])
    readonly: bool = False
    #: (budget bytes, max chunk records) of a Retention the decoder writes into; None: none
    retention: tuple[int, int] | None = None

    def build(self) -> bytearray | bytes:
        cap = self.capacity
        size = self.size if self.size is not None else HEADER_SIZE + cap * RECORD_SIZE + self.size_delta
        buf = bytearray(max(0, size))
        valid_cap = cap if cap > 0 and cap & (cap - 1) == 0 else 0
        if len(buf) >= HEADER_SIZE:
            HEADER_STRUCT.pack_into(buf, 0, MAGIC, VERSION, HEADER_SIZE, RECORD_SIZE, cap & 0xFFFFFFFF, 4_000_001, 1,
                             self.header_bytes.get("session", b"fuzz"), 1_000, 2_000, 130001, 50, 3_000,
                             self.header_bytes.get("status_detail", b"fuzzed ring"))
            U64.pack_into(buf, OFF["head"], (self.tail0 + len(self.records)) & U64_MAX)
            U64.pack_into(buf, OFF["tail"], self.tail0 & U64_MAX)
            if valid_cap:
                _place(buf, valid_cap, self.tail0, self.records)
            for name, value in self.header.items():
                _poke_field(buf, name, value)
        return bytes(buf) if self.readonly else buf


def _place(buf: bytearray, cap: int, position: int, records: list[bytes]) -> None:
    mask = cap - 1
    for i, rec in enumerate(records):
        off = HEADER_SIZE + ((position + i) & mask) * RECORD_SIZE
        if off + RECORD_SIZE <= len(buf):
            buf[off:off + RECORD_SIZE] = rec


def _poke_field(buf: bytearray, name: str, value: int) -> None:
    width = WIDTH.get(name, 4)
    off = OFF[name]
    if off + width <= len(buf):
        buf[off:off + width] = (value & ((1 << (8 * width)) - 1)).to_bytes(width, "little")


# -- playing a case --------------------------------------------------------------------------
def _error(exc: BaseException) -> tuple[str, str, str]:
    return ("raise", type(exc).__name__, str(exc))


def run_case(cls: type, case: Case) -> list[Any]:
    """Play ``case`` against decoder class ``cls``; return what it observed, step by step.

    :raises AssertionError: an invariant broke (see :func:`check_invariants`).
    Exceptions other than the expected ring errors propagate (the caller counts them as crashes).
    """
    buf = case.build()
    kwargs: dict[str, Any] = {}
    if case.retention is not None:
        kwargs["retention"] = retention_class(cls)(*case.retention)
    try:
        dec = cls(buf, lane_span_cap=case.lane_span_cap, **case.caps, **kwargs)
    except Exception as exc:  # noqa: BLE001 - judged by the caller
        if type(exc).__name__ not in EXPECTED_ERRORS:
            raise
        return [("open",) + _error(exc)]
    observed: list[Any] = [("open", "ok", dec.capacity, dec.tail, dec.session, dec.producer_pid)]
    tail0 = dec.tail
    decoded = 0
    try:
        for step in case.steps:
            kind = step[0]
            if kind == "drain":
                try:
                    n = dec.drain(step[1])
                except Exception as exc:  # noqa: BLE001
                    if type(exc).__name__ != "RingFormatError":
                        raise
                    observed.append(("drain",) + _error(exc))
                    continue
                decoded += n
                observed.append(("drain", n))
                if case.retention is not None and len(observed) % 2:
                    observed.append(("compacted", dec.retention.compact()))
            elif kind == "publish":
                head = U64.unpack_from(buf, OFF["head"])[0]
                cap = dec.capacity
                _place(buf, cap, head, step[1])  # type: ignore[arg-type]
                U64.pack_into(buf, OFF["head"], (head + len(step[1])) & U64_MAX)  # type: ignore[arg-type]
            elif kind == "poke":
                off, data = step[1], step[2]
                if off + len(data) <= len(buf):
                    buf[off:off + len(data)] = data  # type: ignore[index]
            elif kind == "write":
                _place(buf, dec.capacity, step[1], [step[2]])  # type: ignore[arg-type]
            else:  # pragma: no cover - a bug in the generator
                raise ValueError(f"unknown step {step!r}")
        out = snapshot(dec)
        if case.retention is not None:
            out["recorded"] = recorded(dec)
            out["compacted"] = (dec.retention.compact(), recorded(dec))
            assert out["compacted"][1]["windows"] == out["recorded"]["windows"], "compaction changed an answer"
        tail_poked = any(s[0] == "poke" and s[1] < OFF["tail"] + 8 and s[1] + len(s[2]) > OFF["tail"]
                         for s in case.steps)
        check_invariants(out, tail0=tail0, decoded=decoded, lane_span_cap=case.lane_span_cap,
                         tail_poked=tail_poked, caps=dec.caps._asdict())
        observed.append(out)
    finally:
        dec.detach()
    observed.append(("detached", dec.detached, dec.header() == out["header"]))
    return observed


def retention_class(cls: type) -> type:
    """The Retention of a decoder twin."""
    from gpuflow.collectors.cupti import decoder as decoder_mod

    return decoder_mod.RetentionC if cls.is_compiled else decoder_mod.RetentionPy


#: the whole placeable range, in wall-clock microseconds
WHOLE_US = (1 << 62) // 1000


def recorded(dec: Any) -> dict[str, Any]:
    """What a retaining decoder kept and answers: its figures, the budget's, and windows (the whole
    range exact and in a few bucket widths, the middle of what is retained, by the ring's clock)."""
    retained = dec.retained()
    clock = dec.clock()
    offsets = [0]
    if clock is not None and abs(clock[1] - clock[0]) < 1 << 62:
        offsets.append(clock[1] - clock[0])
    windows: dict[Any, Any] = {}
    for offset in offsets:
        for width in (None, 1, 3):   # a window of 2^62 ns in at most 3 buckets (edges below 2^64)
            windows[("whole", offset, width)] = dec.window(0, WHOLE_US, offset, width)
        if retained["from_ns"] is not None:
            lo = max(0, (retained["from_ns"] + offset) // 1000)
            hi = min(WHOLE_US, (retained["to_ns"] + offset) // 1000 + 1)
            if lo < hi:
                mid = (lo + hi) // 2
                a, b = lo + (mid - lo) // 2, mid + 1
                for width in (None, 3, 64):
                    if (b - a) * 1000 * (width or 1) < 1 << 64:
                        windows[("middle", offset, width)] = dec.window(a, b, offset, width)
    return {"retained": retained, "budget": dec.retention.figures(), "windows": windows}


def _offsets(dec: Any) -> list[int]:
    """Clock offsets to ask the snapshot's columns with: none, and the ring's own when placeable."""
    clock = dec.clock()
    if clock is not None and abs(clock[1] - clock[0]) < 1 << 62:
        return [0, clock[1] - clock[0]]
    return [0]


def _asked_ids(dec: Any) -> list[int]:
    """The ids to ask ``name`` for: every defined one, those kernels and lanes name, and edges."""
    ids = set(dec.names()) | {k[0] for k in dec.kernels()} | {lane[5] for lane in dec.lanes(newest=0)}
    return sorted(ids | {0, 1, NAME_ID_LIMIT - 1, OTHER_NAME_ID})


def _settled(dec: Any) -> list[Any]:
    """The activity after settling at the middle of the busy times seen, then at their end (the
    settling changes only busy figures, which nothing else in a snapshot reads)."""
    out = []
    devices = [d for d in dec.activity()["devices"] if d.last_end_ns is not None]
    if devices:
        first = min(d.first_start_ns for d in devices)
        last = max(d.last_end_ns for d in devices)
        for until in (first + (last - first) // 2, last):
            dec.settle(until)
            out.append(dec.activity())
    return out


def snapshot(dec: Any) -> dict[str, Any]:
    """Everything a decoder reports, as plain data."""
    return {
        "kernels": dec.kernels(),
        "kernel_rows": list(dec.kernel_rows()),
        "launches": dec.launches(),
        "transfers": dec.transfers(),
        "lanes": dec.lanes(),
        "lanes_after": dec.lanes(after_seq=dec.tail - 3) if dec.tail >= 3 else None,
        "lane_columns": [dec.lane_columns(offset, newest) for offset in _offsets(dec) for newest in (None, 0, 2)],
        "names": dec.names(),
        "name": {nid: dec.name(nid) for nid in _asked_ids(dec)},
        "null_streams": dec.null_streams(),
        "devices": dec.devices(),
        "device_facts": dec.device_facts(),
        "launch_config": {lid: dec.launch_config(lid) for lid in (0, 1, 2, 3, LAUNCH_ID_LIMIT, LAUNCH_ID_LIMIT + 1)},
        "kernel_configs": dec.kernel_configs(),
        "activity": dec.activity(),
        "activity_settled": _settled(dec),
        "clock": dec.clock(),
        "counters": dec.counters(),
        "header": dec.header(),
        "tail": dec.tail,
    }


def launched_total(out: dict[str, Any]) -> int:
    return sum(k[1] for k in out["kernels"])


def check_invariants(out: dict[str, Any], *, tail0: int, decoded: int, lane_span_cap: int,
                     tail_poked: bool = False, caps: dict[str, int] | None = None) -> None:
    """What any correct decoder reports, whatever the input (an independent oracle of sorts)."""
    c = out["counters"]
    assert out["name"] == {nid: out["names"].get(nid) for nid in out["name"]}, "name(id) is names()'s entry"
    if caps is not None:  # nothing held beyond a cap (docs/decoder.md, "Caps")
        assert len(out["names"]) <= caps["max_names"] and len(out["lanes"]) <= caps["max_lanes"]
        assert len(out["null_streams"]) <= caps["max_lanes"] and len(out["devices"]) <= caps["max_lanes"]
        assert c["pending_names"] <= caps["max_pending_names"]
        assert all(len(t.encode("utf-8", "surrogatepass")) <= caps["max_name_bytes"] + 3 * t.count("\ufffd")
                   for t, _f in out["names"].values())
    assert c["records"] == decoded, (c["records"], decoded)
    assert out["kernel_rows"] == [v for k in out["kernels"] for v in (*k[:4], k[4] or 0, k[5] or 0)], \
        "kernel_rows() is kernels() packed, min and max 0 while untimed"
    assert all((k[2] == 0) == (k[4] is None) == (k[5] is None) for k in out["kernels"]), "untimed: no min, no max"
    assert out["tail"] == tail0 + decoded
    assert tail_poked or out["header"]["tail"] == out["tail"], "the decoder stores its tail in the header"
    assert c["invalid_records"] == sum(c["invalid"].values()) <= decoded
    assert all(n > 0 for n in c["invalid"].values())
    assert (c["first_invalid_seq"] is None) == (c["invalid_records"] == 0)
    if c["first_invalid_seq"] is not None:
        assert tail0 <= c["first_invalid_seq"] < out["tail"]
    assert c["pending_names"] >= 0 and c["lane_overflow"] >= 0
    executions = 0
    for nid, count, timed, total, mn, mx in out["kernels"]:
        assert (nid == OTHER_NAME_ID and c["names_folded"]) or (0 <= nid < NAME_ID_LIMIT and (nid == 0 or nid in out["names"]))
        assert 0 <= timed <= count and count > 0
        assert (mn is None) == (mx is None) == (timed == 0)
        if timed:
            assert mn <= mx and (mx <= total or c["saturated"])
        else:
            assert total == 0
        executions += count
    kernel_ids = {k[0] for k in out["kernels"]}
    for nid, (regs, *shared, carveout, cache, cluster) in out["launches"].items():
        assert nid in kernel_ids, "a launch configuration only for a kernel name that launched"
        assert 0 <= regs < 1 << 16 and len(shared) == 5 and len(cluster) == 3 and 0 <= cache < 256
        assert carveout is None or 0 <= carveout < 256
    _stamp, configs = out["kernel_configs"]
    launched = {k[0]: k[1] for k in out["kernels"]}
    for nid, kept, more in configs:   # every launch in one configuration or among "more"
        assert len(kept) <= 4 and sum(c.count for c in kept) + more[0] == launched[nid]
        assert all(c.grid_min <= c.grid_max and c.timed <= c.count for c in kept)
    assert {nid for nid, _k, _m in configs} == set(launched), "configurations for every launched name"
    activity = out["activity"]
    assert caps is None or len(activity["devices"]) <= caps["max_lanes"]
    for settled in out["activity_settled"]:
        for d in settled["devices"]:
            assert d.late <= launched_total(out) and (d.busy_ns == 0 or d.first_start_ns is not None)
            if d.last_end_ns is not None and not settled["saturated"]:
                assert d.busy_ns <= d.last_end_ns - d.first_start_ns, "busy within the kernels' span"
    directions = [t[0] for t in out["transfers"]]
    assert directions == ["h2d", "d2h", "d2d", "p2p", "h2h", "memset"]
    for _d, count, timed, nbytes, total in out["transfers"]:
        assert 0 <= timed <= count and nbytes >= 0 and total >= 0
        assert count or (timed == nbytes == total == 0)
        executions += count
    lane_total = 0
    keys = []
    for dev, ctx, stream, ex, kept, name_id, spans in out["lanes"]:
        keys.append((dev, ctx, stream))
        assert ex > 0 and 0 <= kept <= min(ex, lane_span_cap) and len(spans) == kept
        assert name_id == 0 or name_id in out["names"]
        seqs = [s[0] for s in spans]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), "spans oldest first, each once"
        for seq, kind, start, end, nid, grid, block, nbytes, direction in spans:
            assert tail0 <= seq < out["tail"] and start <= end
            if kind == "kernel":
                assert grid is not None and block is not None and nbytes is None and direction is None
                assert nid in (0, OTHER_NAME_ID) or nid in out["names"]
            else:
                assert kind in ("memcpy", "memset") and nid == 0 and grid is None and nbytes is not None
                assert (direction == "memset") == (kind == "memset")
        lane_total += ex
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert lane_total + c["lane_overflow"] == executions, "every execution on a lane or in lane_overflow"
    if out["lanes_after"] is not None:
        after = out["tail"] - 3
        assert [(l[:6], [s for s in l[6] if s[0] > after]) for l in out["lanes"]] == [
            (l[:6], l[6]) for l in out["lanes_after"]]
    for nid, (_text, flags) in out["names"].items():
        assert 0 < nid < NAME_ID_LIMIT
        assert flags & ~(FLAG_NAME_TRUNCATED | FLAG_NAME_STREAM) == 0


def compare(classes: tuple[type, type], case: Case) -> tuple[list[Any], list[Any]]:
    """Play ``case`` against (compiled, Python); raise AssertionError if they observed anything
    different. Returns both observations."""
    a = run_case(classes[0], case)
    b = run_case(classes[1], case)
    if a != b:
        raise AssertionError("the twins disagree:\n" + describe_difference(a, b))
    return a, b


def describe_difference(a: list[Any], b: list[Any]) -> str:
    lines = []
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else "<missing>"
        y = b[i] if i < len(b) else "<missing>"
        if x == y:
            continue
        if isinstance(x, dict) and isinstance(y, dict):
            for k in x:
                if x.get(k) != y.get(k):
                    lines.append(f"step {i} {k}:\n  compiled {x.get(k)!r}\n  python   {y.get(k)!r}")
        else:
            lines.append(f"step {i}:\n  compiled {x!r}\n  python   {y!r}")
    return "\n".join(lines)[:4000]


# -- random generation -----------------------------------------------------------------------
BOUNDARY_U64 = (0, 1, 2, 10, 20, 1 << 31, 1 << 32, (1 << 32) - 1, 1 << 63, (1 << 63) - 1, U64_MAX, U64_MAX - 1)
BOUNDARY_U32 = (0, 1, 2, 3, 7, 47, 48, 49, 4095, 4096, 4097, (1 << 24) - 1, 1 << 24, 1 << 31, (1 << 32) - 1)
KERNEL_NAMES = (b"_Z6kernelPfi", b"_Z13attention_fwdPKfPfi",
                b"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_",
                b"", b"k", b"x" * 48, b"y" * 49, b"z" * 96, b"\xff\xfe\xc3(" * 13, b"w" * 4096)


def _u64(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.35:
        return rng.choice(BOUNDARY_U64)
    if r < 0.7:
        return rng.randrange(0, 1 << 20)
    return rng.getrandbits(64)


def _u32(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.4:
        return rng.choice(BOUNDARY_U32)
    if r < 0.8:
        return rng.randrange(0, 8)
    return rng.getrandbits(32)


class _Stream:
    """A producer-shaped record stream with the usual mistakes mixed in (by ``bad``, 0..1)."""

    def __init__(self, rng: random.Random, bad: float) -> None:
        self.rng = rng
        self.bad = bad
        self.out: list[bytes] = []
        self.defined: list[int] = [0]
        self.next_id = 1
        self.launches: list[int] = [0]   # launch ids defined so far (0: none)
        self.next_launch = 1
        self.lanes = [(rng.randrange(3), rng.randrange(1, 4), rng.choice((7, 13, 14, 15, 16)))
                      for _ in range(rng.randrange(1, 6))]
        self.t = rng.choice((0, 1_000_000, 1 << 62, U64_MAX - 10_000_000))

    def _oops(self) -> bool:
        return self.rng.random() < self.bad

    def name(self, stream_kind: bool = False) -> int:
        rng = self.rng
        nid = self.next_id
        self.next_id += 1
        if self._oops():
            nid = rng.choice((0, NAME_ID_LIMIT, NAME_ID_LIMIT - 1, rng.getrandbits(32), rng.choice(self.defined)))
        text = rng.choice(KERNEL_NAMES) if rng.random() < 0.7 else rng.randbytes(rng.randrange(0, 300))
        chunks = name_chunks(nid, text, FLAG_NAME_STREAM if stream_kind else 0)
        if self._oops():
            chunks = self.mangle_chunks(chunks, nid, text)
        self.out.extend(chunks)
        self.defined.append(nid)
        return nid

    def mangle_chunks(self, chunks: list[bytes], nid: int, text: bytes) -> list[bytes]:
        rng = self.rng
        what = rng.randrange(9)
        chunks = list(chunks)
        if what == 0 and len(chunks) > 1:       # out of order
            rng.shuffle(chunks)
        elif what == 1:                         # overlapping: a chunk again at a shifted offset
            i = rng.randrange(len(chunks))
            _t, f, n, off, total, txt = NAME.unpack(chunks[i])
            chunks.insert(i + 1, NAME.pack(REC_NAME_CHUNK, f & ~FLAG_NAME_LAST, n, max(0, off + rng.choice((-24, -1, 1, 24))),
                                           total, txt))
        elif what == 2:                         # oversized: total_len past NAME_MAX, offsets past the end
            i = rng.randrange(len(chunks))
            _t, f, n, off, total, txt = NAME.unpack(chunks[i])
            chunks[i] = NAME.pack(REC_NAME_CHUNK, f, n, rng.choice((off, total + 48, 1 << 31, U64_MAX & 0xFFFFFFFF)),
                                  rng.choice((NAME_MAX + 1, total + 1, 1 << 31, (1 << 32) - 1, total)), txt)
        elif what == 3:                         # a chunk lost
            del chunks[rng.randrange(len(chunks))]
        elif what == 4:                         # a chunk twice
            i = rng.randrange(len(chunks))
            chunks.insert(i, chunks[i])
        elif what == 5:                         # NAME_LAST early / missing
            i = rng.randrange(len(chunks))
            _t, f, n, off, total, txt = NAME.unpack(chunks[i])
            chunks[i] = NAME.pack(REC_NAME_CHUNK, f ^ FLAG_NAME_LAST, n, off, total, txt)
        elif what == 6:                         # total_len changes between chunks
            i = rng.randrange(len(chunks))
            _t, f, n, off, total, txt = NAME.unpack(chunks[i])
            chunks[i] = NAME.pack(REC_NAME_CHUNK, f, n, off, max(0, total + rng.choice((-1, 1, 48))), txt)
        elif what == 7:                         # interleaved with another name's chunks
            other = name_chunks(self.next_id, rng.randbytes(rng.randrange(0, 150)))
            self.next_id += 1
            i = rng.randrange(len(chunks) + 1)
            chunks[i:i] = other
        else:                                   # redefinition with other text or kind
            chunks += name_chunks(nid, text + b"!" if rng.random() < 0.5 else text,
                                  rng.choice((0, FLAG_NAME_STREAM, FLAG_NAME_TRUNCATED)))
        return chunks

    def launch(self) -> int:
        """A LAUNCH record for a new launch id (or, by mistake, a bad id or a conflicting one)."""
        rng = self.rng
        lid = self.next_launch
        self.next_launch += 1
        if self._oops():
            lid = rng.choice((0, LAUNCH_ID_LIMIT, LAUNCH_ID_LIMIT + 1, rng.getrandbits(32), rng.choice(self.launches)))
        cluster = (0, 0, 0) if rng.random() < 0.7 else (rng.choice((1, 2, 4, _u32(rng))), 1, 1)
        self.out.append(launch(lid, rng.choice((0, 1024, 49152, _u32(rng))), rng.choice((0, 4096, _u32(rng))),
                               rng.choice((0, 32768, 233472)), cluster, rng.randrange(3), rng.randrange(2),
                               rng.choice((None, 0, 50, 100, 255)), rng.randrange(256)))
        self.launches.append(lid)
        return lid

    def times(self) -> tuple[int, int, int]:
        rng = self.rng
        flags = 0
        if self._oops():
            start, end = _u64(rng), _u64(rng)
        else:
            self.t = (self.t + rng.randrange(0, 5000)) & U64_MAX
            start = self.t
            end = min(U64_MAX, start + rng.choice((0, 1, 700, 40_000, rng.randrange(1 << 40))))
        if rng.random() < 0.05:
            flags |= FLAG_NO_TIMING
            if rng.random() < 0.7:
                start = end = 0
        return start, end, flags

    def lane(self) -> tuple[int, int, int]:
        if self._oops():
            return (_u32(self.rng), _u32(self.rng), _u32(self.rng))
        return self.rng.choice(self.lanes)

    def record(self) -> None:
        rng = self.rng
        r = rng.random()
        if r < 0.45:
            nid = rng.choice(self.defined) if self.defined and rng.random() < 0.85 else self.name()
            if self._oops():
                nid = rng.choice((_u32(rng), self.next_id + 5, (NAME_ID_LIMIT + nid) & 0xFFFFFFFF))
            dev, ctx, stream = self.lane()
            start, end, flags = self.times()
            grid = (rng.randrange(1 << 32), rng.randrange(1 << 16), rng.randrange(1 << 16)) if self._oops() else (64, 1, 1)
            lid = self.launch() if rng.random() < 0.1 else rng.choice(self.launches)
            if self._oops():
                lid = rng.choice((_u32(rng), self.next_launch + 3, LAUNCH_ID_LIMIT + 1))
            self.out.append(kernel(nid, dev, ctx, stream, start, end, flags | rng.choice((0, 0, 0, 0x20)),
                                   grid, (128, 1, 1), launch_id=lid, registers=rng.choice((32, 255, 0))))
        elif r < 0.62:
            dev, ctx, stream = self.lane()
            start, end, flags = self.times()
            kind = rng.choice((1, 2, 8, 10, 9, 3, 4, 5, 6, 7, 0)) if not self._oops() else rng.randrange(256)
            src_kind, dst_kind = (rng.randrange(9), rng.randrange(9)) if kind == 0 or self._oops() else (0, 0)
            src_dev, dst_dev = (dev, dev) if rng.random() < 0.7 else (rng.randrange(4), rng.randrange(4))
            nbytes = rng.choice((0, 4096, 1 << 20, U64_MAX, U64_MAX // 2)) if self._oops() else rng.randrange(1 << 24)
            self.out.append(copy(kind, nbytes, dev, ctx, stream, start, end, flags | rng.choice((0, 8)),
                                 src_kind, dst_kind, src_dev, dst_dev))
        elif r < 0.68:
            dev, ctx, stream = self.lane()
            start, end, flags = self.times()
            self.out.append(memset(rng.randrange(1 << 20), dev=dev, ctx=ctx, stream=stream, start=start,
                                   end=end, flags=flags, dst_kind=rng.randrange(8)))
        elif r < 0.78:
            self.name(stream_kind=rng.random() < 0.3)
        elif r < 0.83:
            dev, ctx, stream = self.lane()
            nid = self.name(stream_kind=True) if rng.random() < 0.5 else rng.choice(self.defined)
            self.out.append(stream_name(nid if not self._oops() else _u32(rng), dev, ctx, stream))
        elif r < 0.88:
            dev, ctx, stream = self.lane()
            self.out.append(context(dev, ctx, stream if rng.random() < 0.5 else 7))
        elif r < 0.92:
            nid = self.name() if rng.random() < 0.5 else rng.choice(self.defined)
            self.out.append(device(rng.randrange(4) if not self._oops() else _u32(rng), nid))
        elif r < 0.96:
            self.out.append(clock_sync(_u64(rng), _u64(rng)))
        elif r < 0.98:
            if self._oops():
                self.out.append(bytes(64))                   # a torn, zeroed slot
        elif self._oops():
            self.out.append(rng.randbytes(64))               # garbage

    def take(self, n: int) -> list[bytes]:
        while len(self.out) < n:
            self.record()
        head, self.out = self.out[:n], self.out[n:]
        return head


def mutate(rng: random.Random, records: list[bytes], n: int) -> list[bytes]:
    """``n`` random mutations of a record list: bit flips, field overwrites, swaps, duplicates,
    deletions, zeroed and random slots."""
    recs = list(records)
    for _ in range(n):
        if not recs:
            recs.append(rng.randbytes(64))
            continue
        i = rng.randrange(len(recs))
        what = rng.randrange(8)
        rec = bytearray(recs[i])
        if what == 0:
            bit = rng.randrange(512)
            rec[bit // 8] ^= 1 << (bit % 8)
        elif what == 1:
            off = rng.choice((0, 2, 4, 8, 16, 24, 28, 32, 36, 40, 48, 52, 56, 60, rng.randrange(61)))
            width = rng.choice((1, 2, 4))
            rec[off:off + width] = rng.getrandbits(8 * width).to_bytes(width, "little")
        elif what == 2:
            rec[0:2] = rng.randrange(0, 12).to_bytes(2, "little")
        elif what == 3:
            j = rng.randrange(len(recs))
            recs[i], recs[j] = recs[j], recs[i]
            continue
        elif what == 4:
            recs.insert(i, recs[i])
            continue
        elif what == 5:
            del recs[i]
            continue
        elif what == 6:
            rec = bytearray(64)
        else:
            off = 8 * rng.randrange(1, 3)
            rec[off:off + 8] = rng.choice(BOUNDARY_U64).to_bytes(8, "little")
        recs[i] = bytes(rec)
    return recs


def valid_stream(rng: random.Random, n: int) -> list[bytes]:
    """A stream exactly as the producer would write it (no mistakes)."""
    return _Stream(rng, 0.0).take(n)


def _drains(rng: random.Random, total: int) -> list[tuple[Any, ...]]:
    steps: list[tuple[Any, ...]] = []
    if rng.random() < 0.4:
        return [("drain", None)]
    left = total + 2
    while left > 0 and len(steps) < 12:
        n = rng.choice((1, 2, 3, 5, rng.randrange(1, 64), None, 0, -1))
        steps.append(("drain", n))
        left -= n if isinstance(n, int) and n > 0 else left
    steps.append(("drain", None))
    return steps


HEADER_DAMAGE = (
    ("magic", (0, 1, MAGIC ^ 1, MAGIC ^ (1 << 63), U64_MAX)),
    ("version", (0, 1, 3, 1 << 31, (1 << 32) - 1)),
    ("header_size", (0, 64, 2048, 4095, 4097, 8192, (1 << 32) - 1)),
    ("record_size", (0, 32, 63, 65, 128, (1 << 32) - 1)),
    ("capacity", (0, 1, 2, 512, 1000, 1023, 1025, 2048, 1536, 1 << 26, 1 << 27, (1 << 31), (1 << 32) - 1)),
    ("status", (0, 7, 8, 255, (1 << 32) - 1)),
    ("producer_pid", (0, -1, 1, 1 << 30)),
    ("producer_exited", (0, 1, 2, (1 << 32) - 1)),
    ("dropped_ring", (0, 1, U64_MAX)),
    ("dropped_cupti", (0, 5, U64_MAX)),
)


def random_case(rng: random.Random) -> tuple[str, Case]:
    """One random case and the name of its family."""
    r = rng.random()
    cap = rng.choice((MIN_CAPACITY,) * 6 + (2048, 4096))
    lane_cap = rng.choice((0, 1, 2, 3, 16, 512))
    if r < 0.12:
        return "header", _header_case(rng, cap, lane_cap)
    if r < 0.22:
        return "counters", _counters_case(rng, cap, lane_cap)
    if r < 0.45:
        family = "valid_mutated"
        records = valid_stream(rng, rng.randrange(1, 120))
        records = mutate(rng, records, rng.randrange(1, 6))
    elif r < 0.55:
        family = "names"
        records = _names_stream(rng)
    else:
        family = "stream"
        records = _Stream(rng, rng.choice((0.02, 0.1, 0.3))).take(rng.randrange(0, 150))
    records = records[:cap]
    tail0 = _position(rng, cap, len(records))
    steps = _drains(rng, len(records))
    caps = _small_caps(rng) if rng.random() < 0.3 else {}
    if rng.random() < 0.25:  # more records published after a first drain, maybe across the wrap
        more = _Stream(rng, 0.1).take(rng.randrange(1, 60))
        steps.insert(1, ("publish", more))
        steps.append(("drain", None))
    if rng.random() < 0.05:  # a slot rewritten after it was published (torn write)
        steps.insert(0, ("write", tail0 + rng.randrange(max(1, len(records))), rng.randbytes(64)))
    retention = None
    if rng.random() < 0.5:   # retaining: a budget of a few small chunks (evicting), or a roomy one
        retention = (rng.choice((1 << 14, 30_000, 1 << 16, 1 << 30)), rng.choice((16, 16, 32, 1024)))
    return family, Case(capacity=cap, tail0=tail0, records=records, lane_span_cap=lane_cap, caps=caps, steps=steps,
                        retention=retention)


def _small_caps(rng: random.Random) -> dict[str, int]:
    """Caps low enough for a case's few records to reach (docs/decoder.md, "Caps")."""
    return {"max_names": rng.choice((0, 1, 2, 3, 8)), "max_name_bytes": rng.choice((1, 5, 47, 48, 49, 100)),
            "max_lanes": rng.choice((1, 2, 3)), "max_pending_names": rng.choice((1, 2, 3))}


def _position(rng: random.Random, cap: int, n: int) -> int:
    """Where the records start: anywhere, often just before a wrap, sometimes near 2^64."""
    r = rng.random()
    if r < 0.5:
        return max(0, rng.randrange(0, 4) * cap + cap - rng.randrange(0, n + 2))
    if r < 0.8:
        return rng.randrange(0, 1 << 40)
    if r < 0.9:
        return 0
    return U64_MAX - rng.randrange(n, n + 2 * cap)


def _names_stream(rng: random.Random) -> list[bytes]:
    """Names and the records that use them, chunks mangled at random."""
    s = _Stream(rng, 0.0)
    for _ in range(rng.randrange(1, 8)):
        nid = s.next_id
        s.next_id += 1
        text = rng.choice(KERNEL_NAMES) if rng.random() < 0.6 else rng.randbytes(rng.randrange(0, 400))
        chunks = name_chunks(nid, text, rng.choice((0, FLAG_NAME_STREAM)))
        if rng.random() < 0.6:
            s.bad = 1.0
            chunks = s.mangle_chunks(chunks, nid, text)
            s.bad = 0.0
        s.out.extend(chunks)
        s.defined.append(nid)
        for _ in range(rng.randrange(0, 4)):
            s.out.append(kernel(nid, *s.lane(), 100, 200))
        if rng.random() < 0.3:
            s.out.append(stream_name(nid, *s.lane()))
    return s.out


def _header_case(rng: random.Random, cap: int, lane_cap: int) -> Case:
    records = _Stream(rng, 0.05).take(rng.randrange(0, 40))
    case = Case(capacity=cap, tail0=_position(rng, cap, len(records)), records=records, lane_span_cap=lane_cap,
                steps=_drains(rng, len(records)))
    for _ in range(rng.randrange(1, 3)):
        name, values = rng.choice(HEADER_DAMAGE)
        case.header[name] = rng.choice(values) if rng.random() < 0.8 else rng.getrandbits(32)
    r = rng.random()
    if r < 0.2:
        case.size_delta = -rng.choice((1, 63, 64, RECORD_SIZE * cap // 2, RECORD_SIZE * cap))
    elif r < 0.3:
        case.size = rng.choice((0, 1, 64, 511, 4095, 4096, 4097))
    elif r < 0.35:
        case.readonly = True
    if rng.random() < 0.2:
        case.header_bytes["session"] = rng.randbytes(32)
        case.header_bytes["status_detail"] = rng.randbytes(rng.randrange(256))
    if rng.random() < 0.3:  # the header damaged under an open decoder
        name, values = rng.choice(HEADER_DAMAGE[:5])
        value = rng.choice(values)
        width = WIDTH.get(name, 4)
        case.steps.insert(rng.randrange(len(case.steps) + 1),
                          ("poke", OFF[name], (value & ((1 << (8 * width)) - 1)).to_bytes(width, "little")))
    return case


def _counters_case(rng: random.Random, cap: int, lane_cap: int) -> Case:
    """head < tail, head - tail > capacity: at open, mid-session, or published that way later."""
    records = _Stream(rng, 0.05).take(rng.randrange(0, 40))
    tail0 = _position(rng, cap, len(records))
    case = Case(capacity=cap, tail0=tail0, records=records, lane_span_cap=lane_cap, steps=_drains(rng, len(records)))
    head = tail0 + len(records)
    bad_heads = [tail0 - 1, tail0 - rng.randrange(1, cap), tail0 + cap + 1, tail0 + cap,
                 tail0 + cap + rng.randrange(1, 1 << 20), 0, U64_MAX, head + rng.randrange(-3, 4)]
    r = rng.random()
    if r < 0.35:
        case.header["head"] = rng.choice(bad_heads) & U64_MAX
    elif r < 0.5:
        case.header["tail"] = rng.choice((head + 1, head - cap - 1, 0, U64_MAX, tail0 + 1)) & U64_MAX
    else:
        value = rng.choice(bad_heads) & U64_MAX
        case.steps.insert(rng.randrange(len(case.steps) + 1), ("poke", OFF["head"], value.to_bytes(8, "little")))
        if rng.random() < 0.5:  # and later the producer puts things right again
            case.steps.append(("poke", OFF["head"], (head & U64_MAX).to_bytes(8, "little")))
            case.steps.append(("drain", None))
        if rng.random() < 0.3:  # a rogue write of the consumer's own tail: the decoder keeps its own
            case.steps.insert(1, ("poke", OFF["tail"], rng.getrandbits(64).to_bytes(8, "little")))
    return case
