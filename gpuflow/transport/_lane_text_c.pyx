# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled twin of ``_lane_text_py``: a traced process's lanes in a frame, the frame encoder's two
passes over them.

What it is for: every frame of every stream (an agent's, a hub's page of a watched host) goes
over each lane of each traced process twice: which spans are new since the base frame, then each
lane's names' ids, head, new rows and skipped count as the delta's text. Written as Python around
one compiled call per lane that wrote the rows, that was some 6–9 µs a lane, most of a watched
frame's encoding on a hub. Here :func:`lane_news` finds the first new span by binary search in the
seq column's buffer, and :func:`lane_texts` writes every lane's head, rows and ``spans_skipped``
into one buffer (``_text_buf``). What both give is ``_lane_text_py``'s opening, exactly.

Constraints: equal to ``_lane_text_py`` on every input (tests/transport/test_wire_text.py,
generated lanes, hostile ones included); what it does not take exactly (Span objects, a head whose
numbers are not int64s or whose label UTF-8 cannot hold, counts beyond int64) it hands to the
twin, whole, before writing anything the twin would not; reads each column through its C pointer
only after checking its type and length.
"""

from cpython.array cimport array
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8, PyUnicode_AsUTF8String
from libc.stdint cimport int64_t
from libc.stdlib cimport free

from json.encoder import encode_basestring

from gpuflow.core._exact_int cimport int64_of
from gpuflow.transport._text_buf cimport (
    Buf, buf_init, buf_reserve, put_char, put_int_member, put_rows, put_text, wt_sub_overflows,
)

from gpuflow.core.recorded import SpanColumns
from gpuflow.transport import _lane_text_py

is_compiled = True


cdef Py_ssize_t bisect_right_int64(const int64_t *values, Py_ssize_t n, int64_t x) noexcept:
    """``bisect.bisect_right`` over ``n`` ascending int64s."""
    cdef Py_ssize_t lo = 0, hi = n, mid
    while lo < hi:
        mid = (lo + hi) // 2
        if x < values[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


def lane_news(lanes, tuple key, dict base_lanes, list news, list demands):
    """``_lane_text_py.lane_news``: columns searched in their seq buffer; any other lane, or a
    base seq that is not an int64, the twin's way, lane by lane."""
    cdef array seq
    cdef long long last = 0
    cdef Py_ssize_t n, first
    for lane in lanes:
        spans = lane.spans
        base = base_lanes.get(key + (lane.device, lane.context, lane.stream))
        if base is None or type(spans) is not SpanColumns or type(base) is not tuple or len(<tuple> base) != 2:
            _lane_text_py.lane_news((lane,), key, base_lanes, news, demands)
            continue
        last_seq = (<tuple> base)[0]
        seq = spans.seq
        n = len(seq)
        if last_seq is None or not int64_of(last_seq, &last) or seq.ob_descr.typecode != c'q':
            _lane_text_py.lane_news((lane,), key, base_lanes, news, demands)
            continue
        first = bisect_right_int64(<const int64_t *> seq.data.as_longlongs, n, last) if n else 0
        news.append((spans, first))
        demands.append(n - first)


