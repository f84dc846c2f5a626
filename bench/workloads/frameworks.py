"""GPU programs written with frameworks other than PyTorch, for scripts/gpu-check's ``frameworks``
stage: does ``gpuflow run`` see what they launch, exactly, without changing what they compute?

    python frameworks.py cupy N     # a CuPy RawKernel (NVRTC-compiled, launched through the driver API)
    python frameworks.py triton N   # a Triton kernel (JIT-compiled, its own launcher)
    python frameworks.py jax N      # a jitted JAX step (XLA: its own kernels, threads, command buffers)

Each launches its own named kernel a known number of times and prints the count in a
``==== gpuflow-named-counts ====`` block (``kernel <name> <count>``): scripts/gpu_verify.py
``named`` requires gpuflow's count for that name to equal it (other kernels the framework launches,
fills, reductions, random numbers, are allowed and not counted). XLA names its own kernels, so the
``jax`` mode prints no block; run it at two step counts and ``gpu_verify.py linear`` requires every
kernel's count to grow by a whole multiple of the extra steps (nothing missed or doubled). Every
mode ends with a ``checksum`` line, which must be the same run bare and under ``gpuflow run``.

Exit status 3 (and a line saying so) where the framework is not installed, so the stage can skip
it; any other failure is the framework's own exception. Constraints: deterministic results (fixed
inputs, JAX's autotuning turned off so both runs pick the same kernels); small sizes, a few
seconds each.
"""

from __future__ import annotations

import importlib.util
import sys

NOT_INSTALLED = 3


def print_counts(counts: dict[str, int]) -> None:
    print("==== gpuflow-named-counts ====")
    for name, count in counts.items():
        print(f"kernel {name} {count}")
    print("==== end ====", flush=True)


CUPY_SOURCE = r"""
extern "C" __global__ void gf_cupy_scale(float *x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = x[i] * a + 1.0f;
}
"""


def run_cupy(launches: int) -> None:
    import cupy as cp

    kernel = cp.RawKernel(CUPY_SOURCE, "gf_cupy_scale")
    n = 1 << 16
    x = cp.arange(n, dtype=cp.float32) / n
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        for _ in range(launches):
            kernel(((n + 255) // 256,), (256,), (x, cp.float32(0.5), cp.int32(n)))
    stream.synchronize()
    print_counts({"gf_cupy_scale": launches})
    print(f"checksum {float(x.sum())!r}")


def run_triton(launches: int) -> None:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def gf_triton_axpy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask)
        y = tl.load(y_ptr + offsets, mask=mask)
        tl.store(y_ptr + offsets, 0.5 * x + 0.5 * y, mask=mask)

    n = 1 << 16
    x = torch.linspace(0.0, 1.0, n, device="cuda")
    y = torch.zeros(n, device="cuda")
    grid = (triton.cdiv(n, 1024),)
    for _ in range(launches):
        gf_triton_axpy[grid](x, y, n, BLOCK=1024)
    torch.cuda.synchronize()
    print_counts({"gf_triton_axpy": launches})
    print(f"checksum {float(y.double().sum())!r}")


def run_jax(steps: int) -> None:
    import os
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_gpu_autotune_level" not in flags:  # the same kernels in every run: no timing-based picks
        os.environ["XLA_FLAGS"] = (flags + " --xla_gpu_autotune_level=0").strip()
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(w, x):
        return jnp.tanh(x @ w) * 0.5 + x * 0.5

    w = jnp.eye(512, dtype=jnp.float32) * 0.9 + 0.001
    x = jnp.linspace(0.0, 1.0, 512 * 512, dtype=jnp.float32).reshape(512, 512)
    for _ in range(steps):
        x = step(w, x)
    x.block_until_ready()
    print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}: {steps} steps", flush=True)
    print(f"checksum {float(jnp.sum(x))!r}")


MODES = {"cupy": ("cupy", run_cupy), "triton": ("triton", run_triton), "jax": ("jax", run_jax)}


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in MODES or not argv[2].isdigit() or int(argv[2]) < 1:
        print(f"usage: {argv[0]} {{{','.join(MODES)}}} N   (N >= 1 launches or steps)", file=sys.stderr)
        return 2
    module, run = MODES[argv[1]]
    if importlib.util.find_spec(module) is None:
        print(f"{module} is not installed here: skipped", flush=True)
        return NOT_INSTALLED
    run(int(argv[2]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
