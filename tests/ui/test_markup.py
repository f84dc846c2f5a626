"""A process that rewrote its own title to markup is shown as text, in real Chromium.

Command-line redaction keeps the first word of ``argv[0]``, and a program can put anything
there (``setproctitle``), spaces aside: ``<img/src=x/onerror=…>`` is one word. Its name
(``/proc/<pid>/comm``) is its own to set too. Here a real process does both; the agent describes
it as the NVML collector would (tests/support/titled_process.py: procinfo's reader and
redaction), and the page must show the markup as characters: no element made from it, nothing
run, no Content-Security-Policy refusal (which would mean the browser was asked to run it).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from child_env import with_support
from cli_process import start_gpuflow, stop_gpuflow

from .conftest import hook, shot, until

pytestmark = pytest.mark.browser

ARGV0 = "<img/src=x/onerror=window.__pwned=1>"
COMM = "<svg/onload=1>"   # comm holds 15 bytes at most
TITLE_SELF = f"open('/proc/self/comm', 'w').write({COMM!r}); import time; time.sleep(120)"


@pytest.fixture
def titled_process():
    """A real process whose argv[0] and comm are markup."""
    proc = subprocess.Popen([ARGV0, "-c", TITLE_SELF], executable=sys.executable)
    try:
        deadline = time.monotonic() + 10
        while Path(f"/proc/{proc.pid}/comm").read_text().strip() != COMM:
            assert proc.poll() is None and time.monotonic() < deadline, "the process did not retitle itself"
            time.sleep(0.05)
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_markup_in_a_process_title_is_shown_as_text(page, titled_process):
    with open(f"/proc/{titled_process.pid}/cmdline", "rb") as f:
        assert f.read().split(b"\0")[0].decode() == ARGV0
    env = with_support({"GPUFLOW_DISABLED_PLUGINS": "nvml,cupti", "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1",
                        "PYTHONUNBUFFERED": "1", "GPUFLOW_TEST_TITLED_PID": str(titled_process.pid)})
    agent, port = start_gpuflow("watch", "--port", "0", "--interval", "200", "--plugin", "titled_process",
                                env=env)
    try:
        page.goto(f"http://127.0.0.1:{port}/")
        node = f"p:{titled_process.pid}"
        until(page, f"window.__gpuflow.graph.nodes.includes('{node}')", timeout=15000)
        r = page.evaluate(f"window.__gpuflow.nodeRect('{node}')")
        page.mouse.move(r["x"] + 12, r["y"] + 6)
        until(page, "window.__gpuflow.hover && window.__gpuflow.hover.tip !== null")
        tip = hook(page, "hover")["tip"]
        assert COMM in tip and ARGV0 in tip, tip
        shot(page, "live-markup-title")
        made = page.evaluate("""() => ({
            img: document.querySelectorAll('img').length, svg: document.querySelectorAll('svg').length,
            scripts: document.querySelectorAll('script').length,
            handlers: [...document.querySelectorAll('*')].filter(e => [...e.attributes].some(a => a.name.startsWith('on'))).length,
            pwned: window.__pwned === undefined ? null : window.__pwned })""")
        assert made == {"img": 0, "svg": 0, "scripts": 1, "handlers": 0, "pwned": None}, made
    finally:
        stop_gpuflow(agent, signal.SIGTERM)
