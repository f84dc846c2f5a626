# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled slice encoder: a lane's span columns as Perfetto slice packets, with no Python object
per span.

Hot path of an export (bench/export.py). The loop reads the span columns through typed views of
their ``array('q')`` buffers and writes each slice's packets straight into a growing C buffer:
the TrackEvent body first into a scratch area (its length is the packet's), then the packet
around it. The only Python calls are for a lane's new sub-track (rare: overlapping slices) and
the one copy of the finished buffer into a ``bytes``. A kernel's occupancy arguments are its
launch configuration's row of the lane's ``LaunchArgs`` (found among its name's few entries by
comparing four integers), copied as bytes, and its waves one division; a copy's bandwidth is one
division (gpuflow.export.launch_args).

Constraints: byte-identical to ``_slices_py``, the readable statement of the format (the tests
compare them over generated columns, hostile values included); the field numbers below are
protowire's and the ids slice_layout's (a test compares :data:`LAYOUT` with them); values from a
ring are untrusted: clamped or left out exactly as the twin does, never undefined behaviour.
"""

from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy

is_compiled = True

# field tags (field << 3 | wire type), protowire's numbers
DEF TAG_PACKET = 0x0A            # Trace.packet = 1, LEN
DEF TAG_TIMESTAMP = 0x40         # TracePacket.timestamp = 8, VARINT
DEF TAG_SEQUENCE_ID = 0x50       # TracePacket.trusted_packet_sequence_id = 10
DEF TAG_TRACK_EVENT = 0x5A       # TracePacket.track_event = 11, LEN
DEF TAG_SEQUENCE_FLAGS = 0x68    # TracePacket.sequence_flags = 13
DEF TAG_EVENT_TYPE = 0x48        # TrackEvent.type = 9
DEF TAG_EVENT_TRACK = 0x58       # TrackEvent.track_uuid = 11
DEF TAG_EVENT_CATEGORY = 0x18    # TrackEvent.category_iids = 3
DEF TAG_EVENT_NAME = 0x50        # TrackEvent.name_iid = 10
DEF TAG_ANNOTATION = 0x22        # TrackEvent.debug_annotations = 4, LEN
DEF TAG_ANNOTATION_NAME = 0x08   # DebugAnnotation.name_iid = 1
DEF TAG_ANNOTATION_INT = 0x20    # DebugAnnotation.int_value = 4
DEF TAG_ANNOTATION_DOUBLE = 0x29 # DebugAnnotation.double_value = 5, FIXED64
DEF TAG_ANNOTATION_STRING = 0x32 # DebugAnnotation.string_value = 6, LEN
DEF SLICE_BEGIN = 1
DEF SLICE_END = 2
DEF NEEDS_STATE = 2
# slice_layout's ids and limits
DEF SEQUENCE_ID = 1
DEF ARG_SEQ = 1
DEF ARG_DUR_NS = 2
DEF ARG_GRID_X = 3
DEF ARG_BYTES = 9
DEF ARG_DIRECTION = 10
DEF ARG_WAVES = 14
DEF ARG_BYTES_PER_S = 15
DEF CATEGORY_OTHER = 4
DEF NAME_UNNAMED_KERNEL = 1
DEF NAME_UNKNOWN_KIND = 2
DEF NAME_MEMCPY = 3
DEF NAME_MEMSET = 4
DEF NAME_MEMCPY_DIRECTION = 5
DEF KIND_KERNEL = 0
DEF KIND_MEMCPY = 1
DEF KIND_MEMSET = 2
DEF DIRECTION_MEMSET = 5
DEF DIRECTION_H2D = 0
DEF DIRECTION_D2H = 1
DEF N_DIRECTIONS = 6
DEF MAX_SUBTRACKS = 16
DEF OVERLAP_TOLERANCE_NS = 999
DEF MAX_START_US = 2305843009213693  # (1 << 61) // 1000
DEF MAX_DURATION_NS = 2305843009213693952  # 1 << 61
DEF MAX_ARG_PIECE = 128
DEF MAX_GRID_DIMENSION = 4294967295  # (1 << 32) - 1
DEF MAX_WAVE_BLOCKS = 9007199254740992  # 1 << 53
# a span's packets fit in this many bytes (begin: 3 + 10 + 2 + 1 + 2 + 11 * 3 + 8 int args of at
# most 2 + 2 + 11 bytes + the direction's + two pieces of MAX_ARG_PIECE or 13-byte doubles; end:
# 3 + 10 + 2 + 2 + 2 + 11 + 2)
DEF SPAN_BYTES = 1024

# the limits beyond 32 bits as C values: compared with a DEF of that size, Cython makes both sides
# Python ints (two objects and two calls a comparison, on every span)
cdef int64_t START_US_LIMIT = MAX_START_US
cdef int64_t DURATION_LIMIT = MAX_DURATION_NS
cdef int64_t GRID_LIMIT = MAX_GRID_DIMENSION
cdef int64_t WAVE_BLOCKS_LIMIT = MAX_WAVE_BLOCKS

LAYOUT = {"SEQUENCE_ID": SEQUENCE_ID, "ARG_SEQ": ARG_SEQ, "ARG_DUR_NS": ARG_DUR_NS, "ARG_GRID_X": ARG_GRID_X,
          "ARG_BYTES": ARG_BYTES, "ARG_DIRECTION": ARG_DIRECTION, "ARG_WAVES": ARG_WAVES,
          "ARG_BYTES_PER_S": ARG_BYTES_PER_S, "DIRECTION_H2D": DIRECTION_H2D, "DIRECTION_D2H": DIRECTION_D2H,
          "MAX_ARG_PIECE": MAX_ARG_PIECE, "MAX_GRID_DIMENSION": MAX_GRID_DIMENSION, "CATEGORY_OTHER": CATEGORY_OTHER,
          "NAME_UNNAMED_KERNEL": NAME_UNNAMED_KERNEL, "NAME_UNKNOWN_KIND": NAME_UNKNOWN_KIND,
          "NAME_MEMCPY": NAME_MEMCPY, "NAME_MEMSET": NAME_MEMSET, "NAME_MEMCPY_DIRECTION": NAME_MEMCPY_DIRECTION,
          "KIND_KERNEL": KIND_KERNEL, "KIND_MEMCPY": KIND_MEMCPY, "KIND_MEMSET": KIND_MEMSET,
          "DIRECTION_MEMSET": DIRECTION_MEMSET, "N_DIRECTIONS": N_DIRECTIONS, "MAX_SUBTRACKS": MAX_SUBTRACKS,
          "OVERLAP_TOLERANCE_NS": OVERLAP_TOLERANCE_NS, "MAX_START_US": MAX_START_US,
          "MAX_DURATION_NS": MAX_DURATION_NS}

from gpuflow.core.snapshot import TRANSFER_DIRECTIONS

# each direction's whole annotation (tag, length, name id, string), as the twin writes it
cdef bytes _direction_arg(str text):
    cdef bytes value = text.encode("utf-8")
    cdef bytes body = bytes([TAG_ANNOTATION_NAME, ARG_DIRECTION, TAG_ANNOTATION_STRING, len(value)]) + value
    return bytes([TAG_ANNOTATION, len(body)]) + body

cdef list _DIRECTION_ARGS = [_direction_arg(d) for d in TRANSFER_DIRECTIONS]
if len(_DIRECTION_ARGS) != N_DIRECTIONS:
    raise ImportError("TRANSFER_DIRECTIONS changed: rebuild _slices_c with its new count")


cdef inline unsigned char* put_varint(unsigned char* p, uint64_t v) noexcept nogil:
    while v > 0x7F:
        p[0] = <unsigned char>((v & 0x7F) | 0x80)
        p += 1
        v >>= 7
    p[0] = <unsigned char>v
    return p + 1


cdef inline int varint_size(uint64_t v) noexcept nogil:
    cdef int n = 1
    while v > 0x7F:
        v >>= 7
        n += 1
    return n


cdef inline unsigned char* put_double_arg(unsigned char* p, int iid, double value) noexcept nogil:
    """An argument with a double value: its IEEE bits little-endian, as struct's "<d" writes them."""
    cdef uint64_t bits
    cdef int k
    memcpy(&bits, &value, 8)
    p[0] = TAG_ANNOTATION
    p[1] = 11
    p[2] = TAG_ANNOTATION_NAME
    p[3] = <unsigned char>iid
    p[4] = TAG_ANNOTATION_DOUBLE
    for k in range(8):
        p[5 + k] = <unsigned char>((bits >> (8 * k)) & 0xFF)
    return p + 13


cdef inline unsigned char* put_piece(unsigned char* p, const unsigned char* piece, Py_ssize_t n) noexcept nogil:
    memcpy(p, piece, <size_t>n)
    return p + n


cdef inline unsigned char* put_int_arg(unsigned char* p, int iid, int64_t value) noexcept nogil:
    p[0] = TAG_ANNOTATION
    p[1] = <unsigned char>(3 + varint_size(<uint64_t>value))
    p[2] = TAG_ANNOTATION_NAME
    p[3] = <unsigned char>iid
    p[4] = TAG_ANNOTATION_INT
    return put_varint(p + 5, <uint64_t>value)


cdef class _Buffer:
    cdef unsigned char* data
    cdef size_t size
    cdef size_t capacity

    def __cinit__(self, size_t capacity):
        self.capacity = capacity if capacity > 0 else 64
        self.data = <unsigned char*>malloc(self.capacity)
        self.size = 0
        if self.data == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.data)

    cdef int reserve(self, size_t more) except -1:
        cdef size_t want = self.size + more
        cdef unsigned char* grown
        if want <= self.capacity:
            return 0
        while self.capacity < want:
            self.capacity *= 2
        grown = <unsigned char*>realloc(self.data, self.capacity)
        if grown == NULL:
            raise MemoryError()
        self.data = grown
        return 0

    cdef int append(self, bytes chunk) except -1:
        cdef Py_ssize_t n = len(chunk)
        self.reserve(<size_t>n)
        memcpy(self.data + self.size, <const char*>chunk, <size_t>n)
        self.size += <size_t>n
        return 0

    cdef bytes take(self):
        return (<char*>self.data)[:self.size]


