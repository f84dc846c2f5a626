"""The fixed tables of a GPUFlow Perfetto trace that the slice encoders write by number.

A trace interns its strings (Perfetto's ``interned_data``): the argument names, the categories and
the names of slices that are not kernels get the small ids below in the trace's first packet
(:mod:`gpuflow.export.perfetto` writes it); kernel names get ids from
:data:`FIRST_KERNEL_NAME_IID` on, as they first appear. Both slice encoders (``_slices_py`` and
the compiled ``_slices_c``) write these ids; a test compares the compiled module's copy with this
one.

What a slice carries (its arguments, Perfetto's debug annotations):

* a kernel: ``seq``, ``dur_ns``, ``grid_x/y/z``, ``block_x/y/z`` (a dimension the recorder does
  not have, -1, is left out: unavailable is not a value), then the theoretical occupancy of its
  own launch configuration (docs/occupancy.md): ``occupancy_pct`` (a double, 0-100),
  ``limiter`` ("registers", "warps+blocks" ...), ``blocks_per_sm`` and ``waves`` (a double: its
  grid's blocks over one full wave's, blocks per SM x SMs); where the occupancy is not known
  ``occupancy_pct`` alone is given, the string "not available: <why>", and where the waves are not
  (no SM count, a cluster launch) ``waves`` is such a string;
* a copy or memset: ``seq``, ``dur_ns``, ``bytes`` (left out when unknown) and ``direction``
  (one of the snapshot's TRANSFER_DIRECTIONS; left out when unknown); a copy then its achieved
  ``bytes_per_s`` (a double: bytes over its duration; "not available: ..." when it took no
  measured time or its bytes are unknown) and, for h2d and d2h, ``host_memory``: "not
  available: ...", since the retained records do not keep a copy's memory kinds (the snapshot's
  copy bandwidth by direction and host memory has them, per device);
* an execution of a kind outside SPAN_KINDS: ``seq`` and ``dur_ns``.

The strings of those arguments are interned (Perfetto's ``debug_annotation_string_values``) as
they first appear, as kernel names are.

How slices are laid on tracks: a lane's executions go on its stream's track, each from its start
to its start plus its duration. A CUDA stream runs one thing at a time, but a span's start is
kept to the microsecond while its duration is exact, so back-to-back executions can appear to
overlap by less than a microsecond: there the earlier slice is ended where the next begins (its
``dur_ns`` argument keeps the exact duration). An execution that overlaps by more (or starts
before the previous one) goes on a sub-track under the stream's, so that slices on one track
always nest as Perfetto requires; at most :data:`MAX_SUBTRACKS` per lane (past that they share
the last one, and Perfetto may report them as misnested: only a program that writes its own
ring could cause it).

Constraints: plain constants; changing a number changes the file format (docs/recorder.md).
"""

from __future__ import annotations

from gpuflow.core.snapshot import SPAN_KINDS, TRANSFER_DIRECTIONS

#: the trace's one packet sequence (trusted_packet_sequence_id)
SEQUENCE_ID = 1

#: debug-annotation names, interned as 1, 2, ...
ARG_NAMES = ("seq", "dur_ns", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "bytes",
             "direction", "occupancy_pct", "limiter", "blocks_per_sm", "waves", "bytes_per_s", "host_memory")
ARG_SEQ, ARG_DUR_NS, ARG_GRID_X, ARG_GRID_Y, ARG_GRID_Z, ARG_BLOCK_X, ARG_BLOCK_Y, ARG_BLOCK_Z, \
    ARG_BYTES, ARG_DIRECTION, ARG_OCCUPANCY_PCT, ARG_LIMITER, ARG_BLOCKS_PER_SM, ARG_WAVES, ARG_BYTES_PER_S, \
    ARG_HOST_MEMORY = range(1, len(ARG_NAMES) + 1)
#: the argument names every GPUFlow trace's header holds (a trace written before the occupancy and
#: bandwidth arguments has only these); a reader requires them and takes the rest where present
BASE_ARG_NAMES = 10

#: event categories, interned as 1, 2, ...: a span kind's category id is its code + 1
CATEGORIES = (*SPAN_KINDS, "other")
CATEGORY_OTHER = len(CATEGORIES)

#: slice names that are not kernel names, interned as 1, 2, ...
FIXED_EVENT_NAMES = ("(unnamed kernel)", "(unknown kind)", "memcpy", "memset",
                     *(f"memcpy {d}" for d in TRANSFER_DIRECTIONS[:5]))
NAME_UNNAMED_KERNEL, NAME_UNKNOWN_KIND, NAME_MEMCPY, NAME_MEMSET = 1, 2, 3, 4
#: "memcpy <direction>" for direction codes 0-4 (h2d, d2h, d2d, p2p, h2h) is this + the code
NAME_MEMCPY_DIRECTION = 5
FIRST_KERNEL_NAME_IID = len(FIXED_EVENT_NAMES) + 1

#: the kind codes (SPAN_KINDS indexes) the encoders treat specially
KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET = (SPAN_KINDS.index(k) for k in ("kernel", "memcpy", "memset"))
#: the direction code that names no copy direction ("memset")
DIRECTION_MEMSET = TRANSFER_DIRECTIONS.index("memset")
#: the directions whose copies have a host side (the ``host_memory`` argument)
DIRECTION_H2D, DIRECTION_D2H = TRANSFER_DIRECTIONS.index("h2d"), TRANSFER_DIRECTIONS.index("d2h")

#: sub-tracks a lane may have (its own track included)
MAX_SUBTRACKS = 16
#: an overlap shorter than this (the microsecond a start was rounded to) ends the earlier slice
OVERLAP_TOLERANCE_NS = 999
#: timestamps and durations are clamped to these (a ring may hold anything; Perfetto's are u64)
MAX_START_US = (1 << 61) // 1000
MAX_DURATION_NS = 1 << 61
#: the most bytes of arguments one pre-encoded piece (a launch configuration's, a fixed one) holds
MAX_ARG_PIECE = 128
#: a grid dimension beyond this is not a grid (CUDA's are 32 bits at most): its waves are not given
MAX_GRID_DIMENSION = (1 << 32) - 1
