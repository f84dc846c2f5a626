"""Raw-socket HTTP for bad-input tests: send exact bytes, read every response that comes back.

``http.client`` and ``requests`` refuse to send most of what these tests need (two Host
headers, a request line with no version, bare LF, a 70 kB header), so requests are bytes and
responses are parsed here: status line, headers (lower-cased, repeated ones kept), and a body
framed by Content-Length, chunked encoding or the end of the connection.
"""

from __future__ import annotations

import re
import socket
import time
from dataclasses import dataclass, field

STATUS_RE = re.compile(rb"^HTTP/(\d)\.(\d) (\d{3})(?: ([^\r\n]*))?$")


@dataclass
class Response:
    status: int
    reason: str
    version: str
    headers: dict[str, list[str]] = field(default_factory=dict)
    body: bytes = b""

    def header(self, name: str) -> str | None:
        values = self.headers.get(name.lower())
        return values[-1] if values else None


def request(method: str, target: str | bytes, headers: list[tuple[str, str]] | None = None,
            version: str = "HTTP/1.1", body: bytes = b"") -> bytes:
    target = target.encode("latin-1") if isinstance(target, str) else target
    lines = [method.encode("latin-1") + b" " + target + b" " + version.encode("ascii")]
    lines += [f"{k}: {v}".encode("latin-1") for k, v in (headers or [])]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def get(target: str | bytes, host: str | None, *extra: tuple[str, str], method: str = "GET",
        version: str = "HTTP/1.1", close: bool = True) -> bytes:
    headers = [] if host is None else [("Host", host)]
    headers += list(extra)
    if close:
        headers.append(("Connection", "close"))
    return request(method, target, headers, version)


def exchange(port: int, data: bytes, timeout: float = 5.0, host: str = "127.0.0.1") -> bytes:
    """Send ``data``, then read until the server closes (or ``timeout`` of silence)."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        try:
            s.sendall(data)
        except OSError:
            pass  # the server may answer and close before it has read everything
        chunks = []
        while True:
            try:
                b = s.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not b:
                break
            chunks.append(b)
    return b"".join(chunks)


def _dechunk(data: bytes) -> tuple[bytes, bytes]:
    out, pos = [], 0
    while True:
        end = data.find(b"\r\n", pos)
        if end < 0:
            return b"".join(out), b""
        size = int(data[pos:end].split(b";")[0], 16)
        pos = end + 2
        if size == 0:
            trailer_end = data.find(b"\r\n", pos)
            return b"".join(out), data[trailer_end + 2:] if trailer_end >= 0 else b""
        out.append(data[pos:pos + size])
        pos += size + 2


def parse_all(raw: bytes, head_only: bool = False) -> list[Response]:
    """Every response in ``raw`` (pipelining answers several on one connection)."""
    out = []
    while raw:
        head, sep, rest = raw.partition(b"\r\n\r\n")
        if not sep:
            raise AssertionError(f"incomplete response head: {raw[:200]!r}")
        lines = head.split(b"\r\n")
        m = STATUS_RE.match(lines[0])
        if m is None:
            raise AssertionError(f"no HTTP status line: {raw[:200]!r}")
        resp = Response(status=int(m.group(3)), reason=(m.group(4) or b"").decode("latin-1"),
                        version=f"{m.group(1).decode()}.{m.group(2).decode()}")
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            resp.headers.setdefault(name.decode("latin-1").strip().lower(), []).append(
                value.decode("latin-1").strip())
        if head_only or resp.status in (100, 101, 204, 304):
            resp.body, raw = b"", rest
        elif resp.header("transfer-encoding") == "chunked":
            resp.body, raw = _dechunk(rest)
        elif resp.header("content-length") is not None:
            n = int(resp.header("content-length"))
            resp.body, raw = rest[:n], rest[n:]
        else:
            resp.body, raw = rest, b""
        if resp.status != 100:
            out.append(resp)
    return out


def one(port: int, data: bytes, timeout: float = 5.0, head_only: bool = False) -> Response:
    responses = parse_all(exchange(port, data, timeout), head_only=head_only)
    assert len(responses) == 1, [r.status for r in responses]
    return responses[0]


def wait_for(predicate, timeout: float = 5.0, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())
