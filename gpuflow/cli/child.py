"""Launch the traced program, forward signals to it, and report its exit status shell-style.

The child runs in its own process group so that gpuflow can signal the whole traced tree
(``bash -c`` wrappers, DataLoader workers, torchrun ranks) the way a terminal would. When gpuflow
owns the terminal's foreground, the child's group is made the foreground group for its lifetime,
so the program reads the terminal and receives Ctrl-C exactly as it would untraced; gpuflow then
takes the foreground back. SIGINT/SIGTERM/SIGHUP/SIGQUIT sent to gpuflow itself are forwarded to
the child's group, whichever of gpuflow's threads the kernel delivered them to.

Constraints: gpuflow never reaps anything but its own child (no waitpid(-1)), which is why the
embedded server is not gunicorn. Exit status: the child's code, or 128+N for signal N; a missing
command is 127 (so is a script whose #! interpreter is missing) and a non-executable one (a
directory, no x bit, also when found on PATH) 126, as bash reports them; a text file with the x
bit but no ``#!`` line is 126 too, refused before anything starts (bash would run it with
/bin/sh; GPUFlow does not guess an interpreter).
"""

from __future__ import annotations

import errno
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
#: the program is waited for in slices this long (see _wait_exit)
WAIT_SLICE_S = 0.1

EXIT_NOT_EXECUTABLE = 126
EXIT_NOT_FOUND = 127


class LaunchError(Exception):
    def __init__(self, message: str, exit_status: int) -> None:
        super().__init__(message)
        self.exit_status = exit_status


def resolve_command(argv0: str, path: str | None = None) -> str:
    """The executable ``argv0`` names, or LaunchError(127/126) saying why it cannot run."""
    if not argv0.strip():
        raise LaunchError("command not found: the command name is empty", EXIT_NOT_FOUND)
    if os.sep in argv0:
        if not os.path.exists(argv0):
            raise LaunchError(f"command not found: {argv0}", EXIT_NOT_FOUND)
        if os.path.isdir(argv0):
            raise LaunchError(f"cannot run {argv0}: is a directory", EXIT_NOT_EXECUTABLE)
        if not os.access(argv0, os.X_OK):
            raise LaunchError(f"cannot run {argv0}: permission denied (not executable)", EXIT_NOT_EXECUTABLE)
        refuse_plain_text(argv0, argv0)
        return argv0
    found = shutil.which(argv0, path=path)
    if found is None:
        # as a shell does: a file of that name on PATH that cannot be executed is 126, not 127
        search = path if path is not None else os.environ.get("PATH", os.defpath)
        for directory in search.split(os.pathsep):
            candidate = os.path.join(directory or ".", argv0)
            if os.path.isfile(candidate):
                raise LaunchError(f"cannot run {argv0}: {candidate} is not executable (permission denied)",
                                  EXIT_NOT_EXECUTABLE)
        raise LaunchError(f"command not found: {argv0}", EXIT_NOT_FOUND)
    if os.path.isdir(found):
        raise LaunchError(f"cannot run {argv0}: is a directory", EXIT_NOT_EXECUTABLE)
    refuse_plain_text(found, argv0)
    return found


#: How much of a command's file is read to tell a program from a text file.
SNIFF_BYTES = 512


def refuse_plain_text(path: str, argv0: str) -> None:
    """LaunchError(126) for a text file without a ``#!`` line: execve cannot run it (ENOEXEC), bash
    would run it with /bin/sh, and GPUFlow does not guess an interpreter. Programs (ELF, other
    binary formats the kernel may know) and unreadable files pass: execve judges those."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        head = os.read(fd, SNIFF_BYTES)
    except OSError:
        return
    finally:
        os.close(fd)
    if not head or head.startswith((b"#!", b"\x7fELF")) or b"\0" in head:
        return
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:  # not just a character cut at the end of what was read
            return
    raise LaunchError(f"cannot run {argv0}: it is a text file without a #! line, not a program (bash "
                      f"would run it with /bin/sh; GPUFlow does not guess: use gpuflow run -- sh {argv0})",
                      EXIT_NOT_EXECUTABLE)


def shell_status(returncode: int) -> int:
    """Popen's returncode (negative for a signal) as a shell reports it."""
    return 128 - returncode if returncode < 0 else returncode


