"""The agent's side of the ring handover: a Unix socket only this user can reach, and the ring
descriptors traced programs send through it (the protocol is in cupti_src/gpuflow_ring.h).

Why: a ring that anyone can name (the old /dev/shm segments) lets every other local user put data
into the view, take a traced process's ring, crash or hang the agent. Here nothing has a name but
the socket, and the socket is in a directory only the agent's user can enter:

* :func:`make_private_directory` creates that directory (mode 0700, checked with ``fstat`` on the
  opened directory, never by path) in ``$XDG_RUNTIME_DIR`` when that is this user's private
  directory, else in the system's temporary directory; :func:`check_private_directory` checks one
  the user named (a gunicorn deployment); :func:`remove_stale_directories` removes what an agent
  that was killed left there (its directory and dead socket; nothing of another user's);
* :class:`RingSocket` listens there (``SOCK_SEQPACKET``: one message is one hello, never split or
  merged) and, on every pass of the drain thread, accepts and reads without ever blocking: a
  bounded number of connections per pass, a bounded number waiting for their message, each with a
  deadline, at most :data:`MESSAGE_BYTES` read from each;
* each connection's peer is checked with ``SO_PEERCRED`` (this user or root) before anything is
  read, and its one message must be the hello with exactly one descriptor (received close-on-exec;
  any other descriptor that came with it is closed at once). Another agent asking whether this one
  still listens (the sweep above) says :data:`PROBE` and is dropped without a refusal: an agent
  starting must not put a warning in every other agent of its user.

What comes out is a :class:`Handover` (the peer's pid and uid from the kernel, the descriptor, the
connection, whose end is the producer's end) or a :class:`Refusal` saying why. What a descriptor
may be is checked by :class:`~gpuflow.collectors.cupti.rings.MappedRing`.

Constraints: Linux; never blocks and never raises for what a peer does; closes every descriptor it
received and does not hand on.
"""

from __future__ import annotations

import array
import errno
import os
import re
import secrets
import socket
import stat
import struct
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from gpuflow.collectors.cupti import _layout as L

SOCKET_NAME = "ring.sock"
#: sun_path holds 108 bytes, the terminating NUL included.
MAX_SOCKET_PATH = 107
#: Connections the kernel queues before the agent accepts them.
BACKLOG = 128
#: Connections accepted in one pass of the drain thread (the rest wait for the next, 20 ms later).
ACCEPT_PER_PASS = 256
#: Connections accepted whose message has not arrived; beyond it the oldest is dropped.
MAX_WAITING = 64
#: How long an accepted connection may take to send its message.
MESSAGE_DEADLINE_S = 2.0
#: The most bytes read from a connection's one message (the hello is GPUFLOW_HELLO_SIZE).
MESSAGE_BYTES = 64
#: Room for this many descriptors in one message: more arrive as a truncated control message.
DESCRIPTOR_ROOM = 4
#: Messages read (and thrown away) from a handed-over connection per pass, looking for its end.
EXTRA_MESSAGES_PER_PASS = 8
#: Agent directories looked at per stale-directory sweep.
STALE_SCAN_LIMIT = 256
#: A directory changed this recently is another agent's being set up (made, its socket not yet
#: listening), never stale: the sweep leaves it, and takes it at a later start if it was left.
STALE_AFTER_S = 60.0
HELLO = struct.pack("<Q", L.HELLO_MAGIC)
#: What an agent sends when it connects only to learn whether another agent still listens there
#: (a stale-directory sweep, or a socket path asked for again): the listener drops the connection
#: without a word, where a connection that closes without a hello is a refused handover it reports.
PROBE = b"GPUFLOW-LISTENING?"
_PROBED = object()   # what _read_message answers for a probe
_PEERCRED = struct.Struct("3i")   # pid, uid, gid


class SocketSetupError(OSError):
    """The ring socket or its directory cannot be set up safely; the message says why."""


def trusted_uids() -> frozenset[int]:
    """Whose processes may hand rings to this agent, and own them: this user and root."""
    return frozenset((os.geteuid(), 0))


