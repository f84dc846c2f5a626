"""Theoretical occupancy of a kernel launch, by the rules of the CUDA toolkit's occupancy calculator.

Given what a traced kernel's records carry (its block and grid, registers per thread, static and
dynamic shared memory, the shared-memory limit config and requested carve-out or cache preference,
its cluster) and the device's compute capability and SM count, :func:`launch_occupancy` gives the
blocks per SM, the occupancy (active warps / the SM's maximum), the limiting resource (ties named
as the calculator names them) and the waves (grid blocks / (blocks per SM x SMs)); or
:class:`NotAvailable`, saying why, for an architecture the rules here do not cover or a launch
whose inputs are missing or impossible.

Every rule below is the toolkit's ``cuda_occupancy.h`` (header-only C++, CUDA 13.0), named by the
function it comes from; ``cudaOccMaxActiveBlocksPerMultiprocessor`` is :func:`blocks_per_sm`. The
per-device values (``cudaOccDeviceProp``: threads and shared memory per SM, opt-in per block, the
driver's reserve) are those ``cudaGetDeviceProperties`` reports on each architecture.
tests/cupti/test_occupancy_reference.py compares :func:`blocks_per_sm` with the header itself,
compiled, over a large grid of configurations on every architecture here (docs/occupancy.md).

"Theoretical" means what the resources allow, not what ran: nothing here says how many warps
were resident, nor anything per SM. Two inputs the calculator takes are not in CUPTI's records
and are assumed as the toolkit's own conversion from ``cudaFuncAttributes`` assumes them: one
block barrier per block, and no virtual resources (Blackwell's).

Constraints: pure Python, no I/O, no state; computed once per (kernel name, launch
configuration), never per launch, so clarity comes first. A value no real device or record can
have (a carve-out above 100 %, a block of 0 threads) is refused with :class:`OccupancyInputError`,
never guessed around.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

KIB = 1024

#: cudaOccLimitingFactor's names, in the order of its bits (warps 0x01, registers 0x02, shared
#: memory 0x04, blocks 0x08, barriers 0x10); a limiter tuple lists them in this order.
LIMITERS = ("warps", "registers", "shared_memory", "blocks", "barriers")

#: cudaOccFuncShmemConfig (= CUpti_FuncShmemLimitConfig): the kernel opted in to more dynamic
#: shared memory than the default per-block limit (cudaFuncAttributeMaxDynamicSharedMemorySize).
SHMEM_LIMIT_DEFAULT, SHMEM_LIMIT_OPTIN = 0, 1

#: cudaOccCacheConfig (= CUfunc_cache, CUPTI's cacheConfig nibbles).
CACHE_PREFER_NONE, CACHE_PREFER_SHARED, CACHE_PREFER_L1, CACHE_PREFER_EQUAL = 0, 1, 2, 3


class OccupancyInputError(ValueError):
    """An input the calculator refuses (its CUDA_OCC_ERROR_INVALID_INPUT), said in one line."""


@dataclass(frozen=True, slots=True)
class Architecture:
    """One compute capability: the device's values (cudaOccDeviceProp) and the header's rules."""

    major: int
    minor: int
    examples: str  #: GPUs of this compute capability, for the docs
    # -- cudaOccDeviceProp, as cudaGetDeviceProperties reports it --------------------------
    max_threads_per_sm: int  #: maxThreadsPerMultiProcessor (max warps x 32)
    shared_per_sm: int  #: sharedMemPerMultiprocessor: the largest carve-out, bytes
    shared_per_block_optin: int  #: sharedMemPerBlockOptin
    reserved_shared_per_block: int  #: reservedSharedMemPerBlock (1 KiB from sm_80)
    max_threads_per_block: int = 1024  #: maxThreadsPerBlock
    regs_per_block: int = 64 * KIB  #: regsPerBlock
    regs_per_sm: int = 64 * KIB  #: regsPerMultiprocessor
    shared_per_block: int = 48 * KIB  #: sharedMemPerBlock: the limit without the opt-in
    warp_size: int = 32

    # -- the header's per-architecture rules -------------------------------------------------
    @property
    def name(self) -> str:
        return f"sm_{self.major}{self.minor}"

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size

    @property
    def max_blocks_per_sm(self) -> int:
        """cudaOccMaxBlocksPerMultiprocessor: 16 on Turing (7.5) and 8.6/8.7, 24 on 8.9, 10.1,
        11.0 and 12.x, else 32."""
        if self.major == 7:
            return 16 if self.minor == 5 else 32
        if self.major == 8:
            return 32 if self.minor == 0 else 24 if self.minor == 9 else 16
        if self.major == 10:
            return 24 if self.minor == 1 else 32
        if self.major == 11:
            return 24 if self.minor == 0 else 32
        if self.major == 12:
            return 24
        return 32  # 9.x

    @property
    def shared_granularity(self) -> int:
        """cudaOccSMemAllocationGranularity: 256 bytes on 7.x, 128 from 8.x."""
        return 256 if self.major == 7 else 128

    #: cudaOccRegAllocationGranularity: registers are given to a warp in units of 256.
    register_granularity = 256
    #: cudaOccRegAllocationMaxPerThread: 256 from 7.x.
    max_registers_per_thread = 256
    #: cudaOccSubPartitionsPerMultiprocessor: 4 from 7.x; the register file is split among them.
    sub_partitions = 4

    @property
    def carveout_steps(self) -> tuple[int, ...]:
        """cudaOccAlignUpShmemSizeVoltaPlus: the shared-memory sizes an SM can be configured
        with, bytes; a carve-out is rounded up to the next one."""
        kib = (0, 8, 16, 32, 64, 100)
        if self.major == 7:
            return tuple(k * KIB for k in ((32, 64) if self.minor == 5 else (0, 8, 16, 32, 64, 96)))
        if self.major == 8 and self.minor in (0, 7):
            kib += (132, 164)
        elif self.major in (9, 10, 11):
            kib += (132, 164, 196, 228)
        return tuple(k * KIB for k in kib)

    @property
    def barriers_per_block_slot(self) -> int | None:
        """cudaOccMaxBlocksPerSMBlockBarrierLimit: barriers available per block slot, applied
        from 9.x only (None before): 1 on 10.1, 11.0 and 12.x, else 2."""
        if self.major < 9:
            return None
        if (self.major, self.minor) in ((10, 1), (11, 0)) or self.major == 12:
            return 1
        return 2


#: The architectures covered: the header's rules and each one's device values. Volta through
#: Hopper, and the Blackwell parts whose values are published (sm_100 B200, sm_120 RTX 50);
#: any other compute capability is "not available".
ARCHITECTURES: dict[tuple[int, int], Architecture] = {(a.major, a.minor): a for a in (
    Architecture(7, 0, "V100", 2048, 96 * KIB, 96 * KIB, 0),
    Architecture(7, 2, "Jetson AGX Xavier", 2048, 96 * KIB, 96 * KIB, 0),
    Architecture(7, 5, "T4, RTX 20", 1024, 64 * KIB, 64 * KIB, 0),
    Architecture(8, 0, "A100, A30", 2048, 164 * KIB, 163 * KIB, KIB),
    Architecture(8, 6, "A10, A40, RTX 30", 1536, 100 * KIB, 99 * KIB, KIB),
    Architecture(8, 7, "Jetson Orin", 1536, 164 * KIB, 163 * KIB, KIB),
    Architecture(8, 9, "L4, L40, RTX 40", 1536, 100 * KIB, 99 * KIB, KIB),
    Architecture(9, 0, "H100, H200, GH200", 2048, 228 * KIB, 227 * KIB, KIB),
    Architecture(10, 0, "B200, GB200", 2048, 228 * KIB, 227 * KIB, KIB),
    Architecture(12, 0, "RTX 50, RTX PRO 6000 Blackwell", 1536, 100 * KIB, 99 * KIB, KIB),
)}


class BlockLimits(NamedTuple):
    """The calculator's cudaOccResult: blocks per SM and what each resource alone allows
    (None: that resource sets no limit, the header's INT_MAX)."""

    blocks_per_sm: int
    limiters: tuple[str, ...]  #: every resource whose limit equals blocks_per_sm, in LIMITERS order
    warps: int  #: blockLimitWarps
    registers: int | None  #: blockLimitRegs (None: the kernel uses no registers)
    shared_memory: int | None  #: blockLimitSharedMem (None: no shared memory at all)
    blocks: int  #: blockLimitBlocks
    barriers: int | None  #: blockLimitBarriers (None: not applied before 9.x)
    registers_per_block: int  #: allocatedRegistersPerBlock
    shared_per_block: int  #: allocatedSharedMemPerBlock, the driver's reserve included
    shared_per_sm: int | None  #: the carve-out the shared-memory limit used (None: limit not reached)


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def carveout_preference(arch: Architecture, carveout_percent: int | None, cache_preference: int) -> int:
    """cudaOccSMemPreferenceVoltaPlus: the shared memory an SM is preferred to have, bytes.

    A requested carve-out (percent) wins; without one, the cache preference maps to one (prefer
    L1: 0 %, prefer shared: 100 %, equal: 50 %); with neither, the largest. The percentage of
    sharedMemPerMultiprocessor, rounded down to a byte, is rounded up to a step
    (:attr:`Architecture.carveout_steps`)."""
    if carveout_percent is not None and not 0 <= carveout_percent <= 100:
        raise OccupancyInputError(f"a shared-memory carve-out of {carveout_percent} % is not a percentage")
    percent = carveout_percent
    if percent is None:
        percent = {CACHE_PREFER_L1: 0, CACHE_PREFER_SHARED: 100, CACHE_PREFER_EQUAL: 50}.get(cache_preference)
    size = arch.shared_per_sm if percent is None else percent * arch.shared_per_sm // 100
    return align_up_carveout(arch, size)


def align_up_carveout(arch: Architecture, size: int) -> int:
    """cudaOccAlignUpShmemSizeVoltaPlus: the smallest step holding ``size`` bytes."""
    for step in arch.carveout_steps:
        if size <= step:
            return step
    raise OccupancyInputError(f"{size} bytes of shared memory exceed {arch.name}'s largest carve-out "
                              f"({arch.carveout_steps[-1]} bytes)")


def _warps_limit(arch: Architecture, block_threads: int) -> int:
    """cudaOccMaxBlocksPerSMWarpsLimit (partitioned global caching exists only before 7.x)."""
    if block_threads > arch.max_threads_per_block:
        return 0
    return arch.max_warps_per_sm // -(-block_threads // arch.warp_size)


def _registers_limit(arch: Architecture, block_threads: int, registers: int) -> tuple[int | None, int]:
    """cudaOccMaxBlocksPerSMRegsLimit: (blocks, registers allocated per block).

    A warp gets registers x 32 rounded up to 256. The block must fit regsPerBlock both as
    allocated and as the hardware checks it, with its warps rounded up to a multiple of the 4
    sub-partitions; then blocks = (warps that fit in one sub-partition's quarter of the register
    file x 4) // warps per block."""
    warps = -(-block_threads // arch.warp_size)
    per_warp = _round_up(registers * arch.warp_size, arch.register_granularity)
    per_block = per_warp * warps
    as_checked = per_warp * _round_up(warps, arch.sub_partitions)
    if (arch.regs_per_block < as_checked or arch.regs_per_block < per_block
            or registers > arch.max_registers_per_thread):
        return 0, per_block
    if per_warp == 0:
        return None, per_block
    warps_per_sub_partition = (arch.regs_per_sm // arch.sub_partitions) // per_warp
    return warps_per_sub_partition * arch.sub_partitions // warps, per_block


def _shared_limit(arch: Architecture, static_shared: int, dynamic_shared: int, optin: bool,
                  max_dynamic_shared: int, preference: int) -> tuple[int | None, int, int | None]:
    """cudaOccMaxBlocksPerSMSmemLimit: (blocks, shared memory allocated per block, carve-out used).

    A block takes static + dynamic + the driver's reserve, rounded up to the allocation
    granularity. It must fit the per-block limit (cudaOccSMemPerBlock: sharedMemPerBlock, or the
    opt-in limit when the kernel opted in and static + reserve + its maximum dynamic size exceed
    sharedMemPerBlock; plus the reserve from 8.x), and an opted-in kernel's dynamic size its
    maximum. The SM's shared memory is the preferred carve-out when one block fits in it, else the
    smallest step that holds one block; blocks = that // the block's allocation."""
    static_with_reserve = static_shared + arch.reserved_shared_per_block
    allocated = _round_up(static_with_reserve + dynamic_shared, arch.shared_granularity)
    per_block_limit = arch.shared_per_block
    if optin and static_with_reserve + max_dynamic_shared > arch.shared_per_block:
        per_block_limit = arch.shared_per_block_optin
    if arch.major >= 8:
        per_block_limit += arch.reserved_shared_per_block
    if (optin and dynamic_shared > max_dynamic_shared) or allocated > per_block_limit:
        return 0, allocated, None
    per_sm = preference if preference >= allocated else align_up_carveout(arch, allocated)
    if allocated == 0:
        return None, allocated, per_sm
    return per_sm // allocated, allocated, per_sm


def blocks_per_sm(arch: Architecture, block_threads: int, registers: int, static_shared: int,
                  dynamic_shared: int, *, shmem_limit_config: int = SHMEM_LIMIT_DEFAULT,
                  max_dynamic_shared: int | None = None, carveout_percent: int | None = None,
                  cache_preference: int = CACHE_PREFER_NONE) -> BlockLimits:
    """cudaOccMaxActiveBlocksPerMultiprocessor on ``arch``: the minimum of the warp, register,
    block and shared-memory limits (and, from 9.x, the barrier limit), with every limit equal to
    it named. ``max_dynamic_shared`` is the kernel's maximum dynamic shared memory
    (cudaFuncAttributeMaxDynamicSharedMemorySize; default: ``dynamic_shared``, the least a launch
    that ran can have had); ``carveout_percent`` None is no carve-out requested."""
    if block_threads <= 0:
        raise OccupancyInputError(f"a block of {block_threads} threads")
    if registers < 0 or static_shared < 0 or dynamic_shared < 0:
        raise OccupancyInputError(f"negative resources: {registers} registers, {static_shared} bytes "
                                  f"of static and {dynamic_shared} of dynamic shared memory")
    preference = carveout_preference(arch, carveout_percent, cache_preference)
    regs, regs_per_block = _registers_limit(arch, block_threads, registers)
    warps = _warps_limit(arch, block_threads)
    blocks = arch.max_blocks_per_sm
    optin = shmem_limit_config != SHMEM_LIMIT_DEFAULT
    shared, shared_per_block, shared_per_sm = _shared_limit(
        arch, static_shared, dynamic_shared, optin,
        dynamic_shared if max_dynamic_shared is None else max_dynamic_shared, preference)
    limits = {"warps": warps, "registers": regs, "shared_memory": shared, "blocks": blocks}
    limit = min(v for v in limits.values() if v is not None)
    named = [name for name, v in limits.items() if v == limit]
    barriers = None
    if arch.barriers_per_block_slot is not None:   # one barrier per block assumed (see the docstring)
        barriers = blocks * arch.barriers_per_block_slot
        limit = min(limit, barriers)
        if barriers == limit:
            named.append("barriers")
    return BlockLimits(limit, tuple(named), warps, regs, shared, blocks, barriers, regs_per_block,
                       shared_per_block, shared_per_sm)


@dataclass(frozen=True, slots=True)
class LaunchConfig:
    """A LAUNCH record's fields (docs/inject.md), as the decoders' ``launches()`` give them after
    the registers: shared memory static / dynamic / executed, the shmem limit config, the
    requested carve-out (None: none requested), the cache config (requested in the low nibble,
    executed in the high), the cluster (0s: not a cluster launch)."""

    static_shared_bytes: int
    dynamic_shared_bytes: int
    shared_executed_bytes: int = 0
    shmem_limit_config: int = SHMEM_LIMIT_DEFAULT
    carveout_requested: int | None = None
    cache_config: int = 0
    cluster: tuple[int, int, int] = (0, 0, 0)

    @classmethod
    def from_launch_tuple(cls, launch: tuple) -> tuple[int, LaunchConfig]:
        """(registers, config) from a decoder's LaunchTuple (protocol.LaunchTuple)."""
        (registers, static, dynamic, executed, _bank_config, limit_config, carveout, cache,
         cluster) = launch
        return registers, cls(static, dynamic, executed, limit_config, carveout, cache, tuple(cluster))


@dataclass(frozen=True, slots=True)
class Occupancy:
    """The theoretical occupancy of one launch configuration on one device."""

    architecture: str  #: e.g. "sm_90"
    blocks_per_sm: int
    warps_per_block: int
    active_warps: int  #: blocks_per_sm x warps_per_block
    max_warps: int  #: per SM
    occupancy: float  #: active_warps / max_warps, 0..1
    limiters: tuple[str, ...]  #: what holds blocks_per_sm down; several on a tie
    limits: BlockLimits  #: each resource's own limit, and the allocations
    grid_blocks: int
    #: grid_blocks / (blocks_per_sm x SMs); None without an SM count, for a launch that cannot
    #: run (0 blocks per SM), or for a cluster launch (clusters must fit in one GPC, which the
    #: calculator does not model)
    waves: float | None
    cluster: tuple[int, int, int] | None  #: the cluster's dimensions, None: not a cluster launch
    shared_executed_bytes: int  #: the carve-out the launch ran with, as CUPTI reports it (0: unknown)


@dataclass(frozen=True, slots=True)
class NotAvailable:
    """Why a launch has no occupancy figure."""

    reason: str


def _product(dims: tuple[int, ...]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def launch_occupancy(compute_capability: tuple[int, int], sm_count: int | None,
                     grid: tuple[int, int, int], block: tuple[int, int, int], registers: int,
                     launch: LaunchConfig | None) -> Occupancy | NotAvailable:
    """The theoretical occupancy of a traced kernel launch, or why there is none.

    ``launch`` None (a kernel record with launch id 0) leaves the shared memory unknown: not
    available, rather than assumed 0. The carve-out is the requested one (else the cache
    preference's, else the largest), as cudaOccupancyMaxActiveBlocksPerMultiprocessor takes it;
    the one the launch ran with is reported beside it (``shared_executed_bytes``)."""
    arch = ARCHITECTURES.get(tuple(compute_capability))
    if arch is None:
        major, minor = compute_capability
        return NotAvailable(f"compute capability {major}.{minor} is not covered by the occupancy rules")
    if launch is None:
        return NotAvailable("no launch configuration recorded (shared memory unknown)")
    block_threads = _product(block)
    try:
        limits = blocks_per_sm(arch, block_threads, registers, launch.static_shared_bytes,
                               launch.dynamic_shared_bytes, shmem_limit_config=launch.shmem_limit_config,
                               carveout_percent=launch.carveout_requested,
                               cache_preference=launch.cache_config & 0x0F)
    except OccupancyInputError as exc:
        return NotAvailable(str(exc))
    warps_per_block = -(-block_threads // arch.warp_size)
    active = limits.blocks_per_sm * warps_per_block
    cluster = tuple(launch.cluster) if any(launch.cluster) else None
    grid_blocks = _product(grid)
    waves = None
    if sm_count and limits.blocks_per_sm and cluster is None:
        waves = grid_blocks / (limits.blocks_per_sm * sm_count)
    return Occupancy(arch.name, limits.blocks_per_sm, warps_per_block, active, arch.max_warps_per_sm,
                     active / arch.max_warps_per_sm, limits.limiters, limits, grid_blocks, waves,
                     cluster, launch.shared_executed_bytes)