def _terminal_fd() -> int | None:
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, ValueError, OSError):
        return None
    try:
        if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp():
            return fd
    except OSError:
        return None
    return None


def _wait_exit(popen: subprocess.Popen) -> int:
    """The program's return code, once it has exited, waiting in slices of ``WAIT_SLICE_S``.

    Python runs signal handlers in the main thread, but the kernel may deliver gpuflow's signal
    to any of its threads (the server's, a collector's); a main thread blocked in one ``waitpid``
    would run the handler, and so forward the signal, only once the program had exited by itself.
    Between slices the interpreter runs such a handler. The exit itself is seen at once: each slice
    waits on the program's pidfd (Linux 5.3 and later), else it sleeps.
    """
    try:
        pidfd: int | None = os.pidfd_open(popen.pid)
    except (AttributeError, OSError):
        pidfd = None
    exited = None
    if pidfd is not None:   # poll, not select: the descriptor may be above select's 1,024
        exited = select.poll()
        exited.register(pidfd, select.POLLIN)
    try:
        while True:
            returncode = popen.poll()
            if returncode is not None:
                return returncode
            if exited is None:
                time.sleep(WAIT_SLICE_S)
            else:
                exited.poll(WAIT_SLICE_S * 1000)
    finally:
        if pidfd is not None:
            os.close(pidfd)


@contextmanager
def _foreground(pgid: int, tty_fd: int | None) -> Iterator[None]:
    if tty_fd is None:
        yield
        return
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        os.tcsetpgrp(tty_fd, pgid)
    except OSError:
        tty_fd = None
    try:
        yield
    finally:
        if tty_fd is not None:
            try:
                os.tcsetpgrp(tty_fd, os.getpgrp())
            except OSError:
                pass
        signal.signal(signal.SIGTTOU, old)


class TracedChild:
    """A running child; ``wait()`` returns its shell-style exit status."""

    def __init__(self, argv: Sequence[str], env: dict[str, str]) -> None:
        executable = resolve_command(argv[0], env.get("PATH"))
        self._tty = _terminal_fd()
        try:
            self.popen = subprocess.Popen(list(argv), executable=executable, env=env, process_group=0)
        except OSError as exc:
            if exc.errno == errno.ENOENT and os.path.exists(executable):
                # the file is there, so what is missing is the interpreter its #! line names;
                # 127 as bash gives ("cannot execute: required file not found")
                raise LaunchError(f"cannot run {argv[0]}: its interpreter (the #! line) was not found",
                                  EXIT_NOT_FOUND) from exc
            status = EXIT_NOT_FOUND if exc.errno == errno.ENOENT else EXIT_NOT_EXECUTABLE
            raise LaunchError(f"cannot run {argv[0]}: {exc.strerror}", status) from exc
        self.pid = self.popen.pid
        self.received_signal: int | None = None

    def _forward(self, signum: int, _frame: object) -> None:
        self.received_signal = signum
        try:
            os.killpg(self.pid, signum)
        except ProcessLookupError:
            pass

    def wait(self, missed: Callable[[], int | None] | None = None) -> int:
        """Forward stop signals to the program until it exits; its shell-style status. ``missed``
        gives a signal that came in before forwarding began (caught by the caller's handler since
        the program was started), which is forwarded at once."""
        previous = {s: signal.signal(s, self._forward) for s in FORWARDED_SIGNALS}
        try:
            pending = missed() if missed else None
            if pending is not None:
                self._forward(pending, None)
            with _foreground(self.pid, self._tty):
                returncode = _wait_exit(self.popen)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
        return shell_status(returncode)
