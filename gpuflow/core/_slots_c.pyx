# cython: language_level=3
"""The compiled twin of frozen.py's positional constructor: a frozen, slotted dataclass's object
made from its fields in order, each stored straight into its slot.

What the generated ``make`` of the pure-Python twin does through each field's slot descriptor
(``object.__new__``, then ``descriptor.__set__(obj, value)``: ~140 ns a field, the call's cost),
done in C: the class's own allocator, then each value stored at its slot's offset, as the
descriptor itself stores it. A hub makes some 110 fields' objects a GPU of every agent's frame.

Constraints: only for what frozen.py's ``_can_bypass`` accepts, and only when every field is a
plain object slot (``T_OBJECT_EX``, writable) of the class itself, checked once here: anything else
raises TypeError and frozen.py keeps its twin. The object is the one the constructor makes: same
class, same slot values.
"""

from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
import types

cdef extern from "structmember.h":
    ctypedef struct PyMemberDef:
        const char *name
        int type
        Py_ssize_t offset
        int flags
    int T_OBJECT_EX
    int READONLY

cdef extern from "Python.h":
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member

cdef extern from *:
    """
    static PyObject *gpuflow_slots_alloc(PyObject *cls) {
        PyTypeObject *t = (PyTypeObject *)cls;
        return t->tp_alloc(t, 0);
    }
    static Py_ssize_t gpuflow_slots_basicsize(PyObject *cls) { return ((PyTypeObject *)cls)->tp_basicsize; }
    """
    object gpuflow_slots_alloc(object cls)
    Py_ssize_t gpuflow_slots_basicsize(object cls)


cdef class SlotMaker:
    """``maker(*values)``: ``cls(*values)`` for a frozen, slotted dataclass, every field in order."""

    cdef object cls
    cdef Py_ssize_t n
    cdef Py_ssize_t offsets[256]
    cdef readonly str __name__

    def __init__(self, cls, names):
        names = tuple(names)
        if len(names) > 256:
            raise TypeError("more than 256 fields")
        size = gpuflow_slots_basicsize(cls)
        for i, name in enumerate(names):
            descr = cls.__dict__.get(name)
            if type(descr) is not types.MemberDescriptorType:
                raise TypeError(f"{cls.__name__}.{name} is not a slot of the class")
            member = (<PyMemberDescrObject *><PyObject *>descr).d_member
            if member.type != T_OBJECT_EX or member.flags & READONLY or not 0 < member.offset <= size - sizeof(PyObject *):
                raise TypeError(f"{cls.__name__}.{name} is not a writable object slot")
            self.offsets[i] = member.offset
        self.cls = cls
        self.n = len(names)
        self.__name__ = f"make_{cls.__name__}"

    def __call__(self, *values):
        cdef Py_ssize_t i
        cdef PyObject *value
        cdef PyObject **slot
        cdef PyObject *old
        if PyTuple_GET_SIZE(values) != self.n:
            raise TypeError(f"{self.__name__}() takes {self.n} positional arguments, "
                            f"{PyTuple_GET_SIZE(values)} were given")
        obj = gpuflow_slots_alloc(self.cls)
        for i in range(self.n):
            value = PyTuple_GET_ITEM(values, i)
            Py_INCREF(<object>value)
            slot = <PyObject **>((<char *><PyObject *>obj) + self.offsets[i])
            old = slot[0]
            slot[0] = value
            Py_XDECREF(old)
        return obj
