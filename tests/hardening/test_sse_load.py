"""The short version of bench/sse_slow_clients.py (about 16 s): readers keep the frame rate while
slow clients come and go, the cap answers 503, threads and memory stay bounded.

40 reading streams, 15 that never read, 5 that send half a request, 5 beyond the cap, against a
real gunicorn agent with the documented ``--threads 64`` (the stream cap sized to it), short
timeouts and a small send buffer so that every slow client is dropped inside the window. The
full-size run (200 + 100, 60 s) and its numbers are in docs/reliability.md ("The HTTP side").
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from servers import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.serial]

ARGS = ["--clients", "40", "--slow", "20", "--half", "5", "--extra", "5", "--duration", "10",
        "--send-timeout", "4", "--header-timeout", "2", "--send-buffer", "16384",
        "--spare-threads", "9"]  # 40 + 15 streams + 9 = --threads 64
LAST = re.compile(r"^clients=(\d+) slow=(\d+) min_frame_ratio=([\d.]+) agent_threads_max=(\d+) "
                  r"agent_rss_mb_max=([\d.]+)$")


def test_readers_keep_their_frames_while_slow_clients_are_dropped():
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "sse_slow_clients.py"), *ARGS],
                         capture_output=True, text=True, timeout=90, cwd=ROOT)
    lines = out.stdout.strip().splitlines()
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    m = LAST.match(lines[-1])
    assert m, lines[-1]
    clients, slow, ratio, threads, rss = m.groups()
    assert (int(clients), int(slow)) == (40, 20)
    assert float(ratio) >= 0.95
    assert int(threads) <= 64 + 8, threads  # the pool, plus the agent's own few threads
    assert float(rss) < 150, rss
    text = out.stdout
    assert "cap: 5/5 streams beyond max_streams answered 503 + Retry-After" in text
    assert "half-request clients: 5/5 dropped" in text
    assert "slots back to the readers' 40" in text
    before, during, after = map(int, re.search(
        r"threads before/during max/after: (\d+)/(\d+)/(\d+)", text).groups())
    assert after <= during  # nothing kept growing once the clients were gone
