"""Protocol-buffer wire decoding: the reading side of :mod:`gpuflow.export.protowire`.

Only what reading a GPUFlow trace back needs (:mod:`gpuflow.export.trace_read`): a message's
fields one after another, each a varint, a 64-bit word, a 32-bit word or a length-delimited
payload (given as its offsets, never copied) (:func:`fields`); for a reader that walks a hot
message inline, a LEN field's length checked (:func:`length`) and a field of no interest
skipped (:func:`skip`); int64 from its two's complement. The field
numbers and wire types are protowire's: one definition for the writer and the reader.

The bytes are untrusted (a file handed to ``gpuflow open``): every read is checked against the
end of the message it belongs to, a varint has at most ten bytes and fits 64 bits, a length
never runs past its message, and groups (wire types 3 and 4, which GPUFlow never writes) and the
undefined wire types 6 and 7 are refused. Anything wrong raises :class:`WireError` naming the byte
offset; nothing here allocates more than the field it returns, so time and memory follow the
input's size.

Constraints: pure functions over ``bytes``; no recursion (a caller descends into a payload by
calling :func:`fields` again on its offsets, as deep as its schema goes and no deeper).
"""

from __future__ import annotations

from gpuflow.export.protowire import FIXED64, LEN, VARINT

#: the wire type of a 32-bit word (never written by GPUFlow; skipped when read)
FIXED32 = 5
_U64 = (1 << 64) - 1


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message (the message says where)."""


def varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` (ending before ``end``), and the offset after it."""
    value = shift = 0
    start = pos
    while True:
        if pos >= end:
            raise WireError(f"a number is cut short at byte {start}")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            if value > _U64:
                raise WireError(f"a number at byte {start} does not fit 64 bits")
            return value, pos
        shift += 7
        if shift >= 70:
            raise WireError(f"a number at byte {start} is longer than ten bytes")


def int64(value: int) -> int:
    """A varint read as protobuf's int64 (two's complement in 64 bits)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def fields(buf: bytes, pos: int, end: int) -> list[tuple[int, int, int, int]]:
    """Every field of the message in ``buf[pos:end]``, in order: ``(number, wire_type, value,
    value_end)``.

    ``value`` is the number for a varint, the little-endian word for FIXED64/FIXED32, and the
    payload's first offset for LEN, whose ``value_end`` is the payload's end (for the others,
    the offset after the field). One call reads the whole message (a list, not a generator: a
    trace is mostly small messages, and one-byte varints are read inline, so a field costs a few
    operations rather than a few calls)."""
    out = []
    append = out.append
    while pos < end:
        at = pos
        key = buf[pos]
        pos += 1
        if key >= 0x80:
            key, pos = varint(buf, at, end)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise WireError(f"field number 0 at byte {at}")
        if wire_type == VARINT or wire_type == LEN:
            if pos >= end:
                raise WireError(f"field {number} at byte {at} is cut short")
            value = buf[pos]
            pos += 1
            if value >= 0x80:
                value, pos = varint(buf, pos - 1, end)
            if wire_type == VARINT:
                append((number, VARINT, value, pos))
                continue
            if value > end - pos:
                raise WireError(f"field {number} at byte {at} says {value} bytes, but its message has "
                                f"{end - pos} left")
            append((number, LEN, pos, pos + value))
            pos += value
        elif wire_type == FIXED64 or wire_type == FIXED32:
            width = 8 if wire_type == FIXED64 else 4
            if end - pos < width:
                raise WireError(f"field {number} at byte {at} is cut short")
            append((number, wire_type, int.from_bytes(buf[pos:pos + width], "little"), pos + width))
            pos += width
        else:
            raise WireError(f"field {number} at byte {at} has wire type {wire_type}, which a GPUFlow trace "
                            "never holds")
    return out


def length(buf: bytes, pos: int, end: int, at: int) -> tuple[int, int]:
    """A LEN field's length (its key read, at ``at``) and the offset of its payload, checked."""
    if pos >= end:
        raise WireError(f"the field at byte {at} is cut short")
    size = buf[pos]
    pos += 1
    if size >= 0x80:
        size, pos = varint(buf, pos - 1, end)
    if size > end - pos:
        raise WireError(f"the field at byte {at} says {size} bytes, but its message has {end - pos} left")
    return size, pos


def skip(buf: bytes, pos: int, end: int, key: int, at: int) -> int:
    """Past the value of a field of no interest (its key read, at ``at``)."""
    wire_type = key & 7
    if key >> 3 == 0:
        raise WireError(f"field number 0 at byte {at}")
    if wire_type == VARINT:
        return varint(buf, pos, end)[1]
    if wire_type == LEN:
        size, pos = length(buf, pos, end, at)
        return pos + size
    if wire_type == FIXED64 or wire_type == FIXED32:
        width = 8 if wire_type == FIXED64 else 4
        if end - pos < width:
            raise WireError(f"the field at byte {at} is cut short")
        return pos + width
    raise WireError(f"the field at byte {at} has wire type {wire_type}, which a GPUFlow trace never holds")
