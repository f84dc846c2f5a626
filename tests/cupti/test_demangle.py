"""Kernel names for display: Itanium C++ names demangled, everything else unchanged."""

from __future__ import annotations

import pytest

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
