"""Fixtures for the browser tests: Debian's Chromium driven by Playwright, and real agents.

The agent is the real command, ``python -m gpuflow watch --port P --plugin
gpuflow.testing.fake_collector``, in a subprocess with the built-in collectors disabled
(GPUFLOW_DISABLED_PLUGINS=nvml,cupti) and the fake collector's scenario set through
``GPUFLOW_FAKE_*``. It serves the page under its real Content-Security-Policy, so a page that
needs anything the CSP forbids fails here.

The browser is tests/conftest.py's ``browser`` (tests/support/chromium.py: never ``playwright
install``; under CI=true a missing browser is a failure). Screenshots go to tests/artifacts/
(git-ignored) for a person to look at.
"""

from __future__ import annotations

import functools
import http.server
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests
from chromium import ARTIFACTS, until
from servers import free_port  # the ui tests import it from here

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "gpuflow" / "ui" / "index.html"
VIEWPORT = {"width": 1400, "height": 900}

#: the fake collector's scenario for the shared agent: 3 GPUs (GPU 2 lost), 4 processes, one
#: traced process with 4 lanes, a problem, slow enough that a page and /api/snapshot can agree
FAKE = {"GPUFLOW_FAKE_GPUS": "3", "GPUFLOW_FAKE_PROCS": "4", "GPUFLOW_FAKE_TRACED": "1",
        "GPUFLOW_FAKE_LANES": "4", "GPUFLOW_FAKE_SPANS": "6", "GPUFLOW_FAKE_SPAN_CAP": "40",
        "GPUFLOW_FAKE_LOST_GPU": "2", "GPUFLOW_FAKE_RATE_HZ": "4",
        "GPUFLOW_FAKE_PROBLEM": "fake collector: synthetic data"}

#: a busy traced program: 16 lanes, each with more new spans per frame (400 at 5 frames/s) than
#: its share of the stream's span budget (16,000/s over all lanes: 200 per lane per frame), so
#: every delta carries only the newest spans of each lane and says how many it skipped
BUSY = {**FAKE, "GPUFLOW_FAKE_LANES": "16", "GPUFLOW_FAKE_SPANS": "400", "GPUFLOW_FAKE_SPAN_CAP": "512",
        "GPUFLOW_FAKE_RATE_HZ": "5"}


class PageErrors:
    """Uncaught exceptions and CSP refusals seen by a page; asserted empty at teardown."""

    def __init__(self, page) -> None:
        self.errors: list[str] = []
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        page.on("console", self._console)

    def _console(self, msg) -> None:
        if msg.type == "error" and ("Content Security Policy" in msg.text or "Refused to" in msg.text):
            self.errors.append(f"console: {msg.text}")


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
    pg = context.new_page()
    errs = PageErrors(pg)
    pg.errors = errs.errors
    yield pg
    context.close()
    assert not errs.errors, errs.errors


class Agent:
    """One ``gpuflow watch`` subprocess with the fake collector (or, with ``plugin=None``, only the
    built-in collectors ``fake`` leaves enabled, e.g. the NVML one on its fake backend); can be
    killed and restarted."""

    def __init__(self, port: int, fake: dict[str, str], cwd: Path = ROOT,
                 plugin: str | None = "gpuflow.testing.fake_collector", args: tuple[str, ...] = ()) -> None:
        self.port = port
        self.fake = fake
        self.cwd = cwd
        self.plugin = plugin
        self.args = args
        #: the agent's token, when the scenario gives it one: every request here sends it
        self.token = fake.get("GPUFLOW_TOKEN")
        self.proc: subprocess.Popen | None = None
        self.url = f"http://127.0.0.1:{port}/"

    def start(self, timeout: float = 20.0) -> float:
        """Start and wait until /healthz answers 200; returns the monotonic time it did."""
        env = dict(os.environ)
        env.update({"GPUFLOW_DISABLED_PLUGINS": "nvml,cupti", "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1",
                    "PYTHONUNBUFFERED": "1"})
        env.update(self.fake)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gpuflow", "watch", "--port", str(self.port)]
            + (["--plugin", self.plugin] if self.plugin else []) + list(self.args),
            cwd=self.cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                out = self.proc.stdout.read().decode(errors="replace")
                raise AssertionError(f"agent exited with {self.proc.returncode}:\n{out}")
            try:
                if requests.get(self.url + "healthz", headers=self._auth(), timeout=1).status_code == 200:
                    return time.monotonic()
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        raise AssertionError(f"agent on port {self.port} not healthy within {timeout} s")

    def kill(self) -> None:
        """SIGKILL: no graceful end of the streams, the browser sees the connection drop."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(5)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def _auth(self, token: str | None = None) -> dict[str, str]:
        token = token or self.token
        return {"Authorization": f"Bearer {token}"} if token else {}

    def snapshot(self) -> dict:
        r = requests.get(self.url + "api/snapshot", headers=self._auth(), timeout=5)
        r.raise_for_status()
        return r.json()

    def health(self) -> dict:
        return requests.get(self.url + "healthz", headers=self._auth(), timeout=5).json()

    def get(self, route: str, token: str | None = None, **params) -> dict:
        """A data route's JSON answer (``api/history``, ``api/window``), ``params`` as given."""
        r = requests.get(self.url + route, params={k: str(v) for k, v in params.items()}, headers=self._auth(token),
                         timeout=10)
        r.raise_for_status()
        return r.json()


class _QuietFiles(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="session")
def static_ui(browser):
    """The page's folder (gpuflow/ui) behind a plain static file server, no agent: its URL."""
    handler = functools.partial(_QuietFiles, directory=str(PAGE.parent))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/index.html"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def agent(browser):
    a = Agent(free_port(), FAKE)
    a.start()
    yield a
    a.stop()


@pytest.fixture(scope="session")
def still_agent(browser):
    """An agent whose fake collector builds one part and then nothing changes (rate 0): what the
    page shows can be compared with /api/snapshot exactly, and its stream stays quiet."""
    a = Agent(free_port(), {**FAKE, "GPUFLOW_FAKE_RATE_HZ": "0"})
    a.start()
    yield a
    a.stop()


@pytest.fixture
def fresh_agent(browser):
    """An agent of its own, for tests that kill it."""
    a = Agent(free_port(), FAKE)
    a.start()
    yield a
    a.stop()


@pytest.fixture
def busy_agent(browser):
    """An agent of its own whose traced program outruns the stream's span budget."""
    a = Agent(free_port(), BUSY)
    a.start()
    yield a
    a.stop()


def open_live(page, agent, frames: int = 3):
    page.goto(agent.url)
    until(page, f"window.__gpuflow.frames >= {frames} && window.__gpuflow.connection === 'live'",
                           timeout=15000)
    return page


def hook(page, name: str):
    return page.evaluate(f"window.__gpuflow.{name}")


def shot(page, name: str) -> Path:
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path
