# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of ``_rows_py``: a lane's span rows read into a SpanColumns in one pass, checked.

The hot path of a hub watching a host (bench/hub.py's full-detail figure): every span of every
lane of every frame the host's agent sends. One loop over the rows reads each value with an exact
type check (an int is a ``PyLong`` exactly: a bool is not one) and a 64-bit bound, keeps the
running seq and start with overflow-checked additions, and writes the thirteen columns straight
into the buffers of their ``array('q')`` objects; the only Python calls are for a name the lane
has not used yet (``names[name_id][0]``, interned). Which rows fit, and why the answer is None
otherwise, is ``_rows_py``'s opening, word for word. :func:`concat` joins two lanes' columns with
two buffer copies a column. The columns are wrapped by ``_rows_py.made`` (no constructor checks:
the arrays are made here, each of the lane's length).

Constraints: equal to ``_rows_py`` on every input, hostile ones included (tests/fleet/
test_lane_columns.py compares both with the reference reading); reads its arguments, never
changes them; never undefined behaviour on an agent's values.
"""

from cpython.array cimport array, clone
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.object cimport PyObject
from libc.string cimport memcpy

import sys

cimport cython

from gpuflow.collectors.fleet._rows_py import made

is_compiled = True

cdef extern from "Python.h":
    bint PyLong_CheckExact(object o)
    bint PyList_CheckExact(object o)
    bint PyUnicode_CheckExact(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)

cdef extern from *:
    bint add_overflow "__builtin_add_overflow" (long long a, long long b, long long *out) nogil

DEF KERNEL = 0
DEF KINDS = 3
DEF DIRECTIONS = 6
DEF NONE = -1

cdef array TEMPLATE = array("q")
_intern = sys.intern


cdef inline bint int64_of(object v, long long *out):
    """Whether ``v`` is an int (exactly) within int64; its value into ``out``."""
    cdef int overflow = 0
    cdef long long x
    if not PyLong_CheckExact(v):
        return False
    x = PyLong_AsLongLongAndOverflow(v, &overflow)
    if overflow != 0:
        return False
    out[0] = x
    return True


cdef inline bint geometry(object g, long long *x, long long *y, long long *z):
    """A grid or a block: an int ``x`` (x, 1, 1), or a list of three ints."""
    if PyLong_CheckExact(g):
        y[0] = 1
        z[0] = 1
        return int64_of(g, x)
    if not PyList_CheckExact(g) or PyList_GET_SIZE(g) != 3:
        return False
    return (int64_of(<object> PyList_GET_ITEM(g, 0), x) and int64_of(<object> PyList_GET_ITEM(g, 1), y)
            and int64_of(<object> PyList_GET_ITEM(g, 2), z))


cdef class _Names:
    """The lane's names, in order of first use, from the process's names table."""

    cdef list table
    cdef Py_ssize_t max_text
    cdef list names
    cdef dict index
    cdef dict by_id

    def __cinit__(self, list table, Py_ssize_t max_text):
        self.table, self.max_text = table, max_text
        self.names, self.index, self.by_id = [], {}, {}

    @cython.boundscheck(True)   # entry[0] of an agent's entry: an empty list is an IndexError, not a read
    @cython.wraparound(True)    # past its end (the module's directives are for the arrays' buffers)
    cdef bint of(self, object name_id, long long *out) except -1:
        """The lane's index of ``name_id`` into ``out``; False: it names no usable entry."""
        cdef long long i = 0
        cdef object known, name
        if name_id is None:
            out[0] = NONE
            return True
        if not int64_of(name_id, &i) or i < 0 or i >= PyList_GET_SIZE(self.table):
            return False
        known = self.by_id.get(name_id)
        if known is not None:
            out[0] = <long long> known
            return True
        try:
            name = (<object> PyList_GET_ITEM(self.table, i))[0]
        except Exception:   # not an entry decode_spans could read a name from
            return False
        if name is None:
            out[0] = NONE
        elif PyUnicode_CheckExact(name) and PyUnicode_GET_LENGTH(name) <= self.max_text:
            name = _intern(name)
            known = self.index.get(name)
            if known is None:
                known = self.index[name] = len(self.names)
                self.names.append(name)
            out[0] = <long long> known
        else:
            return False
        self.by_id[name_id] = out[0]
        return True


def columns(list rows, list names, Py_ssize_t max_text):
    """``rows`` (a non-empty list) as a SpanColumns; None where they do not fit (``_rows_py``)."""
    cdef Py_ssize_t n = PyList_GET_SIZE(rows), i, m
    cdef array seq = clone(TEMPLATE, n, False), start = clone(TEMPLATE, n, False)
    cdef array dur = clone(TEMPLATE, n, False), kind = clone(TEMPLATE, n, False)
    cdef array name = clone(TEMPLATE, n, False), nbytes = clone(TEMPLATE, n, False)
    cdef array direction = clone(TEMPLATE, n, False)
    cdef array gx = clone(TEMPLATE, n, False), gy = clone(TEMPLATE, n, False), gz = clone(TEMPLATE, n, False)
    cdef array bx = clone(TEMPLATE, n, False), by = clone(TEMPLATE, n, False), bz = clone(TEMPLATE, n, False)
    cdef long long s = 0, t = 0, d_seq = 0, d_start = 0, d = 0, k = 0, v = 0
    cdef object r, x
    cdef _Names lane_names = _Names(names, max_text)
    for i in range(n):
        r = <object> PyList_GET_ITEM(rows, i)
        if not PyList_CheckExact(r):
            return None
        m = PyList_GET_SIZE(r)
        if m < 4:
            return None
        if not (int64_of(<object> PyList_GET_ITEM(r, 0), &d_seq) and int64_of(<object> PyList_GET_ITEM(r, 1), &d_start)
                and int64_of(<object> PyList_GET_ITEM(r, 2), &d) and int64_of(<object> PyList_GET_ITEM(r, 3), &k)):
            return None
        if i > 0 and d_seq <= 0:
            return None
        if add_overflow(s, d_seq, &s) or add_overflow(t, d_start, &t):
            return None
        seq.data.as_longlongs[i] = s
        start.data.as_longlongs[i] = t
        dur.data.as_longlongs[i] = d
        kind.data.as_longlongs[i] = k
        if k == KERNEL:
            if m != 7 or not lane_names.of(<object> PyList_GET_ITEM(r, 4), &name.data.as_longlongs[i]):
                return None
            if not geometry(<object> PyList_GET_ITEM(r, 5), &gx.data.as_longlongs[i], &gy.data.as_longlongs[i],
                            &gz.data.as_longlongs[i]):
                return None
            if not geometry(<object> PyList_GET_ITEM(r, 6), &bx.data.as_longlongs[i], &by.data.as_longlongs[i],
                            &bz.data.as_longlongs[i]):
                return None
            nbytes.data.as_longlongs[i] = NONE
            direction.data.as_longlongs[i] = NONE
        elif 0 < k < KINDS:
            if m > 6:
                return None
            v = NONE
            if m > 4:
                x = <object> PyList_GET_ITEM(r, 4)
                if x is not None and (not int64_of(x, &v) or v < 0):
                    return None
            nbytes.data.as_longlongs[i] = v
            v = NONE
            if m > 5:
                x = <object> PyList_GET_ITEM(r, 5)
                if x is not None and (not int64_of(x, &v) or v < 0 or v >= DIRECTIONS):
                    return None
            direction.data.as_longlongs[i] = v
            name.data.as_longlongs[i] = NONE
            gx.data.as_longlongs[i] = NONE
            gy.data.as_longlongs[i] = NONE
            gz.data.as_longlongs[i] = NONE
            bx.data.as_longlongs[i] = NONE
            by.data.as_longlongs[i] = NONE
            bz.data.as_longlongs[i] = NONE
        else:
            return None
    return made((seq, start, dur, kind, name, gx, gy, gz, bx, by, bz, nbytes, direction), tuple(lane_names.names))


cdef tuple COLUMNS = ("seq", "start_us", "dur_ns", "kind", "name", "grid_x", "grid_y", "grid_z",
                      "block_x", "block_y", "block_z", "bytes", "direction")


def concat(kept, Py_ssize_t cut, new, array new_name):
    """The thirteen columns of ``kept`` from row ``cut`` on, then ``new``'s, with ``new_name`` for
    ``new``'s name column: a list of new arrays, each made by two copies of the buffers."""
    cdef Py_ssize_t k = len(kept) - cut, m = len(new)
    cdef array a, b, joined
    cdef list out = []
    if cut < 0 or k < 0:
        raise IndexError(f"row {cut} of {len(kept)}")
    for column in COLUMNS:
        a = getattr(kept, column)
        b = new_name if column == "name" else getattr(new, column)
        if a.ob_descr.typecode != b"q" or b.ob_descr.typecode != b"q" or len(a) != k + cut or len(b) != m:
            raise ValueError(f"the {column} columns are not int64 columns of their lanes' lengths")
        joined = clone(TEMPLATE, k + m, False)
        memcpy(joined.data.as_longlongs, a.data.as_longlongs + cut, k * sizeof(long long))
        memcpy(joined.data.as_longlongs + k, b.data.as_longlongs, m * sizeof(long long))
        out.append(joined)
    return out
