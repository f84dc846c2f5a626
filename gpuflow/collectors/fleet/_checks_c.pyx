# cython: language_level=3, boundscheck=False, wraparound=False
"""The compiled twin of parse.py's checks: an agent's plain values checked into the snapshot's
objects, value by value, in C.

What parse.py's generated converters and their closures do (its module docstring says what is
checked), done without a Python frame per object or list and without a place string per value:
a check fails with :class:`FrameRefused` whose message is the place *below* the value it was
given (``.health: expected true or false``, ``[3].name: missing``), and each level the failure
passes through puts its own part in front, so the message that leaves a check called with
``at`` is ``at`` followed by that place: the same text the pure-Python twin builds eagerly for
every value, built here only for the one value that fails.

The kinds of check, each made by parse.py from the snapshot's field types (one plan for both
twins):

* :class:`Converter`: a dict into a dataclass object (``maker(*values)``), its fields each a
  scalar checked inline, a tuple of scalars of fixed length, or another check; a field named
  ``host`` takes the host the caller gives, when it gives one;
* :class:`Items`: a list of at most ``cap`` items, each checked, into a tuple; :class:`Taken`: an
  object the hub itself made (its kernel tables' entries, its lanes' columns) as it is;
* :class:`Scalar` and :class:`Optional`: one scalar as parse.py's ``_int`` … ``_bool`` check it,
  and None or the inner check.

Constraints: equal to parse.py's pure-Python checks on every input, hostile ones included (tests/
fleet/test_check_twins.py); runs on the hub's network thread for every value of every agent's
frame; nothing it is given is kept but the values it returns.
"""

from cpython.dict cimport PyDict_CheckExact, PyDict_GetItemWithError, PyDict_Next, PyDict_Size
from cpython.exc cimport PyErr_Occurred
from cpython.float cimport PyFloat_AS_DOUBLE, PyFloat_CheckExact
from cpython.list cimport PyList_CheckExact, PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_CheckExact
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_CheckExact, PyUnicode_GET_LENGTH
from libc.math cimport isfinite

cdef extern from *:
    """
    static PyObject *gpuflow_intern(PyObject *s) { Py_INCREF(s); PyUnicode_InternInPlace(&s); return s; }
    """
    object gpuflow_intern(object s)

# scalar kinds (parse.py's SCALAR_KINDS names them in this order)
DEF K_INT = 0
DEF K_FLOAT = 1
DEF K_STR = 2
DEF K_BOOL = 3
# how a Converter checks a field
DEF F_SCALAR = 0
DEF F_FIXED = 1
DEF F_CHECK = 2

cdef object _NO_HOST = object()   # a caller that gives no host
cdef object FrameRefused = None
cdef long long MAX_TEXT = 0
cdef object INLINE_SAYS = None      # the inline check's words, by scalar kind
cdef object MISSING = None


def configure(refused, long long max_text, inline_says, missing):
    """Set once by parse.py: its exception, its longest text, the inline checks' words (by scalar
    kind), and the sentinel of a field left out."""
    global FrameRefused, MAX_TEXT, INLINE_SAYS, MISSING
    FrameRefused, MAX_TEXT, INLINE_SAYS, MISSING = refused, max_text, tuple(inline_says), missing


cdef inline bint _is_int(object x):
    cdef int overflow = 0
    if not PyLong_CheckExact(x):
        return False
    PyLong_AsLongLongAndOverflow(x, &overflow)
    return overflow == 0


cdef inline bint _scalar_ok(object x, int kind):
    """Whether ``x`` passes the inline check of ``kind`` (parse.py's _INLINE)."""
    if kind == K_INT:
        return _is_int(x)
    if kind == K_FLOAT:
        return (PyFloat_CheckExact(x) and isfinite(PyFloat_AS_DOUBLE(x))) or _is_int(x)
    if kind == K_STR:
        return PyUnicode_CheckExact(x) and PyUnicode_GET_LENGTH(x) <= MAX_TEXT
    return x is True or x is False


cdef inline object _refused(str place, str says):
    return FrameRefused(place + ": " + says)


cdef inline object _below(str place, object exc):
    """``exc`` (a check's failure, its place below) raised again with ``place`` in front."""
    return FrameRefused(place + exc.args[0])


