# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of ``_kernel_table_py``: a traced process's kernel table brought up to date from
the decoder's aggregates, ready to be put in kernel order (what it does: that module's opening).

What it is for: the snapshot builder makes a new frozen KernelStat for every kernel whose figures
moved, up to 20 times a second per traced process (~1,600 a build under bench/agent_rss.py's 8
programs); through the dataclass's ``__init__`` (or ``dataclasses.replace``) each costs a few
microseconds of the agent's CPU on a small VM, the largest part of a build. Here a changed one is
made as a copy of the one it replaces, the five figures from the decoder's row and every other
field as it was, written straight into the new object's slots.

How: a frozen slotted dataclass keeps each field in a slot, at an offset its member descriptor
(``PyMemberDescrObject``) gives. For such a type (every field an object slot, ``T_OBJECT_EX``) the
fields are read and the copy's are set through those offsets, as the slots' own descriptors do
(the dataclass's ``__init__`` sets them through ``object.__setattr__``, which ends there too). Any
other dataclass is copied through ``PyObject_GenericSetAttr``, field by field.

The builder passes the decoder's rows packed (``RingDecoder.kernel_rows``: one array('Q'), no
tuple and six ints a name); a shown kernel's row is compared with its stat in C, and a figure
that did not move keeps its int. A copy that holds only ints, text, floats, bools and None (a
KernelStat always does) is untracked by the cyclic garbage collector, as CPython untracks such
tuples and dicts: it can be in no reference cycle, and ~1,600 of them a build (8 busy programs)
were most of what each collection went over, and what filled its oldest generation.

