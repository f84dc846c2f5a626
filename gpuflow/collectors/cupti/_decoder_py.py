"""Pure-Python twin of the ring decoder: identical results to ``_decoder_c``, much slower.

Used where the compiled decoder is unavailable (no compiler at install time, PyPy,
``GPUFLOW_NO_EXTENSIONS=1``) and as the readable statement of the decoder's semantics; the tests
run every case through both twins and require equal output. docs/decoder.md explains the rules.

Constraints: same public API and byte-for-byte the same numbers as the compiled twin, including
its table limits, saturation and invalid-record accounting, and the flight recorder's retained
columns (``_retain_py``, with a ``Retention``). Memory ordering: Python cannot issue
an acquire load, so this twin relies on the platform's ordering for the ``head`` read (x86-64 is
fine); the compiled twin uses real acquire/release atomics.
"""

from __future__ import annotations

import operator
import struct
from array import array
from collections import deque
from typing import Any

from gpuflow.collectors.cupti import _activity_layout as A
from gpuflow.collectors.cupti import _layout as L
from gpuflow.collectors.cupti import _retain_layout as RL
from gpuflow.collectors.cupti._retain_layout import check_offset, check_window
from gpuflow.collectors.cupti._activity_py import Activity
from gpuflow.collectors.cupti._retain_py import Retention, Store
from gpuflow.collectors.cupti.errors import RingDetached

_U16 = struct.Struct("<H")
#: type, flags, device, start, end, context, stream, correlation, name_id, grid x/y/z,
#: block x/y/z, registers, launch_id, graph_id
_KERNEL = struct.Struct("<HHIQQIIIIIHHHHHHII")
#: type, flags, device, start, end, context, stream, correlation, copy_kind, src_kind, dst_kind,
#: (pad), bytes, src_device, dst_device, value, graph_id
_COPY = struct.Struct("<HHIQQIIIBBBxQIIII")
#: type, flags, name id, offset, total_len, text
_NAME = struct.Struct("<HHIII48s")
#: DEVICE: type, flags, device, uuid, SM count, compute capability major, minor, (reserved), name id
_DEVICE = struct.Struct("<HHI16sIHHII24x")
#: type, flags, launch id (then L.LAUNCH_PAYLOAD)
_LAUNCH_HEAD = struct.Struct("<HHI")
assert _KERNEL.size == _COPY.size == _NAME.size == _DEVICE.size == L.RECORD_SIZE

_NAME_KEEP_FLAGS = L.FLAG_NAME_TRUNCATED | L.FLAG_NAME_STREAM


