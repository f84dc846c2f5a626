"""Logging in to an agent that has a token, in real Chromium: what the browser keeps, and what
another web server on the same host gets.

* The token of the login URL leaves the address bar and the tab's history entries at once, and
  is not in the page; a reload stays logged in (the tab's sessionStorage).
* A token the user gave (not printed) is asked for by the page's form; a wrong one is refused
  and asked for again. Tokens with characters URL syntax uses work, in the login URL gpuflow
  would print (percent-encoded) and typed into the form; a base64 token works typed raw.
* **A foreign port**: browsers send a host's cookies to every port of that host, so a web server
  another local user runs on the same host (visited by the victim for any reason) received the
  agent's login cookie and could replay it. Here such a server records everything the victim's
  browser sends it, then replays every header of it to the agent: nothing opens a data route,
  and nothing it received holds the token.
"""

from __future__ import annotations

import http.server
import re
import secrets
import signal
import threading
from urllib.parse import unquote

import pytest

from cli_process import gpuflow_env, start_gpuflow, stop_gpuflow
from gpuflow.cli.serving import login_url
from servers import http_get

from .conftest import FAKE, VIEWPORT, PageErrors, hook, until

pytestmark = pytest.mark.browser

URL = re.compile(r"http://\S+")
DATA_ROUTES = ["/api/snapshot", "/api/stream", "/metrics", "/healthz"]
STRONG = "Zq7-Lp2_xK9vW4tYb8NcE3uR"
#: printable ASCII, every character URL syntax gives a meaning to, and strong
SPECIAL = "a&b#c%41+d/e=f?g;h:i@j~k!l$m'n(o)p*q,r[s]t{u}v|w^x`y\"z<A>B\\C" + secrets.token_hex(4)


class Agent:
    """``gpuflow watch`` with the fake collector and a token: its port and what it printed."""

    def __init__(self, *flags: str, **variables: str) -> None:
        env = gpuflow_env(GPUFLOW_DISABLED_PLUGINS="nvml,cupti", **FAKE, **variables)
        self.proc, self.port = start_gpuflow("watch", "--port", "0", "--plugin", "gpuflow.testing.fake_collector",
                                             *flags, env=env)
        self.printed_url = URL.search(self.proc.printed).group(0)
        self.base = f"http://127.0.0.1:{self.port}/"

    def stop(self) -> str:
        return stop_gpuflow(self.proc, signal.SIGTERM)


@pytest.fixture
def context(browser):
    ctx = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
    yield ctx
    ctx.close()


def new_page(context):
    page = context.new_page()
    page.errors = PageErrors(page).errors
    return page


def live(page, frames: int = 2) -> None:
    until(page, f"window.__gpuflow.connection === 'live' && window.__gpuflow.frames >= {frames}", timeout=15000)


def history_urls(context, page) -> list[str]:
    cdp = context.new_cdp_session(page)
    try:
        return [e["url"] for e in cdp.send("Page.getNavigationHistory")["entries"]]
    finally:
        cdp.detach()


def test_the_login_url_leaves_the_token_in_no_address_bar_history_entry_or_page(context):
    agent = Agent("--token", "auto")
    try:
        token = unquote(agent.printed_url.split("#token=", 1)[1])
        page = new_page(context)
        page.goto(agent.printed_url)
        live(page)
        for text in (page.url, *history_urls(context, page), page.content()):
            assert token not in text and "token=" not in text, text[:200]
        assert page.url == agent.printed_url.split("#", 1)[0]
        page.reload()
        live(page)     # this tab keeps its token
        typed = new_page(context)   # the form Jupyter users type: ?token=
        typed.goto(f"{agent.base}?token={token}")
        live(typed)
        assert all(token not in u for u in (typed.url, *history_urls(context, typed)))
        assert not page.errors and not typed.errors
    finally:
        agent.stop()


def test_the_page_asks_for_a_token_it_was_not_given_and_refuses_a_wrong_one(context):
    agent = Agent(GPUFLOW_TOKEN=STRONG)
    try:
        assert agent.printed_url == agent.base, "a token the user gave is not printed"
        page = new_page(context)
        page.goto(agent.base)
        until(page, "window.__gpuflow.connection === 'locked'")
        assert page.locator("#login").is_visible() and hook(page, "frames") == 0
        page.fill("#login-token", STRONG + "x")
        page.press("#login-token", "Enter")
        until(page, "document.getElementById('login-why').textContent.includes('did not accept')")
        assert hook(page, "connection") == "locked" and hook(page, "frames") == 0
        page.fill("#login-token", STRONG)
        page.press("#login-token", "Enter")
        live(page)
        assert not page.locator("#login").is_visible()
        assert STRONG not in page.content()
        assert not page.errors
    finally:
        agent.stop()


def test_tokens_with_url_syntax_characters_work_in_the_login_url_and_the_form(context):
    agent = Agent(GPUFLOW_TOKEN=SPECIAL)
    try:
        assert http_get(agent.port, "/api/snapshot", {"Authorization": f"Bearer {SPECIAL}"})[0] == 200
        page = new_page(context)
        page.goto(login_url(agent.base, SPECIAL))
        live(page)
        assert "token" not in page.url
        form = new_page(context)
        form.goto(agent.base)
        until(form, "window.__gpuflow.connection === 'locked'")
        form.fill("#login-token", SPECIAL)
        form.press("#login-token", "Enter")
        live(form)
        assert not page.errors and not form.errors
    finally:
        agent.stop()


def test_a_base64_token_typed_raw_into_the_login_url_works(context):
    """'+' reads as a space in a URL's parameters; a token has no spaces, so the page undoes it."""
    token = "Zm9v+YmFy/Qk9P+cXV4/eHl6+MTIz=="
    agent = Agent(GPUFLOW_TOKEN=token)
    try:
        page = new_page(context)
        page.goto(f"{agent.base}#token={token}")
        live(page)
        assert not page.errors
    finally:
        agent.stop()


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Another local user's web server: keeps every request's headers, answers a plain page."""

    seen: list[dict[str, str]] = []

    def do_GET(self) -> None:
        type(self).seen.append({k: v for k, v in self.headers.items()})
        body = b"<!doctype html><title>elsewhere</title><img src='/pixel.png'>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def test_a_web_server_on_another_port_of_the_host_gets_nothing_it_can_replay(context):
    agent = Agent("--token", "auto")
    recorder = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=recorder.serve_forever, daemon=True).start()
    _Recorder.seen = []
    try:
        victim = new_page(context)
        victim.goto(agent.printed_url)     # the victim logs in as gpuflow told them to
        live(victim)
        elsewhere = new_page(context)      # and visits another local web server, on the same host
        elsewhere.goto(f"http://127.0.0.1:{recorder.server_address[1]}/")
        elsewhere.wait_for_load_state("networkidle")
        assert _Recorder.seen, "the foreign server saw no request"
        token = unquote(agent.printed_url.split("token=", 1)[1])
        for headers in _Recorder.seen:
            assert "Cookie" not in headers and "Authorization" not in headers, headers
            assert not any(token in v for v in headers.values())
        for headers in _Recorder.seen:  # the foreign server replays everything it got
            replay = {k: v for k, v in headers.items() if k.lower() not in ("host", "content-length")}
            for route in DATA_ROUTES:
                status, _, body = http_get(agent.port, route, replay)
                assert status == 401, (route, status, body[:80])
        live(victim, frames=hook(victim, "frames") + 1)   # the victim's page goes on
        assert not victim.errors
    finally:
        recorder.shutdown()
        recorder.server_close()
        agent.stop()
