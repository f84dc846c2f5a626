"""Other local users, played by the test process: an attacker, and a victim who runs ``gpuflow run``.

What it is for: GPUFlow's threat model (docs/security.md) has every other local user as a possible
attacker, so tests play one for real: a child forked from the test process drops to another uid
(``os.setgroups``/``setgid``/``setuid``) and attacks with that uid's rights only. The victim is
an unprivileged user too (root can unlink or open anything, which hides attacks that work against
ordinary users): :class:`Victim` runs ``gpuflow run`` in a forked child, in-process through
``gpuflow.cli.main``, after dropping to :data:`VICTIM_UID`.

A forked child that has dropped privileges cannot import anything more from an interpreter
installed under a private home directory, so the victim first runs one short ``gpuflow run`` as
root in the same child (a warm-up: every module that a run imports is then loaded), then drops
and runs the real one. Files both sides must read (the traced program, the fake libcupti, the
summary) live in a world-readable folder made by :func:`shared_dir`.

Constraints: Linux; the test process runs as root (CI does); standard library and gpuflow only.
A child never returns into the test: it ends with ``os._exit``.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

VICTIM_UID = 65533
ATTACKER_UID = 65534   # nobody


def can_play_users() -> bool:
    """Whether this process may become other users (it runs as root)."""
    return os.geteuid() == 0


def shared_dir() -> Path:
    """A new folder every uid may read and write (sticky, like /tmp); the caller removes it."""
    path = Path(tempfile.mkdtemp(prefix="gpuflow-users-"))
    path.chmod(0o1777)
    return path


def _become(uid: int) -> None:
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def as_user(uid: int, action: Callable[..., Any], *args: Any) -> int:
    """Run ``action(*args)`` in a forked child as ``uid``; return the child's pid.

    The child exits 0 when ``action`` returned, 1 when it raised (the traceback goes to stderr).
    """
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _become(uid)
            action(*args)
            code = 0
        except BaseException:  # noqa: BLE001 - report and leave: never return into the test
            import traceback
            traceback.print_exc()
        finally:
            os._exit(code)
    return pid


def wait_child(pid: int, timeout: float) -> int | None:
    """The exit code of child ``pid`` (negative: killed by that signal), or None when it was still
    running after ``timeout`` seconds (it is then killed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def _redirect_output(fd: int) -> None:
    """Send this process's stdout and stderr (the file descriptors, which its children inherit, and
    Python's objects, which a test runner may have replaced) to ``fd``."""
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)


class Victim:
    """``gpuflow run [gpuflow_args] -- program`` as :data:`VICTIM_UID`, in a forked child.

    :meth:`start` forks and warms up; :meth:`go` lets the real run begin; :meth:`wait` returns its
    exit status (None if it hung); :attr:`stderr`, :attr:`summary` (the ``--summary-json``
    document), :attr:`session`, :attr:`port` read what it wrote.
    """

    def __init__(self, folder: Path, program: list[str], environ: dict[str, str],
                 gpuflow_args: tuple[str, ...] = ()) -> None:
        self.folder, self.program, self.environ = folder, program, environ
        self.gpuflow_args = gpuflow_args
        self.err_path = folder / "victim.err"
        self.summary_path = folder / "victim.json"
        self.warmup_path = folder / "victim-warmup.err"
        self.pid = 0
        self._go_w = self._ready_r = -1

    def start(self) -> None:
        from gpuflow.cli import main

        go_r, self._go_w = os.pipe()
        self._ready_r, ready_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            code = 99
            try:
                os.close(self._go_w)
                os.close(self._ready_r)
                os.environ.clear()
                os.environ.update(self.environ)
                _redirect_output(os.open(self.warmup_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
                main(["run", "--port", "0", "--no-summary", "--", *self.program[:1]])  # the warm-up
                _become(VICTIM_UID)
                os.write(ready_w, b"r")
                os.read(go_r, 1)
                _redirect_output(os.open(self.err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
                code = main(["run", "--port", "0", "--flush-ms", "10", *self.gpuflow_args,
                             "--summary-json", str(self.summary_path), "--", *self.program])
            except BaseException:  # noqa: BLE001 - leave with a status the test can see
                import traceback
                traceback.print_exc()
            finally:
                os._exit(code if isinstance(code, int) else 98)
        os.close(go_r)
        os.close(ready_w)
        if os.read(self._ready_r, 1) != b"r":
            try:
                said = self.warmup_path.read_text(errors="replace")
            except FileNotFoundError:
                said = "(nothing)"
            raise AssertionError(f"the victim's warm-up run failed; it printed:\n{said[-4000:]}")

    def go(self) -> None:
        os.write(self._go_w, b"g")
        os.close(self._go_w)

    def wait(self, timeout: float) -> int | None:
        os.close(self._ready_r)
        return wait_child(self.pid, timeout)

    @property
    def stderr(self) -> str:
        try:
            return self.err_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_for_output(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        """The first match of ``pattern`` in what the victim printed so far (waits for it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, self.stderr)
            if m:
                return m
            time.sleep(0.02)
        raise AssertionError(f"the victim never printed {pattern!r}:\n{self.stderr}")

    @property
    def session(self) -> str:
        return self.wait_for_output(r"tracing session ([0-9a-f]+)").group(1)

    @property
    def port(self) -> int:
        return int(self.wait_for_output(r"http://[^\s]+:(\d+)/").group(1))

    @property
    def summary(self) -> dict[str, Any]:
        import json
        return json.loads(self.summary_path.read_text())
