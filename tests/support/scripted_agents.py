"""Scripted agents for the hub's tests: a real TCP server on loopback that answers each request with
what the test scripts, to play agents no real one would be (hostile, broken, busy, slow).

:class:`ScriptedAgent` accepts connections on a thread of its own; each request's head is read and
recorded (:attr:`ScriptedAgent.requests`: when, path, headers) and the test's ``answer(conn)``
runs on a thread per connection, writing through ``conn.send``. A :class:`Meter` (one agent's,
or one several share) counts the connections whose answer has not begun (the hub dialling them).

Constraints: loopback only; every socket has a timeout; :meth:`ScriptedAgent.close` ends the
server and every connection it holds.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Request:
    at: float
    path: str
    headers: dict[str, str] = field(default_factory=dict)


class Conn:
    """One connection: its request, and ``send`` (the first call begins the answer)."""

    def __init__(self, sock: socket.socket, request: Request, begun: Callable[[], None]) -> None:
        self.sock, self.request = sock, request
        self._begun: Callable[[], None] | None = begun

    def send(self, data: bytes) -> None:
        if self._begun is not None:
            self._begun()
            self._begun = None
        self.sock.sendall(data)

    def sse_head(self, status: str = "200 OK", extra: str = "",
                 content_type: str = "text/event-stream; charset=utf-8") -> None:
        self.send((f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nCache-Control: no-cache\r\n"
                   f"Connection: close\r\n{extra}\r\n").encode())


def frame_event(doc: dict, event_id: str = "1700000000000-1") -> bytes:
    return b"id: " + event_id.encode() + b"\nevent: snapshot\ndata: " + json.dumps(doc).encode() + b"\n\n"


def minimal_frame(name: str, seq: int = 1, boot_epoch: int = 1_700_000_000_000, **extra) -> dict:
    """The smallest schema-4 full frame an agent sends: a host, one device, nothing else."""
    host = {"hostname": name, "name": name, "boot_epoch": boot_epoch, "interval_s": 0.2, "problems": []}
    doc = {"frame": "full", "base_seq": None, "schema": 4, "seq": seq, "timestamp": time.time(),
           "host": host, "hosts": [], "sources": ["scripted"],
           "devices": [{"index": 0, "uuid": "GPU-scripted", "host": name}], "processes": [],
           "traced": [], "traced_retired": []}
    doc.update(extra)
    return doc


class Meter:
    """Connections whose answer has not begun, now and at most; one may serve several agents."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.waiting = 0
        self.most_waiting = 0

    def add(self, n: int) -> None:
        with self.lock:
            self.waiting += n
            self.most_waiting = max(self.most_waiting, self.waiting)


class ScriptedAgent:
    def __init__(self, answer: Callable[[Conn], None], meter: Meter | None = None) -> None:
        self.answer = answer
        self.requests: list[Request] = []
        self.meter = meter if meter is not None else Meter()
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0), backlog=128)
        self._server.settimeout(0.2)
        self.port = self._server.getsockname()[1]
        self._socks: list[socket.socket] = []
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                sock, _ = self._server.accept()
            except OSError:
                continue
            sock.settimeout(10)
            with self._lock:
                self._socks.append(sock)
            self.meter.add(1)
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _begun(self) -> None:
        self.meter.add(-1)

    def _serve(self, sock: socket.socket) -> None:
        done = [False]

        def begun() -> None:
            done[0] = True
            self._begun()
        try:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                chunk = sock.recv(4096)
                if not chunk:
                    return
                head += chunk
            lines = head.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
            words = lines[0].split(" ")
            headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
            request = Request(time.monotonic(), words[1] if len(words) > 1 else "", headers)
            with self._lock:
                self.requests.append(request)
            self.answer(Conn(sock, request, begun))
        except OSError:
            pass
        finally:
            if not done[0]:
                self._begun()
            try:
                sock.close()
            except OSError:
                pass

    def close(self) -> None:
        self._closed.set()
        self._server.close()
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
