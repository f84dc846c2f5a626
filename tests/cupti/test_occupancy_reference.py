"""occupancy.py against the CUDA toolkit's own occupancy calculator: tests/support/occupancy_ref.cpp
(cuda_occupancy.h, compiled with the host C++ compiler, no GPU) and ``blocks_per_sm`` must give the
same blocks per SM, the same limiting factors (ties included), the same limit of every resource and
the same allocations, for every architecture of occupancy.ARCHITECTURES, over about two million
configurations: every block size 1..1025, every register count 0..257, shared memory at every
allocation step of each architecture and one byte either side, every carve-out percentage and
cache preference, both shared-memory limit configs, and a seeded random sample of all of it
together. The device values of both tables are compared too.

Without a C++ compiler or the toolkit's cuda_occupancy.h the test skips, except under CI (``CI``
set), where that is a failure: CI has the toolkit.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from gpuflow.collectors.cupti import occupancy as occ

REF_SRC = Path(__file__).resolve().parents[1] / "support" / "occupancy_ref.cpp"
INT_MAX = 2**31 - 1
FACTOR_BITS = {"warps": 0x01, "registers": 0x02, "shared_memory": 0x04, "blocks": 0x08, "barriers": 0x10}
KIB = 1024

Case = tuple[int, int, int, int, int, int, int, int, int, int]
"""major, minor, block size, registers, static, dynamic, limit config, max dynamic, carve-out
(-1: none), cache preference: occupancy_ref.cpp's case line."""


