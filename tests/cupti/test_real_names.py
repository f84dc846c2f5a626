"""Real programs are far inside the caps and budgets (docs/decoder.md, "Caps"), with both decoder twins.

The caps bound what a hostile ring can make the agent hold; a real program must never reach one,
or its kernel names stop matching torch.profiler's. Real names are long: a PyTorch loop's uniform
kernel is a 390-byte mangled name that demangles to 5,112 characters (it came out cut at 4,096 on
the H200), CUTLASS and flash-attention templates reach a few KB mangled, and a large program has
hundreds to a thousand kernel names of 1-2 KB demangled (tests/support/cxxnames.py). Checked here
at the default caps and budgets:

* a 4 KiB mangled name (NAME_MAX, the format's own limit) is kept whole by the decoder;
* the PyTorch name comes out whole, demangled, in the kernel table and on its spans;
* a thousand kernel names of 1-2 KB demangled each keep an entry of their own, never
  ``(other kernel names)``;
* a busy program's lanes (16 streams, 512 spans each, 200 names) are shown whole.
"""

from __future__ import annotations

import pytest
import ringfuzz as F
from cxxnames import PYTORCH_UNIFORM_KERNEL, SHAPE_TEXT, template_kernel_name
from hostile import BufferRing

from gpuflow.collectors.cupti import _layout as L
from gpuflow.collectors.cupti import traced_builder as B
from gpuflow.collectors.cupti.demangle import AVAILABLE as DEMANGLER

WALL0 = 1_764_000_000_000_000_000


def drained(cls, records):
    ring = BufferRing(1 << 14)
    dec = cls(ring.buffer)  # the default caps
    ring.feed(dec, records)
    return dec


def build(dec):
    builder = B.TracedBuilder(1, "s", dec.lane_span_cap)  # the default budgets
    return builder, builder.build(dec, name="real", state="running", exit_status=None, truncated=False,
                                  now_ns=WALL0)


def test_a_mangled_name_of_name_max_bytes_is_kept_whole(decoder_impl):
    mangled = template_kernel_name(1, (L.NAME_MAX - len(template_kernel_name(1, 0))) // 3)
    mangled += "x" * (L.NAME_MAX - len(mangled))  # not demanglable any more: shown as it is
    dec = drained(decoder_impl.cls, F.name_chunks(1, mangled.encode()) + [F.kernel(1)])
    text, flags = dec.names()[1]
    assert text == mangled and not flags & F.FLAG_NAME_TRUNCATED and dec.counters()["names_cut"] == 0
    _builder, t = build(dec)
    assert [k.mangled for k in t.kernels] == [mangled]


@pytest.mark.skipif(not DEMANGLER, reason="no C++ runtime with __cxa_demangle here")
def test_the_pytorch_uniform_kernel_comes_out_whole(decoder_impl):
    dec = drained(decoder_impl.cls, F.name_chunks(1, PYTORCH_UNIFORM_KERNEL.encode())
                  + [F.kernel(1, start=10, end=20), F.kernel(1, start=30, end=45)])
    _builder, t = build(dec)
    (k,) = t.kernels
    assert k.mangled == PYTORCH_UNIFORM_KERNEL and (k.count, k.total_ns) == (2, 25)
    assert len(k.name) > 5_000 and not k.name.endswith(B.CUT_MARK)
    assert k.name.startswith("void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<")
    assert [s.name for s in t.lanes[0].spans] == [k.name, k.name]


@pytest.mark.skipif(not DEMANGLER, reason="no C++ runtime with __cxa_demangle here")
def test_a_thousand_kernel_names_of_one_to_two_kb_each_keep_their_own_entry(decoder_impl):
    repeats = {i: 24 + i % 25 for i in range(1, 1001)}  # 1,037 to 1,997 characters demangled
    records = []
    for i, r in repeats.items():
        records += F.name_chunks(i, template_kernel_name(i, r).encode())
        records.append(F.kernel(i, stream=13 + i % 8, start=1_000 * i, end=1_000 * i + i))
    builder, t = build(drained(decoder_impl.cls, records))
    assert builder.names_over_budget == 0 and B.OTHER_KERNELS not in {k.name for k in t.kernels}
    assert len(t.kernels) == 1000
    for k in t.kernels:
        i = int(k.mangled[len("_ZN2at6native17gemm_kernel_"):][:5])
        assert (k.mangled, k.count, k.total_ns) == (template_kernel_name(i, repeats[i]), 1, i)
        assert k.name.count(SHAPE_TEXT) == 1 + repeats[i] and 1_000 <= len(k.name) <= 2_000


def test_a_busy_programs_lanes_are_shown_whole(decoder_impl):
    """16 streams of 512 spans of 200 kernel names of ~200 characters: every span kept is shown."""
    records = [F.context(0, 1, 7)]
    for i in range(1, 201):
        records += F.name_chunks(i, b"vectorized_elementwise_kernel_%03d_" % i + b"f" * 165)
    t0 = 1_000_000
    records += [F.kernel(1 + j % 200, stream=13 + j % 16, start=t0 + 100 * j, end=t0 + 100 * j + 50)
                for j in range(16 * 600)]
    builder, t = build(drained(decoder_impl.cls, records))
    assert builder.spans_over_budget == 0 and len(t.lanes) == 16
    assert all(len(lane.spans) == 512 and lane.spans_elided == 600 - 512 for lane in t.lanes)
