"""occupancy.launch_occupancy: from what a traced kernel's records carry to blocks per SM, occupancy,
limiter and waves, or a reason why not. The rules themselves are compared with the toolkit's
calculator in test_occupancy_reference.py; here: the mapping of the records' fields, worked sm_90
examples computed by hand from the rules docs/occupancy.md states, and every input that has no
figure."""

from __future__ import annotations

import pytest

from gpuflow.collectors.cupti import occupancy as occ
from gpuflow.collectors.cupti.occupancy import LaunchConfig, NotAvailable, Occupancy, launch_occupancy

H200 = ((9, 0), 132)
KIB = 1024


def h200(grid, block, registers, launch):
    result = launch_occupancy(*H200, grid, block, registers, launch)
    assert isinstance(result, Occupancy), result
    return result


def test_a_register_heavy_kernel_is_limited_by_registers():
    # 128 registers: a warp takes 4,096; a sub-partition's 16,384 hold 4 warps, the SM 16;
    # blocks of 8 warps: 2 per SM, 16 of 64 warps
    r = h200((1056, 1, 1), (256, 1, 1), 128, LaunchConfig(0, 0))
    assert (r.blocks_per_sm, r.warps_per_block, r.active_warps, r.max_warps) == (2, 8, 16, 64)
    assert r.occupancy == 0.25 and r.limiters == ("registers",)
    assert r.waves == 1056 / (2 * 132) == 4.0


def test_a_shared_memory_heavy_kernel_is_limited_by_its_carveout():
    # 100 KiB dynamic + 1 KiB reserved = 103,424 bytes a block; the 228 KiB carve-out holds 2
    r = h200((300, 1, 1), (128, 1, 1), 32, LaunchConfig(0, 100 * KIB, shmem_limit_config=occ.SHMEM_LIMIT_OPTIN))
    assert r.blocks_per_sm == 2 and r.limiters == ("shared_memory",)
    assert r.limits.shared_per_block == 101 * KIB and r.limits.shared_per_sm == 228 * KIB
    assert r.occupancy == 8 / 64


def test_tiny_blocks_hit_the_blocks_per_sm_limit_and_ties_are_all_named():
    r = h200((132 * 32, 1, 1), (32, 1, 1), 16, LaunchConfig(0, 0))
    assert r.blocks_per_sm == 32 and r.limiters == ("blocks",) and r.occupancy == 0.5
    assert r.waves == 1.0
    full = h200((132 * 2, 1, 1), (1024, 1, 1), 32, LaunchConfig(0, 0))   # 2 blocks of 32 warps
    assert full.blocks_per_sm == 2 and full.limiters == ("warps", "registers") and full.occupancy == 1.0


def test_a_requested_carveout_is_rounded_up_to_a_step_and_raised_until_a_block_fits():
    # 25 % of 228 KiB = 58,368 bytes, rounded up to the 64 KiB step: 4 blocks of 13 KiB (12 + 1)
    r = h200((10, 1, 1), (64, 1, 1), 32, LaunchConfig(0, 12 * KIB, carveout_requested=25))
    assert r.limits.shared_per_sm == 64 * KIB and r.blocks_per_sm == 4
    # prefer-L1 (cache config 2, in the requested nibble) means 0 %: raised to the 16 KiB step
    r = h200((10, 1, 1), (64, 1, 1), 32, LaunchConfig(0, 12 * KIB, cache_config=0x02))
    assert r.limits.shared_per_sm == 16 * KIB and r.blocks_per_sm == 1
    # the executed nibble (high) is what ran, not a preference: it is not taken as one
    r = h200((10, 1, 1), (64, 1, 1), 32, LaunchConfig(0, 12 * KIB, cache_config=0x20))
    assert r.limits.shared_per_sm == 228 * KIB and r.blocks_per_sm == 17


def test_a_decoders_launch_tuple_maps_field_by_field():
    registers, config = LaunchConfig.from_launch_tuple((72, 4096, 8192, 102400, 0, 1, 50, 0x12, (2, 1, 1)))
    assert registers == 72
    assert config == LaunchConfig(4096, 8192, 102400, 1, 50, 0x12, (2, 1, 1))
    r = h200((64, 1, 1), (128, 1, 1), registers, config)
    assert r.cluster == (2, 1, 1) and r.waves is None   # a cluster's wave depends on GPCs: not modelled
    assert r.shared_executed_bytes == 102400


def test_other_architectures_use_their_own_limits():
    t4 = launch_occupancy((7, 5), 40, (40, 1, 1), (1024, 1, 1), 32, LaunchConfig(0, 0))
    assert t4.blocks_per_sm == 1 and t4.max_warps == 32 and t4.occupancy == 1.0 and t4.waves == 1.0
    a10 = launch_occupancy((8, 6), 72, (72, 1, 1), (64, 1, 1), 32, LaunchConfig(0, 0))
    assert a10.blocks_per_sm == 16 and a10.limiters == ("blocks",) and a10.max_warps == 48


@pytest.mark.parametrize("cc, why", [((6, 1), "compute capability 6.1 is not covered"),
                                     ((8, 8), "compute capability 8.8 is not covered"),
                                     ((13, 0), "compute capability 13.0 is not covered")])
def test_an_architecture_the_rules_do_not_cover_is_not_available(cc, why):
    result = launch_occupancy(cc, 100, (1, 1, 1), (128, 1, 1), 32, LaunchConfig(0, 0))
    assert isinstance(result, NotAvailable) and why in result.reason


def test_inputs_without_a_figure_say_why():
    assert launch_occupancy(*H200, (1, 1, 1), (128, 1, 1), 32, None) == NotAvailable(
        "no launch configuration recorded (shared memory unknown)")
    bad_carveout = launch_occupancy(*H200, (1, 1, 1), (128, 1, 1), 32, LaunchConfig(0, 0, carveout_requested=150))
    assert bad_carveout == NotAvailable("a shared-memory carve-out of 150 % is not a percentage")
    empty = launch_occupancy(*H200, (1, 1, 1), (0, 1, 1), 32, LaunchConfig(0, 0))
    assert empty == NotAvailable("a block of 0 threads")


def test_a_launch_the_resources_cannot_hold_has_zero_blocks_and_no_waves():
    r = h200((8, 1, 1), (128, 1, 1), 300, LaunchConfig(0, 0))   # more registers than a thread can have
    assert r.blocks_per_sm == 0 and r.occupancy == 0.0 and r.waves is None and "registers" in r.limiters


def test_without_an_sm_count_there_are_no_waves():
    r = launch_occupancy((9, 0), None, (8, 1, 1), (128, 1, 1), 32, LaunchConfig(0, 0))
    assert r.blocks_per_sm == 16 and r.waves is None
