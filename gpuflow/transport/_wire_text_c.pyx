# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled writer of the stream's span rows, kernel entries and traced processes' heads as JSON
text (twin: ``_wire_text_py``).

What it is for: each frame of ``/api/stream`` carries, per lane, the new spans as arrays and, per
traced process, the kernel entries that changed; made as Python lists and dicts and handed to
``json`` they were most of the agent's CPU under bench/agent_rss.py (8 programs at 100 k
records/s: ~1,600 kernel entries and ~800 span rows a frame, up to 20 frames a second). This
writes the same text straight from the lane's ``array('q')`` columns and from the KernelStat
objects' attributes, into one C buffer, and makes one ``str`` of it.

* ``span_rows(columns, lo, hi, ids)``: rows ``lo``..``hi`` of a SpanColumns, or None when one is
  outside the columns' two shapes (the caller then encodes the lane through ``wire.encode_spans``);
* ``name_ids(names, ids)``: each of a SpanColumns' names' id in a names table, None for one it
  lacks;
* ``kernel_delta(kernels, pairs, base_ids, base_kernels, fields)``: in one pass, each kernel's
  id in a names table, whether every kernel of the base frame is still there, and the entries of
  the kernels whose ``fields`` differ from the base frame's (all without one), or no text for an
  id the table lacks, an id given twice or a value it does not take (the caller then uses
  ``json``);
* ``head_text(t, scalars, transfer_fields, types)``: a traced process's head (its devices made
  plain, their copies inside them), or None for a value it does not take (then ``json``).

A KernelStat is a frozen slotted dataclass: its fields are read through the offsets of their
slots (each field's member descriptor, ``PyMemberDescrObject``, gives it), which is what reading
the attribute ends in, without the attribute lookup; a type whose fields are not all object slots
is read by attribute name.

The module opening of ``_wire_text_py`` states both exactly; this is its twin.

Constraints: byte-identical to ``_wire_text_py`` (tests/transport/test_wire_text.py); never
undefined behaviour on any int64 (a difference of two seqs that does not fit int64 makes the lane
go the Python way); holds the GIL throughout (a call takes microseconds: a lane's rows, one
process's kernel table), and reads each array through its own C pointer only after checking its
type and length.
"""

from cpython.array cimport array
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.object cimport PyObject, PyObject_GetAttr, PyObject_RichCompareBool, PyObject_Str, Py_EQ
from cpython.unicode cimport PyUnicode_DecodeUTF8, PyUnicode_AsUTF8String
from libc.math cimport isfinite
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset

from json.encoder import encode_basestring
from types import MemberDescriptorType

from gpuflow.transport._text_buf cimport (
    INT_CHARS, Buf, buf_init, buf_reserve, put_char, put_int, put_rows, put_text,
)

is_compiled = True

cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        const char *name
        int type
        Py_ssize_t offset
        int flags
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member

#: a member's type when it is a plain object slot (``T_OBJECT_EX``, 3.12's ``Py_T_OBJECT_EX``)
DEF OBJECT_SLOT = 16
#: the most fields read through slot offsets (a KernelStat has fewer)
DEF MAX_FIELDS = 64
def span_rows(columns, Py_ssize_t lo, Py_ssize_t hi, ids):
    """Rows ``lo``..``hi`` of ``columns`` as JSON text; None: a row is outside the two shapes."""
    cdef Py_ssize_t n = len(columns.seq), j
    cdef Buf b
    cdef list table = list(ids)   # its items are read only for the names the rows use
    if not 0 <= lo <= hi <= n:
        raise IndexError(f"rows {lo}..{hi} of {n}")
    for j in range(len(table)):
        if type(table[j]) is not int:
            raise TypeError(f"a name's id is {table[j]!r}")
    buf_init(&b)
    try:
        if put_rows(&b, columns, n, lo, hi, table) != 0:
            return None
        return PyUnicode_DecodeUTF8(b.data, b.used, NULL)
    finally:
        free(b.data)


cdef int put_value(Buf *b, object v) except -1:
    """One kernel field's JSON; 1 when it is a value this writer does not take."""
    cdef int overflow = 0
    cdef long long small
    cdef double f
    cdef bytes raw
    if type(v) is int:   # the usual: counts and times
        small = PyLong_AsLongLongAndOverflow(v, &overflow)
        if overflow:
            raw = str(v).encode("ascii")
            put_text(b, PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw))
        else:
            buf_reserve(b, INT_CHARS)
            put_int(b, small)
    elif v is None:
        put_text(b, b"null", 4)
    elif v is True:
        put_text(b, b"true", 4)
    elif v is False:
        put_text(b, b"false", 5)
    elif type(v) is float:
        f = PyFloat_AS_DOUBLE(v)
        if isfinite(f):
            raw = float.__repr__(v).encode("ascii")
            put_text(b, PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw))
        else:
            put_text(b, b"null", 4)
    elif type(v) is str:
        try:
            raw = PyUnicode_AsUTF8String(encode_basestring(v))
        except UnicodeEncodeError:
            return 1
        put_text(b, PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw))
    else:
        return 1
    return 0


