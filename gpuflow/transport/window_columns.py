"""The compact columnar form of a ``/api/window`` answer (``format=columns``): its one definition.

The JSON form writes every span field of every execution as decimal text, and a client then parses
it back: for a second of 100 k executions that is 1.3 M numbers and 6 MB of text, most of a Python
client's time. This form sends the same answer with its integer columns as raw little-endian
int64 blocks, which a client maps without parsing (``array.frombytes``, ``numpy.frombuffer``).
This module is the form's one definition: the layout below, the encoder (:func:`encode`, used by
gpuflow.transport.recorded_api) and the reader (:func:`read`).

Layout, version 1 (every integer little-endian)::

    offset     size  what
    0          4     magic, b"GFWC"
    4          4     version, 1 (u32)
    8          4     H: the header's length in bytes (u32), at most MAX_HEADER_BYTES
    12         4     reserved, 0 (u32)
    16         H     the header: UTF-8 JSON (below)
    16 + H     0..7  zero bytes, up to the next multiple of 8: where the column data begins (D)
    D          ...   the column blocks, each ``rows`` values of 8 bytes (signed 64-bit), nothing else;
                     the body ends where the last block ends

The header is the answer exactly as the JSON form documents it (docs/recorder.md, "The API"), with
four keys more at its top — ``"format": "columns"``, ``"dtype": "<i8"``, ``"span_columns"`` (the
13 names: seq, start_us, dur_ns, kind, name, grid_x, grid_y, grid_z, block_x, block_y, block_z,
bytes, direction) and ``"bucket_columns"`` (count, busy_ns) — and with each lane's lists replaced
by where its blocks lie:

* an exact lane's ``"spans"`` holds ``{"rows": n, "offset": o, "names": [...]}``: its k-th span
  column (in ``span_columns``' order) is the ``n`` values at byte ``D + o + 8·n·k``;
* a reduced lane's ``"buckets"`` holds ``{"start_us", "width_us", "rows": n, "offset": o}``:
  ``count`` at ``D + o``, ``busy_ns`` at ``D + o + 8·n``.

Blocks follow the lanes' order in the header (processes, then lanes), each lane's right after the
previous one's, from ``o = 0``. With numpy: ``numpy.frombuffer(body, "<i8", n, D + o + 8*n*k)``.

Constraints: the encoder copies each column once, into the body, and makes no Python object per
value; the reader trusts nothing it is given: every length and offset is checked against the body
before anything is read or allocated (:class:`ColumnsFormatError` otherwise), so what it allocates
is bounded by the body's size.
"""

from __future__ import annotations

import json
import math
import struct
import sys
from array import array
from typing import Any, Iterable, Sequence

from gpuflow.core.recorded import SpanBuckets, SpanColumns

MAGIC = b"GFWC"
VERSION = 1
#: magic, version, header length, reserved
PREAMBLE = struct.Struct("<4sIII")
#: the most header bytes a reader accepts (the header holds the lanes' names, never the columns)
MAX_HEADER_BYTES = 64 << 20
ALIGN = 8
DTYPE = "<i8"
#: what ``/api/window?format=columns`` answers with
MEDIA_TYPE = "application/octet-stream"
SPAN_COLUMNS = ("seq", "start_us", "dur_ns", "kind", "name", "grid_x", "grid_y", "grid_z",
                "block_x", "block_y", "block_z", "bytes", "direction")
BUCKET_COLUMNS = ("count", "busy_ns")
#: the header's keys that say how the form is laid out (the JSON form has none of them)
LAYOUT_KEYS = {"format": "columns", "dtype": DTYPE, "span_columns": list(SPAN_COLUMNS),
               "bucket_columns": list(BUCKET_COLUMNS)}

_LITTLE = sys.byteorder == "little"

#: a lane as the encoder is given it: its head (the JSON form's keys before its columns) and its
#: spans or buckets
Lane = tuple[dict[str, Any], SpanColumns | SpanBuckets]


class ColumnsFormatError(ValueError):
    """A body that is not a well-formed version-1 columnar window answer."""


