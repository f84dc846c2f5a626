"""In-page A/B: alternate frames draw with and without a part (a patch that no-ops some canvas calls
while window.__skip), timing each frame's paint + raster (first fillRect to the bench's getImageData)."""
import sys, time, statistics
sys.path.insert(0, "bench")
import ui_frame as U
from gpuflow.core.board import SnapshotBoard
from gpuflow.transport.app import create_app
from gpuflow.transport.server import EmbeddedServer
from playwright.sync_api import sync_playwright
query, patch = sys.argv[1], sys.argv[2]
secs = float(sys.argv[3]) if len(sys.argv) > 3 else 5
SETUP = """(() => { const P = CanvasRenderingContext2D.prototype; window.__skip = false; window.__what = WHAT; window.__rec = [[], []];
let start = -1; const fr = P.fillRect, gi = P.getImageData;
P.fillRect = function(...a) { if (start < 0) start = performance.now(); return fr.apply(this, a); };
P.getImageData = function(...a) { const r = gi.apply(this, a); if (start >= 0) { window.__rec[window.__skip ? 1 : 0].push(performance.now() - start); }
  start = -1; window.__skip = !window.__skip; return r; };
const skip = (name) => { const f = P[name]; P[name] = function(...a) { if (window.__skip) return; return f.apply(this, a); }; };
%s })()"""
with EmbeddedServer(create_app(SnapshotBoard()), "127.0.0.1", 0) as server, sync_playwright() as p:
    server.serve_in_thread()
    browser = p.chromium.launch(executable_path=U.CHROMIUM, args=U.ARGS)
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(f"http://127.0.0.1:{server.port}/{query}")
    page.wait_for_function("() => window.__gpuflow && window.__gpuflow.frames > 2", timeout=20000)
    time.sleep(2)
    page.evaluate(SETUP.replace("WHAT", repr(patch)) % "")
    time.sleep(secs)
    a, b = page.evaluate("window.__rec")
    browser.close()
def q(xs, f): s = sorted(xs); return s[int(f * (len(s) - 1))]
print(f"{patch[:90]!r}: with {len(a)} frames p50 {q(a,.5):.2f} p95 {q(a,.95):.2f} | without p50 {q(b,.5):.2f} p95 {q(b,.95):.2f} | saved p50 {q(a,.5)-q(b,.5):.2f} ms ({1-q(b,.5)/q(a,.5):.0%})")