cdef class Check:
    """A check: ``check(v, at)`` is the value checked, or FrameRefused saying ``at`` and below."""

    cdef object run(self, object v, object host):
        raise NotImplementedError

    def __call__(self, v, str at, host=_NO_HOST):
        try:
            return self.run(v, MISSING if host is _NO_HOST else host)
        except FrameRefused as exc:
            raise _below(at, exc) from None


cdef class Scalar(Check):
    """parse.py's _int, _float, _str or _bool."""

    cdef int kind

    def __init__(self, int kind):
        self.kind = kind

    cdef object run(self, object v, object host):
        cdef int kind = self.kind
        if kind == K_FLOAT and PyFloat_CheckExact(v) and not isfinite(PyFloat_AS_DOUBLE(v)):
            raise _refused("", "expected a finite number")
        if not _scalar_ok(v, kind):
            if kind == K_FLOAT:
                raise _refused("", "expected a number")
            raise _refused("", INLINE_SAYS[kind])
        return gpuflow_intern(v) if kind == K_STR else v


cdef class Optional(Check):
    """None as it is, else the inner check."""

    cdef Check inner

    def __init__(self, Check inner):
        self.inner = inner

    cdef object run(self, object v, object host):
        return None if v is None else self.inner.run(v, MISSING)


cdef class Taken(Check):
    """An object the hub made itself taken as parse.py takes it (a ``Checked``: ``unwrap`` its
    items; a ``SpanColumns``: as it is), anything else the inner check."""

    cdef Check inner
    cdef object kind
    cdef bint unwrap

    def __init__(self, Check inner, kind, bint unwrap):
        self.inner, self.kind, self.unwrap = inner, kind, unwrap

    cdef object run(self, object v, object host):
        if self.unwrap:
            if isinstance(v, self.kind):
                return v.items
        elif type(v) is self.kind:
            return v
        return self.inner.run(v, host)


cdef class Items(Check):
    """A list of at most ``cap`` items into a tuple of each checked."""

    cdef Check inner
    cdef Py_ssize_t cap

    def __init__(self, Check inner, Py_ssize_t cap):
        self.inner, self.cap = inner, cap

    cdef object run(self, object v, object host):
        return self.each(v, MISSING)

    def tagged(self, v, str at, host):
        """The list ``v`` checked as by ``self(v, at)``, each item given ``host`` (parse.py's
        _tagged: every item of an agent's list under the name the hub gives it)."""
        try:
            return self.each(v, host)
        except FrameRefused as exc:
            raise _below(at, exc) from None

    cdef object each(self, object v, object host):
        cdef Py_ssize_t i, n
        cdef object out, x
        if not PyList_CheckExact(v):
            raise _refused("", "expected a list")
        n = PyList_GET_SIZE(v)
        if n > self.cap:
            raise _refused("", f"more than {self.cap} entries")
        out = PyTuple_New(n)
        for i in range(n):
            try:
                x = self.inner.run(<object>PyList_GET_ITEM(v, i), host)
            except FrameRefused as exc:
                raise _below(f"[{i}]", exc) from None
            Py_INCREF(x)
            PyTuple_SET_ITEM(out, i, x)
        return out