def lane_texts(lanes, tuple key, table, news, shares, Py_ssize_t at, dict base_lanes, dict lanes_now,
               rows_of, head_of):
    """``_lane_text_py.lane_texts``, each lane's head, rows and skipped count written into one
    buffer. A lane of Span objects, a head whose numbers are not int64s or whose label is not
    text UTF-8 can hold, or counts outside int64 send the process's lanes, all of them again, the
    twin's way (whose steps repeat the ones taken here exactly: a table gives a name the id it
    gave it before); rows outside the columns' shapes go through ``rows_of``, as in the twin."""
    cdef list ids_of = [], heads = []
    cdef Py_ssize_t at0 = at, first, share, n
    cdef long long device = 0, context = 0, stream = 0, executions = 0, elided = 0, base_executions = 0
    cdef int64_t skipped
    cdef bint delta = news is not None and shares is not None, new_or_skipped = False
    cdef Buf b
    cdef bytes label_text, piece
    cdef array seq
    buf_init(&b)
    try:
        if delta:
            buf_reserve(&b, 1)
            put_char(&b, b"[")
        for lane in lanes:
            spans = lane.spans
            label = lane.label
            if (type(spans) is not SpanColumns or type(label) is not str
                    or not int64_of(lane.device, &device) or not int64_of(lane.context, &context)
                    or not int64_of(lane.stream, &stream) or not int64_of(lane.executions, &executions)
                    or not int64_of(lane.spans_elided, &elided)):
                return _twin_texts(lanes, key, table, news, shares, at0, base_lanes, lanes_now, rows_of, head_of)
            seq = spans.seq
            n = len(seq)
            # every name of the sample gets its id now (see the twin)
            ids = table.span_ids(spans.names)
            ids_of.append(ids)
            head = (lane.device, lane.context, lane.stream, label, lane.executions, lane.spans_elided)
            heads.append(head)
            lane_key = key + head[:3]
            if delta:
                new, first = news[at]
                share = shares[at]
                at += 1
                base = base_lanes.get(lane_key)
                base_executions = 0
                if (new is not spans or not 0 <= first <= n or share < 0
                        or (base is not None and not int64_of(base[1], &base_executions))):
                    return _twin_texts(lanes, key, table, news, shares, at0, base_lanes, lanes_now, rows_of, head_of)
                if n - share > first:
                    first = n - share
                if (wt_sub_overflows(executions, base_executions, &skipped)
                        or wt_sub_overflows(skipped, n - first, &skipped)):
                    return _twin_texts(lanes, key, table, news, shares, at0, base_lanes, lanes_now, rows_of, head_of)
                if skipped < 0:
                    skipped = 0
                try:
                    label_text = PyUnicode_AsUTF8String(encode_basestring(label))
                except UnicodeEncodeError:
                    return _twin_texts(lanes, key, table, news, shares, at0, base_lanes, lanes_now, rows_of, head_of)
                if len(heads) > 1:
                    buf_reserve(&b, 1)
                    put_char(&b, b",")
                put_int_member(&b, b'{"device":', 10, device)
                put_int_member(&b, b',"context":', 11, context)
                put_int_member(&b, b',"stream":', 10, stream)
                put_text(&b, b',"label":', 9)
                put_text(&b, PyBytes_AS_STRING(label_text), PyBytes_GET_SIZE(label_text))
                put_int_member(&b, b',"executions":', 14, executions)
                put_int_member(&b, b',"spans_elided":', 16, elided)
                put_text(&b, b',"spans":', 9)
                if put_rows(&b, spans, n, first, n, ids) == 0:
                    new_or_skipped = new_or_skipped or first < n
                else:   # a row outside the columns' shapes: the caller's way
                    rows = rows_of(spans, first, table, ids)
                    piece = PyUnicode_AsUTF8String(rows)
                    put_text(&b, PyBytes_AS_STRING(piece), PyBytes_GET_SIZE(piece))
                    new_or_skipped = new_or_skipped or rows != "[]"
                new_or_skipped = new_or_skipped or skipped > 0
                put_int_member(&b, b',"spans_skipped":', 17, skipped)
                buf_reserve(&b, 1)
                put_char(&b, b"}")
            if n and seq.ob_descr.typecode == c'q':
                largest = seq.data.as_longlongs[n - 1]
            else:
                largest = _lane_text_py.largest_seq(spans)
            lanes_now[lane_key] = (largest, lane.executions)
        if not delta:
            return ids_of, heads, None, False
        buf_reserve(&b, 1)
        put_char(&b, b"]")
        return ids_of, heads, PyUnicode_DecodeUTF8(b.data, b.used, NULL), new_or_skipped
    finally:
        free(b.data)


cdef _twin_texts(lanes, tuple key, table, news, shares, Py_ssize_t at, dict base_lanes, dict lanes_now, rows_of,
                 head_of):
    return _lane_text_py.lane_texts(lanes, key, table, news, shares, at, base_lanes, lanes_now, rows_of, head_of)
