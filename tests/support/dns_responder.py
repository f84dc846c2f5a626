"""A tiny authoritative DNS server for the hub's SRV tests: UDP and TCP on one loopback port.

It answers SRV questions for the names in :attr:`DnsResponder.records` (``name -> [(target,
port, ttl)]``) and ``NXDOMAIN`` for others, and can be switched (:attr:`mode`) to answer badly, as
a broken or hostile server would: ``malformed`` (an answer cut inside its record), ``huge`` (a
datagram larger than any the hub reads), ``wrong_id`` (an answer to another question's id),
``loop`` (a compression pointer to itself), ``truncated`` (TC over UDP; the full answer over TCP
only), ``nxdomain``, ``silent``. It writes its messages with its own encoder (no name
compression), so the hub's reader is tested against bytes it did not make. :attr:`questions`
counts the questions asked, by transport.

Constraints: two daemon threads; every socket closed by :meth:`close`; a read is bounded.
"""

from __future__ import annotations

import socket
import struct
import threading

SRV, OPT, IN = 33, 41, 1


def encode_name(name: str) -> bytes:
    return b"".join(bytes([len(l)]) + l.encode() for l in name.strip(".").split(".") if l) + b"\0"


def read_question(query: bytes) -> tuple[int, str, int, int]:
    """(id, name, qtype, the offset after the question) of a query with one question."""
    (qid,) = struct.unpack_from("!H", query)
    labels, offset = [], 12
    while query[offset]:
        length = query[offset]
        labels.append(query[offset + 1:offset + 1 + length].decode())
        offset += 1 + length
    qtype, _ = struct.unpack_from("!HH", query, offset + 1)
    return qid, ".".join(labels).lower(), qtype, offset + 5


class DnsResponder:
    def __init__(self) -> None:
        self.records: dict[str, list[tuple[str, int, int]]] = {}
        self.mode = "ok"
        self.questions = {"udp": 0, "tcp": 0}
        for _ in range(20):   # one port number free for both UDP and TCP
            self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.udp.bind(("127.0.0.1", 0))
            self.port = self.udp.getsockname()[1]
            self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                self.tcp.bind(("127.0.0.1", self.port))
                break
            except OSError:
                self.udp.close()
                self.tcp.close()
        else:
            raise RuntimeError("no port free for both UDP and TCP")
        self.tcp.listen(8)
        self.udp.settimeout(0.2)
        self.tcp.settimeout(0.2)
        self._closed = threading.Event()
        for target in (self._serve_udp, self._serve_tcp):
            threading.Thread(target=target, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def answer(self, query: bytes, over: str) -> bytes | None:
        qid, name, qtype, end = read_question(query)
        question = query[12:end]
        mode = self.mode
        if mode == "silent":
            return None
        if mode == "nxdomain" or name not in self.records:
            return struct.pack("!HHHHHH", qid, 0x8183, 1, 0, 0, 0) + question
        if mode == "wrong_id":
            qid ^= 0x5A5A
        if mode == "huge":
            return struct.pack("!HHHHHH", qid, 0x8180, 1, 0, 0, 0) + question + b"\0" * 6000
        if mode == "truncated" and over == "udp":
            return struct.pack("!HHHHHH", qid, 0x8380, 1, 0, 0, 0) + question
        records = [] if qtype != SRV else self.records[name]
        body = b""
        for target, port, ttl in records:
            rdata = struct.pack("!HHH", 10, 5, port) + encode_name(target)
            body += encode_name(name) + struct.pack("!HHIH", SRV, IN, ttl, len(rdata)) + rdata
        message = struct.pack("!HHHHHH", qid, 0x8580, 1, len(records), 0, 0) + question + body
        if mode == "malformed":
            return message[:-3]
        if mode == "loop":   # one record whose owner name is a pointer to itself
            at = 12 + len(question)
            return (struct.pack("!HHHHHH", qid, 0x8580, 1, 1, 0, 0) + question
                    + struct.pack("!H", 0xC000 | at) + struct.pack("!HHIH", SRV, IN, 5, 0))
        return message

    def _serve_udp(self) -> None:
        while not self._closed.is_set():
            try:
                query, peer = self.udp.recvfrom(4096)
            except (TimeoutError, OSError):
                continue
            self.questions["udp"] += 1
            reply = self.answer(query, "udp")
            if reply is not None:
                try:
                    self.udp.sendto(reply, peer)
                except OSError:
                    pass

    def _serve_tcp(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self.tcp.accept()
            except (TimeoutError, OSError):
                continue
            with conn:
                try:
                    conn.settimeout(2)
                    (length,) = struct.unpack("!H", _exactly(conn, 2))
                    self.questions["tcp"] += 1
                    reply = self.answer(_exactly(conn, length), "tcp")
                    if reply is not None:
                        conn.sendall(struct.pack("!H", len(reply)) + reply)
                except (OSError, ValueError, struct.error):
                    pass

    def close(self) -> None:
        self._closed.set()
        self.udp.close()
        self.tcp.close()


def _exactly(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ValueError("the connection ended")
        data += chunk
    return data