Constraints: the same answer and the same ``shown`` as ``_kernel_table_py``
(tests/cupti/test_kernel_table.py compares them field for field and type for type); the stats'
type must be a dataclass with the five figure fields; holds the GIL throughout.
"""

from cpython cimport array as carray
from cpython.dict cimport PyDict_GetItem
from cpython.exc cimport PyErr_Clear, PyErr_Occurred
from cpython.object cimport Py_EQ, PyObject, PyObject_RichCompareBool, PyTypeObject
from cpython.ref cimport Py_INCREF
from cpython.type cimport PyType_GenericAlloc
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_AsUnsignedLongLong, PyLong_CheckExact
from cpython.long cimport PyLong_FromUnsignedLongLong
from cpython.unicode cimport PyUnicode_Compare
from libc.stdlib cimport free, malloc
from array import array
from types import MemberDescriptorType
from dataclasses import fields as dataclass_fields

is_compiled = True

cdef extern from "Python.h":
    int PyObject_GenericSetAttr(object o, object name, object value) except -1
    void PyObject_GC_UnTrack(void *op)
    bint PyUnicode_CheckExact(PyObject *o)
    bint PyFloat_CheckExact(PyObject *o)
    bint PyBool_Check(PyObject *o)
    PyObject *Py_None
    ctypedef struct PyMemberDef:
        const char *name
        int type
        Py_ssize_t offset
        int flags
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member

#: a member's type when it is a plain object slot (``T_OBJECT_EX``, 3.12's ``Py_T_OBJECT_EX``)
DEF OBJECT_SLOT = 16
#: the most fields a copied type may have through slots (a KernelStat has 7)
DEF MAX_FIELDS = 64

#: the figures a decoder's row gives, by field name: index in the row
_FIGURES = {"count": 1, "timed": 2, "total_ns": 3, "min_ns": 4, "max_ns": 5}
#: the names a table is ordered by, after the figures
_TEXTS = {"name": 6, "mangled": 7}


cdef class Layout:
    """How the fields of one dataclass type are read and set: by slot offset when every field is
    an object slot, else by name."""
    cdef readonly tuple names   # the fields, in order
    cdef readonly tuple figure  # per field: its index in a decoder's row, or -1
    cdef bint slotted
    cdef bint bare              # an instance holds nothing but its fields' slots (no __dict__, no weakrefs)
    cdef Py_ssize_t n
    cdef Py_ssize_t offsets[MAX_FIELDS]
    cdef int row_index[MAX_FIELDS]
    cdef Py_ssize_t at[8]       # by row index 1..5, then name (6) and mangled (7): their slot offsets

    def __init__(self, type cls):
        cdef Py_ssize_t i
        cdef PyMemberDef *member
        self.names = tuple(f.name for f in dataclass_fields(cls))
        self.figure = tuple(_FIGURES.get(name, -1) for name in self.names)
        missing = (set(_FIGURES) | set(_TEXTS)) - set(self.names)
        if missing:
            raise TypeError(f"{cls.__name__} has no field {sorted(missing)[0]!r}")
        self.n = len(self.names)
        # made as object.__new__ makes it (the generic allocation, a Python class's own) only
        # when the class has no __new__ of its own
        self.slotted = self.n <= MAX_FIELDS and cls.__new__ is object.__new__
        for i in range(self.n):
            if not self.slotted:
                break
            descriptor = next((vars(base)[self.names[i]] for base in cls.__mro__
                               if self.names[i] in vars(base)), None)
            if type(descriptor) is not MemberDescriptorType:
                self.slotted = False
                break
            member = (<PyMemberDescrObject *> <PyObject *> descriptor).d_member
            if member.type != OBJECT_SLOT:
                self.slotted = False
                break
            self.offsets[i] = member.offset
            self.row_index[i] = self.figure[i]
            if self.figure[i] > 0:
                self.at[self.figure[i]] = member.offset
            elif self.names[i] in _TEXTS:
                self.at[_TEXTS[self.names[i]]] = member.offset
        self.bare = (self.slotted and cls.__dictoffset__ == 0 and cls.__weakrefoffset__ == 0
                     and cls.__basicsize__ == object.__basicsize__ + self.n * sizeof(PyObject *))


cdef dict _LAYOUTS = {}


cdef Layout layout_of(type cls):
    cdef Layout found = _LAYOUTS.get(cls)
    if found is None:
        found = _LAYOUTS[cls] = Layout(cls)
    return found


cdef inline PyObject *slot(object obj, Py_ssize_t offset) noexcept:
    return (<PyObject **> ((<char *> <PyObject *> obj) + offset))[0]


cdef object figure(object stat, Layout lay, int index, str name):
    """One of the five figures of ``stat``."""
    cdef PyObject *value
    if lay.slotted:
        value = slot(stat, lay.at[index])
        if value != NULL:
            return <object> value
    return getattr(stat, name)


cdef object copy_with(object stat, Layout lay, tuple row):
    """A new object of ``stat``'s type: the row's figures, every other field as ``stat`` has it."""
    cdef type cls = type(stat)
    cdef Py_ssize_t i
    cdef PyObject *value
    if lay.slotted:
        new = PyType_GenericAlloc(cls, 0)   # what object.__new__ makes of a class without __new__
        for i in range(lay.n):
            if lay.row_index[i] > 0:
                value = <PyObject *> row[lay.row_index[i]]
            else:
                value = slot(stat, lay.offsets[i])
                if value == NULL:   # a field never set: the copy raises for it as the original does
                    continue
            Py_INCREF(<object> value)
            (<PyObject **> ((<char *> <PyObject *> new) + lay.offsets[i]))[0] = value
        return untracked_if_atomic(new, lay)
    new = cls.__new__(cls)
    for i in range(lay.n):
        name = lay.names[i]
        PyObject_GenericSetAttr(new, name, row[lay.figure[i]] if lay.figure[i] > 0 else getattr(stat, name))
    return new


def sort_key(stat, name_id):
    """A kernel's place in its table (``_kernel_table_py.sort_key``)."""
    return (-stat.total_ns, -stat.count, stat.name, stat.mangled, name_id, stat)


cdef inline bint atomic(PyObject *value) noexcept:
    """A value no reference cycle can pass through (what CPython's own tuples and dicts are
    untracked for holding)."""
    return (value == Py_None or PyLong_CheckExact(<object>value) or PyUnicode_CheckExact(value)
            or PyFloat_CheckExact(value) or PyBool_Check(value))


cdef object untracked_if_atomic(object new, Layout lay):
    """``new`` (a copy just made) no longer followed by the cyclic garbage collector when every
    field it holds is an int, str, float, bool or None, so that it can be in no cycle: a busy
    process's table makes ~200 of them a build, and each collection would otherwise go over them
    (and, once they survive one, the oldest generation's collections too)."""
    cdef Py_ssize_t i
    cdef PyObject *value
    if not lay.bare:
        return new
    for i in range(lay.n):
        value = slot(new, lay.offsets[i])
        if value != NULL and not atomic(value):
            return new
    PyObject_GC_UnTrack(<PyObject *> new)
    return new


#: the row indexes of the figures in the order the twin compares them: count, total, timed, min, max
cdef int[5] FIGURE_ORDER = [1, 3, 2, 4, 5]