class RingDecoder:
    """Drains one ring and keeps its complete aggregates and per-lane span samples.

    :param buffer: the ring mapping (mmap, or any writable buffer of the same layout).
    :param lane_span_cap: spans kept per lane, most recent first: an int in [0, 2^20]
        (``_layout.check_lane_span_cap``; TypeError / ValueError otherwise, in both twins).
    :param max_names, max_name_bytes, max_lanes, max_pending_names: the caps on what the ring can
        make the decoder hold (``_layout.check_caps``; docs/decoder.md, "Caps").
    :raises RingFormatError: the header is not readable (see :func:`_layout.validate_header`).
    """

    is_compiled = False

    def __init__(self, buffer: Any, *, lane_span_cap: int = L.DEFAULT_LANE_SPAN_CAP,
                 max_names: int = L.DEFAULT_MAX_NAMES, max_name_bytes: int = L.DEFAULT_MAX_NAME_BYTES,
                 max_lanes: int = L.DEFAULT_MAX_LANES,
                 max_pending_names: int = L.DEFAULT_MAX_PENDING_NAMES,
                 retention: Retention | None = None) -> None:
        lane_span_cap = L.check_lane_span_cap(lane_span_cap)
        self._caps = L.check_caps(max_names, max_name_bytes, max_lanes, max_pending_names)
        if retention is not None and not isinstance(retention, Retention):
            raise TypeError("retention must be this twin's Retention or None")
        info = L.validate_header(buffer)
        mv = memoryview(buffer).cast("B")
        if mv.readonly:
            raise TypeError("the ring buffer must be writable: the decoder stores tail in it")
        self._mv: memoryview | None = mv
        self._capacity = info.capacity
        self._mask = info.capacity - 1
        self._tail = info.tail
        self._producer_pid = info.producer_pid
        self._session = info.session
        self._cap = lane_span_cap
        self._final_header: dict[str, Any] | None = None
        self._records = 0
        self._invalid = [0] * len(L.INVALID_REASONS)
        self._first_invalid_seq: int | None = None
        self._lane_overflow = 0
        self._saturated = False
        self._kstats: dict[int, list[Any]] = {}  # name id -> [count, timed, total, min, max]
        self._dirs = [[0, 0, 0, 0] for _ in L.DIRECTIONS]  # count, timed, bytes, total_ns
        # id -> (text, flags), complete names only. Id 0 is "no name" (a kernel CUPTI gave no
        # name, or a name the producer could not intern): always defined, never reported.
        self._names: dict[int, tuple[bytes, int]] = {0: (b"", 0)}
        # id -> [text kept so far (at most max_name_bytes), total_len, bytes received, seq of the
        # first chunk], least recently continued first (a chunk that fits takes it out and puts it back)
        self._pending: dict[int, list[Any]] = {}
        self._slotted: set[int] = set()  # ids given a slot (max_names of them at most); not 0
        self._folded: bytearray | None = None  # bit per id: a name beyond max_names
        self._names_folded = 0
        self._names_cut = 0
        self._names_unfinished = 0
        # key -> [executions, deque, name id, index (creation order: the retained columns' lane)]
        self._lanes: dict[tuple[int, int, int], list[Any]] = {}
        self._lane_keys: list[tuple[int, int, int]] = []
        self._contexts: dict[tuple[int, int], int] = {}
        self._devices: dict[int, int] = {}
        self._device_facts: dict[int, A.DeviceFacts] = {}  # device id -> its DEVICE record's facts
        # per device and per launch configuration (_activity_py)
        self._activity = Activity(self._caps.max_lanes)
        self._sync: tuple[int, int] | None = None
        # launch id -> (static, dynamic, executed shared memory, shared config, shmem limit config,
        # carve-out requested or None, cache config, (cluster x, y, z)): LAUNCH records
        self._launches: dict[int, tuple[Any, ...]] = {}
        # kernel name id -> (launch id, registers) of its latest launch with a known configuration
        self._last_launch: dict[int, tuple[int, int]] = {}
        # the flight recorder's columns of this process (_retain_py), None: retention off
        self._retention = retention
        self._store = None if retention is None else Store(retention, L.read_header(mv))

    # -- identity --------------------------------------------------------------------------
    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def producer_pid(self) -> int:
        return self._producer_pid

    @property
    def session(self) -> str:
        return self._session

    @property
    def tail(self) -> int:
        return self._tail

    @property
    def lane_span_cap(self) -> int:
        return self._cap

    @property
    def caps(self) -> L.Caps:
        return self._caps

    @property
    def detached(self) -> bool:
        return self._mv is None

    # -- draining --------------------------------------------------------------------------
    def drain(self, max_records: int | None = None) -> int:
        """Decode up to ``max_records`` published records (all of them if None); return how many.

        ``max_records`` is None or an int (TypeError otherwise, e.g. for a float); <= 0 decodes
        nothing. Reads ``head`` once, decodes ``[tail, head)``, then stores the new ``tail`` in the header.
        :raises RingFormatError: the header changed or the counters are torn.
        :raises RingDetached: after :meth:`detach`.
        """
        mv = self._mv
        if mv is None:
            raise RingDetached("the decoder was detached from its ring")
        max_records = L.check_max_records(max_records)
        L.check_unchanged(mv, self._capacity)
        head = L.U64.unpack_from(mv, L.OFF_HEAD)[0]
        tail = self._tail
        L.check_counters(head, tail, self._capacity)
        n = head - tail
        if max_records is not None:
            n = max(0, min(n, max_records))
        record = self._record
        base, mask, size = L.HEADER_SIZE, self._mask, L.RECORD_SIZE
        store = self._store
        if store is not None:
            store.writing = True
        try:
            for seq in range(tail, tail + n):
                record(mv, base + (seq & mask) * size, seq)
        finally:
            self._activity.end_pass()
            if store is not None:
                store.publish()
                store.writing = False
        self._records += n
        self._tail = tail + n
        L.U64.pack_into(mv, L.OFF_TAIL, self._tail)
        if self._pending:
            self._expire_pending()
        return n

    def _expire_pending(self) -> None:
        """Drop the names announced more than a ring's worth of records ago and never finished (a
        producer publishes a name's chunks together)."""
        for nid in [nid for nid, p in self._pending.items() if self._tail - p[3] > self._capacity]:
            del self._pending[nid]
            self._names_unfinished += 1

    def detach(self) -> None:
        """Keep the final header values, release the mapping (so it can be closed and unlinked); the
        chunk being written is sealed (no record will come)."""
        if self._store is not None:
            self._store.seal()
        if self._mv is not None:
            self._final_header = L.read_header(self._mv)
            self._mv.release()
            self._mv = None

    # -- one record ------------------------------------------------------------------------
    def _bad(self, reason: int, seq: int) -> None:
        self._invalid[reason] += 1
        if self._first_invalid_seq is None:
            self._first_invalid_seq = seq

    def _add(self, acc: int, value: int) -> int:
        total = acc + value
        if total > L.U64_MAX:
            self._saturated = True
            return L.U64_MAX
        return total

    def _is_folded(self, name_id: int) -> bool:
        """Whether an id (any value read from the ring) is a name beyond max_names."""
        folded = self._folded
        return folded is not None and name_id < L.NAME_ID_LIMIT and bool(folded[name_id >> 3] >> (name_id & 7) & 1)

    def _fold(self, name_id: int) -> None:
        if self._folded is None:
            self._folded = bytearray(L.NAME_ID_LIMIT >> 3)
        if not self._is_folded(name_id):
            self._folded[name_id >> 3] |= 1 << (name_id & 7)
            self._names_folded += 1

    def _lane(self, key: tuple[int, int, int]) -> list[Any] | None:
        lane = self._lanes.get(key)
        if lane is None:
            if len(self._lanes) >= self._caps.max_lanes:
                return None
            lane = self._lanes[key] = [0, deque(maxlen=self._cap), 0, len(self._lane_keys)]
            self._lane_keys.append(key)
        return lane

    def _record(self, mv: memoryview, off: int, seq: int) -> None:
        rtype = _U16.unpack_from(mv, off)[0]
        if rtype == L.REC_KERNEL:
            (_t, flags, dev, start, end, ctx, stream, _corr, name_id, gx, gy, gz, bx, by, bz,
             regs, launch_id, _graph) = _KERNEL.unpack_from(mv, off)
            if name_id not in self._names:
                if not self._is_folded(name_id):
                    return self._bad(L.INV_UNDEFINED_NAME, seq)
                name_id = L.OTHER_NAME_ID
            if launch_id and launch_id not in self._launches:
                return self._bad(L.INV_UNDEFINED_LAUNCH, seq)
            timed = not flags & L.FLAG_NO_TIMING
            if timed and end < start:
                return self._bad(L.INV_END_BEFORE_START, seq)
            st = self._kstats.get(name_id)
            if st is None:
                st = self._kstats[name_id] = [0, 0, 0, None, None]
            self._activity.kernel(name_id, dev, (gx, gy, gz), (bx, by, bz), regs, launch_id, timed, start, end)
            st[0] += 1
            if timed:
                dur = end - start
                st[1] += 1
                st[2] = self._add(st[2], dur)
                if st[3] is None or dur < st[3]:
                    st[3] = dur
                if st[4] is None or dur > st[4]:
                    st[4] = dur
            if launch_id:
                self._last_launch[name_id] = (launch_id, regs)
            span = (seq, "kernel", start, end, name_id, (gx, gy, gz), (bx, by, bz), None, None)
            self._execution((dev, ctx, stream), timed, span, gx, (name_id, launch_id, gy, gz, bx, by, bz, L.REC_KERNEL, -1))
        elif rtype == L.REC_MEMCPY or rtype == L.REC_MEMSET:
            (_t, flags, dev, start, end, ctx, stream, _corr, copy_kind, src_kind, dst_kind, nbytes,
             src_dev, dst_dev, _value, _graph) = _COPY.unpack_from(mv, off)
            if rtype == L.REC_MEMSET:
                direction, kind = L.DIR_MEMSET, "memset"
            else:
                direction, kind = L.copy_direction(copy_kind, src_kind, dst_kind, src_dev, dst_dev), "memcpy"
                if direction < 0:
                    return self._bad(L.INV_BAD_COPY_KIND, seq)
            timed = not flags & L.FLAG_NO_TIMING
            if timed and end < start:
                return self._bad(L.INV_END_BEFORE_START, seq)
            d = self._dirs[direction]
            d[0] += 1
            d[2] = self._add(d[2], nbytes)
            if timed:
                d[1] += 1
                d[3] = self._add(d[3], end - start)
            self._activity.copy(dev, direction, src_kind, dst_kind, nbytes, timed, start, end)
            span = (seq, kind, start, end, 0, None, None, nbytes, L.DIRECTIONS[direction])
            self._execution((dev, ctx, stream), timed, span, 0, (nbytes, 0, 0, 0, 0, 0, 0, rtype, direction))
        elif rtype == L.REC_NAME_CHUNK:
            self._name_chunk(mv, off, seq)
        elif rtype == L.REC_STREAM_NAME:
            (_t, _flags, dev, _s, _e, ctx, stream, _corr, name_id, *_rest) = _KERNEL.unpack_from(mv, off)
            if name_id not in self._names:
                if not self._is_folded(name_id):
                    return self._bad(L.INV_UNDEFINED_NAME, seq)
                name_id = 0  # a name beyond max_names reads as no name
            lane = self._lane((dev, ctx, stream))
            if lane is None:
                return self._bad(L.INV_TABLE_FULL, seq)
            lane[2] = name_id
        elif rtype == L.REC_CONTEXT:
            (_t, _flags, dev, _s, _e, ctx, stream, *_rest) = _KERNEL.unpack_from(mv, off)
            key2 = (dev, ctx)
            if key2 not in self._contexts and len(self._contexts) >= self._caps.max_lanes:
                return self._bad(L.INV_TABLE_FULL, seq)
            self._contexts[key2] = stream
        elif rtype == L.REC_CLOCK_SYNC:
            (_t, _flags, _dev, cupti_ns, wall_ns, *_rest) = _KERNEL.unpack_from(mv, off)
            self._sync = (cupti_ns, wall_ns)
            if self._store is not None:
                self._store.set_offset(cupti_ns, wall_ns)
        elif rtype == L.REC_LAUNCH:
            self._launch(mv, off, seq)
        elif rtype == L.REC_DEVICE:
            (_t, _flags, dev, uuid, sm_count, major, minor, _reserved, name_id) = _DEVICE.unpack_from(mv, off)
            if name_id not in self._names:
                if not self._is_folded(name_id):
                    return self._bad(L.INV_UNDEFINED_NAME, seq)
                name_id = 0
            if dev not in self._devices and len(self._devices) >= self._caps.max_lanes:
                return self._bad(L.INV_TABLE_FULL, seq)
            self._devices[dev] = name_id
            self._device_facts[dev] = A.device_facts(name_id, uuid, sm_count, major, minor)
        else:
            self._bad(L.INV_BAD_TYPE, seq)

    def _launch(self, mv: memoryview, off: int, seq: int) -> None:
        """A LAUNCH record: defines its id once; a different second definition is invalid (the
        first stays), like a name's."""
        _t, flags, launch_id = _LAUNCH_HEAD.unpack_from(mv, off)
        if launch_id == 0 or launch_id > L.LAUNCH_ID_LIMIT:
            return self._bad(L.INV_BAD_LAUNCH, seq)
        (static, dynamic, executed, cx, cy, cz, config, limit, carveout,
         cache) = L.LAUNCH_PAYLOAD.unpack_from(mv, off + 8)
        launch = (static, dynamic, executed, config, limit,
                  carveout if flags & L.FLAG_CARVEOUT else None, cache, (cx, cy, cz))
        known = self._launches.get(launch_id)
        if known is None:
            self._launches[launch_id] = launch
        elif known != launch:
            self._bad(L.INV_BAD_LAUNCH, seq)

    def _execution(self, key: tuple[int, int, int], timed: bool, span: tuple[Any, ...], grid_x: int,
                   shape: tuple[int, ...]) -> None:
        """One kernel, copy or memset on its lane; ``grid_x`` and ``shape`` (without the lane) are
        what the retained records keep of it (_retain_py.Store.retain)."""
        lane = self._lane(key)
        if lane is None:
            self._lane_overflow += 1
            return
        lane[0] += 1
        if timed:
            if self._store is not None:
                self._store.retain(span[0], span[2], span[3], grid_x, (*shape[:7], lane[3], *shape[7:]))
            lane[1].append(span)

    def _name_chunk(self, mv: memoryview, off: int, seq: int) -> None:
        (_t, flags, name_id, offset, total_len, text) = _NAME.unpack_from(mv, off)
        if name_id == 0 or name_id >= L.NAME_ID_LIMIT:
            return self._bad(L.INV_BAD_NAME_CHUNK, seq)
        pending = self._pending.pop(name_id, None)  # put back only if this chunk fits
        if total_len > L.NAME_MAX or (offset >= total_len and not offset == total_len == 0):
            return self._bad(L.INV_BAD_NAME_CHUNK, seq)
        caps = self._caps
        last = flags & L.FLAG_NAME_LAST
        if pending is None:
            if self._is_folded(name_id):
                return None  # a name beyond max_names: its chunks are consumed, not kept
            if offset != 0:
                return self._bad(L.INV_BAD_NAME_CHUNK, seq)
            if name_id not in self._slotted and len(self._slotted) >= caps.max_names:
                return self._fold(name_id)
            self._slotted.add(name_id)
            if not last and len(self._pending) >= caps.max_pending_names:
                del self._pending[next(iter(self._pending))]  # the one continued least recently
                self._names_unfinished += 1
            pending = [bytearray(), total_len, 0, seq]
        elif pending[1] != total_len or offset != pending[2]:
            return self._bad(L.INV_BAD_NAME_CHUNK, seq)
        kept = pending[0]
        n = min(L.NAME_CHUNK_TEXT, total_len - offset)
        kept += text[:max(0, min(n, caps.max_name_bytes - len(kept)))]
        pending[2] += n
        if not last:
            self._pending[name_id] = pending
            return None
        if pending[2] != total_len:
            return self._bad(L.INV_INCOMPLETE_NAME, seq)
        cut = total_len > caps.max_name_bytes
        name = (bytes(kept), flags & _NAME_KEEP_FLAGS | (L.FLAG_NAME_TRUNCATED if cut else 0))
        known = self._names.get(name_id)
        if known is None:
            self._names[name_id] = name
            self._names_cut += cut
        elif known != name:
            self._bad(L.INV_NAME_CONFLICT, seq)
        return None

    # -- the flight recorder (any thread) ---------------------------------------------------
    @property
    def retention(self) -> Retention | None:
        return self._retention

    def retained(self) -> dict[str, Any] | None:
        """What this process retains: ``records``, ``chunks``, ``bytes`` (what they count against
        the budget), ``from_ns``/``to_ns`` (CUPTI clock: the earliest start and the latest end
        retained; None: nothing), ``evicted_records`` and ``evicted_through_ns`` (the latest
        start among them; None: none), ``unplaced`` (timed executions never retained: a time
        beyond ``_retain_layout.TIME_LIMIT``). None when retention is off."""
        return None if self._store is None else self._store.figures()

    def window(self, lo_us: int, hi_us: int, offset_ns: int, width: int | None = None) -> list[tuple[Any, ...]]:
        """The retained executions starting in [lo_us, hi_us) (wall-clock microseconds, CUPTI
        time + ``offset_ns``) per lane: see ``_retain_py.Store.window``. [] when retention is off."""
        if self._store is None:
            check_window(lo_us, hi_us, offset_ns, width)
            return []
        return self._store.window(lo_us, hi_us, offset_ns, width, self._lane_keys)

    def drop_retained(self) -> None:
        """Hand this process's chunks back to the budget (the collector forgets the process)."""
        if self._store is not None:
            self._store.free()
            self._store = None

    def __del__(self) -> None:
        store = getattr(self, "_store", None)
        if store is not None:
            store.free()

    # -- accessors (frame time) ------------------------------------------------------------
    def kernels(self) -> list[tuple[int, int, int, int, int | None, int | None]]:
        """``(name_id, count, timed, total_ns, min_ns, max_ns)`` per kernel name seen, by id; the
        kernels of names beyond ``max_names`` together under ``_layout.OTHER_NAME_ID`` (last)."""
        return [(nid, s[0], s[1], s[2], s[3], s[4]) for nid, s in sorted(self._kstats.items())]

    def kernel_rows(self) -> array:
        """The rows of :meth:`kernels`, in its order, packed: six values a row in one array('Q'); a
        name's min and max are 0 while it has no timed launch (None in :meth:`kernels`). The
        snapshot builder reads these at every build (the compiled twin makes them without a Python
        object a name)."""
        out = array("Q")
        for nid, s in sorted(self._kstats.items()):
            out.extend((nid, s[0], s[1], s[2], 0 if s[1] == 0 else s[3], 0 if s[1] == 0 else s[4]))
        return out

    def launches(self) -> dict[int, tuple[Any, ...]]:
        """Per kernel name id, the launch configuration of its latest kernel that had one:
        ``(registers, static_shared_bytes, dynamic_shared_bytes, shared_executed_bytes,
        shared_config, shmem_limit_config, carveout_requested (percent, or None when none was
        requested), cache_config, (cluster_x, cluster_y, cluster_z))``; the kernels of names beyond
        ``max_names`` under ``_layout.OTHER_NAME_ID``."""
        return {nid: (regs, *self._launches[lid]) for nid, (lid, regs) in sorted(self._last_launch.items())}

    def transfers(self) -> list[tuple[str, int, int, int, int]]:
        """``(direction, count, timed, bytes, total_ns)`` for every direction, in display order."""
        return [(L.DIRECTIONS[i], d[0], d[1], d[2], d[3]) for i, d in enumerate(self._dirs)]

    def lanes(self, after_seq: int = -1, newest: int | None = None) -> list[tuple[Any, ...]]:
        """``(device, context, stream, executions, kept, name_id, spans)`` per lane with executions.

        ``kept`` is how many spans the lane holds (``executions - kept`` were elided); ``spans``
        lists only those with ``seq > after_seq``, at most the ``newest`` of them (None: all; an
        int, TypeError otherwise), oldest first, each
        ``(seq, kind, start_ns, end_ns, name_id, grid, block, bytes, direction)`` in CUPTI time.
        """
        newest = L.check_newest(newest)
        out = []
        for key in sorted(self._lanes):
            executions, spans, name_id, _index = self._lanes[key]
            if executions == 0:
                continue
            new = [s for s in spans if s[0] > after_seq] if newest != 0 else []
            if newest is not None and len(new) > newest:
                new = new[len(new) - newest:] if newest > 0 else []
            out.append((key[0], key[1], key[2], executions, len(spans), name_id, new))
        return out

    def lane_columns(self, offset_ns: int, newest: int | None) -> list[tuple[Any, ...]]:
        """Each lane's newest ``newest`` spans (None: all it holds) as columns, oldest first:
        ``(device, context, stream, executions, kept, name_id, columns, kernel_name_ids)``.

        ``columns`` are 13 ``array('q')``, SpanColumns' fields in its order: start_us is wall clock
        (CUPTI + ``offset_ns``, floored to the microsecond; -1 for a start beyond
        ``_retain_layout.TIME_LIMIT``), name an index into ``kernel_name_ids`` (the lane's kernel
        name ids in order of first appearance), -1 where a field does not apply; durations and
        bytes are capped at 2^63 - 1, a seq past 2^63 reads negative (int64). The columns the snapshot's lanes carry, made without a
        Python object per span.
        """
        newest = L.check_newest(newest)
        offset = check_offset(offset_ns)
        out = []
        cap = (1 << 63) - 1
        for key in sorted(self._lanes):
            executions, spans, _name_id, _index = self._lanes[key]
            if executions == 0:
                continue
            shown = list(spans)
            if newest is not None:
                shown = shown[len(shown) - newest:] if 0 < newest < len(shown) else (shown if newest else [])
            columns = tuple(array("q") for _ in range(13))
            ids: dict[int, int] = {}
            for seq, kind, start, end, nid, grid, block, nbytes, direction in shown:
                row: tuple[int, ...]
                head = (seq - (1 << 64) if seq > cap else seq,   # a ring position as int64 holds it
                        (start + offset) // 1000 if start <= RL.TIME_LIMIT else -1, min(end - start, cap))
                if kind == "kernel":
                    row = (*head, 0, ids.setdefault(nid, len(ids)), *grid, *block, -1, -1)
                else:
                    row = (*head, 2 if kind == "memset" else 1, -1, -1, -1, -1, -1, -1, -1, min(nbytes, cap),
                           L.DIRECTIONS.index(direction))
                for column, value in zip(columns, row):
                    column.append(value)
            out.append((*key, executions, len(spans), _name_id, columns, tuple(ids)))
        return out

    def names(self) -> dict[int, tuple[str, int]]:
        """Every completely defined name: id → (text, NAME_TRUNCATED/NAME_STREAM flags); not id 0."""
        return {nid: (L.name_text(t, f), f) for nid, (t, f) in self._names.items() if nid}

    def name(self, name_id: int) -> tuple[str, int] | None:
        """One completely defined name, as :meth:`names` gives it, or None (not defined; id 0)."""
        nid = operator.index(name_id)
        entry = self._names.get(nid) if nid else None
        return None if entry is None else (L.name_text(*entry), entry[1])

    def null_streams(self) -> dict[tuple[int, int], int]:
        """(device, context) → the stream id of its null stream, from CONTEXT records."""
        return dict(self._contexts)

    def devices(self) -> dict[int, int]:
        """device id → the name id of its name, from DEVICE records."""
        return dict(self._devices)

    def device_facts(self) -> dict[int, A.DeviceFacts]:
        """device id -> what its latest DEVICE record says (name id, UUID, SMs, compute capability)."""
        return dict(sorted(self._device_facts.items()))

    def launch_config(self, launch_id: int) -> tuple[Any, ...] | None:
        """A defined launch id's configuration, as ``launches()`` gives it after the registers
        (None: not defined). A definition never changes, so callers may keep it."""
        return self._launches.get(operator.index(launch_id))

    def kernel_configs(self, since: int = 0) -> tuple[int, list[tuple[int, tuple[A.KernelConfig, ...],
                                                                       tuple[int, int, int]]]]:
        """``(stamp, entries)``: per kernel name id whose configurations changed after stamp
        ``since`` (0: every name that launched; by id, OTHER_NAME_ID last), its launch
        configurations (at most CONFIGS_PER_NAME, first seen first) and (count, timed, total ns) of
        its launches in further ones (_activity_layout). A change is a configuration, a fewest or
        most grid blocks, or a first launch in a further configuration: not a launch's counts."""
        return self._activity.configs(A.check_stamp(since))

    def activity(self) -> dict[str, Any]:
        """Per device a kernel or copy record named: busy time, late kernels, timed copies
        (``devices``, DeviceActivity each, by device); the records on devices beyond the table
        (``overflow``); whether a sum saturated (``saturated``)."""
        act = self._activity
        return {"devices": act.devices(), "overflow": act.overflow, "saturated": act.saturated}

    def settle(self, until_ns: int) -> None:
        """Settle every device's busy time up to ``until_ns`` (CUPTI clock): kernels that arrive
        later reaching back before it are counted late (docs/decoder.md)."""
        self._activity.settle(A.check_until(until_ns))

    def clock(self) -> tuple[int, int] | None:
        """(CUPTI ns, wall ns) of the latest CLOCK_SYNC record, else the header's pair, else None."""
        if self._sync is not None:
            return self._sync
        h = self.header()
        if h["clock_wall_ns"] != 0:
            return (h["clock_cupti_ns"], h["clock_wall_ns"])
        return None

    def counters(self) -> dict[str, Any]:
        """Decoder counters: records, invalid records (total and by reason), lane overflow, ..."""
        return {
            "records": self._records,
            "invalid_records": sum(self._invalid),
            "invalid": {L.INVALID_REASONS[i]: n for i, n in enumerate(self._invalid) if n},
            "first_invalid_seq": self._first_invalid_seq,
            "lane_overflow": self._lane_overflow,
            "saturated": self._saturated,
            "pending_names": len(self._pending),
            "names_folded": self._names_folded,
            "names_cut": self._names_cut,
            "names_unfinished": self._names_unfinished,
        }

    def header(self) -> dict[str, Any]:
        """The header's fields, live (or as they were at :meth:`detach`)."""
        if self._mv is None:
            assert self._final_header is not None
            return dict(self._final_header)
        return L.read_header(self._mv)
