"""The agent's side of the samplers' handover: a SOCK_SEQPACKET socket in a directory only this user
can enter, and the sample rings its own sampler processes send through it (pm_samples.h).

The same path the kernel rings take (docs/security.md, "Rings"), narrowed to what a sampler is:

* the directory is made with ``mkdir(0700)`` under a fresh random name (which fails if anything is
  there) and checked on the opened directory: ours, mode 0700; it and the socket go when the
  collector stops;
* a connection's peer credentials (``SO_PEERCRED``, from the kernel) must be this user's or
  root's **and** its pid one of the sampler processes this agent started and has not yet heard
  from; anything else is closed unread and counted;
* one message of at most :data:`MESSAGE_BYTES` bytes and :data:`DESCRIPTOR_ROOM` descriptors is
  read (received close-on-exec, extras closed at once): exactly the hello with one descriptor, or
  the connection is refused;
* nothing blocks: the socket is non-blocking, a pass accepts at most :data:`ACCEPT_PER_PASS`
  connections, at most :data:`MAX_WAITING` may wait for their message, each for
  :data:`MESSAGE_DEADLINE_S`.

Constraints: Linux; never raises for what a peer does; closes every descriptor it does not hand on.
"""

from __future__ import annotations

import array
import errno
import os
import secrets
import socket
import stat
import struct
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from gpuflow.collectors.pmsampling import samples_layout as L

SOCKET_NAME = "pm.sock"
MAX_SOCKET_PATH = 107
BACKLOG = 64
ACCEPT_PER_PASS = 64
MAX_WAITING = 16
MESSAGE_DEADLINE_S = 2.0
MESSAGE_BYTES = 64
DESCRIPTOR_ROOM = 4
_PEERCRED = struct.Struct("3i")


class SocketSetupError(OSError):
    """The socket or its directory cannot be set up safely; the message says why."""


def trusted_uids() -> frozenset[int]:
    """Whose rings may be read: this user's and root's."""
    return frozenset((os.geteuid(), 0))


def private_directory(environ: Mapping[str, str]) -> Path:
    """Create a fresh directory only this user can enter, in ``$XDG_RUNTIME_DIR`` when that is
    this user's private directory, else the temporary directory (or /tmp, where a long temporary
    path would not leave room for the socket's name)."""
    base = Path(tempfile.gettempdir())
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if runtime.startswith("/"):
        try:
            st = os.lstat(runtime)
            if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077:
                base = Path(runtime)
        except OSError:
            pass
    path = base / f"gpuflow-pm-{secrets.token_hex(8)}"
    if len(str(path / SOCKET_NAME)) > MAX_SOCKET_PATH:
        path = Path("/tmp") / path.name
    try:
        os.mkdir(path, 0o700)
    except OSError as exc:
        raise SocketSetupError(exc.errno, f"cannot create the samplers' socket directory: {exc.strerror}") from None
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fchmod(fd, 0o700)   # mkdir's mode went through the umask
        st = os.fstat(fd)
    finally:
        os.close(fd)
    if st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) != 0o700:
        os.rmdir(path)
        raise SocketSetupError(errno.EPERM, "the samplers' socket directory is not this user's private one")
    return path


@dataclass
class Handover:
    """A sample ring one of our samplers handed over: its pid, descriptor and connection."""

    pid: int
    ring_fd: int
    connection: socket.socket

    def ended(self) -> bool:
        """True once the sampler's end of the connection is closed (it exited). Whatever it sends
        (it sends nothing after its hello) is read and thrown away, a few messages per call."""
        for _ in range(8):
            try:
                data = self.connection.recv(MESSAGE_BYTES, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return False
            except OSError:
                return True
            if not data:
                return True
        return False


@dataclass
class _Waiting:
    connection: socket.socket
    pid: int
    deadline: float


class SamplerSocket:
    """The listening socket and the connections waiting for their one message.

    ``expected(pid)`` says whether ``pid`` is a sampler this agent started and has not heard from.
    """

    def __init__(self, directory: Path, expected: Callable[[int], bool], clock=time.monotonic) -> None:
        self.directory = directory
        self.path = directory / SOCKET_NAME
        self._expected = expected
        self._clock = clock
        self._waiting: list[_Waiting] = []
        self._trusted = trusted_uids()
        self.refused: dict[str, int] = {}
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_NONBLOCK
                                       | socket.SOCK_CLOEXEC)
        try:
            self._listener.bind(str(self.path))
            os.chmod(self.path, 0o600)
            self._listener.listen(BACKLOG)
        except OSError as exc:
            self._listener.close()
            raise SocketSetupError(exc.errno, f"cannot listen for the samplers: {exc.strerror}") from None

    def _refuse(self, why: str) -> None:
        self.refused[why] = self.refused.get(why, 0) + 1

    def receive(self) -> list[Handover]:
        """Accept what is pending and read what has arrived; never blocks, never raises for a peer."""
        now = self._clock()
        for _ in range(ACCEPT_PER_PASS):
            try:
                connection, _addr = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self._refuse("accept_failed")
                break
            connection.setblocking(False)
            try:
                pid, uid, _gid = _PEERCRED.unpack(connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                                        _PEERCRED.size))
            except OSError:
                connection.close()
                self._refuse("no_credentials")
                continue
            if uid not in self._trusted:
                connection.close()
                self._refuse("foreign_user")
                continue
            if pid <= 0 or not self._expected(pid):
                connection.close()
                self._refuse("not_our_sampler")
                continue
            if len(self._waiting) >= MAX_WAITING:
                self._waiting.pop(0).connection.close()
                self._refuse("too_many_waiting")
            self._waiting.append(_Waiting(connection, pid, now + MESSAGE_DEADLINE_S))
        out: list[Handover] = []
        still: list[_Waiting] = []
        for w in self._waiting:
            got = self._read(w, now)
            if got is None:
                still.append(w)
            elif isinstance(got, Handover):
                out.append(got)
        self._waiting = still
        return out

    def _read(self, w: _Waiting, now: float) -> Handover | bool | None:
        try:
            data, ancillary, flags, _addr = w.connection.recvmsg(
                MESSAGE_BYTES, socket.CMSG_SPACE(DESCRIPTOR_ROOM * 4), socket.MSG_DONTWAIT | socket.MSG_CMSG_CLOEXEC)
        except (BlockingIOError, InterruptedError):
            if now < w.deadline:
                return None
            w.connection.close()
            self._refuse("no_message")
            return False
        except OSError:
            w.connection.close()
            self._refuse("receive_failed")
            return False
        fds = array.array("i")
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
        why = None
        if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            why = "oversized_message"
        elif data != L.HELLO:
            why = "not_a_hello"
        elif len(fds) != 1:
            why = "descriptor_count"
        if why is not None:
            for fd in fds:
                os.close(fd)
            w.connection.close()
            self._refuse(why)
            return False
        return Handover(w.pid, fds[0], w.connection)

    def close(self) -> None:
        """Stop listening, drop waiting connections, remove the socket and its directory."""
        for w in self._waiting:
            w.connection.close()
        self._waiting = []
        self._listener.close()
        for remove, target in ((os.unlink, self.path), (os.rmdir, self.directory)):
            try:
                remove(target)
            except OSError:
                pass