cdef tuple row_tuple(const unsigned long long *r):
    """A packed row (``RingDecoder.kernel_rows``) as the decoder's ``kernels()`` gives it."""
    return (r[0], r[1], r[2], r[3], r[4] if r[2] else None, r[5] if r[2] else None)


cdef bint same_value(PyObject *value, unsigned long long x, bint none) except -1:
    """Whether a figure (a slot's value) == the row's (``None`` when ``none``), as ``==`` says."""
    cdef unsigned long long got
    if value == Py_None:
        return none
    if PyLong_CheckExact(<object>value):
        if none:
            return False
        got = PyLong_AsUnsignedLongLong(<object>value)
        if got == <unsigned long long>-1 and PyErr_Occurred() != NULL:   # negative, or beyond 64 bits
            PyErr_Clear()
            return False
        return got == x
    return PyObject_RichCompareBool(<object>value, None if none else PyLong_FromUnsignedLongLong(x), Py_EQ)


cdef bint same_figures(object stat, Layout lay, const unsigned long long *r) except -1:
    """Whether ``stat``'s five figures are the packed row's (refresh's test, with the row's values)."""
    cdef int j, index
    cdef PyObject *value
    cdef bint none = r[2] == 0
    if lay.slotted:
        for j in range(5):
            index = FIGURE_ORDER[j]
            value = slot(stat, lay.at[index])
            if value == NULL:
                break
            if not same_value(value, r[index], none and index >= 4):
                return False
        else:
            return True
    row = row_tuple(r)
    return (stat.count == row[1] and stat.total_ns == row[3] and stat.timed == row[2]
            and stat.min_ns == row[4] and stat.max_ns == row[5])


cdef object copy_packed(object stat, Layout lay, const unsigned long long *r):
    """``copy_with`` from a packed row: a figure equal to the one it replaces (an int, or None)
    keeps that object, so a min and a max that did not move make no new int."""
    cdef type cls = type(stat)
    cdef Py_ssize_t i
    cdef int index
    cdef PyObject *value
    cdef bint none
    if not lay.slotted:
        return copy_with(stat, lay, row_tuple(r))
    new = PyType_GenericAlloc(cls, 0)
    for i in range(lay.n):
        index = lay.row_index[i]
        value = slot(stat, lay.offsets[i])
        if index > 0:
            none = index >= 4 and r[2] == 0
            if value == NULL or not ((value == Py_None and none) or (
                    PyLong_CheckExact(<object>value) and same_value(value, r[index], none))):
                figure_value = None if none else PyLong_FromUnsignedLongLong(r[index])
                value = <PyObject *> figure_value
        if value == NULL:   # a field never set: the copy raises for it as the original does
            continue
        Py_INCREF(<object> value)
        (<PyObject **> ((<char *> <PyObject *> new) + lay.offsets[i]))[0] = value
    return untracked_if_atomic(new, lay)


cdef tuple refresh_packed(carray.array packed, dict shown):
    """refresh() of a decoder's kernel_rows: no tuple or int made for a row whose kernel is shown."""
    cdef list stats = [], ids = [], unknown = []
    cdef Py_ssize_t i, n = len(packed)
    cdef const unsigned long long *r
    cdef PyObject *found
    cdef Layout lay = None
    cdef type lay_type = None
    if packed.typecode != "Q":
        raise TypeError(f"packed kernel rows are an array('Q'), not array({packed.typecode!r})")
    if n % 6:
        raise ValueError(f"packed kernel rows hold 6 values a row, not {n} values")
    for i in range(0, n, 6):
        r = &(<const unsigned long long *> packed.data.as_ulonglongs)[i]
        name_id = PyLong_FromUnsignedLongLong(r[0])
        found = PyDict_GetItem(shown, name_id)
        if found == NULL:
            unknown.append(row_tuple(r))
            continue
        stat = <object> found
        if type(stat) is not lay_type:
            lay_type = type(stat)
            lay = layout_of(lay_type)
        if not same_figures(stat, lay, r):
            stat = copy_packed(stat, lay, r)
            shown[name_id] = stat
        stats.append(stat)
        ids.append(name_id)
    return stats, ids, unknown


