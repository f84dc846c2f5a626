"""The occupancy and bandwidth arguments of an export, from a real ring through the real collector:
each kernel slice carries the theoretical occupancy, limiter, blocks per SM and waves of its own
execution's launch configuration, exactly what gpuflow/collectors/cupti/occupancy.py gives for it
(H200 configurations whose figures docs/occupancy.md derives by hand: registers, opted-in dynamic
shared memory, a 25 % carve-out, blocks of one warp, a tail wave), and says "not available", and
why, where it cannot know them (no launch configuration, a cluster launch's waves, a device with
no DEVICE record, a configuration beyond those the decoder tracks per kernel name); each copy
slice its bandwidth. The trace is decoded with Perfetto's own schema (tests/support/perfetto_read.py)
and written the same, byte for byte, by both slice encoders (and with both decoder twins). A lane's
figures follow what the decoder learns later: a device described after its first kernels (its
facts asked for again once a second), a configuration added to a kernel name.
"""

from __future__ import annotations

import ringfuzz as F
from perfetto_read import read

from gpuflow.collectors.cupti.occupancy import LaunchConfig, Occupancy, launch_occupancy
from gpuflow.collectors.cupti.window_launches import AMBIGUOUS, CLUSTER, FACTS_EVERY_NS, NO_FACTS, NO_LAUNCH
from gpuflow.export import launch_args as LA
from gpuflow.export import slices
from gpuflow.export.perfetto import TraceWriter

from .conftest import WALL0
from .test_collector import poll_until

CUPTI0 = 1_000_000
H200, SMS = (9, 0), 132
#: (name, name id, launch id, LAUNCH fields, registers, block, grids launched): docs/occupancy.md's
#: H200 examples (tests/cupti/test_occupancy_gpu_stage.py's), each kernel launched with two grids
KNOWN = [
    ("occ_registers", 5001, 101, {}, 127, (256, 1, 1), ((528, 1, 1), (264, 2, 1))),
    ("occ_dynamic_shared", 5002, 102, {"dynamic": 102400, "limit": 1}, 14, (128, 1, 1), ((528, 1, 1), (7, 3, 5))),
    ("occ_carveout", 5003, 103, {"dynamic": 12288, "carveout": 25}, 11, (64, 1, 1), ((1056, 1, 1), (1, 1, 1))),
    ("occ_tiny_blocks", 5004, 104, {}, 10, (32, 1, 1), ((12672, 1, 1), (12673, 1, 1))),
    ("occ_tail_wave", 5005, 104, {}, 10, (1024, 1, 1), ((529, 1, 1), (265, 1, 1))),
]
CLUSTERED = ("occ_cluster", 5006, 105, {"cluster": (2, 1, 1)}, 10, (1024, 1, 1), ((264, 1, 1),))
UNCONFIGURED = ("unconfigured", 5007, 0, None, 10, (128, 1, 1), ((100, 1, 1),))
#: one kernel name with six blocks: the decoder tracks the first four configurations of a name
MANY = "many_blocks", 5008, 101, (32, 64, 96, 128, 160, 192)
#: the same name, launch id and block with two register counts (two modules' functions of one name)
TWINNED = "twinned", 5009, 101


def push(p, records) -> None:
    for r in records:
        assert p.push_raw(r)


