"""C++ kernel names for display: ``_Z13attention_fwdPKfPfi`` → ``attention_fwd(float const*, float*, int)``.

Uses ``abi::__cxa_demangle`` from the C++ runtime already on any CUDA machine (libstdc++), called
through ctypes; no ``c++filt`` subprocess. Anything that is not an Itanium-mangled name (C kernels,
Triton's ``triton_poi_fused_...``), or that the runtime cannot demangle, is returned unchanged, as
is everything when libstdc++ cannot be loaded. Results are cached.

The names come from the traced program, and a name can demangle to far more than it is: each
substitution (``S1_``) prints again what it refers to, so 253 bytes that repeat the previous
parameter twice, 24 times, print 436 MB, in 11 s of a call that can be neither interrupted nor
told a limit. So the agent does not call it: a helper process (this file, run with ``--helper``)
demangles one name at a time under a memory limit, and answers within ``TIMEOUT_S`` or is killed
(:func:`demangle_in_time` then returns None, and the helper starts again for the next name; the
traced-process builder shows that process's names mangled from then on, so one program costs the
collector one ``TIMEOUT_S`` at most). A demangled name keeps at most ``MAX_CHARS + 1`` characters
(the caller marks it cut).

Constraints: called at snapshot-build time only (the collector caches per name id as well), never
per record; thread-safe (one lock around the helper; the cache is an lru_cache); the helper is
started on first use, not at import, and ends when the agent closes its end of the pipe.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import select
import struct
import subprocess
import sys
import threading
import time

_LIBSTDCXX_NAMES = ("libstdc++.so.6", "libc++abi.so.1")
#: the longest demangled name kept, in characters (the ring's own name limit, NAME_MAX)
MAX_CHARS = 4096
#: how long the helper may take for one name
TIMEOUT_S = 0.5
#: the helper's address-space limit: a name that needs more fails to demangle instead
HELPER_MEMORY = 512 << 20
_LENGTH = struct.Struct("<I")
_MAX_INPUT = 1 << 16


def _candidates():
    """The usual sonames first; ``find_library`` (which runs ldconfig, even gcc) only if they fail."""
    yield from _LIBSTDCXX_NAMES
    found = ctypes.util.find_library("stdc++")
    if found:
        yield found


def _load() -> tuple[object, object] | None:
    for name in _candidates():
        try:
            lib = ctypes.CDLL(name)
            fn = lib.__cxa_demangle
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_void_p
        fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
        libc = ctypes.CDLL(None)
        free = libc.free
        free.restype = None
        free.argtypes = [ctypes.c_void_p]
        return fn, free
    return None


def _demangle_here(runtime: tuple[object, object], raw: bytes) -> str | None:
    """``__cxa_demangle`` in this process: the text cut to MAX_CHARS + 1 characters, or None."""
    fn, free = runtime
    status = ctypes.c_int(-4)
    ptr = fn(raw, None, None, ctypes.byref(status))  # type: ignore[operator]
    if not ptr:
        return None
    try:
        text = ctypes.string_at(ptr).decode("utf-8", "replace") if status.value == 0 else None
    finally:
        free(ptr)  # type: ignore[operator]
    return None if text is None else text[:MAX_CHARS + 1]


def _read_exactly(fd: int, n: int, deadline: float | None) -> bytes | None:
    """``n`` bytes from ``fd``, or None at end of file or past ``deadline`` (monotonic)."""
    out = bytearray()
    while len(out) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
        chunk = os.read(fd, n - len(out))
        if not chunk:
            return None
        out += chunk
    return bytes(out)


class _Helper:
    """The demangling helper process: started when first needed, killed when it runs out of time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None

    def demangle(self, raw: bytes) -> str | None:
        """The demangled text ("" when there is none); None when the helper ran out of time."""
        with self._lock:
            try:
                proc = self._proc if self._proc is not None and self._proc.poll() is None else self._start()
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(_LENGTH.pack(len(raw)) + raw)
                proc.stdin.flush()
                deadline = time.monotonic() + TIMEOUT_S
                head = _read_exactly(proc.stdout.fileno(), _LENGTH.size, deadline)
                body = None if head is None else _read_exactly(proc.stdout.fileno(), _LENGTH.unpack(head)[0], deadline)
            except OSError:
                head = body = None
            if body is None:
                self._stop()
                return None
            return body.decode("utf-8", "replace")

    def _start(self) -> subprocess.Popen[bytes]:
        self._stop()
        self._proc = subprocess.Popen([sys.executable, "-I", "-S", os.path.abspath(__file__), "--helper"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      bufsize=0, close_fds=True)
        return self._proc

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            proc.wait()


def _serve() -> None:
    """The helper's loop: a name (length, bytes) in, its demangled text (length, UTF-8; 0: none) out."""
    import resource
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the agent's Ctrl-C is the agent's to handle
    resource.setrlimit(resource.RLIMIT_AS, (HELPER_MEMORY, HELPER_MEMORY))
    runtime = _load()
    stdin, stdout = sys.stdin.buffer.fileno(), sys.stdout.buffer.fileno()
    while (head := _read_exactly(stdin, _LENGTH.size, None)) is not None:
        size = _LENGTH.unpack(head)[0]
        raw = _read_exactly(stdin, size, None) if size <= _MAX_INPUT else None
        if raw is None:
            return
        text = _demangle_here(runtime, raw) if runtime is not None else None
        data = b"" if text is None else text.encode("utf-8")
        os.write(stdout, _LENGTH.pack(len(data)) + data)


_RUNTIME = _load()
_HELPER = _Helper()

#: True when a C++ runtime's demangler was found.
AVAILABLE = _RUNTIME is not None


class _OutOfTime(Exception):
    """The helper did not answer in time (not cached: the next call tries again)."""


@functools.lru_cache(maxsize=4096)
def _demangled(name: str) -> str:
    if _RUNTIME is None or not name.startswith("_Z"):
        return name
    try:
        raw = name.encode("utf-8")
    except UnicodeEncodeError:  # pragma: no cover - names come from bytes decoded as UTF-8
        return name
    if len(raw) > _MAX_INPUT:
        return name
    text = _HELPER.demangle(raw)
    if text is None:
        raise _OutOfTime(name)
    return text or name


def demangle_in_time(name: str) -> str | None:
    """The demangled form of ``name`` (at most MAX_CHARS + 1 characters), ``name`` itself if it is
    not a demanglable C++ name, None if the helper ran out of time on it."""
    try:
        return _demangled(name)
    except _OutOfTime:
        return None


def demangle(name: str) -> str:
    """The demangled form of ``name`` (at most MAX_CHARS + 1 characters), or ``name`` itself if it
    is not a demanglable C++ name or could not be demangled in time."""
    text = demangle_in_time(name)
    return name if text is None else text


if __name__ == "__main__" and sys.argv[1:] == ["--helper"]:
    _serve()
