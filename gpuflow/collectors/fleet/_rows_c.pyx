# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of ``_rows_py``: a lane's span rows read into a SpanColumns in one pass, checked.

The hot path of a hub watching a host (bench/hub.py's full-detail figure): every span of every
lane of every frame the host's agent sends. One loop over the rows reads each value with an exact
type check (an int is a ``PyLong`` exactly: a bool is not one) and a 64-bit bound, keeps the
running seq and start with overflow-checked additions, and writes the thirteen columns straight
into the buffers of their ``array('q')`` objects; the only Python calls are for a name the lane
has not used yet (``names[name_id][0]``, interned). Which rows fit, and why the answer is None
otherwise, is ``_rows_py``'s opening, word for word. :func:`join` joins two lanes' columns in
one call: two buffer copies a column, the new name column remapped as it is copied where its names
are not a prefix of the kept ones'. The columns are wrapped as ``_rows_py.made`` wraps them, their
instance's attributes set in C (no constructor checks: the arrays are made here, each of the lane's
length).

Constraints: equal to ``_rows_py`` on every input, hostile ones included (tests/fleet/
test_lane_columns.py compares both with the reference reading); reads its arguments, never
changes them; never undefined behaviour on an agent's values.
"""

from cpython.array cimport array, clone
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.object cimport PyObject
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

import sys

cimport cython

from gpuflow.core._exact_int cimport int64_of

from gpuflow.collectors.fleet import _rows_py
from gpuflow.core.recorded import SpanColumns

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
cdef object _new_object = object.__new__


cdef object made(object columns, tuple names):
    """``_rows_py.made``: a SpanColumns of the thirteen ``columns`` (in its fields' order, as
    _rows_py checks on import) and ``names``, its attributes set straight into its ``__dict__``."""
    cdef Py_ssize_t i
    out = _new_object(SpanColumns)
    cdef dict values = out.__dict__
    for i in range(13):
        values[COLUMNS[i]] = columns[i]
    values["names"] = names
    return out


cdef inline array int64_column(object spans, str column, Py_ssize_t n):
    """``spans``' column, checked to be an int64 array of ``n`` values (what a join copies)."""
    cdef array a = getattr(spans, column)
    if a.ob_descr.typecode != b"q" or len(a) != n:
        raise ValueError(f"the {column} columns are not int64 columns of their lanes' lengths")
    return a


cdef inline bint is_prefix(tuple part, tuple whole):
    """``part == whole[:len(part)]``, as tuples compare (identity, then equality)."""
    cdef Py_ssize_t i, n = PyTuple_GET_SIZE(part)
    if n > PyTuple_GET_SIZE(whole):
        return False
    for i in range(n):
        a = <object> PyTuple_GET_ITEM(part, i)
        b = <object> PyTuple_GET_ITEM(whole, i)
        if a is not b and not (a == b):
            return False
    return True


def join(kept, new, Py_ssize_t size):
    """``_rows_py.join`` in one call: the last ``size`` spans of ``kept`` then ``new`` (both
    SpanColumns) as columns, ``()`` for a size of 0 or less, None where ``new`` does not continue
    ``kept`` in seq order. The names are matched here (``new``'s a prefix of ``kept``'s, the
    steady state: nothing to remap; else by a dict, as the twin does) and ``new``'s name column
    remapped as it is copied. A trim that drops every kept span, and a join that would name more
    names than it has spans (which the twin compacts), are the twin's, called from here."""
    cdef array kept_seq = kept.seq, new_seq = new.seq, a, b, joined
    cdef Py_ssize_t k, m, cut, start, rows, j, n_new_names
    cdef long long v
    cdef long long *remap = NULL
    cdef tuple kept_names, new_names, names
    cdef list out
    if size <= 0:
        return ()
    k, m = len(kept_seq), len(new_seq)
    if k == 0 or m == 0 or k + m - size >= k:   # one side whole or trimmed: no copy of both
        return _rows_py.join(kept, new, size)
    if new_seq.ob_descr.typecode != b"q" or kept_seq.ob_descr.typecode != b"q":
        raise ValueError("the seq columns are not int64 columns")
    if new_seq.data.as_longlongs[0] <= kept_seq.data.as_longlongs[k - 1]:
        return None
    cut = k + m - size
    start = cut if cut > 0 else 0
    rows = k - start + m
    kept_names, new_names = kept.names, new.names
    n_new_names = PyTuple_GET_SIZE(new_names)
    if is_prefix(new_names, kept_names):
        names = kept_names
    else:
        index = {n: i for i, n in enumerate(kept_names)}
        for n in new_names:
            index.setdefault(n, len(index))
        names = tuple(index)
        remap = <long long *> malloc((n_new_names + 1) * sizeof(long long))
        if remap == NULL:
            raise MemoryError()
        for j in range(n_new_names):
            remap[j] = index[<object> PyTuple_GET_ITEM(new_names, j)]
    try:
        if PyTuple_GET_SIZE(names) > rows:   # the twin compacts the names: its way, whole
            return _rows_py.join(kept, new, size)
        out = []
        for column in COLUMNS:
            a = int64_column(kept, column, k)
            b = int64_column(new, column, m)
            joined = clone(TEMPLATE, rows, False)
            memcpy(joined.data.as_longlongs, a.data.as_longlongs + start, (k - start) * sizeof(long long))
            if remap == NULL or column != "name":
                memcpy(joined.data.as_longlongs + k - start, b.data.as_longlongs, m * sizeof(long long))
            else:
                for j in range(m):
                    v = b.data.as_longlongs[j]
                    if v != NONE:
                        if v < 0 or v >= n_new_names:
                            raise KeyError(v)   # as the twin's remap of a name id it lacks
                        v = remap[v]
                    joined.data.as_longlongs[k - start + j] = v
            out.append(joined)
        return made(out, names)
    finally:
        free(remap)
