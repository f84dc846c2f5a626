"""C++ kernel names for display: ``_Z13attention_fwdPKfPfi`` → ``attention_fwd(float const*, float*, int)``.

Uses ``abi::__cxa_demangle`` from the C++ runtime already on any CUDA machine (libstdc++), called
through ctypes; no ``c++filt`` subprocess. Anything that is not an Itanium-mangled name (C kernels,
Triton's ``triton_poi_fused_...``), or that the runtime cannot demangle, is returned unchanged, as
is everything when libstdc++ cannot be loaded. Results are cached.

Constraints: called at snapshot-build time only (the collector caches per name id as well), never
per record; thread-safe (``__cxa_demangle`` is, and the cache is an lru_cache).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

_LIBSTDCXX_NAMES = ("libstdc++.so.6", "libc++abi.so.1")


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


_RUNTIME = _load()

#: True when a C++ runtime's demangler was found.
AVAILABLE = _RUNTIME is not None


@functools.lru_cache(maxsize=16384)
def demangle(name: str) -> str:
    """The demangled form of ``name``, or ``name`` itself if it is not a demanglable C++ name."""
    if _RUNTIME is None or not name.startswith("_Z"):
        return name
    fn, free = _RUNTIME
    status = ctypes.c_int(-4)
    try:
        raw = name.encode("utf-8")
    except UnicodeEncodeError:  # pragma: no cover - names come from bytes decoded as UTF-8
        return name
    ptr = fn(raw, None, None, ctypes.byref(status))  # type: ignore[operator]
    if not ptr:
        return name
    try:
        text = ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        free(ptr)  # type: ignore[operator]
    return text if status.value == 0 else name
