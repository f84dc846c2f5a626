"""Which main-thread work fills the longest frame intervals of ?demo=bench&scrub (a Chrome trace)."""
import json, sys, time, collections
sys.path.insert(0, "bench")
import ui_frame as U
from gpuflow.core.board import SnapshotBoard
from gpuflow.transport.app import create_app
from gpuflow.transport.server import EmbeddedServer
from playwright.sync_api import sync_playwright
query = sys.argv[1]; secs = float(sys.argv[2]) if len(sys.argv) > 2 else 4
with EmbeddedServer(create_app(SnapshotBoard()), "127.0.0.1", 0) as server, sync_playwright() as p:
    server.serve_in_thread()
    browser = p.chromium.launch(executable_path=U.CHROMIUM, args=U.ARGS)
    page = browser.new_page(viewport={"width": 1600, "height": 1000})
    page.goto(f"http://127.0.0.1:{server.port}/{query}")
    page.wait_for_function("() => window.__gpuflow && window.__gpuflow.frames > 2", timeout=20000)
    time.sleep(2)
    browser.start_tracing(page=page, categories=["devtools.timeline", "disabled-by-default-devtools.timeline", "v8", "blink.canvas", "toplevel"])
    time.sleep(secs)
    raw = browser.stop_tracing()
    browser.close()
ev = json.loads(raw)["traceEvents"]
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "thread_name"}
main = [k for k, v in names.items() if v == "CrRendererMain"]
mk = max(main, key=lambda k: sum(1 for e in ev if (e.get("pid"), e.get("tid")) == k))
es = sorted([e for e in ev if (e.get("pid"), e.get("tid")) == mk and e.get("ph") == "X" and "dur" in e], key=lambda e: e["ts"])
raf = [e for e in es if e["name"] == "FireAnimationFrame"]
iv = [(raf[i]["ts"], raf[i + 1]["ts"]) for i in range(len(raf) - 1)]
durs = sorted(b - a for a, b in iv)
print(f"{len(raf)} rAFs, interval p50 {durs[len(durs)//2]/1e3:.1f} p90 {durs[int(.9*len(durs))]/1e3:.1f} p95 {durs[int(.95*len(durs))]/1e3:.1f} ms")
cut = durs[int(.9 * len(durs))]
def content(a, b):
    c = collections.Counter()
    for e in es:
        if e["ts"] >= a and e["ts"] < b:
            nm = e["name"]
            if nm == "FunctionCall": nm += " " + str(e.get("args", {}).get("data", {}).get("functionName", "")) + " " + str(e.get("args", {}).get("data", {}).get("url", "")).rsplit("/", 1)[-1]
            c[nm] += min(e["dur"], b - e["ts"])
    return c
slow, fast = collections.Counter(), collections.Counter(); ns = nf = 0
for a, b in iv:
    if b - a >= cut: slow.update(content(a, b)); ns += 1
    else: fast.update(content(a, b)); nf += 1
keys = set(k for k, v in slow.items() if v / ns > 200) | set(k for k, v in fast.items() if v / nf > 200)
print(f"{'event (inclusive µs per frame)':60} slow({ns}) fast({nf})")
for k in sorted(keys, key=lambda k: -(slow[k] / ns - fast[k] / nf)):
    print(f"{k[:60]:60} {slow[k]/ns:8.0f} {fast[k]/nf:8.0f}")
