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
* ``encode_spans(lane, columns, name_iids, kernel_counts) -> bytes`` — a slice-begin packet per
  span (and the end packet of the slice before it on the same track), ``name_iids[i]`` being the
  interned id of ``columns.names[i]``; each kernel adds one to ``kernel_counts[i]`` for its name
  ``i``, or to ``kernel_counts[len(names)]`` when it has none (both are ``array('q')``);
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


def encode_spans(lane: LaneSlices, columns: SpanColumns, name_iids: array, kernel_counts: array) -> bytes:
    out: list[bytes] = []
    n_names = len(name_iids)
    if len(kernel_counts) != n_names + 1:
        raise ValueError("kernel_counts needs one entry per name and one for kernels without")
    c = columns
    for i in range(len(c)):
        begin = min(max(c.start_us[i], 0), L.MAX_START_US) * 1000
        dur = min(max(c.dur_ns[i], 0), L.MAX_DURATION_NS)
        kind, name, direction = c.kind[i], c.name[i], c.direction[i]
        k = _track_for(lane, begin, out)
        uuid = lane.uuids[k]
        if lane.pending_end[k] >= 0:
            out.append(_end_packet(uuid, max(min(lane.pending_end[k], begin), lane.last_begin[k])))
        args = [_int_arg(L.ARG_SEQ, c.seq[i]), _int_arg(L.ARG_DUR_NS, dur)]
        if kind == L.KIND_KERNEL:
            category = kind + 1
            named = 0 <= name < n_names
            name_iid = name_iids[name] if named else L.NAME_UNNAMED_KERNEL
            kernel_counts[name if named else n_names] += 1
            for iid, value in zip(_KERNEL_DIMENSIONS, (c.grid_x[i], c.grid_y[i], c.grid_z[i], c.block_x[i],
                                                       c.block_y[i], c.block_z[i])):
                if value != -1:
                    args.append(_int_arg(iid, value))
        elif kind in (L.KIND_MEMCPY, L.KIND_MEMSET):
            category = kind + 1
            if kind == L.KIND_MEMSET:
                name_iid = L.NAME_MEMSET
            elif 0 <= direction < L.DIRECTION_MEMSET:
                name_iid = L.NAME_MEMCPY_DIRECTION + direction
            else:
                name_iid = L.NAME_MEMCPY
            if c.bytes[i] != -1:
                args.append(_int_arg(L.ARG_BYTES, c.bytes[i]))
            if 0 <= direction < len(_DIRECTION_ARGS):
                args.append(_DIRECTION_ARGS[direction])
        else:
            category, name_iid = L.CATEGORY_OTHER, L.NAME_UNKNOWN_KIND
        event = (_BEGIN + w.int_field(w.EVENT_TRACK_UUID, uuid) + w.int_field(w.EVENT_CATEGORY_IIDS, category)
                 + w.int_field(w.EVENT_NAME_IID, name_iid) + b"".join(args))
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
