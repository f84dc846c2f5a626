"""Server-Sent Events read from an agent's bytes, within bounds: the hub's SSE parser.

An agent is untrusted: whatever it sends, this parser holds at most one line (``max_line``
bytes, the largest frame the hub accepts, plus its field name) and one event's ``data`` (the same
bound) at a time, and raises :class:`StreamTooLarge` as soon as a line or an event would be
longer, before reading on. Lines end with LF or CRLF (what GPUFlow's agents send; a lone CR is a
character like any other, so a line that never ends is caught by the bound). Fields as the SSE
standard reads them: ``data`` (joined by LF), ``id``, ``event``, ``retry`` (digits only, else
ignored), a line starting with ``:`` a comment (the agents' ``: ping``), unknown fields ignored,
an empty line dispatches the event (one without data is not dispatched).

A comment (``: ping``) is counted (:attr:`SseParser.comments`), not dispatched; the hub takes any
bytes, a ping or part of a line, as a sign of life.

Constraints: pure, no I/O; a chunk is scanned once (a long frame arriving in many chunks is not
rescanned from its start each time).
"""

from __future__ import annotations

from dataclasses import dataclass

#: the longest ``retry:`` value read, in digits (a larger one is ignored)
MAX_RETRY_DIGITS = 9


class StreamTooLarge(ValueError):
    """A line or an event over the parser's bound; the message says which bound."""


@dataclass(frozen=True)
class SseEvent:
    data: bytes
    event: str
    id: str | None


class SseParser:
    """Feed bytes with :meth:`feed`; it returns the events they complete."""

    def __init__(self, max_line: int) -> None:
        self.max_line = max_line
        self.retry_ms: int | None = None  #: the latest ``retry:`` the stream sent
        self.last_id: str | None = None  #: the latest ``id:``
        self.comments = 0  #: comment lines read (pings)
        self._buf = bytearray()
        self._scanned = 0   # bytes of _buf known to hold no LF
        self._data: list[bytes] = []
        self._data_len = 0
        self._event = ""
        self._id: str | None = None

    def feed(self, chunk: bytes) -> list[SseEvent]:
        out: list[SseEvent] = []
        buf = self._buf
        buf += chunk
        start = 0
        while True:
            end = buf.find(b"\n", max(start, self._scanned))
            if end < 0:
                self._scanned = len(buf)
                break
            line_end = end - 1 if end > start and buf[end - 1] == 0x0D else end
            if line_end - start > self.max_line:
                raise StreamTooLarge(f"a line longer than {self.max_line} bytes")
            self._line(bytes(buf[start:line_end]), out)
            start = end + 1
            self._scanned = start
        if start:
            del buf[:start]
            self._scanned -= start
        if len(buf) > self.max_line + 1:
            raise StreamTooLarge(f"a line longer than {self.max_line} bytes")
        return out

    def _line(self, line: bytes, out: list[SseEvent]) -> None:
        if not line:
            if self._data:
                out.append(SseEvent(b"\n".join(self._data), self._event or "message", self._id))
            self._data, self._data_len, self._event = [], 0, ""
            return
        if line[:1] == b":":
            self.comments += 1
            return
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data_len += len(value) + 1
            if self._data_len > self.max_line + 1:
                raise StreamTooLarge(f"an event's data longer than {self.max_line} bytes")
            self._data.append(value)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")[:64]
        elif name == b"id":
            if b"\x00" not in value:
                self._id = self.last_id = value.decode("utf-8", "replace")[:64]
        elif name == b"retry":
            if value.isdigit() and len(value) <= MAX_RETRY_DIGITS:
                self.retry_ms = int(value)
