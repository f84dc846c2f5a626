"""The stream's compact form (schema 4, docs/snapshot.md "The stream"): its one Python definition.

This module holds everything about the form itself: its constants, the encoder's pieces and
:class:`StreamReader`, which reads it back. :mod:`gpuflow.transport.frames` only frames it (which
parts a full or a delta frame carries); ``gpuflow/ui/stream.js`` is the page's reader of the same
form, and tests/transport/test_wire_page.py fails if its constants leave this module's.

``GET /api/stream`` carries schema 4: a traced process has a ``names`` table (id → demangled and
mangled name), its kernels refer to a name id instead of repeating the name, and each lane's
spans are arrays, not objects::

    kernel           [Δseq, Δstart_us, dur_ns, 0, name_id, grid, block]
    memcpy / memset  [Δseq, Δstart_us, dur_ns, 1 | 2, bytes, direction_code]
    anything else    [Δseq, Δstart_us, dur_ns, "kind", name_id, grid, block, bytes, "direction"]

The kind code is the index in :data:`KINDS`, the direction code the index in :data:`DIRECTIONS`.
``Δseq`` and ``Δstart_us`` are differences from the span before it in the same list (the first
from 0); a grid or block ``(x, 1, 1)`` is the bare int ``x``; trailing nulls are left out.
Everything else (devices, processes, transfers, lanes' counters) is the plain form of
:meth:`Snapshot.to_json_dict`. The encoding is lossless: :class:`StreamReader` turns a stream
frame back into exactly that plain form (the tests compare the two).

Schema 4 is schema 2 with hosts named (every item's ``host``, the ``hosts`` list):
:class:`StreamReader` reads both, a schema-2 frame through :mod:`gpuflow.transport.wire_upgrade`,
into the plain form of schema 3.

A :class:`NameTable` belongs to one traced process (``(host, session, pid)``) and is append-only, so an id never changes
meaning while the process is in the stream; the frame encoder sends a delta only the entries
added since its base frame.

Constraints: pure data, no I/O; called under the frame encoder's lock, once per snapshot for all
clients, so the per-span loop is kept tight. Depends only on the snapshot contract; the order of
a kernel table is the snapshot's own :func:`~gpuflow.core.snapshot.kernel_order`, never restated.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Callable, Iterable, Sequence

from gpuflow.core.recorded import SpanColumns
from gpuflow.transport import wire_text
from gpuflow.transport.wire_upgrade import upgrade_frame

from gpuflow.core.snapshot import (
    SPAN_KINDS, CopyRate, KernelLaunch, KernelStat, Lane, Span, TRANSFER_DIRECTIONS, TracedDevice, TracedProcess,
    TransferStat, json_value, kernel_order,
)

#: schema of the stream's frames (the plain form of Snapshot.to_json_dict is schema 3)
WIRE_SCHEMA = 4
#: the stream's schema before hosts were named, which StreamReader still reads
OLD_WIRE_SCHEMA = 2
#: the schemas of the compact form, old and new (the others are plain: 1 and 3)
COMPACT_SCHEMAS = (OLD_WIRE_SCHEMA, WIRE_SCHEMA)
#: a frame's ``frame`` field: the whole snapshot, or the changes since ``base_seq``
FULL, DELTA = "full", "delta"

#: span kind codes: index in this tuple
KINDS = SPAN_KINDS
#: transfer direction codes: index in snapshot.TRANSFER_DIRECTIONS
DIRECTIONS = TRANSFER_DIRECTIONS

_KIND_CODE = {k: i for i, k in enumerate(KINDS)}
_DIRECTION_CODE = {d: i for i, d in enumerate(DIRECTIONS)}
#: top-level parts a delta frame may leave out (unchanged since its base frame)
OMITTABLE = ("host", "hosts", "sources", "devices", "processes", "traced_retired")
#: KernelStat fields sent as they are (name and mangled travel in the names table)
KERNEL_FIELDS = tuple(f.name for f in fields(KernelStat) if f.name not in ("name", "mangled"))
_TRANSFER_FIELDS = tuple(f.name for f in fields(TransferStat))
#: TracedProcess fields sent as they are, in the plain form's order
_TRACED_SCALARS = tuple(f.name for f in fields(TracedProcess)
                        if f.name not in ("kernels", "transfers", "lanes", "kernel_launches"))
#: KernelLaunch fields sent as they are (mangled travels in the names table)
LAUNCH_FIELDS = tuple(f.name for f in fields(KernelLaunch) if f.name != "mangled")


#: a traced process's key in a stream: (host, session, pid)
TracedKey = tuple[str | None, str, int]


def traced_key(t: TracedProcess) -> TracedKey:
    """Which traced process ``t`` is: pids and sessions repeat across the hosts of a fleet."""
    return (t.host, t.session, t.pid)


class NameTable:
    """Names of one traced process: id → ``[demangled, mangled]``, append-only.

    Kernel aggregates are entered by (demangled, mangled); a span knows only its demangled name
    and refers to the first entry with that name (an entry ``[name, None]`` if no kernel has it).
    """

    __slots__ = ("entries", "_pairs", "_names", "_mangled")

    def __init__(self) -> None:
        self.entries: list[list[str | None]] = []
        self._pairs: dict[tuple[str, str | None], int] = {}
        self._names: dict[str, int] = {}
        self._mangled: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def kernel_id(self, name: str, mangled: str | None) -> int:
        key = (name, mangled)
        i = self._pairs.get(key)
        if i is None:
            i = self._add(name, mangled)
        return i

    def launch_id(self, mangled: str) -> int | None:
        """The id of the first kernel entry with this mangled name (a KernelLaunch's key); None:
        no kernel has it."""
        return self._mangled.get(mangled)

    def span_id(self, name: str) -> int:
        i = self._names.get(name)
        if i is None:
            i = self._add(name, None)
        return i

    @property
    def pairs(self) -> dict[tuple[str, str | None], int]:
        """(name, mangled) -> id: what the frame encoder's compiled writer looks kernels up in
        (gpuflow.transport.wire_text.kernel_delta); read it, never change it."""
        return self._pairs

    def kernel_ids(self, kernels: Sequence[KernelStat], known: list[int | None] | None = None) -> list[int]:
        """Each kernel's id, entering new ones in order (as :meth:`kernel_id` would, kernel by
        kernel); ``known``: the ids already looked up (None for a pair the table lacks)."""
        ids = [self._pairs.get((k.name, k.mangled)) for k in kernels] if known is None else known
        if None in ids:
            ids = [self.kernel_id(k.name, k.mangled) if i is None else i for k, i in zip(kernels, ids)]
        return ids  # type: ignore[return-value]

    def span_ids(self, names: Sequence[str]) -> list[int]:
        """The id of each of a SpanColumns' ``names``, entering new ones in order (as
        :meth:`span_id` would, name by name)."""
        ids = wire_text.name_ids(names, self._names) if type(names) is tuple else list(map(self._names.get, names))
        if None in ids:
            ids = [self.span_id(n) if i is None else i for n, i in zip(names, ids)]
        return ids  # type: ignore[return-value]

    def add_span_names(self, spans: Iterable[Span] | Iterable[str]) -> None:
        """Give every span name in ``spans`` an id (as :meth:`span_id` would); ``spans`` may be the
        names themselves (a SpanColumns' ``names``, in order of first appearance)."""
        names = self._names
        for s in spans:
            name = s if isinstance(s, str) else s.name
            if name is not None and name not in names:
                self._add(name, None)

    def _add(self, name: str, mangled: str | None) -> int:
        i = len(self.entries)
        self.entries.append([name, mangled])
        self._pairs[(name, mangled)] = i
        self._names.setdefault(name, i)
        if mangled is not None:
            self._mangled.setdefault(mangled, i)
        return i


def geometry(g: Sequence[int] | None) -> int | list[int] | None:
    """A grid or block: ``x`` for (x, 1, 1), else the list; None stays None."""
    if g is None:
        return None
    if len(g) == 3 and g[1] == 1 and g[2] == 1:
        return g[0]
    return list(g)


def encode_spans(spans: Iterable[Span] | SpanColumns, table: NameTable) -> list[list[Any]]:
    """One lane's spans (oldest first) as the stream's arrays, names entered into ``table``.
    Columns are read column by column (:func:`_encode_columns`), with no Span per span."""
    if isinstance(spans, SpanColumns):
        return _encode_columns(spans, table)
    out = []
    prev_seq = prev_start = 0
    span_id = table.span_id
    for s in spans:
        out.append(_span_row(s, [s.seq - prev_seq, s.start_us - prev_start, s.dur_ns], span_id))
        prev_seq, prev_start = s.seq, s.start_us
    return out


def _span_row(s: Span, head: list[int], span_id: Callable[[str], int]) -> list[Any]:
    """A span's array after its ``head`` (Δseq, Δstart_us, dur_ns), trailing nulls left out."""
    kind = s.kind
    name, grid, block, nbytes, direction = s.name, s.grid, s.block, s.bytes, s.direction
    if kind == "kernel" and nbytes is None and direction is None:
        row = head + [0, None if name is None else span_id(name), geometry(grid), geometry(block)]
    elif (kind != "kernel" and kind in _KIND_CODE and name is None and grid is None
          and block is None and (direction is None or direction in _DIRECTION_CODE)):
        row = head + [_KIND_CODE[kind], nbytes,
                      None if direction is None else _DIRECTION_CODE[direction]]
    else:  # outside the documented shapes: every field, nothing lost
        row = head + [kind, None if name is None else span_id(name), geometry(grid),
                      geometry(block), nbytes, direction]
    while row[-1] is None:
        row.pop()
    return row


def _encode_columns(c: SpanColumns, table: NameTable) -> list[list[Any]]:
    """:func:`encode_spans` of columns: the rows ``encode_spans(iter(c), table)`` gives (so names
    enter ``table`` in the same order), made from the columns' ints. A kernel, or a copy or memset
    without a name, is written here; any other span goes through its Span (:func:`_span_row`)."""
    out = []
    prev_seq = prev_start = 0
    span_id, names = table.span_id, c.names
    ids: dict[int, int] = {}   # the columns' name index -> the table's id, filled as names appear
    n_kinds, n_directions = len(KINDS), len(DIRECTIONS)
    columns = zip(c.seq, c.start_us, c.dur_ns, c.kind, c.name, c.grid_x, c.grid_y, c.grid_z,
                  c.block_x, c.block_y, c.block_z, c.bytes, c.direction)
    for i, (seq, start, dur, kind, name, gx, gy, gz, bx, by, bz, nbytes, direction) in enumerate(columns):
        head = [seq - prev_seq, start - prev_start, dur]
        prev_seq, prev_start = seq, start
        if kind == 0 and nbytes < 0 and direction < 0:   # a kernel (SPAN_KINDS[0])
            if name < 0:
                name_id = None
            else:
                name_id = ids.get(name)
                if name_id is None:
                    name_id = ids[name] = span_id(names[name])
            out.append(head + [0, name_id, gx if gy == 1 and gz == 1 else [gx, gy, gz],
                               bx if by == 1 and bz == 1 else [bx, by, bz]])
        elif 0 < kind < n_kinds and name < 0 and direction < n_directions:   # a copy or memset
            row = head + [kind, None if nbytes < 0 else nbytes, None if direction < 0 else direction]
            while row[-1] is None:
                row.pop()
            out.append(row)
        else:
            out.append(_span_row(c.span(i), head, span_id))
    return out


def encode_kernels(kernels: Iterable[KernelStat], table: NameTable) -> list[dict[str, Any]]:
    """Kernel aggregates with ``id`` (into ``table``) in place of ``name`` and ``mangled``."""
    out = []
    for k in kernels:
        d = {"id": table.kernel_id(k.name, k.mangled)}
        for f in KERNEL_FIELDS:
            d[f] = getattr(k, f)
        out.append(d)
    return out


def encode_launches(launches: Iterable[KernelLaunch], table: NameTable) -> list[dict[str, Any]]:
    """Kernel launch entries with ``id`` (into ``table``, whose kernels are entered first) in
    place of ``mangled``; one whose kernel the table lacks (a builder gives none) is left out."""
    out = []
    for x in launches:
        i = table.launch_id(x.mangled)
        if i is not None:
            out.append({"id": i, **{f: getattr(x, f) for f in LAUNCH_FIELDS}})
    return out


class LaunchEntries:
    """A traced process's kernel launch entries as :func:`encode_launches` gives them, for one
    tuple of KernelLaunch objects, made reusing an earlier frame's: a builder hands the same tuple
    again while no entry changed, and the same object for an entry that did not change, so a frame
    makes a dict only for an entry whose object is new (a busy process has hundreds, every frame).

    ``changed_since(base)`` gives the entries that differ from their id's entry in ``base`` (the
    base frame's), as comparing the dicts would; ``text()`` the compact JSON list, made once.
    """

    __slots__ = ("launches", "table", "rows", "by_id", "whole", "_text")

    def __init__(self, launches: Sequence[KernelLaunch], table: NameTable, base: LaunchEntries | None) -> None:
        known = base.by_id if base is not None and base.table is table else {}
        self.launches, self.table = launches, table
        self.rows: list[tuple[int, KernelLaunch, dict[str, Any]]] = []
        for x in launches:
            i = table.launch_id(x.mangled)
            if i is None:
                continue
            kept = known.get(i)
            entry = kept[1] if kept is not None and kept[0] is x else {"id": i, **{f: getattr(x, f) for f in LAUNCH_FIELDS}}
            self.rows.append((i, x, entry))
        #: by id, the last entry with it (ids repeat only where names do)
        self.by_id = {i: (x, entry) for i, x, entry in self.rows}
        #: every launch has its entry (no kernel was missing from the table)
        self.whole = len(self.rows) == len(launches)
        self._text: str | None = None

    @classmethod
    def of(cls, launches: Sequence[KernelLaunch], table: NameTable, base: LaunchEntries | None) -> LaunchEntries:
        """``base`` itself when it holds these very launches, whole, with this table; else new ones."""
        if base is not None and base.launches is launches and base.table is table and base.whole:
            return base
        return cls(launches, table, base)

    def changed_since(self, base: LaunchEntries | None) -> list[dict[str, Any]]:
        if base is self:
            return []
        before = {} if base is None else base.by_id
        return [entry for i, _x, entry in self.rows
                if (old := before.get(i)) is None or (old[1] is not entry and old[1] != entry)]

    def text(self, encode: Callable[[Any], str]) -> str:
        if self._text is None:
            self._text = encode([entry for _i, _x, entry in self.rows])
        return self._text


def traced_head(t: TracedProcess) -> dict[str, Any]:
    """A traced process's plain scalar fields, ``complete`` and transfers (no names, kernels, lanes)."""
    d = {f: getattr(t, f) for f in _TRACED_SCALARS}
    d["devices"] = json_value(t.devices)
    d["complete"] = t.complete
    d["transfers"] = [{f: getattr(x, f) for f in _TRANSFER_FIELDS} for x in t.transfers]
    return d


#: the objects a traced process's head holds (its devices and their copies): their fields, as
#: ``json_value`` makes them plain
_HEAD_TYPES = {cls: tuple(f.name for f in fields(cls)) for cls in (TracedDevice, CopyRate)}


def traced_head_text(t: TracedProcess) -> str | None:
    """:func:`traced_head` as compact JSON text, written straight from ``t`` (wire_text.head_text);
    None where a value is not one it writes (the caller encodes :func:`traced_head` instead)."""
    return wire_text.head_text(t, _TRACED_SCALARS, _TRANSFER_FIELDS, _HEAD_TYPES)


def lane_head(lane: Lane) -> dict[str, Any]:
    """A lane's plain fields except ``spans``."""
    return {"device": lane.device, "context": lane.context, "stream": lane.stream,
            "label": lane.label, "executions": lane.executions,
            "spans_elided": lane.spans_elided}


# -- reading the stream ------------------------------------------------------------------------------
def _geometry_plain(g: Any) -> list[int] | None:
    if g is None:
        return None
    return [g, 1, 1] if isinstance(g, int) else list(g)


def _name(names: Sequence[Sequence[str | None]], i: Any) -> str | None:
    if i is None:
        return None
    if not isinstance(i, int) or not 0 <= i < len(names):
        raise ValueError(f"span refers to name id {i!r}, the table has {len(names)}")
    return names[i][0]


def decode_spans(rows: Sequence[Sequence[Any]], names: Sequence[Sequence[str | None]]) -> list[dict]:
    """The stream's span arrays back to plain span objects (docs/snapshot.md, Span)."""
    out = []
    seq = start = 0
    for r in rows:
        seq += r[0]
        start += r[1]
        k = r[3]
        rest = list(r[4:]) + [None] * (9 - len(r))
        if isinstance(k, str):
            name_id, grid, block, nbytes, direction = rest[:5]
            kind = k
        elif isinstance(k, int) and 0 <= k < len(KINDS):
            kind = KINDS[k]
            if kind == "kernel":
                (name_id, grid, block), nbytes, direction = rest[:3], None, None
            else:
                name_id, grid, block = None, None, None
                nbytes, code = rest[:2]
                direction = None if code is None else DIRECTIONS[code]
        else:
            raise ValueError(f"unknown span kind code {k!r}")
        out.append({"seq": seq, "kind": kind, "start_us": start, "dur_ns": r[2],
                    "name": _name(names, name_id), "grid": _geometry_plain(grid),
                    "block": _geometry_plain(block), "bytes": nbytes, "direction": direction})
    return out


#: a traced process's parts a delta carries only the changed entries of, kept by a StreamReader
KEPT_TABLES = ("kernels", "kernel_launches")


class PlainTables:
    """How a :class:`StreamReader` keeps a traced process's kernel table and launch entries (each
    ``part`` of :data:`KEPT_TABLES`): as the plain form's lists. ``whole`` takes a full frame's
    (or a new process's) entries, names filled in; ``updated`` the table the frame before had with
    the entries a delta carries (those that changed) put in by name, in the snapshot's order
    (``kernel_order``; launch entries by mangled name). ``index`` is the traced process's place in
    the frame's list, for an answer that refuses the part. A hub gives its own
    (gpuflow.collectors.fleet.kernel_tables)."""

    def whole(self, part: str, entries: list[dict[str, Any]], index: int) -> Any:
        return entries

    def updated(self, part: str, before: Any, changed: list[dict[str, Any]], index: int) -> Any:
        if part == "kernels":
            table = {(k["name"], k["mangled"]): k for k in before}
            table.update({(k["name"], k["mangled"]): k for k in changed})
            return sorted(table.values(), key=lambda k: kernel_order(KernelStat(**k)))
        launches = {x["mangled"]: x for x in before}
        launches.update({x["mangled"]: x for x in changed})
        return sorted(launches.values(), key=lambda x: x["mangled"])


class StreamReader:
    """Follows one ``/api/stream`` connection: ``read(frame)`` gives the frame in the plain form.

    It keeps each traced process's names table (a full frame replaces them, a delta appends), so
    the traced processes come back with ``name``/``mangled`` in their kernels, spans as objects,
    and no ``names``; a delta's lanes keep their ``spans_skipped``, and the parts a delta left out
    (unchanged: top-level parts, a traced process's ``kernels`` or ``lanes``) are filled in from the
    frame before; a delta's kernels (those that changed) update the table the frame before had
    (its launch entries likewise; :class:`PlainTables`, or a hub's ``tables``). A delta that does
    not follow the last frame read raises ValueError, as does a span naming an id the table lacks. A
    schema-2 frame (an agent from before hosts were named) is read as the schema-4 frame it would
    be: its host named by its hostname (else ``fallback_host``), every item tagged with it.
    """

    def __init__(self, fallback_host: str | None = None,
                 spans: Callable[[Any, Sequence[Sequence[str | None]]], Any] | None = None,
                 tables: PlainTables | None = None) -> None:
        #: how a lane's rows are read (given them and the process's names table): plain span
        #: objects (decode_spans) unless told otherwise (a hub reads them into columns)
        self.spans = spans or decode_spans
        #: how a traced process's kernel table and launch entries are kept from frame to frame:
        #: lists of plain objects unless told otherwise (a hub keeps them checked, as objects)
        self.tables = tables or PlainTables()
        self.names: dict[TracedKey, list[list[str | None]]] = {}
        self.last_seq: int | None = None
        self.last: dict[str, Any] = {}
        #: a schema-2 frame names no host: it is this agent's hostname, else ``fallback_host``
        self.fallback_host = fallback_host
        self._old_host: str | None = None

    def read(self, frame: dict[str, Any]) -> dict[str, Any]:
        if frame.get("schema") == OLD_WIRE_SCHEMA:
            frame, self._old_host = upgrade_frame(frame, self._old_host, self.fallback_host)
            frame["schema"] = WIRE_SCHEMA
        delta = frame.get("frame") == DELTA
        if delta and frame.get("base_seq") != self.last_seq:
            raise ValueError(f"delta on base {frame.get('base_seq')}, last frame read {self.last_seq}")
        if delta:   # the parts a delta leaves out are the base frame's
            frame = {**{k: self.last[k] for k in OMITTABLE if k not in frame}, **frame}
        tables = {}
        traced = []
        before = {_key(t): t for t in self.last.get("traced", [])} if delta else {}
        kept = self.tables
        for i, t in enumerate(frame["traced"]):
            key = _key(t)
            fresh = not delta or key not in before or t.get("reset", False)
            names = ([] if fresh else self.names.get(key, [])) + list(t["names"])
            tables[key] = names
            if fresh:   # whole: a full frame, a process new to the stream, or one replacing its namesake
                if "kernels" not in t or "lanes" not in t:
                    raise ValueError(f"kernels or lanes left out for traced process {key}, unknown to "
                                     "the last frame")
                plain = plain_traced(t, names, self.spans)
                for part in KEPT_TABLES:
                    plain[part] = kept.whole(part, plain[part], i)
                traced.append(plain)
                continue
            plain = plain_traced({"kernels": [], "lanes": [], **t}, names, self.spans)
            # the kernels (and launch entries) a delta carries are those that changed: the table
            # the frame before had, updated by name
            for part in KEPT_TABLES:
                plain[part] = kept.updated(part, before[key][part], plain[part], i)
            if "lanes" not in t:   # every lane as before: its head, no new span
                plain["lanes"] = [{**{k: v for k, v in lane.items() if k not in ("spans", "spans_skipped")},
                                   "spans": [], "spans_skipped": 0} for lane in before[key]["lanes"]]
            traced.append(plain)
        self.names = tables
        self.last_seq = frame["seq"]
        self.last = {**frame, "traced": traced}
        return self.last


def _key(t: dict[str, Any]) -> TracedKey:
    return (t.get("host"), t["session"], t["pid"])


def plain_traced(t: dict[str, Any], names: Sequence[Sequence[str | None]],
                 spans: Callable[[Any, Sequence[Sequence[str | None]]], Any] = decode_spans) -> dict[str, Any]:
    """One traced process of a stream frame in the plain form, given its whole names table."""
    out = {k: v for k, v in t.items() if k not in ("names", "kernels", "lanes", "complete",
                                                     "transfers", "kernel_launches")}
    out["kernels"] = []
    for k in t["kernels"]:
        name, mangled = names[k["id"]]
        out["kernels"].append({"name": name, "mangled": mangled,
                               **{f: v for f, v in k.items() if f != "id"}})
    out["transfers"] = t["transfers"]
    out["kernel_launches"] = [{"mangled": names[x["id"]][1],
                               **{f: v for f, v in x.items() if f != "id"}} for x in t.get("kernel_launches", [])]
    out["lanes"] = [{**lane, "spans": spans(lane["spans"], names)} for lane in t["lanes"]]
    out["complete"] = t["complete"]
    return out
