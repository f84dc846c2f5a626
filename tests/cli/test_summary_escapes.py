"""What the CLI prints of a snapshot cannot drive the terminal: control characters in kernel names,
process names, CUPTI details, device names and problems come out as visible escapes.

A traced program names its own kernels and its own process, and a plugin's problem text can
quote what it read: an ESC sequence there could retitle the terminal, move the cursor, hide
lines, or (on some terminals) answer back. The end-of-run summary and the start banner must
print every C0 and C1 control, DEL, a lone surrogate (what undecodable bytes become under
surrogateescape) and the bidirectional overrides as escapes, keep everything else (non-ASCII
names included), and never fail on them. Checked on the functions, and through the real
``gpuflow watch`` with a problem text that carries them.
"""

from __future__ import annotations

import io
import signal
import unicodedata

import pytest

from cli_process import gpuflow_env, start_gpuflow, stop_gpuflow
from gpuflow.cli.printable import printable
from gpuflow.cli.report import describe_start
from gpuflow.cli.summary import write_summary
from gpuflow.core.snapshot import Device, HostInfo, KernelStat, Problem, Snapshot, TracedProcess, TransferStat

HOSTILE = ("\x1b]0;owned\x07"          # OSC: set the terminal's title, ended by BEL
           "\x1b[2J\x1b[H"             # clear the screen, cursor home
           "\rfake line"               # CR: overwrite what was printed
           "\x9b31m"                   # C1 CSI (8-bit)
           "\x00\x08\x0b\x0c\x7f"      # NUL, BS, VT, FF, DEL
           "\u202eevil\u202c"          # right-to-left override
           + b"\xff\xfe\xc3".decode("utf-8", "replace")         # invalid UTF-8, as decoded
           + b"\xff\xfe".decode("utf-8", "surrogateescape")     # or kept as lone surrogates
           + "\u2028\n")


def controls(text: str) -> list[str]:
    """Characters a terminal would act on (the newlines between lines aside)."""
    return [c for line in text.split("\n") for c in line
            if unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp") or c in "\u202a\u202b\u202c\u202d\u202e"]


def test_printable_escapes_controls_and_keeps_the_rest():
    assert printable("void gemm<float, 128>(float*) · ψ ✓") == "void gemm<float, 128>(float*) · ψ ✓"
    assert printable("a\x1b[31mb") == "a\\x1b[31mb"
    assert printable("\r\n\t\x00\x7f\x9b") == "\\r\\n\\t\\x00\\x7f\\x9b"
    assert printable("\u202e\u2066\u2028") == "\\u202e\\u2066\\u2028"
    assert printable("\udcff") == "\\udcff"
    assert controls(printable(HOSTILE)) == []


def hostile_snapshot() -> Snapshot:
    kernel = KernelStat(name="k" + HOSTILE, mangled="_Z1k" + HOSTILE, count=3, total_ns=3000, min_ns=900,
                        max_ns=1100, timed=3)
    traced = TracedProcess(pid=4242, session="s", name="p" + HOSTILE, state="exited", exit_status=0,
                           cupti_status="failed" + HOSTILE, cupti_detail="d" + HOSTILE, records=3,
                           kernels=(kernel,),
                           transfers=(TransferStat(direction="h2d" + HOSTILE, count=1, bytes=10, total_ns=5, timed=1),))
    return Snapshot(seq=1, timestamp=0.0,
                    host=HostInfo(hostname="h" + HOSTILE, driver_version="v" + HOSTILE,
                                  cuda_driver_version="c" + HOSTILE),
                    devices=(Device(index=0, uuid="GPU-0" + HOSTILE, name="n" + HOSTILE,
                                    memory_used_bytes=1, memory_total_bytes=2),),
                    problems=(Problem(source="s" + HOSTILE, message="m" + HOSTILE, severity="warning"),),
                    traced=(traced,))


def test_the_end_of_run_summary_prints_no_control_character():
    out = io.StringIO()
    write_summary(hostile_snapshot(), out)
    text = out.getvalue()
    assert controls(text) == [], controls(text)
    assert "\\x1b]0;owned\\x07" in text and "\\u202eevil" in text and "\ufffd" in text
    for field in ("p", "failed", "d", "k", "h2d"):
        assert field + "\\x1b]0;owned" in text, field
    text.encode("utf-8")   # printable to any UTF-8 terminal: no lone surrogate left


def test_the_start_banner_prints_no_control_character():
    out = io.StringIO()
    describe_start(hostile_snapshot(), "http://127.0.0.1:7717/", out)
    text = out.getvalue()
    assert controls(text) == [], controls(text)
    for field in ("n", "v", "c", "s", "m"):
        assert field + "\\x1b]0;owned" in text, field
    text.encode("utf-8")


@pytest.mark.parametrize("problem", ["\x1b]0;owned\x07\x1b[2J\rfake line\x9b31m\u202eevil"])
def test_gpuflow_watch_prints_a_hostile_problem_text_escaped(problem):
    env = gpuflow_env(GPUFLOW_DISABLED_PLUGINS="nvml,cupti", GPUFLOW_FAKE_PROBLEM=problem)
    proc, _ = start_gpuflow("watch", "--port", "0", "--plugin", "gpuflow.testing.fake_collector", env=env)
    out = stop_gpuflow(proc, signal.SIGTERM)
    assert proc.returncode == 0, out
    assert "\\x1b]0;owned\\x07\\x1b[2J\\rfake line\\x9b31m\\u202eevil" in out, out
    assert controls(out) == [], controls(out)