cdef class Fields:
    """How some fields of one type are read: through their slots' offsets when each is an object
    slot of a slotted class (``T_OBJECT_EX``, as a frozen slotted dataclass's fields are), else
    by name."""
    cdef tuple names
    cdef bint slotted
    cdef Py_ssize_t n
    cdef Py_ssize_t offsets[MAX_FIELDS]

    def __init__(self, type cls, tuple names):
        cdef Py_ssize_t i
        cdef PyMemberDef *member
        self.names = names
        self.n = len(names)
        self.slotted = self.n <= MAX_FIELDS
        for i in range(self.n):
            if not self.slotted:
                break
            descriptor = next((vars(base)[names[i]] for base in cls.__mro__ if names[i] in vars(base)), None)
            if type(descriptor) is not MemberDescriptorType:
                self.slotted = False
                break
            member = (<PyMemberDescrObject *> <PyObject *> descriptor).d_member
            if member.type != OBJECT_SLOT:
                self.slotted = False
                break
            self.offsets[i] = member.offset

    cdef inline object get(self, object obj, Py_ssize_t i):
        cdef PyObject *value
        if self.slotted:
            value = (<PyObject **> ((<char *> <PyObject *> obj) + self.offsets[i]))[0]
            if value != NULL:
                return <object> value
        return getattr(obj, self.names[i])


cdef dict _FIELDS = {}


cdef Fields fields_of(type cls, tuple names):
    cdef Fields found = _FIELDS.get((cls, names))
    if found is None:
        found = _FIELDS[(cls, names)] = Fields(cls, names)
    return found


def name_ids(tuple names, dict ids):
    """Each of ``names``' id in ``ids`` (a names table's name -> id), None for a name it lacks."""
    cdef list out = []
    for name in names:
        out.append(ids.get(name))
    return out


def kernel_delta(kernels, dict pairs, base_ids, base_kernels, tuple fields):
    """``(ids, whole, text)`` of one process's kernel table against the base frame's
    (``_wire_text_py.kernel_delta``), in one pass over the kernels."""
    cdef Py_ssize_t n = len(kernels), n_base = 0, i, j, n_fields = len(fields)
    cdef object k, b_obj, kid_obj
    cdef int64_t kid, top = -1
    cdef bint same, writable = True, whole = True
    cdef Buf b
    cdef unsigned char *seen = NULL
    cdef PyObject **base = NULL
    cdef Fields f = None, fb = None
    cdef type f_type = None, fb_type = None
    cdef tuple read = ("name", "mangled") + fields
    cdef list ids = [], keys
    cdef bytes raw
    cdef const char *key_text[MAX_FIELDS + 1]
    cdef Py_ssize_t key_size[MAX_FIELDS + 1]
    if base_ids is not None:
        n_base = len(base_ids)
        if len(base_kernels) != n_base:
            raise ValueError(f"{len(base_kernels)} base kernels for {n_base} ids")
    for i in range(n):   # the ids first: which pairs the table holds, and the largest id
        k = kernels[i]
        if type(k) is not f_type:
            f_type = type(k)
            f = fields_of(f_type, read)
        kid_obj = pairs.get((f.get(k, 0), f.get(k, 1)))
        ids.append(kid_obj)
        if kid_obj is None or type(kid_obj) is not int or kid_obj < 0:
            writable = False
        elif kid_obj > top:
            top = kid_obj
    for i in range(n_base):
        kid_obj = base_ids[i]
        if type(kid_obj) is not int or kid_obj < 0:
            raise ValueError(f"a base id is {kid_obj!r}")
        if kid_obj > top:
            top = kid_obj
    buf_init(&b)
    try:
        seen = <unsigned char *> malloc(top + 2)
        base = <PyObject **> malloc((top + 2) * sizeof(PyObject *))
        if seen == NULL or base == NULL:
            raise MemoryError()
        memset(seen, 0, top + 2)
        for i in range(top + 2):
            base[i] = NULL
        for i in range(n):
            if ids[i] is not None and type(ids[i]) is int and ids[i] >= 0:
                kid = ids[i]
                if seen[kid]:
                    writable = False   # an id twice: the caller's way
                seen[kid] = 1
        for i in range(n_base):
            kid = base_ids[i]
            base[kid] = <PyObject *> base_kernels[i]   # borrowed: the caller's list holds it
            if not seen[kid]:
                whole = False
        if not writable:
            return ids, whole, None
        keys = [('{"id":' if j == 0 else ',"' + name + '":').encode("ascii") for j, name in enumerate(("id",) + fields)]
        if n_fields >= MAX_FIELDS:
            return ids, whole, None
        for j in range(n_fields + 1):   # the keys' text, held by ``keys``
            raw = keys[j]
            key_text[j] = PyBytes_AS_STRING(raw)
            key_size[j] = PyBytes_GET_SIZE(raw)
        buf_reserve(&b, 2)
        put_char(&b, b"[")
        for i in range(n):
            k = kernels[i]
            kid = ids[i]
            if type(k) is not f_type:
                f_type = type(k)
                f = fields_of(f_type, read)
            if base_ids is not None and base[kid] != NULL:
                b_obj = <object> base[kid]
                if b_obj is k:
                    continue
                if type(b_obj) is not fb_type:
                    fb_type = type(b_obj)
                    fb = fields_of(fb_type, read)
                same = True
                for j in range(n_fields):
                    if not PyObject_RichCompareBool(f.get(k, j + 2), fb.get(b_obj, j + 2), Py_EQ):
                        same = False
                        break
                if same:
                    continue
            if b.used > 1:
                buf_reserve(&b, 1)
                put_char(&b, b",")
            put_text(&b, key_text[0], key_size[0])
            buf_reserve(&b, INT_CHARS)
            put_int(&b, kid)
            for j in range(n_fields):
                put_text(&b, key_text[j + 1], key_size[j + 1])
                if put_value(&b, f.get(k, j + 2)):
                    return ids, whole, None
            buf_reserve(&b, 1)
            put_char(&b, b"}")
        buf_reserve(&b, 1)
        put_char(&b, b"]")
        return ids, whole, PyUnicode_DecodeUTF8(b.data, b.used, NULL)
    finally:
        free(seen)
        free(base)
        free(b.data)


