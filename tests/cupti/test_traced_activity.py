"""A traced process's devices and kernel launches as the snapshot shows them (traced_activity.py
through TracedBuilder, both decoder twins): occupancy equal to occupancy.launch_occupancy's for the
device the DEVICE record describes, said unavailable (and why) without one, the main configuration
and the range of several, the GPU busy share over a settled window, the whole run's busy time once
the process exited, and copy bandwidth split by host memory.
"""

from __future__ import annotations

import pytest

from gpuflow.collectors.cupti import _layout as L
from gpuflow.collectors.cupti.occupancy import LaunchConfig, launch_occupancy
from gpuflow.collectors.cupti.traced_activity import NO_FACTS, NO_LAUNCH, SETTLE_NS
from gpuflow.collectors.cupti.traced_builder import TracedBuilder

import ringfuzz as F

WALL = 1_764_000_000_000_000_000     # CLOCK_SYNC: CUPTI 0 is this wall time
SMS = 132
UUID = bytes(range(16))


def head(facts: bool = True) -> list[bytes]:
    recs = F.name_chunks(1, b"_Z4gemmPfi") + F.name_chunks(2, b"_Z3addPf") + F.name_chunks(3, b"NVIDIA H200")
    recs += [F.clock_sync(0, WALL), F.launch(1, static=8192, dynamic=32768), F.launch(2, dynamic=1 << 17, limit=1)]
    if facts:
        recs.append(F.device(0, 3, UUID, SMS, (9, 0)))
    return recs


class Ring:
    """An in-memory ring the test appends to and a decoder drains, built as the collector builds."""

    def __init__(self, cls: type, records: list[bytes]) -> None:
        self.buf = F.Case(capacity=1 << 16, records=records).build()
        self.head = len(records)
        self.dec = cls(self.buf)
        self.builder = TracedBuilder(4242, "s", self.dec.lane_span_cap)

    def add(self, records: list[bytes]) -> None:
        for i, rec in enumerate(records):
            off = L.HEADER_SIZE + ((self.head + i) & ((1 << 16) - 1)) * L.RECORD_SIZE
            self.buf[off:off + L.RECORD_SIZE] = rec
        self.head += len(records)
        L.U64.pack_into(self.buf, L.OFF_HEAD, self.head)

    def build(self, now_ns: int, state: str = "running"):
        self.dec.drain()
        return self.builder.build(self.dec, name="p", state=state, exit_status=None, truncated=False, now_ns=now_ns)


def expected(block: tuple[int, int, int], registers: int, launch: tuple, grid_blocks: int):
    config = LaunchConfig(*launch)
    return launch_occupancy((9, 0), SMS, (grid_blocks, 1, 1), block, registers, config)


def test_a_kernels_occupancy_is_the_calculators_for_its_device(decoder_impl):
    recs = head() + [F.kernel(1, start=10, end=20, block=(256, 1, 1), registers=64, launch_id=1, grid=(g, 1, 1))
                     for g in (132, 1000, 528)]
    t = Ring(decoder_impl.cls, recs).build(WALL + 10**9)
    (x,) = t.kernel_launches
    lo = expected((256, 1, 1), 64, (8192, 32768), 132)
    hi = expected((256, 1, 1), 64, (8192, 32768), 1000)
    assert x.mangled == "_Z4gemmPfi" and [k.name for k in t.kernels if k.mangled == x.mangled] == ["gemm(float*, int)"]
    assert (x.configs, x.configs_more, x.device, x.block_threads, x.registers, x.shared_bytes) == (1, 0, 0, 256, 64, 40960)
    assert x.occupancy_pct == round(lo.occupancy * 100, 3) and x.blocks_per_sm == lo.blocks_per_sm
    assert x.limiters == "+".join(lo.limiters) and x.unavailable is None
    assert (x.waves_min, x.waves_max) == (round(lo.waves, 4), round(hi.waves, 4))
    assert x.occupancy_min_pct == x.occupancy_max_pct == x.occupancy_pct
    (d,) = t.devices
    assert (d.device, d.uuid, d.name, d.compute_capability, d.sm_count) == (
        0, "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f", "NVIDIA H200", (9, 0), SMS)


def test_without_a_device_record_or_a_launch_configuration_occupancy_is_unavailable(decoder_impl):
    t = Ring(decoder_impl.cls, head(facts=False) + [F.kernel(1, launch_id=1)]).build(WALL)
    assert [(x.occupancy_pct, x.unavailable) for x in t.kernel_launches] == [(None, NO_FACTS)]
    t = Ring(decoder_impl.cls, head() + [F.kernel(2, launch_id=0)]).build(WALL)
    assert [(x.occupancy_pct, x.shared_bytes, x.unavailable) for x in t.kernel_launches] == [(None, None, NO_LAUNCH)]