def _private_base(environ: Mapping[str, str]) -> Path:
    """``$XDG_RUNTIME_DIR`` when it is this user's private directory, else the temporary directory."""
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if runtime.startswith("/"):
        try:
            st = os.lstat(runtime)
        except OSError:
            st = None
        if (st is not None and stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()
                and not st.st_mode & 0o077):
            return Path(runtime)
    return Path(tempfile.gettempdir())


#: what an agent names its private directory: "gpuflow-" and 16 random hex digits
_DIRECTORY_NAME = re.compile(r"gpuflow-[0-9a-f]{16}")


def plan_private_directory(environ: Mapping[str, str]) -> Path:
    """A fresh, unguessable directory name for :func:`make_private_directory` (nothing is created).

    Short enough for the socket path's 108 bytes: under a long temporary directory, /tmp.
    """
    name = f"gpuflow-{secrets.token_hex(8)}"
    base = _private_base(environ)
    if len(str(base / name / SOCKET_NAME)) > MAX_SOCKET_PATH:
        base = Path("/tmp")
    return base / name


def remove_stale_directories(base: Path) -> list[Path]:
    """Remove this user's agent directories in ``base`` that no agent listens in any more (an
    agent killed by SIGKILL cannot remove its own); return them.

    Only directories named as agents name them, owned by this user, mode 0700, unchanged for
    :data:`STALE_AFTER_S` (another agent may be between making its directory and listening in it),
    holding nothing but a socket nobody listens on; looked at through the opened directory
    (``O_NOFOLLOW``), so nothing else is ever removed. A few hundred entries of ``base`` at most
    are looked at per call.
    """
    removed: list[Path] = []
    try:
        entries = [e for e in os.listdir(base) if _DIRECTORY_NAME.fullmatch(e)][:STALE_SCAN_LIMIT]
    except OSError:
        return removed
    for entry in entries:
        path = Path(base) / entry
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) != 0o700:
                continue
            if time.time() - st.st_mtime < STALE_AFTER_S:
                continue
            inside = os.listdir(fd)
            if inside not in ([], [SOCKET_NAME]):
                continue
            if inside:
                if not stat.S_ISSOCK(os.lstat(SOCKET_NAME, dir_fd=fd).st_mode) or _someone_listens(path / SOCKET_NAME):
                    continue
                os.unlink(SOCKET_NAME, dir_fd=fd)
            os.rmdir(path)
            removed.append(path)
        except OSError:
            continue
        finally:
            os.close(fd)
    return removed


def make_private_directory(path: Path) -> None:
    """Create ``path`` as a directory only this user can enter, or raise SocketSetupError.

    ``mkdir`` fails if anything is already there (someone who guessed the name gets no say in what
    it is), and the result is checked on the opened directory: a directory, ours, mode 0700.
    """
    try:
        os.mkdir(path, 0o700)
    except OSError as exc:
        raise SocketSetupError(exc.errno, f"cannot create the ring socket's directory {path}: "
                               f"{exc.strerror}") from None
    try:
        _check_directory(path, exact_mode=True)
    except SocketSetupError:
        _remove_quietly(path, os.rmdir)
        raise


def check_private_directory(path: Path) -> None:
    """Raise SocketSetupError unless ``path`` is a directory of this user that no one else may
    enter or write (group and others have no access at all)."""
    _check_directory(path, exact_mode=False)


def _check_directory(path: Path, *, exact_mode: bool) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise SocketSetupError(exc.errno, f"the ring socket's directory {path} cannot be used: "
                               f"{exc.strerror}") from None
    try:
        if exact_mode:
            os.fchmod(fd, 0o700)   # mkdir's mode went through the umask
        st = os.fstat(fd)
    finally:
        os.close(fd)
    if st.st_uid != os.geteuid():
        raise SocketSetupError(errno.EPERM, f"the ring socket's directory {path} belongs to uid "
                               f"{st.st_uid}, not to this user ({os.geteuid()})")
    if st.st_mode & 0o077:
        raise SocketSetupError(errno.EPERM, f"the ring socket's directory {path} is open to other users "
                               f"(mode {stat.S_IMODE(st.st_mode):o}); it must be 0700")


def _remove_quietly(path: Path, remove=os.unlink) -> None:
    try:
        remove(path)
    except OSError:
        pass