cdef unsigned char* put_end(unsigned char* p, uint64_t uuid, uint64_t ts) noexcept nogil:
    cdef int event_len = 2 + 1 + varint_size(uuid)
    cdef int body_len = 1 + varint_size(ts) + 2 + event_len + 2
    p[0] = TAG_PACKET
    p = put_varint(p + 1, <uint64_t>body_len)
    p[0] = TAG_TIMESTAMP
    p = put_varint(p + 1, ts)
    p[0] = TAG_TRACK_EVENT
    p[1] = <unsigned char>event_len
    p[2] = TAG_EVENT_TYPE
    p[3] = SLICE_END
    p[4] = TAG_EVENT_TRACK
    p = put_varint(p + 5, uuid)
    p[0] = TAG_SEQUENCE_ID
    p[1] = SEQUENCE_ID
    return p + 2


cdef class LaneSlices:
    """One lane's tracks and the slices still open on them (the twin's API and semantics)."""

    cdef object new_subtrack
    cdef int64_t uuids[MAX_SUBTRACKS]
    cdef int64_t last_begin[MAX_SUBTRACKS]
    cdef int64_t pending_end[MAX_SUBTRACKS]
    cdef int n

    def __cinit__(self, int64_t track_uuid, new_subtrack):
        self.new_subtrack = new_subtrack
        self.uuids[0] = track_uuid
        self.last_begin[0] = -1
        self.pending_end[0] = -1
        self.n = 1

    @property
    def subtracks(self):
        return self.n

    cdef int track_for(self, int64_t begin, _Buffer out) except -1:
        cdef int k
        for k in range(self.n):
            if begin >= self.last_begin[k] and begin + OVERLAP_TOLERANCE_NS >= self.pending_end[k]:
                return k
        if self.n == MAX_SUBTRACKS:
            return MAX_SUBTRACKS - 1
        k = self.n
        uuid, descriptor = self.new_subtrack(k)
        out.append(descriptor)
        self.uuids[k] = uuid
        self.last_begin[k] = -1
        self.pending_end[k] = -1
        self.n += 1
        return k


