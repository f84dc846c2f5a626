"""Where the network thread's time goes on a watched frame, in-process: orjson, the reader (with its rows), taking the frame (with the lane keeper).

    python frame_parts.py FRAMES TEMPLATES   (TEMPLATES: a bench/hub.py run's templates.json)
"""
import json, sys, time
from pathlib import Path
from gpuflow.collectors.fleet.host_table import HostTable
from gpuflow.collectors.fleet.link import Link
from gpuflow.collectors.fleet import link as linkmod, lane_keeper
from gpuflow.collectors.fleet.sse_events import SseParser
from gpuflow.collectors.fleet.targets import parse_url
import orjson
class Hub:
    credentials = None
    table = HostTable()
    def changed(self, urgent): pass
    def watched(self, name): return True
name = "replay-0001"
frames = [e.replace("@HOST@", name).replace("@TS@", "1.0").encode() for e in json.loads(Path(sys.argv[2]).read_text())['full']]
link = Link(parse_url("http://127.0.0.1:9"), Hub())
reader = link.new_reader()
parser = SseParser(64 << 20)
acc = {}
def timed(name, fn):
    def w(*a, **k):
        t = time.perf_counter()
        try: return fn(*a, **k)
        finally: acc[name] = acc.get(name, 0) + time.perf_counter() - t
    return w
lane_keeper.LaneKeeper.apply = timed('lanes.apply', lane_keeper.LaneKeeper.apply)
linkmod.orjson = type('o', (), {'loads': staticmethod(timed('orjson', orjson.loads))})
reader.read = timed('reader.read', reader.read)
import gpuflow.collectors.fleet.parse as parse
link._take = timed('_take', link._take)
n = int(sys.argv[1])
for i in range(n + 80):
    if i == 80: acc.clear(); t0 = time.perf_counter()
    link._on_bytes(frames[i % len(frames)], parser, reader, 'full')
tot = time.perf_counter() - t0
print(f'total {1e6*tot/n:.1f} us/frame')
for k, v in acc.items(): print(f'{k:12s} {1e6*v/n:.1f} us')
