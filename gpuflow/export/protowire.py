"""Protocol-buffer wire encoding, and the field numbers of Perfetto's trace schema GPUFlow writes.

Only what the exporter needs: varints (unsigned, and int64 as two's complement in ten bytes),
length-delimited fields, and the numbers of the fields of ``perfetto_trace.proto`` that a GPUFlow
trace uses (Trace, TracePacket, TrackDescriptor, ProcessDescriptor, CounterDescriptor,
TrackEvent, DebugAnnotation, InternedData, TracingServiceEvent). The tests decode what is written
with the official schema (the ``perfetto`` package's generated classes), so a wrong number here
fails there.

Constraints: pure functions over ``bytes``; the compiled slice encoder (``_slices_c.pyx``)
repeats the few numbers its hot loop writes, and a test compares them with these.
"""

from __future__ import annotations

import struct

VARINT, FIXED64, LEN = 0, 1, 2

# Trace
TRACE_PACKET = 1
# TracePacket
PACKET_TIMESTAMP = 8
PACKET_SEQUENCE_ID = 10  #: trusted_packet_sequence_id
PACKET_TRACK_EVENT = 11
PACKET_INTERNED_DATA = 12
PACKET_SEQUENCE_FLAGS = 13
PACKET_PREVIOUS_DROPPED = 42
PACKET_TRACK_DESCRIPTOR = 60
PACKET_SERVICE_EVENT = 69
PACKET_FIRST_ON_SEQUENCE = 87
SEQ_INCREMENTAL_STATE_CLEARED = 1
SEQ_NEEDS_INCREMENTAL_STATE = 2
# TrackDescriptor
TRACK_UUID = 1
TRACK_NAME = 2
TRACK_PROCESS = 3
TRACK_PARENT_UUID = 5
TRACK_COUNTER = 8
TRACK_CHILD_ORDERING = 11
TRACK_SIBLING_RANK = 12
TRACK_DESCRIPTION = 14
CHILD_ORDERING_EXPLICIT = 3
# ProcessDescriptor
PROCESS_PID = 1
PROCESS_NAME = 6
# CounterDescriptor
COUNTER_UNIT = 3
COUNTER_UNIT_NAME = 6
UNIT_SIZE_BYTES = 3
# TrackEvent
EVENT_CATEGORY_IIDS = 3
EVENT_DEBUG_ANNOTATIONS = 4
EVENT_TYPE = 9
EVENT_NAME_IID = 10
EVENT_TRACK_UUID = 11
EVENT_DOUBLE_COUNTER_VALUE = 44
TYPE_SLICE_BEGIN = 1
TYPE_SLICE_END = 2
TYPE_COUNTER = 4
# DebugAnnotation
ANNOTATION_NAME_IID = 1
ANNOTATION_INT_VALUE = 4
ANNOTATION_DOUBLE_VALUE = 5
ANNOTATION_STRING_VALUE = 6
ANNOTATION_STRING_VALUE_IID = 17
# InternedData (each entry: iid = 1, name = 2; an InternedString's str is field 2 too)
INTERNED_EVENT_CATEGORIES = 1
INTERNED_EVENT_NAMES = 2
INTERNED_ANNOTATION_NAMES = 3
INTERNED_ANNOTATION_STRING_VALUES = 29
INTERNED_IID = 1
INTERNED_NAME = 2
# TracingServiceEvent
SERVICE_READ_BUFFERS_COMPLETED = 4

_U64 = (1 << 64) - 1


def varint(value: int) -> bytes:
    """``value`` as a base-128 varint; a negative one as its 64-bit two's complement (int64)."""
    value &= _U64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def tag(field: int, wire_type: int) -> bytes:
    return varint((field << 3) | wire_type)


def int_field(field: int, value: int) -> bytes:
    return tag(field, VARINT) + varint(value)


def len_field(field: int, payload: bytes) -> bytes:
    return tag(field, LEN) + varint(len(payload)) + payload


def text_field(field: int, text: str) -> bytes:
    """A string field; text that is not valid Unicode (a lone surrogate) is replaced, not refused:
    names come from traced programs, and the schema's strings must be UTF-8."""
    return len_field(field, text.encode("utf-8", "replace"))


def double_field(field: int, value: float) -> bytes:
    return tag(field, FIXED64) + struct.pack("<d", value)


def packet(payload: bytes) -> bytes:
    """One TracePacket of the Trace (``repeated TracePacket packet = 1``)."""
    return len_field(TRACE_PACKET, payload)