cdef int check_args(const long long[::1] launch_ids, const long long[::1] first, const long long[::1] keys,
                    const long long[::1] wave_blocks, const long long[::1] row_at, bytes blob, bytes no_grid,
                    bytes no_rate, bytes host, Py_ssize_t spans, Py_ssize_t n_names) except -1:
    """The Python twin's check_args: the same refusals, in the same order."""
    cdef Py_ssize_t rows = wave_blocks.shape[0], j
    if launch_ids.shape[0] != 0 and launch_ids.shape[0] != spans:
        raise ValueError("args.launch_ids needs one id per span, or none")
    if first.shape[0] != n_names + 1 or rows < 1 or keys.shape[0] != 4 * (rows - 1) \
            or row_at.shape[0] != 2 * rows + 1:
        raise ValueError("args' tables differ in length")
    for j in range(n_names):
        if not 0 <= first[j] <= first[j + 1] <= rows - 1:
            raise ValueError("args.first is not a run of entries")
    if first[0] != 0:
        raise ValueError("args.first is not a run of entries")
    if blob is None or row_at[0] != 0 or row_at[2 * rows] != len(blob):
        raise ValueError("args.row_at does not cut args.blob into pieces")
    for j in range(2 * rows):
        if not 0 <= row_at[j + 1] - row_at[j] <= MAX_ARG_PIECE:
            raise ValueError("args.row_at does not cut args.blob into pieces")
    if no_grid is None or no_rate is None or host is None or len(no_grid) > MAX_ARG_PIECE \
            or len(no_rate) > MAX_ARG_PIECE or len(host) > MAX_ARG_PIECE:
        raise ValueError("an argument piece or a wave size is out of range")
    for j in range(rows):
        if wave_blocks[j] < 0 or wave_blocks[j] > WAVE_BLOCKS_LIMIT:
            raise ValueError("an argument piece or a wave size is out of range")
    return 0