def test_a_name_with_several_configurations_shows_its_main_one_and_the_range(decoder_impl):
    small = [F.kernel(2, start=0, end=10, block=(64, 1, 1), registers=32, launch_id=2)] * 3        # 30 ns
    big = [F.kernel(2, start=0, end=100, block=(1024, 1, 1), registers=32, launch_id=2)]           # 100 ns
    t = Ring(decoder_impl.cls, head() + small + big).build(WALL)
    (x,) = t.kernel_launches
    main = expected((1024, 1, 1), 32, (0, 1 << 17, 0, 1), 1)
    other = expected((64, 1, 1), 32, (0, 1 << 17, 0, 1), 1)
    assert x.configs == 2 and x.block_threads == 1024 and x.occupancy_pct == round(main.occupancy * 100, 3)
    assert (x.occupancy_min_pct, x.occupancy_max_pct) == tuple(sorted(
        (round(main.occupancy * 100, 3), round(other.occupancy * 100, 3))))


def test_the_busy_share_is_the_union_over_a_settled_window(decoder_impl):
    """Kernels keep the GPU busy 3 ms out of every 4 (two streams overlapping) for 3 s; the share
    over a settled window of at least a second is 75 %, exactly; an exited process settles its
    whole run."""
    ring = Ring(decoder_impl.cls, head())
    ms = 1_000_000
    for second in range(3):
        recs = []
        for i in range(250):
            t0 = second * 1000 * ms + i * 4 * ms
            recs += [F.kernel(1, stream=13, start=t0, end=t0 + 2 * ms), F.kernel(1, stream=14, start=t0 + ms,
                                                                              end=t0 + 3 * ms)]
        ring.add(recs)
        t = ring.build(WALL + (second + 1) * 1000 * ms + SETTLE_NS)
    (d,) = t.devices
    assert d.busy_pct == 75.0 and d.busy_window_ms >= 1000 and d.busy_late == 0
    assert d.busy_window_end_us == (WALL + 3000 * ms) // 1000
    t = ring.build(WALL + 3000 * ms + SETTLE_NS, state="exited")
    (d,) = t.devices
    assert (d.busy_ns, d.kernel_span_ns) == (750 * 3 * ms, 3000 * ms - ms)


def test_copies_have_their_bandwidth_by_host_memory(decoder_impl):
    recs = head() + [F.copy(1, nbytes=64 << 20, start=0, end=2_000_000, src_kind=2, dst_kind=3),
                     F.copy(1, nbytes=64 << 20, start=0, end=8_000_000, src_kind=1, dst_kind=3)]
    t = Ring(decoder_impl.cls, recs).build(WALL)
    (d,) = t.devices
    rates = {(c.direction, c.memory): c.bytes_per_s for c in d.copies}
    assert rates == {("h2d", "pinned"): pytest.approx((64 << 20) / 2e-3), ("h2d", "pageable"): pytest.approx((64 << 20) / 8e-3)}
    assert d.busy_pct is None and d.kernel_span_ns is None


def test_a_names_entry_follows_its_main_configuration_and_is_made_again_only_when_it_can_change(decoder_impl,
                                                                                              monkeypatch):
    from gpuflow.collectors.cupti import traced_activity
    made = []
    real = traced_activity.ActivityBuilder._kernel_launch
    monkeypatch.setattr(traced_activity.ActivityBuilder, "_kernel_launch",
                        lambda self, *a: made.append(a[1].mangled) or real(self, *a))
    small = F.kernel(2, start=0, end=10, block=(64, 1, 1), registers=32, launch_id=2)
    big = F.kernel(2, start=0, end=100, block=(1024, 1, 1), registers=32, launch_id=2)
    gemm = F.kernel(1, start=0, end=50, block=(256, 1, 1), registers=64, launch_id=1, grid=(132, 1, 1))
    ring = Ring(decoder_impl.cls, head() + [small, big, gemm])
    first = ring.build(WALL)
    assert [x.block_threads for x in first.kernel_launches] == [1024, 256] and sorted(made) == ["_Z3addPf", "_Z4gemmPfi"]
    made.clear()
    ring.add([small] * 20 + [gemm] * 5)        # the small configuration now has the most time
    later = ring.build(WALL + 2 * 10**9)     # the full look, a second later
    add, gemm_entry = later.kernel_launches
    assert add.block_threads == 64 and add.occupancy_pct == round(expected((64, 1, 1), 32, (0, 1 << 17, 0, 1), 1)
                                                                 .occupancy * 100, 3)
    assert gemm_entry is first.kernel_launches[1] and made == ["_Z3addPf"]   # gemm's inputs did not move
    made.clear()
    ring.add([F.kernel(1, start=0, end=50, block=(256, 1, 1), registers=64, launch_id=1, grid=(1320, 1, 1))])
    wider = ring.build(WALL + 2 * 10**9 + 1)  # a grid extreme moved: its waves, at once
    assert made == ["_Z4gemmPfi"] and wider.kernel_launches[1].waves_max == round(
        expected((256, 1, 1), 64, (8192, 32768), 1320).waves, 4)
