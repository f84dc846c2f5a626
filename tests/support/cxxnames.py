"""C++ kernel names as real programs have them: long mangled names that demangle to thousands of
characters, for the tests of the caps and budgets on names (docs/decoder.md, "Caps").

What it is for: the caps must keep real programs far inside them, and real names are long. A
PyTorch training loop on an H200 launched
``void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, ...>``,
a 446-byte mangled name that demangles to 5,050 characters: every reference to a lambda prints the
whole signature of the function it is defined in, and these lambdas are nested three deep.

* :data:`PYTORCH_UNIFORM_KERNEL` — that kernel's name, as g++ 12 mangles a reduced copy of
  PyTorch's ``uniform_kernel`` → ``uniform_and_transform`` → ``distribution_nullary_kernel`` →
  ``distribution_elementwise_grid_stride_kernel`` chain (the same templates and lambdas, without
  their bodies): 390 bytes that demangle to 5,112 characters.
* :func:`template_kernel_name` — distinct names of a CUTLASS-like shape (one template argument,
  :data:`SHAPE_TEXT`, repeated by substitution), demangling to ``77 + 40 × repeats`` characters
  (``>>`` printed ``> >`` by some runtimes, one more): a program with a thousand kernel names of
  1–2 KB.

Constraints: standard library only; the names are plain Itanium ABI text (no compiler needed to
use them), checked against ``__cxa_demangle`` by the tests that use them.
"""

from __future__ import annotations

PYTORCH_UNIFORM_KERNEL = (
    "_ZN2at6native12_GLOBAL__N_143distribution_elementwise_grid_stride_kernelIfLi4EZNS0_9templates4cuda21"
    "uniform_and_transformIffLm4EPNS_17CUDAGeneratorImplEZZZNS4_14uniform_kernelIS7_EEvRNS_18TensorIterator"
    "BaseEddT_ENKUlvE_clEvENKUlvE_clEvEUlfE_EEvSA_T2_T3_EUlP24curandStatePhilox4_32_10E_ZNS4_27distribution"
    "_nullary_kernelIffLi4ES7_SJ_SE_EEvSA_SF_RKSG_T4_EUlifE_EEvlNS_15PhiloxCudaStateET1_SF_")

#: the template argument :func:`template_kernel_name` repeats, and what it demangles to
_SHAPE = "N7cutlass4gemm9GemmShapeILi128ELi256ELi64EEE"
SHAPE_TEXT = "cutlass::gemm::GemmShape<128, 256, 64>"


def template_kernel_name(i: int, repeats: int) -> str:
    """``void at::native::gemm_kernel_<i><GemmShape<128, 256, 64>, ... (1 + repeats of them)>()``.

    ``S5_`` is the substitution of the seventh component seen (at, at::native, the kernel's
    template name, cutlass, cutlass::gemm, cutlass::gemm::GemmShape, the GemmShape
    specialisation), so each repeat costs 3 bytes and prints 40 characters.
    """
    ident = f"gemm_kernel_{i:05d}"
    return f"_ZN2at6native{len(ident)}{ident}I{_SHAPE}{'S5_' * repeats}EEvv"