def encode_spans(LaneSlices lane, columns, const long long[::1] name_iids, long long[::1] kernel_counts, args):
    cdef const long long[::1] seq = columns.seq
    cdef const long long[::1] start_us = columns.start_us
    cdef const long long[::1] dur_ns = columns.dur_ns
    cdef const long long[::1] kind = columns.kind
    cdef const long long[::1] name = columns.name
    cdef const long long[::1] grid_x = columns.grid_x
    cdef const long long[::1] grid_y = columns.grid_y
    cdef const long long[::1] grid_z = columns.grid_z
    cdef const long long[::1] block_x = columns.block_x
    cdef const long long[::1] block_y = columns.block_y
    cdef const long long[::1] block_z = columns.block_z
    cdef const long long[::1] nbytes = columns.bytes
    cdef const long long[::1] direction = columns.direction
    cdef Py_ssize_t n = seq.shape[0], n_names = name_iids.shape[0], i
    cdef int k, d, j, event_len, body_len
    cdef int64_t begin, dur, end, category, name_iid, value, knd, nm
    cdef int64_t dims[6]
    cdef uint64_t uuid
    cdef unsigned char event[SPAN_BYTES]
    cdef unsigned char* e
    cdef unsigned char* p
    cdef bytes dir_arg
    cdef const char* dir_bytes[N_DIRECTIONS]
    cdef int dir_len[N_DIRECTIONS]
    cdef Py_ssize_t row, rows, entry, a, b, n_launch
    cdef int64_t launch, blocks
    if kernel_counts.shape[0] != n_names + 1:
        raise ValueError("kernel_counts needs one entry per name and one for kernels without")
    cdef const long long[::1] launch_ids = args.launch_ids
    cdef const long long[::1] first = args.first
    cdef const long long[::1] keys = args.keys
    cdef const long long[::1] wave_blocks = args.wave_blocks
    cdef const long long[::1] row_at = args.row_at
    cdef bytes blob = args.blob, no_grid = args.no_grid, no_rate = args.no_rate, host = args.host_memory
    check_args(launch_ids, first, keys, wave_blocks, row_at, blob, no_grid, no_rate, host, n, n_names)
    cdef const unsigned char* blob_p = <const unsigned char*><const char*>blob
    cdef const unsigned char* no_grid_p = <const unsigned char*><const char*>no_grid
    cdef const unsigned char* no_rate_p = <const unsigned char*><const char*>no_rate
    cdef const unsigned char* host_p = <const unsigned char*><const char*>host
    cdef Py_ssize_t no_grid_n = len(no_grid), no_rate_n = len(no_rate), host_n = len(host)
    rows = wave_blocks.shape[0]
    n_launch = launch_ids.shape[0]
    if (start_us.shape[0] != n or dur_ns.shape[0] != n or kind.shape[0] != n or name.shape[0] != n
            or grid_x.shape[0] != n or grid_y.shape[0] != n or grid_z.shape[0] != n or block_x.shape[0] != n
            or block_y.shape[0] != n or block_z.shape[0] != n or nbytes.shape[0] != n
            or direction.shape[0] != n):
        raise ValueError("span columns differ in length")
    for d in range(N_DIRECTIONS):
        dir_arg = _DIRECTION_ARGS[d]
        dir_bytes[d] = dir_arg
        dir_len[d] = len(dir_arg)
    cdef _Buffer out = _Buffer(<size_t>(n * 160 + 64))
    for i in range(n):
        begin = start_us[i]
        if begin < 0:
            begin = 0
        elif begin > START_US_LIMIT:
            begin = START_US_LIMIT
        begin *= 1000
        dur = dur_ns[i]
        if dur < 0:
            dur = 0
        elif dur > DURATION_LIMIT:
            dur = DURATION_LIMIT
        knd, nm = kind[i], name[i]
        k = lane.track_for(begin, out)
        out.reserve(2 * SPAN_BYTES)
        p = out.data + out.size
        uuid = <uint64_t>lane.uuids[k]
        if lane.pending_end[k] >= 0:
            end = lane.pending_end[k] if lane.pending_end[k] < begin else begin
            if end < lane.last_begin[k]:
                end = lane.last_begin[k]
            p = put_end(p, uuid, <uint64_t>end)
        # the TrackEvent: type, track, category, name, arguments
        e = event
        e[0] = TAG_EVENT_TYPE
        e[1] = SLICE_BEGIN
        e[2] = TAG_EVENT_TRACK
        e = put_varint(e + 3, uuid)
        if knd == KIND_KERNEL:
            category = knd + 1
            if 0 <= nm < n_names:
                name_iid = name_iids[nm]
                kernel_counts[nm] += 1
            else:
                name_iid = NAME_UNNAMED_KERNEL
                kernel_counts[n_names] += 1
        elif knd == KIND_MEMCPY or knd == KIND_MEMSET:
            category = knd + 1
            d = <int>direction[i] if 0 <= direction[i] < N_DIRECTIONS else -1
            if knd == KIND_MEMSET:
                name_iid = NAME_MEMSET
            elif 0 <= d < DIRECTION_MEMSET:
                name_iid = NAME_MEMCPY_DIRECTION + d
            else:
                name_iid = NAME_MEMCPY
        else:
            category, name_iid = CATEGORY_OTHER, NAME_UNKNOWN_KIND
        e[0] = TAG_EVENT_CATEGORY
        e = put_varint(e + 1, <uint64_t>category)
        e[0] = TAG_EVENT_NAME
        e = put_varint(e + 1, <uint64_t>name_iid)
        e = put_int_arg(e, ARG_SEQ, seq[i])
        e = put_int_arg(e, ARG_DUR_NS, dur)
        if knd == KIND_KERNEL:
            dims[0], dims[1], dims[2] = grid_x[i], grid_y[i], grid_z[i]
            dims[3], dims[4], dims[5] = block_x[i], block_y[i], block_z[i]
            for j in range(6):
                if dims[j] != -1:
                    e = put_int_arg(e, ARG_GRID_X + j, dims[j])
            # its launch configuration's row: the first of its name's entries with its launch id and block
            row = rows - 1
            if n_launch != 0 and 0 <= nm < n_names:
                launch = launch_ids[i]
                for entry in range(first[nm], first[nm + 1]):
                    if (keys[4 * entry] == launch and keys[4 * entry + 1] == dims[3]
                            and keys[4 * entry + 2] == dims[4] and keys[4 * entry + 3] == dims[5]):
                        row = entry
                        break
            a, b = row_at[2 * row], row_at[2 * row + 1]
            e = put_piece(e, blob_p + a, b - a)
            blocks = wave_blocks[row]
            if blocks > 0:
                if (0 <= dims[0] and dims[0] <= GRID_LIMIT and 0 <= dims[1] and dims[1] <= GRID_LIMIT
                        and 0 <= dims[2] and dims[2] <= GRID_LIMIT):
                    e = put_double_arg(e, ARG_WAVES, <double>dims[0] * <double>dims[1] * <double>dims[2]
                                       / <double>blocks)
                else:
                    e = put_piece(e, no_grid_p, no_grid_n)
            else:
                e = put_piece(e, blob_p + b, row_at[2 * row + 2] - b)
        elif knd == KIND_MEMCPY or knd == KIND_MEMSET:
            value = nbytes[i]
            if value != -1:
                e = put_int_arg(e, ARG_BYTES, value)
            if d >= 0:
                memcpy(e, dir_bytes[d], <size_t>dir_len[d])
                e += dir_len[d]
            if knd == KIND_MEMCPY:
                if value >= 0 and dur > 0:
                    e = put_double_arg(e, ARG_BYTES_PER_S, <double>value * 1e9 / <double>dur)
                else:
                    e = put_piece(e, no_rate_p, no_rate_n)
                if d == DIRECTION_H2D or d == DIRECTION_D2H:
                    e = put_piece(e, host_p, host_n)
        event_len = <int>(e - event)
        body_len = 1 + varint_size(<uint64_t>begin) + 1 + varint_size(<uint64_t>event_len) + event_len + 4
        p[0] = TAG_PACKET
        p = put_varint(p + 1, <uint64_t>body_len)
        p[0] = TAG_TIMESTAMP
        p = put_varint(p + 1, <uint64_t>begin)
        p[0] = TAG_TRACK_EVENT
        p = put_varint(p + 1, <uint64_t>event_len)
        memcpy(p, event, <size_t>event_len)
        p += event_len
        p[0] = TAG_SEQUENCE_ID
        p[1] = SEQUENCE_ID
        p[2] = TAG_SEQUENCE_FLAGS
        p[3] = NEEDS_STATE
        out.size = <size_t>(p + 4 - out.data)
        lane.last_begin[k] = begin
        lane.pending_end[k] = begin + dur
    return out.take()


def finish(LaneSlices lane):
    cdef _Buffer out = _Buffer(<size_t>(lane.n * 64))
    cdef int k
    cdef unsigned char* p
    for k in range(lane.n):
        if lane.pending_end[k] >= 0:
            p = out.data + out.size
            p = put_end(p, <uint64_t>lane.uuids[k], <uint64_t>lane.pending_end[k])
            out.size = <size_t>(p - out.data)
            lane.pending_end[k] = -1
    return out.take()
