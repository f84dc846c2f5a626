"""The embedded server's writer: a chunk straight to the descriptor while the send buffer has room,
else through sendall within the socket's timeout; the same bytes in the same order either way,
and a peer that stops reading still fails the write after the timeout."""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from gpuflow.transport.server import _SocketWriter


def pair(timeout: float | None, sndbuf: int = 4096) -> tuple[socket.socket, socket.socket]:
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    a.settimeout(timeout)
    return a, b


def read_all(sock: socket.socket, n: int, out: list[bytes], pause: float = 0.0) -> None:
    got = 0
    while got < n:
        chunk = sock.recv(65536)
        if not chunk:
            break
        out.append(chunk)
        got += len(chunk)
        if pause:
            time.sleep(pause)


@pytest.mark.parametrize("timeout", [5.0, None])
def test_chunks_larger_than_the_buffer_arrive_whole_and_in_order(timeout):
    a, b = pair(timeout)
    chunks = [os.urandom(n) for n in (10, 70_000, 1, 300_000, 5000)]
    out: list[bytes] = []
    reader = threading.Thread(target=read_all, args=(b, sum(map(len, chunks)), out, 0.001))
    reader.start()
    writer = _SocketWriter(a)
    assert [writer.write(c) for c in chunks] == [len(c) for c in chunks]
    reader.join(10)
    assert b"".join(out) == b"".join(chunks)
    a.close(), b.close()


def test_a_small_chunk_with_room_is_one_write_and_no_poll(monkeypatch):
    a, b = pair(5.0, sndbuf=1 << 20)
    calls = []
    real_sendall = socket.socket.sendall
    monkeypatch.setattr(socket.socket, "sendall", lambda self, data: (calls.append(len(data)),
                                                                        real_sendall(self, data))[1])
    assert _SocketWriter(a).write(b"data: x\n\n") == 9
    assert b.recv(100) == b"data: x\n\n" and calls == []
    a.close(), b.close()


def test_a_peer_that_never_reads_fails_the_write_after_the_timeout():
    a, b = pair(0.3)
    t0 = time.monotonic()
    with pytest.raises(OSError):
        _SocketWriter(a).write(b"x" * (8 << 20))
    assert 0.25 < time.monotonic() - t0 < 3.0
    a.close(), b.close()
