"""A kernel name that demangles to gigabytes ("demangle bomb") costs the agent nothing of that.

An Itanium name whose parameters each repeat the previous one twice (``S_IS1_S1_E`` ...) doubles
the demangled text per 10 bytes: 213 bytes demangle to 27 MB, 253 bytes to 436 MB in 11 s of
``__cxa_demangle``, which cannot be interrupted or told a limit. A traced program names its
kernels, so the agent demangles in a helper process it can stop (docs/decoder.md, "Caps"): each
case here runs in a fresh process, so that its peak memory is its own, and must grow by at most
50 MB and give a name of at most MAX_CHARS characters (plus the cut marker; far above real names,
which reach thousands), the mangled name when the demangler ran out of time; real names still
demangle. What one traced process has demangled in all is bounded too (the builder's budget), and
the helper's own start is not timed as a name.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from cxxnames import SHAPE_TEXT, template_kernel_name

from gpuflow.collectors.cupti import caps
from gpuflow.collectors.cupti import demangle as dm

GROWTH_MAX_BYTES = 50 << 20

PROBE = r"""
import json, sys, time
from gpuflow.collectors.cupti.demangle import demangle

def status_kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])

names = json.loads(sys.argv[1])
demangle("_Z3maxIiET_S0_S0_")  # the helper is up (its start is not what is measured)
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
before = status_kib("VmRSS")
shown = [demangle(n) for n in names]
print(json.dumps({"shown": shown, "grown": (status_kib("VmHWM") - before) * 1024}))
"""


def bomb(doublings: int) -> str:
    """A mangled name whose demangled text doubles with each of its ``doublings`` parameters."""
    return "_Z1f1PI1AS0_E" + "".join(f"S_IS{_seq(i)}_S{_seq(i)}_E" for i in range(1, doublings + 1))


def _seq(i: int) -> str:
    digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    out = ""
    while True:
        out = digits[i % 36] + out
        i //= 36
        if i == 0:
            return out


def probe(names: list[str]) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(names)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


@pytest.mark.skipif(not dm.AVAILABLE, reason="no C++ runtime with __cxa_demangle here")
def test_a_demangle_bomb_costs_neither_memory_nor_a_long_name():
    names = [bomb(24), "_Z13attention_fwdPKfPfi"]
    out = probe(names)
    assert out["grown"] <= GROWTH_MAX_BYTES, f"grew by {out['grown'] / 2**20:.0f} MiB"
    assert len(out["shown"][0]) <= dm.MAX_CHARS + 1  # the mangled name (out of time), or the text cut
    assert out["shown"][1] == "attention_fwd(float const*, float*, int)"


@pytest.mark.skipif(not dm.AVAILABLE, reason="no C++ runtime with __cxa_demangle here")
def test_a_small_bomb_is_demangled_and_cut():
    out = probe([bomb(12)])  # 106,432 characters, demangled in about a millisecond
    assert dm.MAX_CHARS >= 64 << 10  # far above real names: 5,112 characters for a PyTorch kernel
    assert len(out["shown"][0]) == dm.MAX_CHARS + 1 and out["shown"][0].startswith("f(P<A, A>, P<P<A, A>")


@pytest.mark.skipif(not dm.AVAILABLE, reason="no C++ runtime with __cxa_demangle here")
def test_a_process_whose_name_ran_the_demangler_out_of_time_shows_the_rest_mangled():
    import ringfuzz as F
    from hostile import BufferRing

    from gpuflow.collectors.cupti.decoder import RingDecoder
    from gpuflow.collectors.cupti.traced_builder import TracedBuilder

    ring = BufferRing(1024)
    dec = RingDecoder(ring.buffer)
    ring.feed(dec, F.name_chunks(1, bomb(24).encode()) + F.name_chunks(2, b"_Z3maxIiET_S0_S0_")
              + [F.kernel(1), F.kernel(2)])
    builder = TracedBuilder(1, "s", dec.lane_span_cap)
    t = builder.build(dec, name="p", state="running", exit_status=None, truncated=False, now_ns=0)
    assert not builder.demangling
    assert sorted(k.name for k in t.kernels) == sorted([bomb(24), "_Z3maxIiET_S0_S0_"])
    assert dm.demangle("_Z3maxIiET_S0_S0_") == "int max<int>(int, int)"  # other processes: as ever
    (message,) = [m for key, m, _severity in caps.problems(1, caps.figures(dec.counters(), builder), dec.caps)
                  if key == "demangle-time"]
    assert message.startswith("pid 1: ") and "shown mangled" in message


@pytest.mark.skipif(not dm.AVAILABLE, reason="no C++ runtime with __cxa_demangle here")
def test_what_a_process_has_demangled_is_bounded_and_its_further_names_are_shown_mangled(decoder_impl):
    """Names of a few KB mangled print tens of thousands of characters each, and a program
    chooses how many it has: past its budget of demangled text, a process's names are shown
    mangled (they were all demangled, 4,096 of up to 64 KiB each: 256 MiB of text)."""
    import ringfuzz as F
    from hostile import BufferRing

    from gpuflow.collectors.cupti.traced_builder import DEMANGLED_CHARS, TracedBuilder

    assert DEMANGLED_CHARS >= 1 << 20  # at the default, hundreds of real names of thousands of characters
    names = {i: template_kernel_name(i, 300) for i in range(1, 31)}  # 12,077 characters each
    ring = BufferRing(1 << 12)
    dec = decoder_impl.cls(ring.buffer)
    ring.feed(dec, [r for i, n in names.items() for r in F.name_chunks(i, n.encode())] + [F.kernel(i) for i in names])
    builder = TracedBuilder(1, "s", dec.lane_span_cap, demangled_chars=100_000)
    t = builder.build(dec, name="p", state="running", exit_status=None, truncated=False, now_ns=0)
    shown = {k.mangled: k.name for k in t.kernels}
    demangled = [i for i, n in names.items() if shown[n] != n]
    assert demangled == list(range(1, 9))  # 8 x 12,077 <= 100,000 < 9 x 12,077
    assert all(shown[names[i]].count(SHAPE_TEXT) == 301 for i in demangled)
    assert builder.demangled_chars <= 100_000 and builder.names_past_demangled_budget == 22
    (message,) = [m for key, m, _severity in caps.problems(1, caps.figures(dec.counters(), builder), dec.caps)
                  if key == "budget-demangled"]
    assert message.startswith("pid 1: ") and "100,000 characters" in message and "shown mangled" in message


def start_slowly(monkeypatch, seconds: float) -> None:
    """Every helper started from now on takes ``seconds`` before its interpreter starts (a loaded machine)."""
    real = subprocess.Popen

    def popen(args, **kwargs):
        return real(["sh", "-c", f'sleep {seconds}; exec "$0" "$@"', *args], **kwargs)

    monkeypatch.setattr(dm.subprocess, "Popen", popen)


@pytest.mark.skipif(not dm.AVAILABLE, reason="no C++ runtime with __cxa_demangle here")
def test_the_helpers_start_does_not_count_against_the_first_names_time(monkeypatch):
    """The helper is a Python interpreter: on a loaded machine its start alone can take longer than
    a name may (TIMEOUT_S), and the first name of a program then came out mangled, with the rest."""
    start_slowly(monkeypatch, 2 * dm.TIMEOUT_S)
    helper = dm._Helper()
    try:
        assert helper.demangle(b"_Z3maxIiET_S0_S0_") == "int max<int>(int, int)"
        assert helper.demangle(b"_Z13attention_fwdPKfPfi") == "attention_fwd(float const*, float*, int)"
    finally:
        helper.close()


@pytest.mark.skipif(not dm.AVAILABLE, reason="no C++ runtime with __cxa_demangle here")
def test_a_helper_that_never_gets_ready_is_given_up_at_its_start_deadline(monkeypatch):
    monkeypatch.setattr(dm, "START_TIMEOUT_S", 1.0)
    start_slowly(monkeypatch, 5)
    helper = dm._Helper()
    started = time.monotonic()
    try:
        assert helper.demangle(b"_Z3maxIiET_S0_S0_") is None
        assert time.monotonic() - started < 1.0 + 2 * dm.TIMEOUT_S
        assert not helper.running
    finally:
        helper.close()