def refresh(rows, dict shown):
    """Bring ``shown`` up to date with ``rows`` (a decoder's ``kernels()``, or its packed
    ``kernel_rows()``); the shown kernels' stats and name ids, and the rows of the others
    (``_kernel_table_py.refresh``)."""
    if type(rows) is array:
        return refresh_packed(rows, shown)
    cdef list stats = [], ids = [], unknown = []
    cdef tuple row
    cdef Layout lay = None
    cdef type lay_type = None
    for row in rows:
        if len(row) != 6:
            raise ValueError(f"a kernel row has 6 figures, not {len(row)}")
        name_id = row[0]
        stat = shown.get(name_id)
        if stat is None:
            unknown.append(row)
            continue
        if type(stat) is not lay_type:
            lay_type = type(stat)
            lay = layout_of(lay_type)
        if not (figure(stat, lay, 1, "count") == row[1] and figure(stat, lay, 3, "total_ns") == row[3]
                and figure(stat, lay, 2, "timed") == row[2] and figure(stat, lay, 4, "min_ns") == row[4]
                and figure(stat, lay, 5, "max_ns") == row[5]):
            stat = copy_with(stat, lay, row)
            shown[name_id] = stat
        stats.append(stat)
        ids.append(name_id)
    return stats, ids, unknown


cdef struct Entry:
    unsigned long long total
    unsigned long long count
    PyObject *name      # borrowed: the stats list holds the stats, the stats their fields
    PyObject *mangled
    long long name_id
    Py_ssize_t index


cdef extern from "stdlib.h":
    void qsort(void *base, size_t n, size_t size, int (*compare)(const void *, const void *) noexcept)


cdef int by_kernel_order(const void *pa, const void *pb) noexcept:
    """kernel_order, then the name id: total time and launches descending, name, mangled name."""
    cdef const Entry *a = <const Entry *> pa
    cdef const Entry *b = <const Entry *> pb
    cdef int c
    if a.total != b.total:
        return -1 if a.total > b.total else 1
    if a.count != b.count:
        return -1 if a.count > b.count else 1
    c = PyUnicode_Compare(<object> a.name, <object> b.name)   # both str: it cannot fail
    if c == 0:
        c = PyUnicode_Compare(<object> a.mangled, <object> b.mangled)
    if c == 0 and a.name_id != b.name_id:
        c = -1 if a.name_id < b.name_id else 1
    return c


def ordered(list stats, list ids):
    """``stats`` (with their name ids) in kernel order, a tie broken by the name id
    (``_kernel_table_py.ordered``). Sorted in C when every stat has a total and a count in
    0..2**64-1, a str name and mangled name and an int64 name id; else as the twin sorts."""
    cdef Py_ssize_t n = len(stats), i
    cdef Entry *entries
    cdef object stat, name, mangled, total, count, name_id
    cdef Layout lay = None
    cdef type lay_type = None
    if len(ids) != n:
        raise ValueError(f"{len(ids)} name ids for {n} stats")
    entries = <Entry *> malloc(max(n, 1) * sizeof(Entry))
    if entries == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            stat = stats[i]
            name_id = ids[i]
            if type(stat) is not lay_type:
                lay_type = type(stat)
                lay = layout_of(lay_type)
            total, count = figure(stat, lay, 3, "total_ns"), figure(stat, lay, 1, "count")
            name, mangled = figure(stat, lay, 6, "name"), figure(stat, lay, 7, "mangled")
            if not (type(total) is int and type(count) is int and type(name) is str and type(mangled) is str
                    and type(name_id) is int and as_u64(total, &entries[i].total)
                    and as_u64(count, &entries[i].count) and as_i64(name_id, &entries[i].name_id)):
                return tuple(key[5] for key in sorted(map(sort_key, stats, ids)))
            entries[i].name = <PyObject *> name
            entries[i].mangled = <PyObject *> mangled
            entries[i].index = i
        qsort(entries, n, sizeof(Entry), by_kernel_order)
        return tuple([stats[entries[i].index] for i in range(n)])
    finally:
        free(entries)


cdef bint as_u64(object v, unsigned long long *out) except -1:
    """``v`` (an int) into ``out``; False when it is not within 0..2**64-1."""
    try:
        out[0] = PyLong_AsUnsignedLongLong(v)
    except OverflowError:   # negative, or beyond 64 bits
        return False
    return True


cdef bint as_i64(object v, long long *out) except -1:
    """``v`` (an int) into ``out``; False when it is not an int64."""
    cdef int overflow = 0
    out[0] = PyLong_AsLongLongAndOverflow(v, &overflow)
    return not overflow
