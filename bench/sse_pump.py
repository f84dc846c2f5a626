"""Shared pieces of the SSE load benches (sse_fanout.py, sse_slow_clients.py): many stream
connections on one selector, read without threads.

* :class:`StreamConn` — one non-blocking connection to /api/stream; ``feed`` counts bytes and
  records each complete event's sequence number (from its ``id:``) and whether it was a full
  frame; a ``probe`` connection only keeps what it received (a status line to look at);
* :func:`pump` — reads every ready connection until a deadline, marking a connection closed when
  the server ends it;
* :func:`frame_ratios` — per connection, the share of the frames produced in a window it got;
* :func:`stop_agent` — terminate the agent under test, kill it if it does not go;
* :func:`free_port`, :func:`cpu_seconds`, :func:`children` — what both benches read from the OS.

Constraints: standard library only; the benches run it in one thread for hundreds of connections,
so ``feed`` parses only complete events and only their first lines.
"""

from __future__ import annotations

import os
import re
import selectors
import socket
import subprocess
import time

#: an event's id (boot epoch - sequence) and its frame kind
EVENT_RE = re.compile(rb"\nid: \d+-(\d+)\nevent: snapshot\ndata: \{\"frame\":\"(full|delta)\"")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15)


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def stream_request(port: int, *, complete: bool = True) -> bytes:
    """The GET /api/stream request; ``complete=False`` leaves its head unfinished (no blank line)."""
    head = f"GET /api/stream HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
    return (head + "\r\n").encode() if complete else head.encode()


class StreamConn:
    """One connection to /api/stream; ``kind`` is what the bench makes of it (reader, never, …)."""

    __slots__ = ("sock", "kind", "buf", "seqs", "fulls", "bytes", "first_at", "opened_at",
                 "closed_at", "head")

    def __init__(self, sock: socket.socket, kind: str = "reader") -> None:
        self.sock, self.kind = sock, kind
        self.buf = b""
        self.seqs: list[int] = []
        self.fulls = 0
        self.bytes = 0
        self.first_at: float | None = None
        self.opened_at = time.monotonic()
        self.closed_at: float | None = None
        self.head = b""

    def feed(self, data: bytes) -> None:
        self.bytes += len(data)
        if self.kind == "probe":
            self.head += data
            return
        self.buf += data
        end = self.buf.rfind(b"\n\n")
        if end < 0:
            return
        done, self.buf = b"\n" + self.buf[:end + 2], self.buf[end + 2:]
        for m in EVENT_RE.finditer(done):
            self.seqs.append(int(m.group(1)))
            if m.group(2) == b"full":
                self.fulls += 1
            if self.first_at is None:
                self.first_at = time.monotonic()


def pump(sel: selectors.BaseSelector, until: float, tick: float = 0.25) -> None:
    """Read every ready connection registered on ``sel`` (data: its StreamConn) until ``until``."""
    while True:
        left = until - time.monotonic()
        if left <= 0:
            return
        for key, _ in sel.select(timeout=min(left, tick)):
            c: StreamConn = key.data
            try:
                data = c.sock.recv(262144)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                sel.unregister(c.sock)
                c.closed_at = time.monotonic()
                continue
            c.feed(data)


def frame_ratios(conns: list[StreamConn], seq0: int, seq1: int) -> list[float]:
    """Per connection, the share of the snapshots seq0 < seq <= seq1 it received."""
    produced = seq1 - seq0
    return [len({s for s in c.seqs if seq0 < s <= seq1}) / produced for c in conns]


def stop_agent(agent: subprocess.Popen, timeout: float = 15.0) -> None:
    agent.terminate()
    try:
        agent.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        agent.kill()
