"""Who a GPU process is: name, user and command line from /proc, with the command line redacted.

NVML gives only pids. The name comes from ``/proc/<pid>/comm``, which works where nvidia-smi
prints ``[Not Found]`` (it asks NVML, which cannot see into other PID namespaces' names); the
user from the owner of ``/proc/<pid>``; the command line from ``/proc/<pid>/cmdline``. Command
lines can hold secrets (tokens, passwords), so by default only the executable is kept. Its cgroup
file (``/proc/<pid>/cgroup``: its container, pod and job) is read by :meth:`LinuxProcReader.cgroup`
for :mod:`gpuflow.workload`, once per process.

A pid whose /proc entry is gone exited between NVML's answer and our look: :meth:`read`
returns None and the collector drops it.

Constraints: runs on the poll thread for every GPU process every tick: three small reads, no
subprocesses; uid → user name lookups are cached, and so are the facts of a pid whose three
reads gave the same bytes as last time (decoding them anew cost ~1.5 µs a process a tick).
Linux only (elsewhere every field is None).
"""

from __future__ import annotations

import os
import pwd
from functools import lru_cache
from typing import Any, NamedTuple, Protocol

from gpuflow.workload.cgroup import read_cgroup_file


class ProcFacts(NamedTuple):
    """What /proc says about a pid; any field may be None (hidden by hidepid, kernel thread...)."""

    name: str | None
    user: str | None
    argv: tuple[str, ...] | None


class ProcReader(Protocol):
    def read(self, pid: int) -> ProcFacts | None:
        """Facts about ``pid``, or None if no such process exists (it vanished)."""

    def cgroup(self, pid: int) -> bytes | None:
        """The bytes of ``pid``'s cgroup file (who it belongs to: gpuflow.workload), or None."""


@lru_cache(maxsize=256)
def user_name(uid: int) -> str:
    """The login name of ``uid``, or the number as text if the password database does not know it."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


_KNOWN_MAX = 4096  #: pids whose last reads are remembered; forgotten all at once beyond this


class LinuxProcReader:
    """Reads /proc (or another procfs root, for tests). One instance per collector (poll thread)."""

    def __init__(self, root: str = "/proc") -> None:
        self._root = root
        self._known: dict[int, tuple[tuple[Any, ...], ProcFacts]] = {}  # pid → (raw reads, facts)

    def read(self, pid: int) -> ProcFacts | None:
        base = f"{self._root}/{pid}"
        try:
            uid = os.stat(base).st_uid
        except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
            return None
        except OSError:
            uid = None
        try:
            comm: bytes | None = read_small_file(base + "/comm")
        except (FileNotFoundError, ProcessLookupError):
            return None
        except OSError:
            comm = None
        try:
            cmdline: bytes | None = read_small_file(base + "/cmdline")
        except (FileNotFoundError, ProcessLookupError):
            return None
        except OSError:
            cmdline = None
        raw = (uid, comm, cmdline)
        known = self._known.get(pid)
        if known is not None and known[0] == raw:
            return known[1]
        facts = _facts(uid, comm, cmdline)
        if len(self._known) >= _KNOWN_MAX:
            self._known.clear()
        self._known[pid] = (raw, facts)
        return facts

    def cgroup(self, pid: int) -> bytes | None:
        return read_cgroup_file(self._root, pid)


def _facts(uid: int | None, comm: bytes | None, cmdline: bytes | None) -> ProcFacts:
    """ProcFacts from the owner uid and the raw bytes of comm and cmdline (None: unreadable)."""
    name = None if comm is None else (comm.decode("utf-8", "replace").rstrip("\n") or None)
    argv = None
    if cmdline is not None:
        parts = cmdline.decode("utf-8", "replace").split("\0")
        if parts and parts[-1] == "":
            parts.pop()
        argv = tuple(parts) if parts else None
    return ProcFacts(name, None if uid is None else user_name(uid), argv)


def read_small_file(path: str) -> bytes:
    """A /proc file's first 64 KiB, in one read (no buffered file object)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 65536)
    finally:
        os.close(fd)


def describe_cmdline(argv: tuple[str, ...] | None, show_cmdline: bool) -> str | None:
    """The command line to show: everything with ``show_cmdline``, else the executable only.

    >>> describe_cmdline(("python", "train.py", "--token=abc"), False)
    'python'
    >>> describe_cmdline(("postgres: alice db 10.0.0.1",), False)  # setproctitle-style rewrite
    'postgres:'
    >>> describe_cmdline(("python", "train.py"), True)
    'python train.py'
    """
    if not argv:
        return None
    if show_cmdline:
        return " ".join(argv)
    exe = argv[0].strip()
    # A program that rewrote its title (setproctitle) puts its arguments into argv[0]: keep the
    # first word only, so a redacted command line never carries arguments.
    return exe.split(None, 1)[0] if exe else None
