"""A lane's occupancy and bandwidth arguments, encoded once per launch configuration for the slice
encoders (which arguments, and what they mean: :mod:`gpuflow.export.slice_layout`).

A kernel slice carries the theoretical occupancy of its own execution's launch configuration: the
collector gives, per exact lane, a launch configuration id per span (``LaneWindow.launch_ids``)
and, per kernel name, the figures of each (launch id, block) it ran with (``LaneWindow.launches``,
:class:`~gpuflow.core.recorded.LaunchFigures`). :class:`ArgPieces` turns them into a
:class:`LaunchArgs`: each configuration's arguments encoded once (cached by its
figures across the export), and the look-up tables the encoders search per kernel span (its
name's few configurations), so that the per-slice work is a search of a handful of integers, a
copy of bytes and, for the waves, one division: in C in the compiled encoder, the same steps in
its Python twin. A copy slice's bandwidth is one division of its own columns; its host memory
argument, and every "not available" argument, is a piece encoded once here.

The strings of these arguments (limiters, reasons) are interned: ``intern(text)`` gives each its
id and the writer emits the new ones before the slices that use them.

Constraints: imports only the core and the trace format; every string from a collector is written
as data; a value a collector gives that no encoding can hold is not an exception: a key beyond 64
bits (which no span's can equal) is left out, a wave size beyond 2^53 blocks makes the waves
"not available".
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Callable

from gpuflow.core.recorded import LaneWindow, LaunchFigures
from gpuflow.export import protowire as w
from gpuflow.export import slice_layout as L

NOT_AVAILABLE = "not available: "
#: a kernel slice's occupancy when its lane came with no launch configurations at all
NO_LAUNCHES = "the recorder gave no launch configurations with these spans"
#: ... when its execution's (name, launch id, block) is not among the lane's configurations
UNTRACKED = "its launch configuration is not among those the collector tracks for this kernel"
NO_GRID = "the grid is not known"
NO_RATE = "the copy took no measured time, or its bytes are not known"
NO_HOST_MEMORY = "the recorded copies do not keep their memory kinds"
#: a wave size the encoders' doubles hold exactly
MAX_WAVE_BLOCKS = 1 << 53
_INT64 = (-(1 << 63), (1 << 63) - 1)


def int_arg(iid: int, value: int) -> bytes:
    return w.len_field(w.EVENT_DEBUG_ANNOTATIONS,
                       w.int_field(w.ANNOTATION_NAME_IID, iid) + w.int_field(w.ANNOTATION_INT_VALUE, value))


def double_arg(iid: int, value: float) -> bytes:
    return w.len_field(w.EVENT_DEBUG_ANNOTATIONS,
                       w.int_field(w.ANNOTATION_NAME_IID, iid) + w.double_field(w.ANNOTATION_DOUBLE_VALUE, value))


def string_arg(iid: int, string_iid: int) -> bytes:
    """An argument whose value is an interned string."""
    return w.len_field(w.EVENT_DEBUG_ANNOTATIONS, w.int_field(w.ANNOTATION_NAME_IID, iid)
                       + w.int_field(w.ANNOTATION_STRING_VALUE_IID, string_iid))


@dataclass(frozen=True, slots=True)
class LaunchArgs:
    """One lane piece's tables for the slice encoders. Rows are the lane's configurations (its
    entries) and, last, the fallback for a kernel that matches none."""

    launch_ids: array  #: the lane's launch id per span (empty: none given: every kernel falls back)
    first: array  #: per name index, where its entries start (and, last, where they end)
    keys: array  #: 4 per entry: launch id, block x, y, z
    wave_blocks: array  #: per row: the blocks of a full wave (0: no waves)
    row_at: array  #: per row, 2 offsets into ``blob`` (its fixed arguments, its no-waves one); then the end
    blob: bytes
    no_grid: bytes  #: ``waves`` where the execution's grid is not a grid
    no_rate: bytes  #: ``bytes_per_s`` where a copy has no measured time or no bytes
    host_memory: bytes  #: an h2d or d2h copy's ``host_memory``

    @property
    def rows(self) -> int:
        return len(self.wave_blocks)


class ArgPieces:
    """The pieces of one export (strings interned by ``intern``; a configuration's pieces cached by
    its figures)."""

    def __init__(self, intern: Callable[[str], int]) -> None:
        self._intern = intern
        self._rows: dict[tuple, tuple[bytes, bytes, int]] = {}
        self.no_grid = string_arg(L.ARG_WAVES, intern(NOT_AVAILABLE + NO_GRID))
        self.no_rate = string_arg(L.ARG_BYTES_PER_S, intern(NOT_AVAILABLE + NO_RATE))
        self.host_memory = string_arg(L.ARG_HOST_MEMORY, intern(NOT_AVAILABLE + NO_HOST_MEMORY))
        self._fallback = {given: self._unavailable(NO_LAUNCHES if not given else UNTRACKED)
                          for given in (False, True)}

    def _unavailable(self, why: str) -> tuple[bytes, bytes, int]:
        return string_arg(L.ARG_OCCUPANCY_PCT, self._intern(NOT_AVAILABLE + why)), b"", 0

    def row(self, f: LaunchFigures) -> tuple[bytes, bytes, int]:
        """(fixed arguments, the no-waves argument, wave blocks) of one configuration's figures: a
        double, an interned string and an int argument, 44 bytes at most, and a string one."""
        key = (f.occupancy_pct, f.blocks_per_sm, f.limiters, f.wave_blocks, f.waves_unavailable, f.unavailable)
        found = self._rows.get(key)
        if found is None:
            found = self._rows[key] = self._encode(f)
        return found

    def _encode(self, f: LaunchFigures) -> tuple[bytes, bytes, int]:
        if f.occupancy_pct is None or f.blocks_per_sm is None or not _fits(f.blocks_per_sm):
            return self._unavailable(f.unavailable or "the collector did not say why")
        fixed = double_arg(L.ARG_OCCUPANCY_PCT, float(f.occupancy_pct))
        if f.limiters:
            fixed += string_arg(L.ARG_LIMITER, self._intern(f.limiters))
        fixed += int_arg(L.ARG_BLOCKS_PER_SM, f.blocks_per_sm)
        if f.wave_blocks is not None and 0 < f.wave_blocks <= MAX_WAVE_BLOCKS:
            return fixed, b"", f.wave_blocks
        why = f.waves_unavailable or ("the wave size is out of range" if f.wave_blocks is not None
                                      else "the collector did not say why")
        return fixed, string_arg(L.ARG_WAVES, self._intern(NOT_AVAILABLE + why)), 0

    def lane(self, lane: LaneWindow) -> LaunchArgs:
        """The tables of one lane piece (its spans must be exact)."""
        assert lane.spans is not None
        n_names = len(lane.spans.names)
        given = lane.launch_ids is not None
        per_name = lane.launches if given else ()
        try:
            return self._tables(lane, n_names, per_name, given)
        except (OverflowError, TypeError, ValueError):   # a key no span's can equal (beyond 64 bits): left out
            return self._tables(lane, n_names, tuple(tuple(f for f in figures if _key_fits(f))
                                                     for figures in per_name), given)

    def _tables(self, lane: LaneWindow, n_names: int, per_name: tuple[tuple[LaunchFigures, ...], ...],
                given: bool) -> LaunchArgs:
        first = array("q", [0])
        keys: list[int] = []
        wave_blocks, row_at = array("q"), array("q")
        blob: list[bytes] = []
        at = entries = 0
        rows = self._rows
        for index in range(n_names):
            for f in per_name[index] if index < len(per_name) else ():
                bx, by, bz = f.block
                keys += (f.launch_id, bx, by, bz)
                found = rows.get((f.occupancy_pct, f.blocks_per_sm, f.limiters, f.wave_blocks, f.waves_unavailable,
                                  f.unavailable))
                fixed, no_waves, waves = self.row(f) if found is None else found
                row_at.append(at)
                at += len(fixed)
                row_at.append(at)
                at += len(no_waves)
                blob += (fixed, no_waves)
                wave_blocks.append(waves)
                entries += 1
            first.append(entries)
        fixed, no_waves, waves = self._fallback[given]
        row_at.extend((at, at + len(fixed), at + len(fixed) + len(no_waves)))
        blob += (fixed, no_waves)
        wave_blocks.append(waves)
        return LaunchArgs(lane.launch_ids if given and lane.launch_ids is not None else array("q"), first,
                          array("q", keys), wave_blocks, row_at, b"".join(blob), self.no_grid, self.no_rate,
                          self.host_memory)


def _fits(value: int) -> bool:
    return isinstance(value, int) and _INT64[0] <= value <= _INT64[1]


def _key_fits(f: LaunchFigures) -> bool:
    return len(f.block) == 3 and all(map(_fits, (f.launch_id, *f.block)))