def _unavailable(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but {why}")
    pytest.skip(why)


def occupancy_header_dir() -> Path | None:
    candidates = [Path(os.environ[v]) / "include" for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    candidates += [Path("/usr/local/cuda/include"), Path("/opt/cuda/include")]
    return next((c for c in candidates if (c / "cuda_occupancy.h").exists()), None)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """occupancy_ref.cpp built against the toolkit's cuda_occupancy.h."""
    include = occupancy_header_dir()
    if include is None:
        _unavailable("the CUDA toolkit's cuda_occupancy.h was not found (set CUDA_HOME)")
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if cxx is None:
        _unavailable("no C++ compiler (g++, c++ or clang++) was found")
    out = tmp_path_factory.mktemp("occupancy") / "occupancy_ref"
    cmd = [cxx, "-O2", "-std=c++11", "-Wall", "-Wextra", f"-I{include}", "-o", str(out), str(REF_SRC)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{' '.join(cmd)}\n{done.stderr}"
    return out


def run_reference(binary: Path, cases: list[Case]) -> list[tuple[int, ...]]:
    text = "".join(" ".join(map(str, c)) + "\n" for c in cases)
    done = subprocess.run([str(binary)], input=text, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    rows = [tuple(map(int, line.split())) for line in done.stdout.splitlines()]
    assert len(rows) == len(cases)
    return rows


def ours(case: Case) -> tuple[int, ...]:
    """occupancy.py's answer in occupancy_ref.cpp's row form (rc, then cudaOccResult's fields)."""
    major, minor, block, regs, static, dynamic, limit_config, max_dynamic, carveout, cache = case
    arch = occ.ARCHITECTURES[(major, minor)]
    try:
        r = occ.blocks_per_sm(arch, block, regs, static, dynamic, shmem_limit_config=limit_config,
                              max_dynamic_shared=max_dynamic,
                              carveout_percent=None if carveout == -1 else carveout, cache_preference=cache)
    except occ.OccupancyInputError:
        return (1,)
    factors = sum(FACTOR_BITS[name] for name in r.limiters)
    none_max = (lambda v: INT_MAX if v is None else v)
    return (0, r.blocks_per_sm, factors, none_max(r.registers), none_max(r.shared_memory), r.warps,
            r.blocks, none_max(r.barriers), r.registers_per_block, r.shared_per_block)


# -- the configurations --------------------------------------------------------------------------

def block_and_register_cases(arch: occ.Architecture) -> Iterator[Case]:
    """Every block size 1..1025 with registers at the allocation's edges; every register count
    0..257 with three block sizes inside each warp count. No shared memory: these find the warp,
    register and block limits."""
    m, n = arch.major, arch.minor
    for block in range(1, 1026):
        for regs in (0, 1, 8, 16, 24, 31, 32, 33, 40, 48, 56, 64, 72, 80, 96, 128, 168, 255, 256, 257):
            yield (m, n, block, regs, 0, 0, 0, 0, -1, 0)
    for warps in range(1, 33):
        for block in (32 * warps - 31, 32 * warps - 16, 32 * warps):
            for regs in range(0, 258):
                yield (m, n, block, regs, 0, 0, 0, 0, -1, 0)


def shared_sizes(arch: occ.Architecture) -> list[int]:
    """Block shared-memory sizes, before the driver's reserve: every allocation step up to past
    the opt-in limit, and one byte either side of each."""
    g = arch.shared_granularity
    top = arch.shared_per_block_optin + 4 * g
    edges = {0, 1}
    for step in range(g, top + 1, g):
        edges.update((step - 1, step, step + 1))
    for step in arch.carveout_steps:   # the carve-outs, less the reserve: where a block just fits
        edges.update(s for s in (step - arch.reserved_shared_per_block + d for d in (-1, 0, 1)) if s >= 0)
    return sorted(edges)


CARVEOUT_SETTINGS = [(-1, cache) for cache in range(4)] + [(p, 0) for p in
                                                           (0, 1, 5, 10, 25, 33, 50, 66, 75, 90, 99, 100)]


def shared_memory_cases(arch: occ.Architecture) -> Iterator[Case]:
    """Every shared size with the carve-out settings and both limit configs (all dynamic, the
    launch's own maximum; or static up to the 48 KiB a kernel can declare and the rest dynamic);
    every percentage 0..100 at the carve-out steps' edges; an opted-in kernel whose maximum is
    above, at and below its launch's dynamic size."""
    m, n = arch.major, arch.minor
    sizes = shared_sizes(arch)
    for size in sizes:
        static = min(size, 48 * KIB)
        for carveout, cache in CARVEOUT_SETTINGS:
            yield (m, n, 64, 32, 0, size, 0, size, carveout, cache)
            yield (m, n, 64, 32, 0, size, 1, size, carveout, cache)
            yield (m, n, 256, 0, static, size - static, 1, size - static, carveout, cache)
    edges = [s for s in sizes if any(abs(s + arch.reserved_shared_per_block - step) <= 1
                                     for step in arch.carveout_steps)]
    for percent in range(0, 101):
        for size in edges + [0, 4 * KIB, 20 * KIB]:
            yield (m, n, 128, 16, 0, size, 1, size, percent, 0)
    for size in sizes[::7]:
        for max_dynamic in (0, size // 2, size - 1, size, size + 1, arch.shared_per_block_optin,
                            arch.shared_per_block_optin + 1, 200 * KIB):
            if max_dynamic < 0:
                continue
            yield (m, n, 96, 40, 1024, size, 1, max_dynamic, -1, 0)
            yield (m, n, 96, 40, 1024, size, 0, max_dynamic, -1, 0)


def random_cases(arch: occ.Architecture, count: int, seed: int) -> Iterator[Case]:
    """Everything at once, drawn with a fixed seed: ties between limits, blocks above 1024,
    carve-outs outside 0..100 (which the calculator refuses)."""
    rng = random.Random(seed)
    m, n = arch.major, arch.minor
    for _ in range(count):
        block = rng.choice((rng.randint(1, 1024), 32 * rng.randint(1, 32), rng.randint(1, 1100)))
        regs = rng.choice((rng.randint(0, 64), rng.randint(0, 258)))
        static = rng.choice((0, rng.randint(0, 48 * KIB), 16 * rng.randint(0, 3 * KIB)))
        dynamic = rng.choice((0, rng.randint(0, arch.shared_per_block_optin), 128 * rng.randint(0, 512)))
        limit_config = rng.randint(0, 1)
        max_dynamic = rng.choice((dynamic, rng.randint(0, arch.shared_per_block_optin + KIB)))
        carveout = rng.choice((-1, -1, rng.randint(0, 100), rng.randint(-3, 110)))
        cache = rng.randint(0, 3)
        yield (m, n, block, regs, static, dynamic, limit_config, max_dynamic, carveout, cache)


# -- the tests -------------------------------------------------------------------------------------

def test_both_tables_hold_the_same_device_values(reference):
    done = subprocess.run([str(reference), "props"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    theirs = {tuple(map(int, line.split()[:2])): tuple(map(int, line.split()[2:]))
              for line in done.stdout.splitlines()}
    mine = {key: (a.max_threads_per_block, a.max_threads_per_sm, a.regs_per_block, a.regs_per_sm,
                  a.shared_per_block, a.shared_per_sm, a.shared_per_block_optin, a.reserved_shared_per_block)
            for key, a in occ.ARCHITECTURES.items()}
    assert theirs == mine


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(occ.ARCHITECTURES), ids=lambda k: f"sm_{k[0]}{k[1]}")
def test_every_configuration_matches_the_toolkits_calculator(reference, key):
    arch = occ.ARCHITECTURES[key]
    cases = [*block_and_register_cases(arch), *shared_memory_cases(arch),
             *random_cases(arch, 40_000, seed=key[0] * 100 + key[1])]
    expected = run_reference(reference, cases)
    mismatches = []
    for case, theirs in zip(cases, expected):
        if theirs[0] != 0:   # the calculator refused the input: so must occupancy.py
            theirs = theirs[:1]
        mine = ours(case)
        if mine != theirs:
            mismatches.append((case, theirs, mine))
    assert not mismatches, (f"{len(mismatches)} of {len(cases)} differ on {arch.name}; first: "
                            f"case {mismatches[0][0]} calculator {mismatches[0][1]} ours {mismatches[0][2]}")
    # the grid reached every outcome the calculator has: each resource limiting alone and in ties
    seen = {row[2] for row in expected if row[0] == 0}
    for bit in (0x01, 0x02, 0x04, 0x08):   # (from 10.1 the barrier limit always ties the blocks')
        assert any(f & 0x0F == bit for f in seen), f"no case on {arch.name} was limited by {bit:#x} alone"
    assert any(bin(f).count("1") > 1 for f in seen), f"no tie on {arch.name}"
    assert any(row[0] == 1 for row in expected) and any(row[0] == 0 and row[1] == 0 for row in expected)
