"""A lane's span columns as Perfetto slice packets: the pure-Python twin of ``_slices_c``.

The readable statement of what the compiled encoder does, byte for byte (the tests run both over
the same columns and compare their output); used where the extension is not built or
``GPUFLOW_NO_EXTENSIONS`` is set. Which fields each packet holds, and how slices are laid on a
lane's track and its sub-tracks, is described in :mod:`gpuflow.export.slice_layout`.

API (the same in both twins):

* ``LaneSlices(track_uuid, new_subtrack)`` — one lane's state across the pieces of an export:
  its sub-tracks, the last slice begun on each and the end not yet written; ``new_subtrack(k)``
  is called when sub-track ``k`` (1, 2, ...) is first needed and returns ``(uuid,
  descriptor_packet_bytes)``, which go into the output just before the first slice on it;
* ``encode_spans(lane, columns, name_iids, kernel_counts, args) -> bytes`` — a slice-begin packet
  per span (and the end packet of the slice before it on the same track), ``name_iids[i]`` being
  the interned id of ``columns.names[i]``; each kernel adds one to ``kernel_counts[i]`` for its
  name ``i``, or to ``kernel_counts[len(names)]`` when it has none (both are ``array('q')``);
  ``args`` (:class:`~gpuflow.export.launch_args.LaunchArgs`) gives each kernel its launch
  configuration's occupancy arguments (its row: the first of its name's entries whose launch id
  and block are the span's, else the last row) and each copy its bandwidth and host memory;
* ``finish(lane) -> bytes`` — the end packets still pending.

Constraints: no Python object per span beyond what this twin's loop needs; values from a ring are
untrusted (clamped or left out as slice_layout says, never an exception).
"""

from __future__ import annotations

from array import array
from typing import Callable

from gpuflow.core.recorded import SpanColumns
from gpuflow.core.snapshot import TRANSFER_DIRECTIONS
from gpuflow.export import protowire as w
from gpuflow.export import slice_layout as L
from gpuflow.export.launch_args import LaunchArgs, double_arg

is_compiled = False

_SEQ_ID = w.int_field(w.PACKET_SEQUENCE_ID, L.SEQUENCE_ID)
_NEEDS_STATE = w.int_field(w.PACKET_SEQUENCE_FLAGS, w.SEQ_NEEDS_INCREMENTAL_STATE)
_BEGIN = w.int_field(w.EVENT_TYPE, w.TYPE_SLICE_BEGIN)
_END = w.int_field(w.EVENT_TYPE, w.TYPE_SLICE_END)
_DIRECTION_ARGS = tuple(
    w.len_field(w.EVENT_DEBUG_ANNOTATIONS, w.int_field(w.ANNOTATION_NAME_IID, L.ARG_DIRECTION)
                + w.text_field(w.ANNOTATION_STRING_VALUE, d))
    for d in TRANSFER_DIRECTIONS)
_KERNEL_DIMENSIONS = (L.ARG_GRID_X, L.ARG_GRID_Y, L.ARG_GRID_Z, L.ARG_BLOCK_X, L.ARG_BLOCK_Y,
                      L.ARG_BLOCK_Z)


def _int_arg(iid: int, value: int) -> bytes:
    return w.len_field(w.EVENT_DEBUG_ANNOTATIONS,
                       w.int_field(w.ANNOTATION_NAME_IID, iid) + w.int_field(w.ANNOTATION_INT_VALUE, value))


def _end_packet(uuid: int, ts: int) -> bytes:
    event = _END + w.int_field(w.EVENT_TRACK_UUID, uuid)
    return w.packet(w.int_field(w.PACKET_TIMESTAMP, ts) + w.len_field(w.PACKET_TRACK_EVENT, event) + _SEQ_ID)


class LaneSlices:
    """One lane's tracks and the slices still open on them (see the module's API)."""

    def __init__(self, track_uuid: int, new_subtrack: Callable[[int], tuple[int, bytes]]) -> None:
        self.new_subtrack = new_subtrack
        self.uuids = [track_uuid]
        self.last_begin = [-1]
        self.pending_end = [-1]

    @property
    def subtracks(self) -> int:
        return len(self.uuids)


def _track_for(lane: LaneSlices, begin: int, out: list[bytes]) -> int:
    """The sub-track a slice beginning at ``begin`` goes on (made, and described, if new)."""
    for k in range(len(lane.uuids)):
        if begin >= lane.last_begin[k] and begin + L.OVERLAP_TOLERANCE_NS >= lane.pending_end[k]:
            return k
    if len(lane.uuids) == L.MAX_SUBTRACKS:
        return L.MAX_SUBTRACKS - 1
    k = len(lane.uuids)
    uuid, descriptor = lane.new_subtrack(k)
    out.append(descriptor)
    lane.uuids.append(uuid)
    lane.last_begin.append(-1)
    lane.pending_end.append(-1)
    return k


def check_args(args: LaunchArgs, spans: int, n_names: int) -> None:
    """ValueError unless ``args``' tables are consistent (what the compiled twin relies on)."""
    rows = len(args.wave_blocks)
    if len(args.launch_ids) not in (0, spans):
        raise ValueError("args.launch_ids needs one id per span, or none")
    if len(args.first) != n_names + 1 or rows < 1 or len(args.keys) != 4 * (rows - 1) \
            or len(args.row_at) != 2 * rows + 1:
        raise ValueError("args' tables differ in length")
    if any(not 0 <= a <= b <= rows - 1 for a, b in zip(args.first, args.first[1:])) or args.first[0] != 0:
        raise ValueError("args.first is not a run of entries")
    if args.row_at[0] != 0 or args.row_at[-1] != len(args.blob) or any(
            not 0 <= b - a <= L.MAX_ARG_PIECE for a, b in zip(args.row_at, args.row_at[1:])):
        raise ValueError("args.row_at does not cut args.blob into pieces")
    if any(len(piece) > L.MAX_ARG_PIECE for piece in (args.no_grid, args.no_rate, args.host_memory)) \
            or any(not 0 <= b <= 1 << 53 for b in args.wave_blocks):
        raise ValueError("an argument piece or a wave size is out of range")


