"""The page's encoding of a watched host's frame, in-process: whole, without its lanes, without its traced process.

    python enc_parts.py TEMPLATES   (TEMPLATES: a bench/hub.py run's templates.json)
"""
import json, sys, time
from dataclasses import replace
from pathlib import Path
from gpuflow.collectors.fleet.host_table import HostTable
from gpuflow.collectors.fleet.link import Link
from gpuflow.collectors.fleet.sse_events import SseParser
from gpuflow.collectors.fleet.targets import parse_url
from gpuflow.core.board import SnapshotBoard
from gpuflow.core.merge import merge_parts
from gpuflow.transport.frames import FrameEncoder
from gpuflow.transport.stream_views import HostIndex, HostViewOf
class Hub:
    credentials = None
    table = HostTable()
    def changed(self, urgent): pass
    def watched(self, name): return True
name = "replay-0001"
frames = [e.replace("@HOST@", name).replace("@TS@", "1.0").encode() for e in json.loads(Path(sys.argv[1]).read_text())['full']]
hub = Hub()
link = Link(parse_url("http://127.0.0.1:9"), hub)
reader = link.new_reader()
parser, view = SseParser(64 << 20), HostViewOf(name, HostIndex(), False)
snaps = []
for i in range(400):
    link._on_bytes(frames[i % len(frames)], parser, reader, 'full')
    s = view(merge_parts([hub.table.part()], seq=i + 1, timestamp=1.0 + i * 0.1))
    snaps.append(s)
def run(snaps):
    board = SnapshotBoard(); enc = FrameEncoder(board)
    t = 0.0
    for s in snaps:
        board.publish(s)
        t0 = time.perf_counter(); f = enc.current(); f.delta; t += time.perf_counter() - t0
    return 1e6 * t / len(snaps)
nolanes = [replace(s, traced=tuple(replace(t, lanes=()) for t in s.traced)) for s in snaps]
notraced = [replace(s, traced=()) for s in snaps]
for r in range(3):
    print(f"encode: whole {run(snaps):.1f} us, no lanes {run(nolanes):.1f} us, no traced {run(notraced):.1f} us")
