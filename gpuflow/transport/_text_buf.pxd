# cython: language_level=3
"""The stream's text written into one C buffer: the helpers the compiled writers share.

What it is for: ``_wire_text_c`` (span rows, kernel entries, heads) and ``_lane_text_c`` (a
delta's lanes) write JSON text into one growing C buffer and make one ``str`` of it; this is the
buffer, the number and row writers they both use, defined once (inline: each module compiles its
own copy). A span row is written as docs/snapshot.md's "Spans" says, from a SpanColumns' thirteen
``array('q')`` columns, each checked (type and length) before its C pointer is read.

Constraints: declarations and inline functions only (no module-level Python object: this file
has no module of its own at run time); no Python call beyond reading the columns and a name's id;
never undefined
behaviour on any int64 (a difference of two seqs that does not fit int64 makes ``put_rows``
decline); the caller frees ``b.data``.
"""

from cpython.array cimport array
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport realloc
from libc.string cimport memcpy

cdef extern from *:
    """
    static int wt_sub_overflows(int64_t a, int64_t b, int64_t *out) {
        return __builtin_sub_overflow(a, b, out);
    }
    /* "00".."99": the two digits of each number below 100 */
    static const char wt_digit_pairs[201] =
        "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
        "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
        "8081828384858687888990919293949596979899";
    /* what an empty column's values point at (an empty array has no buffer at all) */
    static const int64_t wt_no_values = 0;
    """
    int wt_sub_overflows(int64_t a, int64_t b, int64_t *out)
    const char *DIGIT_PAIRS "wt_digit_pairs"
    const int64_t NO_VALUES "wt_no_values"


cdef enum:
    #: the kind codes of the columns (SPAN_KINDS: kernel, memcpy, memset) and the directions' count
    N_KINDS = 3
    N_DIRECTIONS = 6
    #: the longest text one int64 takes: "-9223372036854775808"
    INT_CHARS = 20
    #: the most a span row takes: 3 numbers of the head, a code, two geometries of three numbers,
    #: brackets and commas
    ROW_CHARS = 16 * (20 + 1) + 16

cdef struct Buf:
    char *data
    Py_ssize_t used
    Py_ssize_t size


cdef inline void buf_init(Buf *b) noexcept:
    """An empty buffer (nothing allocated until a write; the caller frees ``b.data`` once done)."""
    b.data = NULL
    b.used = b.size = 0


cdef inline int buf_reserve(Buf *b, Py_ssize_t more) except -1:
    """Room for ``more`` bytes after what is used."""
    if b.used + more <= b.size:
        return 0
    return buf_grow(b, more)


cdef inline int buf_grow(Buf *b, Py_ssize_t more) except -1:
    cdef Py_ssize_t size
    cdef char *grown
    size = b.size * 2 if b.size else 4096
    while size < b.used + more:
        size *= 2
    grown = <char *> realloc(b.data, size)
    if grown == NULL:
        raise MemoryError()
    b.data = grown
    b.size = size
    return 0


cdef inline void put_char(Buf *b, char c) noexcept:
    b.data[b.used] = c
    b.used += 1


cdef inline void put_int(Buf *b, int64_t v) noexcept:
    """Decimal digits of ``v`` (room for INT_CHARS already reserved): two at a time from the end
    of a local buffer, then one copy (most of a frame's bytes are numbers)."""
    cdef char digits[INT_CHARS]
    cdef int k = INT_CHARS
    cdef uint64_t u, r
    if v < 0:
        put_char(b, b"-")
        u = (<uint64_t> 0) - <uint64_t> v
    else:
        u = <uint64_t> v
    while u >= 100:
        r = u % 100
        u //= 100
        k -= 2
        digits[k] = DIGIT_PAIRS[2 * r]
        digits[k + 1] = DIGIT_PAIRS[2 * r + 1]
    if u >= 10:
        k -= 2
        digits[k] = DIGIT_PAIRS[2 * u]
        digits[k + 1] = DIGIT_PAIRS[2 * u + 1]
    else:
        k -= 1
        digits[k] = <char> (48 + u)
    memcpy(b.data + b.used, &digits[k], INT_CHARS - k)
    b.used += INT_CHARS - k


cdef inline int put_text(Buf *b, const char *text, Py_ssize_t n) except -1:
    buf_reserve(b, n)
    memcpy(b.data + b.used, text, n)
    b.used += n
    return 0