def _block(column: array) -> array | bytes:
    """A column's bytes, little-endian (an int64 array already is, on a little-endian host)."""
    if _LITTLE:
        return column
    swapped = array(column.typecode, column)
    swapped.byteswap()
    return swapped.tobytes()


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float as None (null), as the JSON form writes them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(v) for key, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _header_text(doc: dict[str, Any]) -> bytes:
    try:
        text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError:   # a NaN or an infinity somewhere: null, as in the JSON form
        text = json.dumps(_finite(doc), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8")


def encode(head: dict[str, Any], processes: Iterable[tuple[dict[str, Any], Sequence[Lane]]],
           problems: list[dict[str, str]]) -> bytes:
    """The body of an answer: ``head`` (from, to, pid, width, sources), each process's head with
    its lanes, the problems."""
    blocks: list[array | bytes] = []
    offset = 0
    procs = []
    for process_head, lanes in processes:
        described = []
        for lane_head, data in lanes:
            if isinstance(data, SpanColumns):
                rows = len(data.seq)
                where = {"rows": rows, "offset": offset, "names": list(data.names)}
                described.append({**lane_head, "spans": where})
                blocks += (_block(getattr(data, name)) for name in SPAN_COLUMNS)
                offset += 8 * rows * len(SPAN_COLUMNS)
            else:
                rows = len(data.count)
                if len(data.busy_ns) != rows:
                    raise ValueError("a lane's bucket columns differ in length")
                described.append({**lane_head, "buckets": {"start_us": data.start_us, "width_us": data.width_us,
                                                           "rows": rows, "offset": offset}})
                blocks += (_block(data.count), _block(data.busy_ns))
                offset += 8 * rows * len(BUCKET_COLUMNS)
        procs.append({**process_head, "lanes": described})
    header_doc = {**head, **LAYOUT_KEYS, "processes": procs, "problems": problems}
    header = _header_text(header_doc)
    pad = -(PREAMBLE.size + len(header)) % ALIGN
    return b"".join([PREAMBLE.pack(MAGIC, VERSION, len(header), 0), header, bytes(pad), *blocks])


def _int(value: Any, what: str) -> int:
    if type(value) is not int or value < 0:
        raise ColumnsFormatError(f"{what} must be a non-negative whole number")
    return value


def _columns(view: memoryview, start: int, rows: int, names: Sequence[str]) -> dict[str, array]:
    out = {}
    for k, name in enumerate(names):
        column = array("q")
        column.frombytes(view[start + 8 * rows * k:start + 8 * rows * (k + 1)])
        if not _LITTLE:
            column.byteswap()
        out[name] = column
    return out


def read(body: bytes | bytearray | memoryview) -> dict[str, Any]:
    """The answer a columnar body holds, as the JSON form's document with every column an
    ``array('q')`` (``tolist()`` of each gives exactly the JSON form's lists).

    :raises ColumnsFormatError: anything that is not a well-formed version-1 body.
    """
    view = memoryview(body).cast("B")
    if len(view) < PREAMBLE.size:
        raise ColumnsFormatError("the body is shorter than its preamble")
    magic, version, header_len, reserved = PREAMBLE.unpack_from(view, 0)
    if magic != MAGIC:
        raise ColumnsFormatError("not a columnar window answer (bad magic)")
    if version != VERSION or reserved != 0:
        raise ColumnsFormatError(f"unsupported columnar window answer version {version}")
    if header_len > MAX_HEADER_BYTES or PREAMBLE.size + header_len > len(view):
        raise ColumnsFormatError("the header's length is beyond the body or the limit")
    try:
        doc = json.loads(bytes(view[PREAMBLE.size:PREAMBLE.size + header_len]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ColumnsFormatError("the header is not UTF-8 JSON") from None
    if not isinstance(doc, dict) or any(doc.get(key) != value for key, value in LAYOUT_KEYS.items()):
        raise ColumnsFormatError("the header does not describe version-1 int64 columns")
    data = PREAMBLE.size + header_len
    data += -data % ALIGN
    if data > len(view) or any(view[PREAMBLE.size + header_len:data]):
        raise ColumnsFormatError("the header's padding is not zeros up to the data")
    expected = 0
    processes = doc.get("processes")
    if not isinstance(processes, list):
        raise ColumnsFormatError("processes must be a list")
    for process in processes:
        lanes = process.get("lanes") if isinstance(process, dict) else None
        if not isinstance(lanes, list):
            raise ColumnsFormatError("each process must have a list of lanes")
        for lane in lanes:
            if not isinstance(lane, dict) or ("spans" in lane) == ("buckets" in lane):
                raise ColumnsFormatError("each lane must have spans or buckets")
            key, names = ("spans", SPAN_COLUMNS) if "spans" in lane else ("buckets", BUCKET_COLUMNS)
            where = lane[key]
            if not isinstance(where, dict):
                raise ColumnsFormatError(f"a lane's {key} must be an object")
            rows = _int(where.pop("rows", None), f"a lane's {key} rows")
            if _int(where.pop("offset", None), f"a lane's {key} offset") != expected:
                raise ColumnsFormatError("a lane's blocks are not where the previous lane's end")
            size = 8 * rows * len(names)
            if data + expected + size > len(view):
                raise ColumnsFormatError("a lane's blocks run past the body")
            if key == "spans":
                lane["spans"] = {**_columns(view, data + expected, rows, names), "names": where.get("names")}
                if not isinstance(lane["spans"]["names"], list):
                    raise ColumnsFormatError("a lane's spans must have a list of names")
            else:
                where.update(_columns(view, data + expected, rows, names))
            expected += size
    if data + expected != len(view):
        raise ColumnsFormatError("the body does not end where its last block ends")
    for key in LAYOUT_KEYS:
        del doc[key]
    return doc