def write_ring(p) -> list[tuple]:
    """The ring's records; the kernels written, as (name, launch id, LAUNCH fields, registers,
    block, grid, device)."""
    p.set_status(1, "")
    p.context(0, 1, 7)
    p.context(1, 1, 7)
    p.clock_sync(CUPTI0, WALL0)
    p.device(0, "NVIDIA H200", sm_count=SMS, compute_capability=H200)   # device 1 has no DEVICE record
    launches = {101: {}}
    for _name, _nid, lid, fields, *_rest in KNOWN + [CLUSTERED]:
        launches.setdefault(lid, fields)
    push(p, [F.launch(lid, **fields) for lid, fields in launches.items()])
    written, t = [], CUPTI0 + 1_000
    for name, nid, lid, fields, regs, block, grids in KNOWN + [CLUSTERED, UNCONFIGURED]:
        push(p, F.name_chunks(nid, name.encode()))
        for grid in grids:
            push(p, [F.kernel(nid, 0, 1, 13, t, t + 4_000, grid=grid, block=block, launch_id=lid, registers=regs)])
            written.append((name, lid, fields, regs, block, grid, 0))
            t += 10_000
    push(p, F.name_chunks(MANY[1], MANY[0].encode()))
    for bx in MANY[3]:
        push(p, [F.kernel(MANY[1], 0, 1, 13, t, t + 4_000, grid=(132, 1, 1), block=(bx, 1, 1), launch_id=MANY[2],
                          registers=16)])
        written.append((MANY[0], MANY[2], {}, 16, (bx, 1, 1), (132, 1, 1), 0))
        t += 10_000
    push(p, F.name_chunks(TWINNED[1], TWINNED[0].encode()))
    for regs in (32, 40):
        push(p, [F.kernel(TWINNED[1], 0, 1, 13, t, t + 4_000, grid=(132, 1, 1), block=(128, 1, 1),
                          launch_id=TWINNED[2], registers=regs)])
        written.append((TWINNED[0], TWINNED[2], {}, regs, (128, 1, 1), (132, 1, 1), 0))
        t += 10_000
    # the registers kernel on device 1, which no DEVICE record describes
    push(p, [F.kernel(5001, 1, 1, 13, t, t + 4_000, grid=(528, 1, 1), block=(256, 1, 1), launch_id=101,
                      registers=127)])
    written.append(("occ_registers", 101, {}, 127, (256, 1, 1), (528, 1, 1), 1))
    p.memcpy(0, 1, 7, t, t + 20_000, 1, 1 << 20)       # 1 MiB h2d in 20 us: 52.4 GB/s
    p.memcpy(0, 1, 7, t + 30_000, t + 30_000, 2, 4096)  # d2h that took no measured time
    return written


def expected(name, lid, fields, regs, block, grid, device) -> dict:
    """What the slice's occupancy arguments must be."""
    if device == 1:
        return {"occupancy_pct": LA.NOT_AVAILABLE + NO_FACTS}
    if name == MANY[0] and block[0] > 128:
        return {"occupancy_pct": LA.NOT_AVAILABLE + LA.UNTRACKED}
    if name == TWINNED[0]:
        return {"occupancy_pct": LA.NOT_AVAILABLE + AMBIGUOUS}
    if lid == 0:
        return {"occupancy_pct": LA.NOT_AVAILABLE + NO_LAUNCH}
    config = LaunchConfig(fields.get("static", 0), fields.get("dynamic", 0), 0, fields.get("limit", 0),
                          fields.get("carveout"), 0, fields.get("cluster", (0, 0, 0)))
    fig = launch_occupancy(H200, SMS, grid, block, regs, config)
    assert isinstance(fig, Occupancy)
    return {"occupancy_pct": fig.occupancy * 100, "limiter": "+".join(fig.limiters),
            "blocks_per_sm": fig.blocks_per_sm,
            "waves": fig.waves if fig.waves is not None else LA.NOT_AVAILABLE + CLUSTER}


def export(part, module) -> bytes:
    out = []
    saved = slices.LaneSlices, slices.encode_spans, slices.finish
    slices.LaneSlices, slices.encode_spans, slices.finish = module.LaneSlices, module.encode_spans, module.finish
    try:
        writer = TraceWriter(out.append)
        writer.header()
        writer.window((part,))
        writer.finish()
    finally:
        slices.LaneSlices, slices.encode_spans, slices.finish = saved
    return b"".join(out)