cdef inline void put_geometry(Buf *b, int64_t x, int64_t y, int64_t z) noexcept:
    """``x`` for (x, 1, 1), else ``[x,y,z]``."""
    if y == 1 and z == 1:
        put_int(b, x)
        return
    put_char(b, b"[")
    put_int(b, x)
    put_char(b, b",")
    put_int(b, y)
    put_char(b, b",")
    put_int(b, z)
    put_char(b, b"]")


cdef inline const int64_t *column(array a, str name, Py_ssize_t n) except NULL:
    """The values of one column, checked: an array('q') of ``n`` values."""
    if a.ob_descr.typecode != c'q' or len(a) != n:
        raise ValueError(f"SpanColumns.{name} is not an array('q') of {n} values")
    if n == 0:   # an empty array has no buffer at all
        return &NO_VALUES
    return <const int64_t *> a.data.as_longlongs


cdef inline int put_int_member(Buf *b, const char *text, Py_ssize_t n, int64_t v) except -1:
    """``text`` (``n`` bytes: a member's separator, key and colon) then ``v``'s digits."""
    buf_reserve(b, n + INT_CHARS + 1)
    memcpy(b.data + b.used, text, n)
    b.used += n
    put_int(b, v)
    return 0


cdef inline int put_rows(Buf *b, object columns, Py_ssize_t n, Py_ssize_t lo, Py_ssize_t hi, list table) except -1:
    """Rows ``lo``..``hi`` of ``columns`` (``n`` rows, ``0 <= lo <= hi <= n``; ``table``: each
    name's id, ints) appended to ``b``; 1, with ``b`` as it was, where a row is outside the two
    shapes or a difference does not fit int64."""
    cdef Py_ssize_t i, n_ids = len(table), j, was = b.used
    cdef const int64_t *cols[13]
    cdef int64_t prev_seq = 0, prev_start = 0, d_seq, d_start, k, name, nbytes, direction, name_id
    # held here, so that nothing frees an array while its pointer is read (converting an exact int
    # is the only Python code run from here on)
    names = ("seq", "start_us", "dur_ns", "kind", "name", "grid_x", "grid_y", "grid_z",
             "block_x", "block_y", "block_z", "bytes", "direction")   # a SpanColumns' columns, in order
    held = [getattr(columns, column_name) for column_name in names]
    for j in range(13):
        cols[j] = column(held[j], names[j], n)
    buf_reserve(b, 2 + (hi - lo) * ROW_CHARS)
    put_char(b, b"[")
    for i in range(lo, hi):
        if wt_sub_overflows(cols[0][i], prev_seq, &d_seq) or wt_sub_overflows(cols[1][i], prev_start, &d_start):
            b.used = was
            return 1
        prev_seq = cols[0][i]
        prev_start = cols[1][i]
        k = cols[3][i]
        name = cols[4][i]
        nbytes = cols[11][i]
        direction = cols[12][i]
        if i > lo:
            put_char(b, b",")
        put_char(b, b"[")
        put_int(b, d_seq)
        put_char(b, b",")
        put_int(b, d_start)
        put_char(b, b",")
        put_int(b, cols[2][i])
        put_char(b, b",")
        if k == 0 and nbytes < 0 and direction < 0:   # a kernel
            if name >= n_ids:
                b.used = was
                return 1
            put_char(b, b"0")
            put_char(b, b",")
            if name < 0:
                put_text(b, b"null", 4)
            else:
                name_id = table[name]
                put_int(b, name_id)
            put_char(b, b",")
            put_geometry(b, cols[5][i], cols[6][i], cols[7][i])
            put_char(b, b",")
            put_geometry(b, cols[8][i], cols[9][i], cols[10][i])
        elif 0 < k < N_KINDS and name < 0 and direction < N_DIRECTIONS:   # a copy or a memset
            put_int(b, k)
            if direction >= 0:
                put_char(b, b",")
                if nbytes < 0:
                    put_text(b, b"null", 4)
                else:
                    put_int(b, nbytes)
                put_char(b, b",")
                put_int(b, direction)
            elif nbytes >= 0:
                put_char(b, b",")
                put_int(b, nbytes)
        else:
            b.used = was
            return 1
        put_char(b, b"]")
    put_char(b, b"]")
    return 0