#: how deep a traced process's head nests (its devices, their copies, a copy's fields): deeper is
#: not a head this writer takes
DEF MAX_DEPTH = 8

cdef dict _KEYS = {}


cdef list keys_of(tuple names):
    """Each name as a JSON object key, ``"name":``, as UTF-8 (made once per tuple of names)."""
    cdef list found = _KEYS.get(names)
    if found is None:
        found = _KEYS[names] = [PyUnicode_AsUTF8String(encode_basestring(name) + ":") for name in names]
    return found


cdef int put_object(Buf *b, object obj, Fields f, list keys, dict types, int depth) except -1:
    """``obj``'s fields (``f``) as a JSON object; 1: a value this writer does not take."""
    cdef Py_ssize_t i
    cdef bytes key
    put_text(b, b"{", 1)
    for i in range(f.n):
        if i:
            put_text(b, b",", 1)
        key = keys[i]
        put_text(b, PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))
        if put_plain(b, f.get(obj, i), types, depth + 1):
            return 1
    put_text(b, b"}", 1)
    return 0


cdef int put_plain(Buf *b, object v, dict types, int depth) except -1:
    """``v`` as ``json_value(v)`` and then ``compact`` write it: a tuple or list as a list, an
    object of one of ``types`` (type -> its field names) as an object of those fields, anything
    else through put_value; 1: a value this writer does not take."""
    cdef type t = type(v)
    cdef tuple names
    cdef Py_ssize_t i, n
    if depth > MAX_DEPTH:
        return 1
    if t is tuple or t is list:
        put_text(b, b"[", 1)
        n = len(v)
        for i in range(n):
            if i:
                put_text(b, b",", 1)
            if put_plain(b, v[i], types, depth + 1):
                return 1
        put_text(b, b"]", 1)
        return 0
    names = types.get(t) if types is not None else None
    if names is not None:
        return put_object(b, v, fields_of(t, names), keys_of(names), types, depth)
    buf_reserve(b, INT_CHARS + 1)
    return put_value(b, v)


def head_text(t, tuple scalars, tuple transfer_fields, dict types):
    """A traced process's head as the stream's JSON text (``_wire_text_py.head_text``); None: a
    value this writer does not take."""
    cdef Buf b
    cdef Py_ssize_t i, n
    cdef Fields f
    cdef list keys, transfer_keys
    cdef bytes key
    buf_init(&b)
    try:
        f = fields_of(type(t), scalars)
        keys = keys_of(scalars)
        put_text(&b, b"{", 1)
        for i in range(f.n):
            if i:
                put_text(&b, b",", 1)
            key = keys[i]
            put_text(&b, PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key))
            if put_plain(&b, f.get(t, i), types, 1):
                return None
        put_text(&b, b',"complete":', 12)
        buf_reserve(&b, INT_CHARS + 1)
        if put_value(&b, t.complete):
            return None
        put_text(&b, b',"transfers":[', 14)
        transfers = t.transfers
        transfer_keys = keys_of(transfer_fields)
        n = len(transfers)
        for i in range(n):
            if i:
                put_text(&b, b",", 1)
            x = transfers[i]
            # a transfer's values as they are (traced_head takes them so): no object among them
            if put_object(&b, x, fields_of(type(x), transfer_fields), transfer_keys, None, 1):
                return None
        put_text(&b, b"]}", 2)
        return PyUnicode_DecodeUTF8(b.data, b.used, NULL)
    finally:
        free(b.data)
