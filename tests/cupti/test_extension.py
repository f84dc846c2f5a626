"""The compiled decoder is really in use where it should be, and agrees with the shared layout.

Like yarl's test_quoting_c_loaded: under GPUFLOW_REQUIRE_EXTENSIONS=1 or CI=true a silently
missing or broken build fails here instead of quietly falling back to the slow twin.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import pytest
import ringproducer

from gpuflow.collectors.cupti import _layout as L
from gpuflow.collectors.cupti import decoder as decoder_mod

from .conftest import extensions_required


@pytest.mark.c_extension
def test_compiled_decoder_is_loaded():
    if decoder_mod.RingDecoderC is None and not extensions_required():
        pytest.skip(f"not built: {decoder_mod.EXTENSION_IMPORT_ERROR}")
    assert decoder_mod.RingDecoderC is not None, decoder_mod.EXTENSION_IMPORT_ERROR
    assert decoder_mod.RingDecoderC.is_compiled
    if not decoder_mod.NO_EXTENSIONS:
        assert decoder_mod.USING_EXTENSION
        assert decoder_mod.RingDecoder is decoder_mod.RingDecoderC


def _selected(env_extra: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items() if k != "GPUFLOW_NO_EXTENSIONS"}
    env.update(env_extra)
    code = ("from gpuflow.collectors.cupti import decoder as d; "
            "print(d.USING_EXTENSION, d.RingDecoder.__module__)")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_gpuflow_no_extensions_selects_the_python_twin():
    assert _selected({"GPUFLOW_NO_EXTENSIONS": "1"}) == "False gpuflow.collectors.cupti._decoder_py"


@pytest.mark.c_extension
def test_the_compiled_twin_is_the_default(both_impls):
    assert _selected({}) == "True gpuflow.collectors.cupti._decoder_c"


@pytest.mark.c_extension
def test_compiled_constants_match_the_layout(both_impls):
    from gpuflow.collectors.cupti import _decoder_c

    h = _decoder_c.HEADER_CONSTANTS
    assert (h["MAGIC"], h["VERSION"], h["HEADER_SIZE"], h["RECORD_SIZE"], h["NAME_CHUNK_TEXT"],
            h["NAME_MAX"], h["MIN_CAPACITY"], h["MAX_CAPACITY"]) == (
        L.MAGIC, L.VERSION, L.HEADER_SIZE, L.RECORD_SIZE, L.NAME_CHUNK_TEXT, L.NAME_MAX,
        L.MIN_CAPACITY, L.MAX_CAPACITY)
    assert (h["OFF_HEAD"], h["OFF_TAIL"], h["OFF_DROPPED_RING"], h["OFF_PRODUCER_EXITED"],
            h["OFF_BUFFERS_COMPLETED"], h["OFF_TRANSLATE_CPU_NS"]) == (
        L.OFF_HEAD, L.OFF_TAIL, L.OFF_DROPPED_RING, L.OFF_PRODUCER_EXITED, L.OFF_BUFFERS_COMPLETED,
        L.OFF_TRANSLATE_CPU_NS)
    lim = _decoder_c.LIMITS
    assert (lim["NAME_ID_LIMIT"], lim["MAX_LANES"], lim["MAX_CONTEXTS"], lim["MAX_DEVICES"],
            lim["N_REASONS"], lim["DIR_D2D"], lim["DIR_P2P"], lim["DIR_MEMSET"]) == (
        L.NAME_ID_LIMIT, L.MAX_LANES, L.MAX_CONTEXTS, L.MAX_DEVICES, len(L.INVALID_REASONS), L.DIR_D2D,
        L.DIR_P2P, L.DIR_MEMSET)
    assert lim["COPY_KIND_DIRECTION"] == L.COPY_KIND_DIRECTION


def test_layout_matches_the_producers_header_struct():
    H = ringproducer.RingHeader
    offsets = {name: getattr(H, name).offset for name, *_ in H._fields_}
    assert (offsets["head"], offsets["tail"], offsets["dropped_ring"], offsets["dropped_cupti"],
            offsets["incomplete"], offsets["producer_exited"], offsets["buffers_completed"],
            offsets["translate_cpu_ns"]) == (
        L.OFF_HEAD, L.OFF_TAIL, L.OFF_DROPPED_RING, L.OFF_DROPPED_CUPTI, L.OFF_INCOMPLETE,
        L.OFF_PRODUCER_EXITED, L.OFF_BUFFERS_COMPLETED, L.OFF_TRANSLATE_CPU_NS)
    assert L.HEADER_STRUCT.size == offsets["_pad0"] and ctypes.sizeof(H) <= L.HEADER_SIZE
    assert (ringproducer.MAGIC, ringproducer.VERSION, ringproducer.RECORD_SIZE) == (L.MAGIC, L.VERSION, L.RECORD_SIZE)
