"""A minimal Server-Sent Events client for the benchmarks: raw socket, one event at a time.

Yields (receive_time_ns, event_name, data_text) for each complete event, with the receive time
taken the moment the event's last line arrived. No dependencies; used by bench/latency.py and
scripts/gpu-check (which run where only the standard library is guaranteed).
"""

from __future__ import annotations

import socket
import time
from typing import Iterator


def connect(host: str, port: int, path: str = "/api/stream", timeout: float = 10.0) -> socket.socket:
    deadline = time.monotonic() + timeout
    while True:
        try:
            sock = socket.create_connection((host, port), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    request = (f"GET {path} HTTP/1.1\r\nHost: localhost:{port}\r\nAccept: text/event-stream\r\n"
               "Cache-Control: no-cache\r\n\r\n")
    sock.sendall(request.encode())
    return sock


def events(sock: socket.socket) -> Iterator[tuple[int, str, str]]:
    """Parse the HTTP response head, then chunked or plain SSE, event by event."""
    reader = sock.makefile("rb")
    status = reader.readline()
    if b" 200 " not in status:
        raise RuntimeError(f"stream refused: {status!r}")
    chunked = False
    while True:
        line = reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        if line.lower().startswith(b"transfer-encoding:") and b"chunked" in line.lower():
            chunked = True
    body = _dechunk(reader) if chunked else _plain(reader)
    buffer = b""
    for piece in body:
        buffer += piece
        while b"\n\n" in buffer:
            raw, buffer = buffer.split(b"\n\n", 1)
            now = time.time_ns()
            name, data = "message", []
            for field in raw.decode("utf-8").split("\n"):
                if field.startswith("event:"):
                    name = field[6:].strip()
                elif field.startswith("data:"):
                    data.append(field[5:].lstrip(" ") if field[5:6] == " " else field[5:])
            if data:
                yield now, name, "\n".join(data)


def _plain(reader) -> Iterator[bytes]:
    while True:
        piece = reader.read1(65536)
        if not piece:
            return
        yield piece


def _dechunk(reader) -> Iterator[bytes]:
    while True:
        size_line = reader.readline()
        if not size_line:
            return
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            return
        data = reader.read(size)
        reader.readline()
        yield data
