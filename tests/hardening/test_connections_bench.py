"""The short version of bench/connections.py (about 30 s): its last line parses, and with 200 idle
connections open both servers answer every request of the good client and add no thread for
the crowd. The full runs and their figures are in docs/reliability.md ("Idle connections")."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from servers import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.serial]

FIELD = re.compile(r"(\w+)=([\d.]+|nan)")


def test_bench_last_line_and_both_servers_serve_beside_idle_connections():
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "connections.py"), "--idle", "200",
                          "--window", "4", "--trickle", "1"],
                         capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    last = out.stdout.strip().splitlines()[-1]
    fields = dict(FIELD.findall(last))
    assert last.startswith("idle=200 ") and fields["idle"] == "200", last
    for server in ("embedded", "gunicorn"):
        assert fields[f"{server}_failed"] == "0", last
        assert float(fields[f"{server}_frame_ratio"]) >= 0.8, last
        assert int(fields[f"{server}_threads_max"]) < 40, last  # not one per idle connection