def _kernel_args(args: LaunchArgs, c: SpanColumns, i: int, name: int, named: bool) -> list[bytes]:
    """A kernel's occupancy arguments: its configuration's row, and its waves."""
    row = len(args.wave_blocks) - 1
    if named and len(args.launch_ids):
        launch, keys = args.launch_ids[i], args.keys
        for entry in range(args.first[name], args.first[name + 1]):
            if keys[4 * entry] == launch and keys[4 * entry + 1] == c.block_x[i] \
                    and keys[4 * entry + 2] == c.block_y[i] and keys[4 * entry + 3] == c.block_z[i]:
                row = entry
                break
    at = args.row_at
    out = [args.blob[at[2 * row]:at[2 * row + 1]]]
    wave_blocks = args.wave_blocks[row]
    if wave_blocks > 0:
        gx, gy, gz = c.grid_x[i], c.grid_y[i], c.grid_z[i]
        if all(0 <= g <= L.MAX_GRID_DIMENSION for g in (gx, gy, gz)):
            out.append(double_arg(L.ARG_WAVES, float(gx) * float(gy) * float(gz) / float(wave_blocks)))
        else:
            out.append(args.no_grid)
    else:
        out.append(args.blob[at[2 * row + 1]:at[2 * row + 2]])
    return out


def encode_spans(lane: LaneSlices, columns: SpanColumns, name_iids: array, kernel_counts: array,
                 args: LaunchArgs) -> bytes:
    out: list[bytes] = []
    n_names = len(name_iids)
    if len(kernel_counts) != n_names + 1:
        raise ValueError("kernel_counts needs one entry per name and one for kernels without")
    check_args(args, len(columns), n_names)
    c = columns
    for i in range(len(c)):
        begin = min(max(c.start_us[i], 0), L.MAX_START_US) * 1000
        dur = min(max(c.dur_ns[i], 0), L.MAX_DURATION_NS)
        kind, name, direction = c.kind[i], c.name[i], c.direction[i]
        k = _track_for(lane, begin, out)
        uuid = lane.uuids[k]
        if lane.pending_end[k] >= 0:
            out.append(_end_packet(uuid, max(min(lane.pending_end[k], begin), lane.last_begin[k])))
        fields = [_int_arg(L.ARG_SEQ, c.seq[i]), _int_arg(L.ARG_DUR_NS, dur)]
        if kind == L.KIND_KERNEL:
            category = kind + 1
            named = 0 <= name < n_names
            name_iid = name_iids[name] if named else L.NAME_UNNAMED_KERNEL
            kernel_counts[name if named else n_names] += 1
            for iid, value in zip(_KERNEL_DIMENSIONS, (c.grid_x[i], c.grid_y[i], c.grid_z[i], c.block_x[i],
                                                       c.block_y[i], c.block_z[i])):
                if value != -1:
                    fields.append(_int_arg(iid, value))
            fields += _kernel_args(args, c, i, name, named)
        elif kind in (L.KIND_MEMCPY, L.KIND_MEMSET):
            category = kind + 1
            if kind == L.KIND_MEMSET:
                name_iid = L.NAME_MEMSET
            elif 0 <= direction < L.DIRECTION_MEMSET:
                name_iid = L.NAME_MEMCPY_DIRECTION + direction
            else:
                name_iid = L.NAME_MEMCPY
            if c.bytes[i] != -1:
                fields.append(_int_arg(L.ARG_BYTES, c.bytes[i]))
            if 0 <= direction < len(_DIRECTION_ARGS):
                fields.append(_DIRECTION_ARGS[direction])
            if kind == L.KIND_MEMCPY:
                nbytes = c.bytes[i]
                fields.append(double_arg(L.ARG_BYTES_PER_S, float(nbytes) * 1e9 / float(dur))
                              if nbytes >= 0 and dur > 0 else args.no_rate)
                if direction in (L.DIRECTION_H2D, L.DIRECTION_D2H):
                    fields.append(args.host_memory)
        else:
            category, name_iid = L.CATEGORY_OTHER, L.NAME_UNKNOWN_KIND
        event = (_BEGIN + w.int_field(w.EVENT_TRACK_UUID, uuid) + w.int_field(w.EVENT_CATEGORY_IIDS, category)
                 + w.int_field(w.EVENT_NAME_IID, name_iid) + b"".join(fields))
        out.append(w.packet(w.int_field(w.PACKET_TIMESTAMP, begin) + w.len_field(w.PACKET_TRACK_EVENT, event)
                            + _SEQ_ID + _NEEDS_STATE))
        lane.last_begin[k] = begin
        lane.pending_end[k] = begin + dur
    return b"".join(out)


def finish(lane: LaneSlices) -> bytes:
    out = []
    for k, end in enumerate(lane.pending_end):
        if end >= 0:
            out.append(_end_packet(lane.uuids[k], end))
            lane.pending_end[k] = -1
    return b"".join(out)
