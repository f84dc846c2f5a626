"""Replay agents for bench/hub.py: one process serving a recorded agent stream on many loopback ports.

    python bench/hub_replay.py TEMPLATES.json N

``TEMPLATES.json`` (written by bench/hub.py from a real agent) holds two lists of SSE events as
text, with ``@HOST@`` where the agent's name was and ``@TS@`` where a frame's timestamp was:
``summary`` (full frames of ``/api/stream?detail=summary``, one per second) and ``full`` (a full
frame and the deltas after it, of ``/api/stream`` at its rate), and ``full_hz``. Each of the
``N`` ports (``replay-0000`` ... as host names) answers ``GET /api/stream?detail=summary`` with
the summary frames in a loop, one a second, each timestamped when it is sent, and any other
``/api/stream`` with the full-detail frames in a loop at ``full_hz`` (the loop starts again with
its full frame, so every delta follows its base). Anything else is 404. The ports are printed as
one JSON line once every one listens; a line ``count`` on stdin is answered with one JSON line,
the frames written so far of each kind (``{"summary": n, "full": m}``: a frame counts once its
write drained, so a hub short of CPU, which reads less and fills the socket, is sent fewer).

Constraints: loopback only; standard library only; each connection costs one task and a string
replace per frame; ends on SIGTERM or when stdin closes.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import sys
import time

HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
        b"Cache-Control: no-cache\r\nConnection: close\r\n\r\nretry: 2000\n\n")
NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


#: frames written so far, by kind
SENT = {"summary": 0, "full": 0}


async def serve(templates: dict, index: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    name = f"replay-{index:04d}".encode()
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        path = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b""
        if not path.startswith(b"/api/stream"):
            writer.write(NOT_FOUND)
            await writer.drain()
            return
        summary = b"detail=summary" in path
        kind = "summary" if summary else "full"
        frames = templates[kind]
        period = 1.0 if summary else 1.0 / templates["full_hz"]
        writer.write(HEAD)
        i = random.randrange(len(frames)) if summary else 0
        await asyncio.sleep(random.uniform(0, period))   # the agents are not in step
        while True:
            event = frames[i % len(frames)].replace(b"@HOST@", name).replace(b"@TS@", repr(time.time()).encode())
            writer.write(event)
            await writer.drain()
            SENT[kind] += 1
            i += 1
            await asyncio.sleep(period)
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError,
            asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def main() -> None:
    path, n = sys.argv[1], int(sys.argv[2])
    with open(path) as f:
        raw = json.load(f)
    templates = {"summary": [e.encode() for e in raw["summary"]], "full": [e.encode() for e in raw["full"]],
                 "full_hz": raw["full_hz"]}
    servers = []
    for i in range(n):
        servers.append(await asyncio.start_server(
            lambda r, w, i=i: serve(templates, i, r, w), "127.0.0.1", 0, backlog=64))
    print(json.dumps([s.sockets[0].getsockname()[1] for s in servers]), flush=True)
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, done.set)
    def on_stdin() -> None:
        got = sys.stdin.buffer.read1(4096)
        if not got:
            done.set()
        for _ in range(got.count(b"count\n")):
            print(json.dumps(SENT), flush=True)
    loop.add_reader(sys.stdin.fileno(), on_stdin)
    await done.wait()
    for s in servers:
        s.close()


if __name__ == "__main__":
    asyncio.run(main())
