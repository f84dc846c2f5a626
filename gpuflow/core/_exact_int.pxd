# cython: language_level=3
"""An untrusted value read as an int64, exactly: the one definition the compiled readers share.

What it is for: a hub's compiled readers (``gpuflow/collectors/fleet/_rows_c.pyx``) and the
frame encoder's compiled lanes (``gpuflow/transport/_wire_text_c.pyx``) take a value as an int64
only when it is an ``int`` exactly (a bool is not one) and fits, and otherwise go another way; this
says so once.

Constraints: inline, no Python call beyond CPython's own conversion, which cannot fail on an exact
int (an overflow is a flag, not an error).
"""

from cpython.long cimport PyLong_AsLongLongAndOverflow

cdef extern from "Python.h":
    bint PyLong_CheckExact(object o)


cdef inline bint int64_of(object v, long long *out):
    """Whether ``v`` is an int (exactly, not a bool) within int64; its value into ``out``."""
    cdef int overflow = 0
    cdef long long x
    if not PyLong_CheckExact(v):
        return False
    x = PyLong_AsLongLongAndOverflow(v, &overflow)
    if overflow != 0:
        return False
    out[0] = x
    return True
