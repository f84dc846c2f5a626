"""A small ring catcher: an independent stand-in for the agent's side of the handover.

What it is for: the producer-side tests (tests/inject) and the GPU checks need the rings that
injected processes hand over, without the agent (which is tested on its own). A
:class:`RingCatcher` listens on a ``SOCK_SEQPACKET`` socket in a fresh private directory, takes
every ring handed over (the protocol of cupti_src/gpuflow_ring.h: one hello message with the
ring's descriptor), keeps the descriptor and notes when each connection ends. Read a ring with
ringread.py (``read_ring(catcher.ring_fd(pid))``).

As a program, for the GPU checks (tests/inject/gpu_smoke.sh)::

    python3 tests/support/ringcatch.py OUTDIR -- CMD [ARGS...]

runs CMD with ``GPUFLOW_RING_SOCKET`` set, waits for it and for every ring's connection to end,
writes each ring's bytes to ``OUTDIR/ring-<pid>.bin`` (ringread.py reads those files), prints
their paths on stderr (CMD's own output is left alone), and exits with CMD's status.

Constraints: standard library only; Linux; a thread per catcher, which never blocks the test.
"""

from __future__ import annotations

import array
import os
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HELLO = struct.pack("<Q", 0x314F444E48465047)   # GPUFLOW_HELLO_MAGIC, "GPFHNDO1"


class RingCatcher:
    """Takes rings handed over at :attr:`path` until :meth:`close`."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="gpuflow-catch-", dir="/tmp"))
        self.path = self.directory / "ring.sock"
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._listener.bind(str(self.path))
        self._listener.listen(64)
        self._lock = threading.Lock()
        self.rings: dict[int, list[int]] = {}        # pid -> ring descriptors, in arrival order
        self.ended: dict[int, list[float]] = {}      # pid -> when each connection ended (monotonic)
        self.refused: list[str] = []
        self._connections: dict[int, tuple[socket.socket, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="ring-catcher", daemon=True)
        self._thread.start()

    def env(self) -> dict[str, str]:
        return {"GPUFLOW_RING_SOCKET": str(self.path)}

    def ring_fd(self, pid: int, timeout: float = 10.0) -> int:
        """The (first) ring process ``pid`` handed over; waits for it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if self.rings.get(pid):
                    return self.rings[pid][0]
            time.sleep(0.005)
        raise AssertionError(f"pid {pid} handed no ring over (rings from {sorted(self.rings)})")

    def wait_ended(self, pid: int, timeout: float = 10.0) -> float:
        """When the connection of ``pid``'s ring ended (time.monotonic()); waits for it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if self.ended.get(pid):
                    return self.ended[pid][0]
            time.sleep(0.005)
        raise AssertionError(f"the connection of pid {pid} did not end")

    def pids(self) -> list[int]:
        with self._lock:
            return sorted(self.rings)

    def open_connections(self) -> int:
        with self._lock:
            return len(self._connections)

    def _serve(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                watched = [self._listener.fileno(), *self._connections]
            ready, _, _ = select.select(watched, [], [], 0.05)
            for fd in ready:
                if fd == self._listener.fileno():
                    self._accept()
                else:
                    self._check_end(fd)

    def _accept(self) -> None:
        conn, _ = self._listener.accept()
        conn.settimeout(2.0)
        pid, _uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        try:
            data, ancillary, _flags, _ = conn.recvmsg(64, socket.CMSG_SPACE(16))
        except OSError:
            data, ancillary = b"", []
        fds = array.array("i")
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[:len(payload) - len(payload) % 4])
        if data != HELLO or len(fds) != 1:
            self.refused.append(f"pid {pid}: {data!r} with {len(fds)} descriptors")
            for fd in fds:
                os.close(fd)
            conn.close()
            return
        with self._lock:
            self.rings.setdefault(pid, []).append(fds[0])
            self._connections[conn.fileno()] = (conn, pid)

    def _check_end(self, fd: int) -> None:
        conn, pid = self._connections[fd]
        try:
            data = conn.recv(64, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            with self._lock:
                del self._connections[fd]
                self.ended.setdefault(pid, []).append(time.monotonic())
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._listener.close()
        with self._lock:
            for conn, _pid in self._connections.values():
                conn.close()
            for fds in self.rings.values():
                for fd in fds:
                    os.close(fd)
            self.rings.clear()
        shutil.rmtree(self.directory, ignore_errors=True)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python3 tests/support/ringcatch.py OUTDIR -- CMD [ARGS...]", file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    catcher = RingCatcher()
    try:
        status = subprocess.call(argv[2:], env={**os.environ, **catcher.env()})
        deadline = time.monotonic() + 30
        while catcher.open_connections() and time.monotonic() < deadline:
            time.sleep(0.05)   # the program's descendants may still run
        for pid in catcher.pids():
            for n, fd in enumerate(catcher.rings[pid]):
                path = out / (f"ring-{pid}.bin" if n == 0 else f"ring-{pid}-{n}.bin")
                path.write_bytes(os.pread(fd, os.fstat(fd).st_size, 0))
                print(path, file=sys.stderr)
        return status
    finally:
        catcher.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
