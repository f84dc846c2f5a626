"""The page's "open in Perfetto" (gpuflow/ui/perfetto.js) in real Chromium, from the agent's page,
against a stub Perfetto UI served locally on another origin that answers Perfetto's documented
handshake ('PING' → 'PONG', then {perfetto: {buffer, title, fileName}}): the trace it receives
and the file downloaded are byte for byte the agent's /api/export; a UI that never answers, and
origins that may not hand traces over, are refused with a reason; the E key does it for the
shown window."""

from __future__ import annotations

import hashlib
import http.server
import threading
import time

import pytest
import requests
from perfetto_read import read

from .conftest import hook, open_live, until

pytestmark = pytest.mark.browser

STUB = b"""<!doctype html><meta charset="utf-8"><title>stub Perfetto UI</title><script>
window.__got = null; window.__pings = 0;
window.addEventListener('message', async (e) => {
  if (e.source !== window.opener) return;
  if (e.data === 'PING') {
    window.__pings++;
    if (!location.search.includes('silent')) e.source.postMessage('PONG', e.origin);
    return;
  }
  if (e.data && e.data.perfetto) {
    const p = e.data.perfetto;
    const digest = await crypto.subtle.digest('SHA-256', p.buffer);
    window.__got = { origin: e.origin, title: p.title, fileName: p.fileName, bytes: p.buffer.byteLength,
      sha256: [...new Uint8Array(digest)].map(b => b.toString(16).padStart(2, '0')).join('') };
  }
});
</script><p>stub</p>"""


class _Stub(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.end_headers()
        self.wfile.write(STUB)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def stub_ui():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def settled_range() -> tuple[float, float]:
    """A range the fake collector no longer adds to."""
    now = time.time()
    return now - 30, now - 1


SAVE_AND_OPEN = """async ([ui, from, to]) => {
  const m = await import('./perfetto.js');
  return await m.saveAndOpen(from, to, null, { ui, title: 'the test' });
}"""


def test_the_trace_reaches_perfetto_and_the_download_byte_for_byte(page, agent, stub_ui):
    page.goto(agent.url)
    start, end = settled_range()
    with page.expect_popup() as popup, page.expect_download() as saved:
        result = page.evaluate(SAVE_AND_OPEN, [stub_ui, start, end])
    ui = popup.value
    ui.wait_for_function("() => window.__got !== null", timeout=10000)
    got = ui.evaluate("window.__got")
    expected = requests.get(agent.url + "api/export", params={"from": repr(start), "to": repr(end)}, timeout=10).content
    assert got["sha256"] == hashlib.sha256(expected).hexdigest() and got["bytes"] == len(expected)
    assert got["origin"] == agent.url.rstrip("/") and got["title"] == "the test"
    assert got["fileName"] == f"gpuflow-{int(start)}-{int(end)}.perfetto-trace"
    with open(saved.value.path(), "rb") as fh:
        assert fh.read() == expected
    assert saved.value.suggested_filename == got["fileName"]
    assert result == {"fileName": got["fileName"], "bytes": len(expected), "opened": True}


def test_a_perfetto_ui_that_never_answers_is_given_up_with_the_file_saved(page, agent, stub_ui):
    page.goto(agent.url)
    start, end = settled_range()
    outcome = page.evaluate("""async ([ui, from, to]) => {
      const m = await import('./perfetto.js');
      const trace = await m.fetchTrace(from, to, null);
      try { await m.openInPerfetto(window.open(ui + '/?silent'), { ...trace, title: 't' }, ui, 1500); return 'posted'; }
      catch (e) { return e.message; }
    }""", [stub_ui, start, end])
    assert "did not answer" in outcome
    blocked = page.evaluate("""async () => {
      const m = await import('./perfetto.js');
      try { await m.openInPerfetto(null, { buffer: new ArrayBuffer(1) }); return 'posted'; } catch (e) { return e.message; }
    }""")
    assert "blocked the Perfetto window" in blocked


def test_only_loopback_pages_hand_traces_over(page, agent):
    page.goto(agent.url)
    verdicts = page.evaluate("""async () => {
      const m = await import('./perfetto.js');
      return ['http://127.0.0.1:7717/', 'http://localhost:7717/x', 'http://[::1]:7717/', 'https://localhost/',
              'http://gpu-box:7717/', 'http://10.0.0.5:7717/', 'file:///tmp/index.html', 'http://127.0.0.1.evil.example/']
        .map(u => m.canOpenInPerfetto(u));
    }""")
    assert verdicts == [True, True, True, True, False, False, False, False]


def test_an_export_the_agent_refuses_says_why(page, agent):
    page.goto(agent.url)
    said = page.evaluate("""async () => {
      const m = await import('./perfetto.js');
      try { await m.fetchTrace(5, 2, null); return 'fetched'; } catch (e) { return e.message; }
    }""")
    assert said == "the agent could not export: to must be after from"


def test_the_e_key_saves_the_shown_window_and_opens_it_in_perfetto(page, agent):
    # Perfetto's real address, answered by the stub inside the browser: nothing leaves the machine
    page.context.route("https://ui.perfetto.dev/**",
                       lambda route: route.fulfill(status=200, content_type="text/html", body=STUB))
    open_live(page, agent)
    until(page, "window.__gpuflow.timeline.retained !== null", timeout=20000)   # what a user sees before E does anything
    with page.expect_download() as saved, page.expect_popup() as popup:
        page.keyboard.press("e")
    ui = popup.value
    ui.wait_for_function("() => window.__got !== null", timeout=10000)
    got = ui.evaluate("window.__got")
    with open(saved.value.path(), "rb") as fh:
        data = fh.read()
    t = read(data)
    assert t.whole and t.slices and {t.path(s.track)[0] for s in t.slices} == {"pid 5000"}
    assert got["sha256"] == hashlib.sha256(data).hexdigest() and got["fileName"] == saved.value.suggested_filename


def test_the_e_key_before_the_agent_said_what_it_keeps_says_so_and_opens_nothing(page, agent):
    # the page's questions about the retained range held unanswered: the range is not yet known
    held = []
    page.route("**/api/history?**", lambda route: held.append(route))
    page.route("**/api/window?**", lambda route: held.append(route))
    opened = []
    page.on("popup", lambda popup: opened.append(popup))
    open_live(page, agent)
    page.keyboard.press("e")
    until(page, "window.__gpuflow.timeline.texts[4] !== ''")
    tl = hook(page, "timeline")
    assert tl["texts"][4] == "still asking the agent what it keeps: try again in a moment"
    assert tl["retained"] is None and not tl["nothingKept"] and tl["exports"] == 0 and not opened
    assert held   # the questions were asked, and are held
    page.unroute("**/api/history?**")   # held questions go on to the agent
    page.unroute("**/api/window?**")
    until(page, "window.__gpuflow.timeline.retained !== null", timeout=20000)
