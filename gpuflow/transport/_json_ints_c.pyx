# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled JSON writer for a column of 64-bit integers: ``array('q')`` to ``b"[1,-2,3]"``.

What it is for: the window answer (/api/window) carries a lane's spans column by column, ~1.3 M
integers for a second of 100 k executions; made into Python ints and then JSON by ``json`` they
cost ~0.2 s of the agent's time (bench/window_query.py). This writes the digits straight from the
column's buffer into one C buffer, with the GIL released while it does (the buffer is the
column's, exported and so held unresizable for the call), and makes one ``bytes`` of it.

Constraints: byte-identical to ``_json_ints_py`` (and so to ``json.dumps`` of the column's list,
compact): the tests compare them over generated columns, the int64 extremes included; any int64
is written, INT64_MIN too (negated as unsigned, never undefined behaviour).
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport free, malloc

is_compiled = True

#: the longest text one value takes: "-9223372036854775808" and its comma
DEF MAX_CHARS = 21


def int64_json(const int64_t[::1] values):
    """``values`` as a compact JSON array of integers, ASCII bytes."""
    cdef Py_ssize_t n = values.shape[0], i, used = 0
    cdef char *out
    cdef char digits[MAX_CHARS]
    cdef int k
    cdef int64_t v
    cdef uint64_t u
    if n == 0:
        return b"[]"
    out = <char *> malloc(n * MAX_CHARS + 2)
    if out == NULL:
        raise MemoryError()
    try:
        with nogil:
            out[0] = b"["
            used = 1
            for i in range(n):
                if i:
                    out[used] = b","
                    used += 1
                v = values[i]
                if v < 0:
                    out[used] = b"-"
                    used += 1
                    u = (<uint64_t> 0) - <uint64_t> v
                else:
                    u = <uint64_t> v
                k = 0
                while True:
                    digits[k] = <char> (48 + u % 10)
                    k += 1
                    u //= 10
                    if u == 0:
                        break
                while k:
                    k -= 1
                    out[used] = digits[k]
                    used += 1
            out[used] = b"]"
            used += 1
        return PyBytes_FromStringAndSize(out, used)
    finally:
        free(out)
