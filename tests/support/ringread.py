"""A small, slow, independent ring reader for the producer-side tests.

What it is for: checking what the producer (test producer or injected library) wrote, record by
record, without depending on the real decoder (gpuflow/collectors/cupti), which is tested on its
own. It reads a ring with struct from a descriptor (one ringcatch.py caught, or a process's own:
:func:`own_ring_fd`) or from a file of its bytes (what ``ringcatch.py OUTDIR -- CMD`` writes);
only the header's field layout comes from the package (``_layout.HEADER_STRUCT``, its one
definition). ``python3 tests/support/ringread.py FILE...`` prints a summary as JSON (on a GPU
machine too: tests/inject/gpu_smoke.sh).

Constraints: the standard library and GPUFlow's ``_layout`` (an installed GPUFlow); a strict
reader: a record naming a name id not yet defined is an AssertionError, not a guess.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import sys
from dataclasses import dataclass, field

from gpuflow.collectors.cupti._layout import HEADER_STRUCT

#: how a ring's memory file shows in /proc/<pid>/fd (memfd_create's name)
RING_FILE_NAME = "/memfd:gpuflow-ring (deleted)"


@dataclass
class Ring:
    header: dict
    records: list[dict]
    names: dict[int, dict] = field(default_factory=dict)

    def of_type(self, rtype: int) -> list[dict]:
        return [r for r in self.records if r["type"] == rtype]


def own_ring_fd() -> int:
    """The descriptor of this process's own ring (the injected library keeps it open)."""
    for entry in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{entry}") == RING_FILE_NAME:
                return int(entry)
        except OSError:
            continue
    raise FileNotFoundError("this process has no GPUFlow ring")


def _ring_bytes(source: int | str | os.PathLike, size: int | None = None) -> bytes:
    """The first ``size`` bytes (all, by default) of a ring given as a descriptor or a file."""
    if isinstance(source, int):
        return os.pread(source, size if size is not None else os.fstat(source).st_size, 0)
    with open(source, "rb") as f:
        return f.read() if size is None else f.read(size)


def read_header(buf: bytes) -> dict:
    (magic, version, header_size, record_size, capacity, pid, status, session, clock_cupti,
     clock_wall, cupti_version, flush_ms, started, detail) = HEADER_STRUCT.unpack_from(buf, 0)
    head, = struct.unpack_from("<Q", buf, 512)
    tail, = struct.unpack_from("<Q", buf, 576)
    dropped_ring, dropped_cupti, incomplete = struct.unpack_from("<QQQ", buf, 640)
    exited, = struct.unpack_from("<I", buf, 664)
    buffers, translate_ns = struct.unpack_from("<QQ", buf, 672)
    return dict(magic=magic, version=version, header_size=header_size, record_size=record_size,
                capacity=capacity, producer_pid=pid, status=status,
                session=session.split(b"\0", 1)[0].decode(), clock_cupti_ns=clock_cupti,
                clock_wall_ns=clock_wall, cupti_version=cupti_version, flush_ms=flush_ms,
                started_wall_ns=started,
                status_detail=detail.split(b"\0", 1)[0].decode("utf-8", "replace"),
                head=head, tail=tail, dropped_ring=dropped_ring, dropped_cupti=dropped_cupti,
                incomplete=incomplete, producer_exited=exited, buffers_completed=buffers,
                translate_cpu_ns=translate_ns)


def parse_record(raw: bytes) -> dict:
    rtype, flags, device = struct.unpack_from("<HHI", raw, 0)
    rec = {"type": rtype, "flags": flags, "device": device}
    if rtype == 4:  # NAME_CHUNK
        offset, total = struct.unpack_from("<II", raw, 8)
        rec.update(name_id=device, offset=offset, total_len=total, text=raw[16:64])
        return rec
    if rtype == 9:  # LAUNCH (version 3)
        static, dynamic, executed, cx, cy, cz, config, limit, carveout, cache = struct.unpack_from(
            "<IIIIIIBBBB", raw, 8)
        rec.update(launch_id=device, static_shared=static, dynamic_shared=dynamic, shared_executed=executed,
                   cluster=(cx, cy, cz), shared_config=config, shmem_limit_config=limit,
                   carveout=carveout if flags & 0x0040 else None, cache_config=cache)
        return rec
    start, end, ctx, stream = struct.unpack_from("<QQII", raw, 8)
    rec.update(start=start, end=end, context=ctx, stream=stream)
    if rtype in (2, 3):  # MEMCPY, MEMSET
        corr, ck, sk, dk, _p, nbytes, sdev, ddev, value, graph = struct.unpack_from(
            "<IBBBBQIIII", raw, 32)
        rec.update(correlation=corr, copy_kind=ck, src_kind=sk, dst_kind=dk, bytes=nbytes,
                   src_device=sdev, dst_device=ddev, value=value, graph_id=graph)
    else:  # KERNEL, STREAM_NAME, DEVICE carry the kernel payload (name id at 36)
        corr, name_id, gx, gy, gz, bx, by, bz, regs, launch_id, graph = struct.unpack_from(
            "<IIIHHHHHHII", raw, 32)
        rec.update(correlation=corr, name_id=name_id, grid=(gx, gy, gz), block=(bx, by, bz),
                   registers=regs, launch_id=launch_id, graph_id=graph)
    if rtype == 8:  # DEVICE: its facts where the act fields of other records are (gpuflow_device_payload)
        uuid, sm_count, major, minor = struct.unpack_from("<16sIHH", raw, 8)
        rec.update(uuid=uuid, sm_count=sm_count, compute_capability=(major, minor))
    return rec


