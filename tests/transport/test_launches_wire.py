"""A traced process's kernel launches (occupancy) and devices (busy share, copy bandwidth) on the
stream (docs/snapshot.md, "The compact form"): launches refer to the names table by id and a delta
carries only those that changed, left out when none did; devices travel with the process's head;
the reader gives back the plain form exactly.
"""

from __future__ import annotations

import json

from gpuflow.core.snapshot import CopyRate, KernelLaunch, KernelStat, TracedDevice, TracedProcess
from gpuflow.transport.frames import FrameEncoder
from gpuflow.transport.wire import StreamReader
from snapshots import board_with, lane, make_snapshot

GEMM = ("gemm(float*, int)", "_Z4gemmPfi")
ADD = ("add(float*)", "_Z3addPf")


def body(event: bytes) -> dict:
    data = [l[len("data: "):] for l in event.decode().split("\n") if l.startswith("data: ")]
    return json.loads(data[0])


def plain(snap) -> dict:
    return json.loads(json.dumps(snap.to_json_dict()))


def without(d: dict, *keys: str) -> dict:
    return {k: v for k, v in d.items() if k not in keys}


def launch(name: tuple[str, str], occupancy: float, waves_max: float = 2.0) -> KernelLaunch:
    return KernelLaunch(mangled=name[1], configs=1, block_threads=256, registers=64,
                        shared_bytes=1024, occupancy_pct=occupancy, blocks_per_sm=4, limiters="registers",
                        waves_min=0.5, waves_max=waves_max, occupancy_min_pct=occupancy,
                        occupancy_max_pct=occupancy)


DEVICE = TracedDevice(device=0, uuid="GPU-a", name="Test GPU", compute_capability=(9, 0), sm_count=132,
                      busy_pct=97.5, busy_window_ms=1003.2, busy_window_end_us=1_764_473_412_000_000,
                      busy_ns=4_000_000_000, kernel_span_ns=4_100_000_000,
                      copies=(CopyRate("h2d", "pinned", 10, 10 << 30, 200_000_000, 53.7e9),
                              CopyRate("h2d", "pageable", 4, 1 << 30, 90_000_000, 11.9e9)))


def snapshot(seq: int, launches: tuple[KernelLaunch, ...], kernels: tuple[KernelStat, ...], busy: float):
    t = TracedProcess(pid=4242, session="s1", name="train", cupti_status="ok", records=seq, kernels=kernels,
                      lanes=(lane(13, [seq]),), devices=(TracedDevice(**{**_fields(DEVICE), "busy_pct": busy}),),
                      kernel_launches=launches)
    return make_snapshot(seq=seq, traced=(t,))


def same_but_lanes(read: dict, snap) -> bool:
    """The reader's frame is the plain snapshot, but for the lanes (a delta's carry only new spans)."""
    want = without(plain(snap), "schema")
    got = without(read, "frame", "base_seq", "schema")
    return ([without(t, "lanes") for t in got.pop("traced")] == [without(t, "lanes") for t in want.pop("traced")]
            and got == want)


def _fields(d: TracedDevice) -> dict:
    return {f: getattr(d, f) for f in d.__slots__}