def test_each_kernel_slice_carries_its_own_configurations_occupancy_and_each_copy_its_bandwidth(
        collector_factory, rings):
    p, _child = rings.traced(capacity=1 << 12)
    written = write_ring(p)
    c = collector_factory()
    poll_until(c, lambda part: part.traced and part.traced[0].records == p.head)   # each pass ends taking them
    part = c.window(WALL0 / 1e9 - 1, WALL0 / 1e9 + 60, None, None)
    data = export(part, slices.slices_py)
    if slices.slices_c is not None:
        assert export(part, slices.slices_c) == data
    t = read(data)
    kernels = sorted((s for s in t.slices if s.category == "kernel"), key=lambda s: s.begin_ns)
    assert len(kernels) == len(written)
    occupancy_args = ("occupancy_pct", "limiter", "blocks_per_sm", "waves")
    for s, w in zip(kernels, written):
        name, _lid, _fields, _regs, block, grid, _device = w
        assert (s.name, (s.args["grid_x"], s.args["grid_y"], s.args["grid_z"])) == (name, grid)
        assert {k: s.args[k] for k in occupancy_args if k in s.args} == expected(*w), w
    by_name: dict = {}
    for s in kernels:   # each name's first execution (on device 0)
        by_name.setdefault(s.name, s.args)
    # the figures docs/occupancy.md gives by hand, and one execution's exact waves
    assert [by_name[n]["blocks_per_sm"] for n, *_ in KNOWN] == [2, 2, 4, 32, 2]
    assert [by_name[n]["limiter"] for n, *_ in KNOWN] == ["registers", "shared_memory", "shared_memory", "blocks",
                                                          "warps"]
    tail = [s.args for s in kernels if s.name == "occ_tail_wave"]
    assert (tail[0]["waves"], tail[1]["waves"]) == (529 / 264, 265 / 264)
    copies = sorted((s for s in t.slices if s.category == "memcpy"), key=lambda s: s.begin_ns)
    assert [s.args.get("bytes_per_s") for s in copies] == [(1 << 20) * 1e9 / 20_000, LA.NOT_AVAILABLE + LA.NO_RATE]
    assert {s.args["host_memory"] for s in copies} == {LA.NOT_AVAILABLE + LA.NO_HOST_MEMORY}


def test_a_lanes_figures_follow_a_device_described_late_and_a_configuration_added_later(collector_factory, rings):
    p, _child = rings.traced(capacity=1 << 12)
    p.set_status(1, "")
    p.context(0, 1, 7)
    p.clock_sync(CUPTI0, WALL0)
    push(p, [F.launch(101)] + F.name_chunks(5001, b"occ_registers"))
    t = CUPTI0 + 1_000

    def kernel(block):
        nonlocal t
        push(p, [F.kernel(5001, 0, 1, 13, t, t + 4_000, grid=(528, 1, 1), block=block, launch_id=101,
                          registers=127)])
        t += 10_000

    def figures():
        poll_until(c, lambda part: part.traced and part.traced[0].records == p.head)
        (lane,) = c.window(WALL0 / 1e9 - 1, WALL0 / 1e9 + 60, None, None).processes[0].lanes
        (figures,) = lane.launches   # the lane's one kernel name's
        return {(f.block, f.blocks_per_sm, f.unavailable) for f in figures}

    c = collector_factory()
    now = [WALL0 + 50_000_000]
    c._clock_ns = lambda: now[0]
    kernel((256, 1, 1))
    assert figures() == {((256, 1, 1), None, NO_FACTS)}   # no DEVICE record yet: said, not guessed
    p.device(0, "NVIDIA H200", sm_count=SMS, compute_capability=H200)
    kernel((256, 1, 1))   # the same configuration: the facts are asked for again once a second
    assert figures() == {((256, 1, 1), None, NO_FACTS)}
    now[0] += FACTS_EVERY_NS
    assert figures() == {((256, 1, 1), 2, None)}
    kernel((128, 1, 1))   # a configuration more: 127 registers x 4 warps a block -> 4 blocks
    assert figures() == {((256, 1, 1), 2, None), ((128, 1, 1), 4, None)}
