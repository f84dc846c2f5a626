"""Hostile rings at the default configuration: what one traced process can make the agent hold.

Each attack of tests/support/hostile.py (a million distinct names, 4,096 names of 4 KiB, 10,000
lanes, names announced and never finished, timestamps of 0 and 2^64-1 and ends before starts,
4,096 names that each demangle to 106,432 characters, and all of them together) is drained by each decoder twin on an in-memory ring, a ring-full per pass as the
collector drains; the traced process is built as the collector builds it (TracedBuilder) and its
part served by a real agent and the real app. Each case runs in a fresh process
(``hostile.measure``), so that its memory figure is its own. What must hold:

* the decoder keeps at most the default caps: names, kernel entries (plus the unnamed and the
  "other" one), name length, lanes, names pending; the builder, its demangling bounds: a name
  shown in at most MAX_CHARS characters (and the cut mark), DEMANGLED_CHARS of them in all;
* every record still counts, exactly: the kernel table's launches add up to every kernel decoded,
  the lanes' executions plus ``lane_overflow`` to every execution;
* the process's peak resident size grows by at most 100 MB (for a million short names it grew by
  859 MiB with the compiled twin);
* ``GET /api/snapshot`` is at most 5 MB (118 MB for a million names, 99 MB for 2,000 names of
  4 KiB, 2.3 GB for 10,000 lanes) and ``/healthz`` answers 200.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from child_env import SUPPORT_DIR, with_support
from hostile import ATTACKS

from gpuflow.collectors.cupti import _layout as L
from gpuflow.collectors.cupti.demangle import MAX_CHARS
from gpuflow.collectors.cupti.traced_builder import DEMANGLED_CHARS

SNAPSHOT_MAX_BYTES = 5_000_000
GROWTH_MAX_BYTES = 100 << 20


def measured(twin: str, attack: str) -> dict:
    proc = subprocess.run([sys.executable, str(SUPPORT_DIR / "hostile.py"), "measure", twin, attack],
                          capture_output=True, text=True, env=with_support(), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_one_hostile_ring_stays_within_the_default_bounds(decoder_impl, attack):
    m = measured(decoder_impl.name, attack)
    assert m["names"] <= L.DEFAULT_MAX_NAMES and m["longest_name"] <= L.DEFAULT_MAX_NAME_BYTES
    assert m["kernel_entries"] <= L.DEFAULT_MAX_NAMES + 2
    assert m["lanes"] <= L.DEFAULT_MAX_LANES and m["pending_names"] <= L.DEFAULT_MAX_PENDING_NAMES
    assert m["longest_shown_name"] <= MAX_CHARS + 1 and m["demangled_chars"] <= DEMANGLED_CHARS
    # exact: every kernel decoded is in the table, every execution on a lane or in lane_overflow
    assert m["table_launches"] == m["launched"]
    executions = m["launched"] + m["moved"]
    assert m["lane_executions"] + m["counters"]["lane_overflow"] == executions
    assert m["shown_lane_executions"] + m["counters"]["lane_overflow"] == executions
    assert m["peak_growth_bytes"] <= GROWTH_MAX_BYTES, f"grew by {m['peak_growth_bytes'] / 2**20:.0f} MiB"
    assert (m["healthz_status"], m["snapshot_status"]) == (200, 200)
    assert m["snapshot_bytes"] <= SNAPSHOT_MAX_BYTES, f"/api/snapshot is {m['snapshot_bytes']:,} bytes"
    assert m["served_pids"] == [4_000_001] and m["served_kernel_entries"] == m["shown_kernel_entries"]
