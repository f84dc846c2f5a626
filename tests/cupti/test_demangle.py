"""Kernel names for display: Itanium C++ names demangled, everything else unchanged."""

from __future__ import annotations

import pytest
from cxxnames import PYTORCH_UNIFORM_KERNEL

from gpuflow.collectors.cupti import demangle as dm


@pytest.mark.skipif(not dm.AVAILABLE, reason="no C++ runtime with __cxa_demangle here")
@pytest.mark.parametrize(("mangled", "shown"), [
    ("_Z13attention_fwdPKfPfi", "attention_fwd(float const*, float*, int)"),
    ("_Z3maxIiET_S0_S0_", "int max<int>(int, int)"),
    ("_ZN2at6native6kernelEPfi", "at::native::kernel(float*, int)"),
])
def test_cpp_names_are_demangled(mangled, shown):
    assert dm.demangle(mangled) == shown


@pytest.mark.parametrize("name", ["triton_poi_fused_add_0", "", "_Z", "_Zzz!not-mangled", "kernel(int)", "\u00fcber"])
def test_other_names_are_left_alone(name):
    assert dm.demangle(name) == name


@pytest.mark.skipif(not dm.AVAILABLE, reason="no C++ runtime with __cxa_demangle here")
def test_a_pytorch_kernel_name_of_five_thousand_characters_comes_out_whole():
    """A PyTorch loop's uniform kernel (a 390-byte mangled name: tests/support/cxxnames.py) demangles
    to 5,112 characters; it was cut at 4,096 and then differed from torch.profiler's name."""
    shown = dm.demangle(PYTORCH_UNIFORM_KERNEL)
    assert len(shown) > 5_000 and "…" not in shown
    assert shown.startswith("void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel"
                            "<float, 4, at::native::templates::cuda::uniform_and_transform<float, float, 4ul, ")
    assert shown.endswith("::{lambda(float)#1})::{lambda(int, float)#1})")



def test_the_cache_shared_by_all_processes_keeps_to_its_bytes():
    cache = dm._Cache(200_000)
    for i in range(100):
        cache.put(f"_Z{i}", "x" * 5_000 + str(i))
        cache.get("_Z0")  # the most recently used stays
    assert cache.bytes <= 200_000
    assert cache.get("_Z0") is not None and cache.get("_Z99") is not None and cache.get("_Z1") is None
    cache.put("_Zbig", "y" * 300_000)  # larger than the whole cache: not kept, nothing evicted for it
    assert cache.get("_Zbig") is None and cache.get("_Z99") is not None
    assert dm.CACHE_BYTES <= 16 << 20 and dm.CACHE_NAME_CHARS < dm.MAX_CHARS
