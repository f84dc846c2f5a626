"""The network thread's CPU a watched frame in-process, one host or H hosts' links interleaved.

    python hosts_interleaved.py H FRAMES TEMPLATES   (TEMPLATES: a bench/hub.py run's templates.json)
"""
import json, sys, time
from pathlib import Path
from gpuflow.collectors.fleet.host_table import HostTable
from gpuflow.collectors.fleet.link import Link
from gpuflow.collectors.fleet.sse_events import SseParser
from gpuflow.collectors.fleet.targets import parse_url
class Hub:
    credentials = None
    table = HostTable()
    def changed(self, urgent): pass
    def watched(self, name): return True
H = int(sys.argv[1]); n = int(sys.argv[2])
tmpl = json.loads(Path(sys.argv[3]).read_text())['full']
hub = Hub()
links = []
for h in range(H):
    name = f"replay-{h:04d}"
    frames = [e.replace("@HOST@", name).replace("@TS@", "1.0").encode() for e in tmpl]
    link = Link(parse_url(f"http://127.0.0.1:{9000+h}"), hub)
    links.append((link, link.new_reader(), SseParser(64 << 20), frames))
k = 0
for i in range(n // H + 80):
    if i == 80: t0 = time.process_time()
    for link, reader, parser, frames in links:
        link._on_bytes(frames[i % len(frames)], parser, reader, 'full')
print(f"{H} hosts: {1e6*(time.process_time()-t0)/((n//H)*H):.1f} us a frame")