def header(source: int | str | os.PathLike) -> dict:
    """Only the header of a ring (a descriptor or a file; cheap enough to poll)."""
    return read_header(_ring_bytes(source, 4096))


def read_ring(source: int | str | os.PathLike, consume: bool = False, strict: bool = True) -> Ring:
    """Read every published, unconsumed record of a ring: a descriptor (read in place) or a file
    of its bytes.

    Names are reassembled from NAME_CHUNK records; a record that refers to a name id not yet
    defined raises AssertionError when `strict` (the producer promises that never happens). With
    `consume` (a descriptor only), tail is advanced to head afterwards, as a consumer would.
    """
    if isinstance(source, int):
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if consume else 0)
        mm = mmap.mmap(source, os.fstat(source).st_size, mmap.MAP_SHARED, prot)
    else:
        assert not consume, "only a ring's descriptor can be consumed"
        mm = bytearray(_ring_bytes(source))
    try:
        hdr = read_header(bytes(mm[:4096]))
        cap, head, tail = hdr["capacity"], hdr["head"], hdr["tail"]
        records, names, partial, launches = [], {}, {}, {}
        for n in range(tail, head):
            off = 4096 + (n % cap) * 64
            rec = parse_record(bytes(mm[off:off + 64]))
            rec["index"] = n
            records.append(rec)
            if rec["type"] == 4:
                buf = partial.setdefault(rec["name_id"], bytearray())
                assert rec["offset"] == len(buf), f"chunk out of order at {n}: {rec}"
                take = min(48, rec["total_len"] - rec["offset"])
                buf += rec["text"][:take]
                if rec["flags"] & 1:
                    names[rec["name_id"]] = {"text": bytes(partial.pop(rec["name_id"])).decode(
                        "utf-8", "replace"), "flags": rec["flags"]}
            elif rec["type"] == 9:
                launches[rec["launch_id"]] = rec
            elif rec["type"] in (1, 5, 8) and rec.get("name_id") and (
                    strict or rec["name_id"] in names):
                assert rec["name_id"] in names, f"name id {rec['name_id']} used before defined"
                rec["name"] = names[rec["name_id"]]["text"]
            if rec["type"] == 1 and rec["launch_id"] and (strict or rec["launch_id"] in launches):
                assert rec["launch_id"] in launches, f"launch id {rec['launch_id']} used before defined"
                rec["launch"] = launches[rec["launch_id"]]
        if consume:
            struct.pack_into("<Q", mm, 576, head)
        return Ring(header=hdr, records=records, names=names)
    finally:
        if isinstance(mm, mmap.mmap):
            mm.close()


def summary(ring: Ring) -> dict:
    """Counts a GPU check compares with what a workload printed."""
    kernels: dict[str, int] = {}
    copies: dict[str, list[int]] = {}
    kinds = {1: "h2d", 2: "d2h", 8: "d2d", 10: "p2p"}
    streams = {}
    contexts = []
    for r in ring.records:
        if r["type"] == 1:
            kernels[r.get("name", "?")] = kernels.get(r.get("name", "?"), 0) + 1
        elif r["type"] == 2:
            c = copies.setdefault(kinds.get(r["copy_kind"], str(r["copy_kind"])), [0, 0])
            c[0] += 1
            c[1] += r["bytes"]
        elif r["type"] == 3:
            c = copies.setdefault("memset", [0, 0])
            c[0] += 1
            c[1] += r["bytes"]
        elif r["type"] == 5:
            streams[f"{r['device']}/{r['context']}/{r['stream']}"] = r.get("name")
        elif r["type"] == 6:
            contexts.append({"device": r["device"], "context": r["context"],
                             "null_stream": r["stream"]})
    hdr = {k: v for k, v in ring.header.items() if k != "magic"}
    no_timing = sum(1 for r in ring.records if r["type"] in (1, 2, 3) and r["flags"] & 0x10)
    return {"header": hdr, "kernels": kernels, "copies": copies, "streams": streams,
            "contexts": contexts, "devices": [r.get("name") for r in ring.of_type(8)],
            "clock_syncs": len(ring.of_type(7)), "no_timing": no_timing,
            "records": len(ring.records)}


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(json.dumps({"ring": arg, **summary(read_ring(arg))}, indent=1, sort_keys=True))