def test_launches_refer_to_names_and_a_delta_carries_only_those_that_changed():
    kernels = (KernelStat(*GEMM, 3, 6000, 1900, 2100, timed=3), KernelStat(*ADD, 5, 500, 100, 100, timed=5))
    board = board_with(snapshot(1, (launch(ADD, 25.0), launch(GEMM, 50.0)), kernels, 97.5))
    enc, reader = FrameEncoder(board, boot_epoch=1), StreamReader()
    f1 = enc.current()
    t1 = body(f1.full)["traced"][0]
    ids = {tuple(n): i for i, n in enumerate(t1["names"])}
    assert [x["id"] for x in t1["kernel_launches"]] == [ids[ADD], ids[GEMM]]
    assert t1["devices"][0]["busy_pct"] == 97.5 and t1["devices"][0]["copies"][0]["memory"] == "pinned"
    read = reader.read(body(f1.full))
    assert without(read, "frame", "base_seq", "schema") == without(plain(board.latest()), "schema")
    # counts move, launches do not: the delta leaves them out, the reader keeps them
    kernels2 = (KernelStat(*GEMM, 4, 8000, 1900, 2100, timed=4), kernels[1])
    board.publish(snapshot(2, (launch(ADD, 25.0), launch(GEMM, 50.0)), kernels2, 96.0))
    f2 = enc.current()
    t2 = body(f2.delta)["traced"][0]
    assert "kernel_launches" not in t2 and t2["devices"][0]["busy_pct"] == 96.0
    assert same_but_lanes(reader.read(body(f2.delta)), board.latest())
    # one launch's figures change (a new grid extreme): only it travels
    board.publish(snapshot(3, (launch(ADD, 25.0), launch(GEMM, 50.0, waves_max=7.5)), kernels2, 96.0))
    f3 = enc.current()
    t3 = body(f3.delta)["traced"][0]
    assert [(x["id"], x["waves_max"]) for x in t3["kernel_launches"]] == [(ids[GEMM], 7.5)]
    read = reader.read(body(f3.delta))
    assert same_but_lanes(read, board.latest())
    assert [x["mangled"] for x in read["traced"][0]["kernel_launches"]] == [ADD[1], GEMM[1]]


def test_launch_objects_the_builder_hands_again_are_sent_once_and_a_reset_names_them_anew():
    """A builder hands the same tuple while no launch changed, and the same object for one that did
    not: the encoder reuses what it made of them, which must never carry a stale id (a process that
    replaced its namesake starts a new names table) nor leave a full frame without them."""
    add, gemm = launch(ADD, 25.0), launch(GEMM, 50.0)
    table = (add, gemm)
    kernels = (KernelStat(*GEMM, 3, 6000, 1900, 2100, timed=3), KernelStat(*ADD, 5, 500, 100, 100, timed=5))
    board = board_with(snapshot(1, table, kernels, 97.5))
    enc, reader = FrameEncoder(board, boot_epoch=1), StreamReader()
    reader.read(body(enc.current().full))
    # the same tuple, the kernels' counts moved: no launch travels; a full frame has them all
    kernels2 = (KernelStat(*GEMM, 4, 8000, 1900, 2100, timed=4), kernels[1])
    board.publish(snapshot(2, table, kernels2, 96.0))
    f2 = enc.current()
    assert "kernel_launches" not in body(f2.delta)["traced"][0]
    full = body(f2.full)["traced"][0]
    ids = {n[1]: i for i, n in enumerate(full["names"])}
    assert [x["id"] for x in full["kernel_launches"]] == [ids[ADD[1]], ids[GEMM[1]]]
    assert same_but_lanes(reader.read(body(f2.delta)), board.latest())
    # a new tuple holding one new object: only that one travels
    gemm2 = launch(GEMM, 50.0, waves_max=7.5)
    table3 = (add, gemm2)
    board.publish(snapshot(3, table3, kernels2, 96.0))
    t3 = body(enc.current().delta)["traced"][0]
    assert [(x["id"], x["waves_max"]) for x in t3["kernel_launches"]] == [(ids[GEMM[1]], 7.5)]
    reader.read(body(enc.current().delta))
    # pid reuse (fewer records): the same tuple, a new names table in which ADD comes first
    reused = TracedProcess(pid=4242, session="s1", name="train", cupti_status="ok", records=1,
                           kernels=(KernelStat(*ADD, 5, 9000, 100, 3000, timed=5), kernels2[0]),
                           lanes=(lane(13, [1]),), kernel_launches=table3)
    board.publish(make_snapshot(seq=4, traced=(reused,)))
    f4 = enc.current()
    t4 = body(f4.delta)["traced"][0]
    new_ids = {n[1]: i for i, n in enumerate(t4["names"])}
    assert t4.get("reset") is True and new_ids[ADD[1]] != ids[ADD[1]]
    assert [x["id"] for x in t4["kernel_launches"]] == [new_ids[ADD[1]], new_ids[GEMM[1]]]
    assert [x["id"] for x in body(f4.full)["traced"][0]["kernel_launches"]] == [new_ids[ADD[1]], new_ids[GEMM[1]]]
    read = reader.read(body(f4.delta))["traced"][0]
    assert read["kernel_launches"] == plain(board.latest())["traced"][0]["kernel_launches"]
