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
collector one ``TIMEOUT_S`` at most). The helper's own start (a Python interpreter, which a loaded
machine can take longer than ``TIMEOUT_S`` to start) is not timed as a name: it says it is ready,
within ``START_TIMEOUT_S``, before the first name is sent.

A demangled name keeps at most ``MAX_CHARS + 1`` characters (the caller marks it cut): real names
run to thousands (a PyTorch kernel of 446 mangled bytes prints 5,050 characters), a few KB of
mangled template name to tens of thousands. What a traced process may have demangled in all is the
traced-process builder's budget; the cache shared by all processes keeps at most ``CACHE_BYTES``,
names of at most ``CACHE_NAME_CHARS``, and only their mangled form when they do not demangle.

Constraints: called at snapshot-build time only (the collector caches per name id as well), never
per record; thread-safe (one lock around the helper, one around the cache); the helper is started
on first use, not at import, and ends when the agent closes its end of the pipe.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import struct
import subprocess
import sys
import threading
import time
from collections import OrderedDict

_LIBSTDCXX_NAMES = ("libstdc++.so.6", "libc++abi.so.1")
#: the longest demangled name kept, in characters: far above real names (5,050 for a PyTorch
#: kernel), far below what a hostile name prints (436 MB from 253 bytes)
MAX_CHARS = 64 << 10
#: how long the helper may take for one name
TIMEOUT_S = 0.5
#: how long the helper may take to start (an interpreter, on a machine that may be loaded)
START_TIMEOUT_S = 10.0
#: what the helper writes once it is ready for names
READY = b"GPFDMGL1"
#: the most memory the cache of demangled names (shared by every traced process, so that a program
#: that starts process after process asks the helper once per name) holds, and the longest name
#: it keeps (a traced process's builder keeps its own names, however long)
CACHE_BYTES = 4 << 20
CACHE_NAME_CHARS = 16 << 10
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
    """The demangling helper process: started when first needed (and ready within its start
    deadline), killed when it runs out of time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        """Whether a helper process is up (started and ready)."""
        return self._proc is not None and self._proc.poll() is None

    def demangle(self, raw: bytes) -> str | None:
        """The demangled text ("" when there is none); None when the helper did not start in time
        or ran out of time on this name."""
        with self._lock:
            try:
                proc = self._proc if self.running else self._start()
                if proc is None:
                    return None
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

    def close(self) -> None:
        """Stop the helper (the next name starts another)."""
        with self._lock:
            self._stop()

    def _start(self) -> subprocess.Popen[bytes] | None:
        """A new helper that said it is ready within START_TIMEOUT_S, or None (and none running)."""
        self._stop()
        self._proc = subprocess.Popen([sys.executable, "-I", "-S", os.path.abspath(__file__), "--helper"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      bufsize=0, close_fds=True)
        assert self._proc.stdout is not None
        if _read_exactly(self._proc.stdout.fileno(), len(READY), time.monotonic() + START_TIMEOUT_S) != READY:
            self._stop()
            return None
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
    os.write(stdout, READY)
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


class _Cache:
    """The demangled names, least recently used first out, within ``limit`` bytes of strings."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, str] = OrderedDict()
        self.bytes = 0

    def get(self, name: str) -> str | None:
        with self._lock:
            text = self._entries.get(name)
            if text is not None:
                self._entries.move_to_end(name)
            return text

    def put(self, name: str, text: str) -> None:
        cost = sys.getsizeof(name) + sys.getsizeof(text)
        with self._lock:
            if name in self._entries or cost > self._limit:
                return
            self._entries[name] = text
            self.bytes += cost
            while self.bytes > self._limit:
                old, old_text = self._entries.popitem(last=False)
                self.bytes -= sys.getsizeof(old) + sys.getsizeof(old_text)


_CACHE = _Cache(CACHE_BYTES)


def demangle_in_time(name: str) -> str | None:
    """The demangled form of ``name`` (at most MAX_CHARS + 1 characters), ``name`` itself if it is
    not a demanglable C++ name, None if the helper did not answer in time (not cached: the next
    call tries again)."""
    if _RUNTIME is None or not name.startswith("_Z"):
        return name
    known = _CACHE.get(name)
    if known is not None:
        return known or name
    try:
        raw = name.encode("utf-8")
    except UnicodeEncodeError:  # pragma: no cover - names come from bytes decoded as UTF-8
        return name
    if len(raw) > _MAX_INPUT:
        return name
    text = _HELPER.demangle(raw)
    if text is None:
        return None
    if len(text) <= CACHE_NAME_CHARS:
        _CACHE.put(name, text)  # "": not demanglable
    return text or name


def demangle(name: str) -> str:
    """The demangled form of ``name`` (at most MAX_CHARS + 1 characters), or ``name`` itself if it
    is not a demanglable C++ name or could not be demangled in time."""
    text = demangle_in_time(name)
    return name if text is None else text


if __name__ == "__main__" and sys.argv[1:] == ["--helper"]:
    _serve()