@dataclass
class Handover:
    """A ring a peer handed over: who (from the kernel), its descriptor, and the connection."""

    pid: int
    uid: int
    ring_fd: int
    connection: socket.socket
    _ended: bool = field(default=False, repr=False)

    def ended(self) -> bool:
        """True once the peer's end of the connection is closed (the process ended, or let go).

        Anything else a peer sends after its hello is read and thrown away (a bounded number of
        messages per call); descriptors in it are closed by the kernel, since none are asked for.
        """
        if self._ended:
            return True
        for _ in range(EXTRA_MESSAGES_PER_PASS):
            try:
                data = self.connection.recv(MESSAGE_BYTES, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return False
            except OSError:
                data = b""
            if not data:
                self._ended = True
                return True
        return False

    def close(self) -> None:
        """Close the connection and, if still held, the ring's descriptor."""
        self.connection.close()
        self.release_descriptor()

    def release_descriptor(self) -> None:
        if self.ring_fd >= 0:
            os.close(self.ring_fd)
            self.ring_fd = -1


@dataclass(frozen=True)
class Refusal:
    """A connection the agent turned away: ``reason`` is a short key, ``detail`` a sentence."""

    reason: str
    detail: str
    pid: int = 0
    uid: int = -1


@dataclass
class _Waiting:
    connection: socket.socket
    pid: int
    uid: int
    deadline: float


class RingSocket:
    """The listening socket at ``path`` and the connections waiting for their message.

    ``owns_directory``: the directory was made for this socket and goes when it closes.
    """

    def __init__(self, path: Path, *, owns_directory: bool, clock=time.monotonic) -> None:
        self.path = Path(path)
        self._owns_directory = owns_directory
        self._clock = clock
        self._waiting: list[_Waiting] = []
        self._trusted = trusted_uids()
        if len(str(self.path)) > MAX_SOCKET_PATH:
            raise SocketSetupError(errno.ENAMETOOLONG, f"the ring socket path {self.path} is longer "
                                   f"than {MAX_SOCKET_PATH} bytes")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_NONBLOCK
                                       | socket.SOCK_CLOEXEC)
        try:
            self._listener.bind(str(self.path))
            os.chmod(self.path, 0o600)
            self._listener.listen(BACKLOG)
        except OSError as exc:
            self._listener.close()
            raise SocketSetupError(exc.errno, f"cannot listen on the ring socket {self.path}: "
                                   f"{exc.strerror}") from None

    @classmethod
    def in_private_directory(cls, directory: Path, **kw) -> "RingSocket":
        """Create ``directory`` (:func:`make_private_directory`) and listen in it, after removing
        what killed agents of this user left beside it."""
        remove_stale_directories(directory.parent)
        make_private_directory(directory)
        try:
            return cls(directory / SOCKET_NAME, owns_directory=True, **kw)
        except BaseException:
            _remove_quietly(directory, os.rmdir)
            raise

    @classmethod
    def at(cls, path: Path, **kw) -> "RingSocket":
        """Listen at ``path``, whose directory the user made private (:func:`check_private_directory`).

        A socket left there by an agent that died is replaced; one an agent still listens on, or
        anything that is not a socket, is an error.
        """
        path = Path(path)
        check_private_directory(path.parent)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            st = None
        if st is not None:
            if not stat.S_ISSOCK(st.st_mode):
                raise SocketSetupError(errno.EEXIST, f"{path} exists and is not a socket")
            if _someone_listens(path):
                raise SocketSetupError(errno.EADDRINUSE, f"another GPUFlow agent listens on {path}")
            _remove_quietly(path)
        return cls(path, owns_directory=False, **kw)

    def receive(self) -> list[Handover | Refusal]:
        """Accept what is pending and read what has arrived, without blocking; never raises for
        anything a peer does."""
        out: list[Handover | Refusal] = []
        now = self._clock()
        for _ in range(ACCEPT_PER_PASS):
            try:
                connection, _addr = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:   # EMFILE and the like: try again next pass
                out.append(Refusal("accept_failed", f"accepting a connection failed: {exc.strerror}"))
                break
            connection.setblocking(False)
            self._admit(connection, now, out)
        still: list[_Waiting] = []
        for waiting in self._waiting:
            result = self._read_message(waiting, now)
            if result is None:
                still.append(waiting)
            elif result is not _PROBED:
                out.append(result)
        self._waiting = still
        return out

    def _admit(self, connection: socket.socket, now: float, out: list[Handover | Refusal]) -> None:
        """Check the peer; keep its connection waiting for its message, or close it and say why."""
        try:
            pid, uid, _gid = _PEERCRED.unpack(connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                                    _PEERCRED.size))
        except OSError as exc:
            connection.close()
            out.append(Refusal("no_credentials", f"the peer's credentials could not be read: {exc.strerror}"))
            return
        if uid not in self._trusted or pid <= 0:
            connection.close()
            out.append(Refusal("foreign_user", f"a process of uid {uid} connected; only this user's and "
                               "root's processes may hand rings over", pid, uid) if uid not in self._trusted
                       else Refusal("unknown_pid", "the peer's pid is not visible from here (another pid "
                                    "namespace)", pid, uid))
            return
        if len(self._waiting) >= MAX_WAITING:
            oldest = self._waiting.pop(0)
            oldest.connection.close()
            out.append(Refusal("too_many_waiting", f"more than {MAX_WAITING} connections were waiting to "
                               "send their ring; the oldest was dropped", oldest.pid, oldest.uid))
        self._waiting.append(_Waiting(connection, pid, uid, now + MESSAGE_DEADLINE_S))

    def _read_message(self, waiting: _Waiting, now: float) -> Handover | Refusal | object | None:
        """The connection's one message read: a Handover, a Refusal, None while it may still come,
        or _PROBED for another agent's probe (closed, nothing to say)."""
        pid, uid = waiting.pid, waiting.uid
        try:
            data, ancillary, flags, _addr = waiting.connection.recvmsg(
                MESSAGE_BYTES, socket.CMSG_SPACE(DESCRIPTOR_ROOM * 4),
                socket.MSG_DONTWAIT | socket.MSG_CMSG_CLOEXEC)
        except (BlockingIOError, InterruptedError):
            if now < waiting.deadline:
                return None
            waiting.connection.close()
            return Refusal("no_message", f"pid {pid} connected but sent no ring within "
                           f"{MESSAGE_DEADLINE_S:g} s", pid, uid)
        except OSError as exc:
            waiting.connection.close()
            return Refusal("receive_failed", f"reading pid {pid}'s message failed: {exc.strerror}", pid, uid)
        fds = _descriptors(ancillary)
        problem = None
        if data == PROBE and not fds and not flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            waiting.connection.close()
            return _PROBED
        if not data:
            problem = ("no_message", f"pid {pid} closed its connection without sending a ring")
        elif flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            problem = ("oversized_message", f"pid {pid} sent a message with more than "
                       f"{MESSAGE_BYTES} bytes or {DESCRIPTOR_ROOM} descriptors")
        elif data != HELLO:
            problem = ("not_a_hello", f"pid {pid} sent {len(data)} bytes that are not GPUFlow's hello")
        elif len(fds) != 1:
            problem = ("descriptor_count", f"pid {pid} sent {len(fds)} descriptors with its hello, not one")
        if problem is not None:
            for fd in fds:
                os.close(fd)
            waiting.connection.close()
            return Refusal(problem[0], problem[1], pid, uid)
        return Handover(pid, uid, fds[0], waiting.connection)

    def close(self) -> None:
        """Stop listening; drop waiting connections; remove the socket (and its directory, if it
        was made for it)."""
        for waiting in self._waiting:
            waiting.connection.close()
        self._waiting = []
        self._listener.close()
        _remove_quietly(self.path)
        if self._owns_directory:
            _remove_quietly(self.path.parent, os.rmdir)


def _descriptors(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    """Every descriptor in SCM_RIGHTS control messages (the caller closes the ones it does not keep)."""
    fds = array.array("i")
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
    return list(fds)


def _someone_listens(path: Path) -> bool:
    """Whether an agent listens at ``path``: it is asked by connecting and saying :data:`PROBE`, so
    that the agent there does not count the connection as a refused handover."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC)
    try:
        probe.connect(str(path))
        try:
            probe.send(PROBE, socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
        except OSError:
            pass   # it listens; the message is a courtesy
        return True
    except (ConnectionRefusedError, FileNotFoundError):
        return False
    except OSError as exc:
        return exc.errno == errno.EAGAIN   # a full backlog: someone listens
    finally:
        probe.close()