cdef class Converter(Check):
    """A dict into ``maker(*values)``, a field at a time. ``fields``: per field (its name, its
    default or MISSING, how it is checked (F_SCALAR, F_FIXED, F_CHECK), what with (a scalar kind,
    a tuple of them, a Check), whether None passes).

    Finding the fields: an agent writes an object's keys in one order, and orjson gives the same
    key text the same object from frame to frame (its key cache), so the dict is walked in its
    order and each key compared by identity with the key seen at that position before, which
    names its field; only a key not seen there is looked up (``index``). A hash lookup per field
    compared each field's name with orjson's key of another identity character by character: half
    of a GPU's checks. The values found are then checked in the fields' order, as before, so the
    result and the first refusal do not depend on how the keys were found. A dict of many more
    keys than fields (nothing an agent sends) is read by a lookup per field instead, so the time
    stays bounded by the fields, not by the keys a peer adds."""

    cdef object maker
    cdef tuple names, defaults, withs, places
    cdef int hows[256]
    cdef bint optionals[256]
    cdef Py_ssize_t n
    cdef Py_ssize_t host_at
    cdef dict index             # a field's name -> its position
    cdef list seen_keys         # the key found at each position of the dicts walked before
    cdef int seen_field[256]    # ... and its field (-1: none of them)
    cdef Py_ssize_t n_seen

    def __init__(self, maker, fields):
        fields = list(fields)
        if len(fields) > 256:
            raise TypeError("more than 256 fields")
        self.maker, self.n, self.host_at = maker, len(fields), -1
        self.names = tuple(f[0] for f in fields)
        self.defaults = tuple(f[1] for f in fields)
        self.withs = tuple(f[3] for f in fields)
        self.places = tuple("." + f[0] for f in fields)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.seen_keys = [None] * 256
        self.n_seen = 0
        for i, f in enumerate(fields):
            if f[2] not in (F_SCALAR, F_FIXED, F_CHECK):
                raise TypeError(f"no such way to check a field: {f[2]!r}")
            if f[2] == F_CHECK and not isinstance(f[3], Check):
                raise TypeError(f"{f[0]}: not a compiled check")
            self.hows[i], self.optionals[i] = f[2], bool(f[4])
            if f[0] == "host":
                self.host_at = i

    cdef int find(self, object v, PyObject **found) except -1:
        """Each field's value in ``v`` into ``found`` (NULL: not there), by the walk above."""
        cdef Py_ssize_t pos = 0, j = 0, i
        cdef PyObject *key
        cdef PyObject *value
        cdef PyObject *got
        cdef int field
        if PyDict_Size(v) > 2 * self.n + 8:
            for i in range(self.n):
                found[i] = PyDict_GetItemWithError(v, self.names[i])
                if found[i] == NULL and PyErr_Occurred():
                    return -1
            return 0
        for i in range(self.n):
            found[i] = NULL
        while PyDict_Next(v, &pos, &key, &value):
            if j < self.n_seen and key == <PyObject *>self.seen_keys[j]:
                field = self.seen_field[j]
            else:
                got = PyDict_GetItemWithError(self.index, <object>key)
                if got == NULL and PyErr_Occurred():
                    return -1
                field = <int><object>got if got != NULL else -1
                if j < 256:
                    self.seen_keys[j] = <object>key
                    self.seen_field[j] = field
                    if j >= self.n_seen:
                        self.n_seen = j + 1
            if field >= 0:
                found[field] = value
            j += 1
        return 0

    cdef object run(self, object v, object host):
        cdef Py_ssize_t i, k, m
        cdef PyObject *got
        cdef PyObject *found[256]
        cdef object x, values, w
        cdef int how
        if not PyDict_CheckExact(v):
            raise _refused("", "expected an object")
        self.find(v, found)
        values = PyTuple_New(self.n)
        for i in range(self.n):
            if i == self.host_at and host is not MISSING:
                x = host
            else:
                got = found[i]
                if got == NULL:
                    x = self.defaults[i]
                    if x is MISSING:
                        raise _refused(self.places[i], "missing")
                    Py_INCREF(x)
                    PyTuple_SET_ITEM(values, i, x)
                    continue
                x = <object>got
            how = self.hows[i]
            if x is None and self.optionals[i]:
                pass
            elif how == F_SCALAR:
                if not _scalar_ok(x, self.withs[i]):
                    raise _refused(self.places[i], INLINE_SAYS[self.withs[i]])
                if self.withs[i] == K_STR:
                    x = gpuflow_intern(x)
            elif how == F_FIXED:
                w = self.withs[i]
                m = len(w)
                if not PyList_CheckExact(x) or PyList_GET_SIZE(x) != m:
                    raise _refused(self.places[i], f"expected a list of {m} values")
                for k in range(m):
                    if not _scalar_ok(<object>PyList_GET_ITEM(x, k), w[k]):
                        raise _refused(self.places[i], f"expected a list of {m} values")
                x = tuple(x)
            else:
                try:
                    x = (<Check>self.withs[i]).run(x, MISSING)
                except FrameRefused as exc:
                    raise _below(self.places[i], exc) from None
            Py_INCREF(x)
            PyTuple_SET_ITEM(values, i, x)
        return self.maker(*values)
