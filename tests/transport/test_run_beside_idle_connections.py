"""``gpuflow run`` with its embedded server under a crowd: the program's exit status still comes
back, and Ctrl-C stops everything within seconds with streams and hundreds of idle connections
open (the head reader reaps no child and holds no thread that would keep the process alive)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from cli_process import URL_RE, gpuflow_env
from conn_crowd import Crowd, StreamWatch, timed_get
from servers import FAKE_ENV

ENV = gpuflow_env(**FAKE_ENV, GPUFLOW_FAKE_RATE_HZ="10")


def start_run(*program: str) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, "-m", "gpuflow", "run", "--port", "0", "--plugin",
                             "gpuflow.testing.fake_collector", "--linger", "--", *program],
                            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 20
    seen = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        m = URL_RE.search(line)
        if m:
            return proc, int(m.group(1))
    proc.kill()
    raise AssertionError("gpuflow run printed no URL:\n" + "".join(seen))


def test_ctrl_c_with_streams_and_a_crowd_open_stops_at_once_with_the_programs_status():
    proc, port = start_run(sys.executable, "-c", "import sys, time; time.sleep(3); sys.exit(5)")
    crowd = None
    streams = []
    try:
        assert timed_get(port, "/healthz")[0] == 200
        streams = [StreamWatch(port) for _ in range(3)]
        for s in streams:
            s.start()
        crowd = Crowd(port, silent=150, trickling=150, trickle_s=0.5).start_and_wait()
        time.sleep(4)  # the program has exited with 5; --linger keeps serving
        assert proc.poll() is None
        assert timed_get(port, "/healthz")[0] == 200
        assert all(s.arrivals for s in streams)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        status = proc.wait(timeout=15)
        took = time.monotonic() - t0
    finally:
        if crowd is not None:
            crowd.stop()
        for s in streams:
            s.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert status == 5, proc.stdout.read()
    assert took < 5, took
