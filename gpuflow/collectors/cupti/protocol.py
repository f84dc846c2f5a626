"""What a ring decoder is, as a type: the :class:`RingDecoder` protocol both twins satisfy.

The compiled ``_decoder_c.RingDecoder`` (typed by ``_decoder_c.pyi``) and the pure-Python
``_decoder_py.RingDecoder`` have the same public surface; their callers (the collector, the
traced-process builder, the benchmarks) are typed against this protocol rather than against
either twin or ``Any``, so a type checker sees every call whichever twin :mod:`decoder` picked.
The tests check that both twins have exactly these members with these signatures.

Constraints: types only; importing it loads neither twin.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from gpuflow.collectors.cupti._layout import Caps

SpanTuple = tuple[int, str, int, int, int, tuple[int, int, int] | None, tuple[int, int, int] | None,
                  int | None, str | None]
"""(seq, kind, start_ns, end_ns, name_id, grid, block, bytes, direction); times in CUPTI ns."""

LaneTuple = tuple[int, int, int, int, int, int, list[SpanTuple]]
"""(device, context, stream, executions, kept, name_id, spans with seq > after_seq)."""

KernelTuple = tuple[int, int, int, int, int | None, int | None]
"""(name_id, count, timed, total_ns, min_ns, max_ns)."""

TransferTuple = tuple[str, int, int, int, int]
"""(direction, count, timed, bytes, total_ns)."""

LaunchTuple = tuple[int, int, int, int, int, int, int | None, int, tuple[int, int, int]]
"""(registers, static_shared_bytes, dynamic_shared_bytes, shared_executed_bytes, shared_config,
shmem_limit_config, carveout_requested (percent) or None, cache_config, (cluster x, y, z)):
the launch configuration of a kernel name's latest kernel that had one (ring version 3)."""


@runtime_checkable
class RingDecoder(Protocol):
    """Drains one ring (shared memory of ``buffer``) and keeps the complete aggregates and the
    per-lane span sample of docs/decoder.md, within its caps (``caps``, docs/decoder.md "Caps")."""

    is_compiled: bool

    def __init__(self, buffer: Any, *, lane_span_cap: int = ..., max_names: int = ..., max_name_bytes: int = ...,
                 max_lanes: int = ..., max_pending_names: int = ...) -> None: ...
    @property
    def capacity(self) -> int: ...
    @property
    def producer_pid(self) -> int: ...
    @property
    def session(self) -> str: ...
    @property
    def tail(self) -> int: ...
    @property
    def lane_span_cap(self) -> int: ...
    @property
    def caps(self) -> Caps: ...
    @property
    def detached(self) -> bool: ...
    def drain(self, max_records: int | None = None) -> int: ...
    def detach(self) -> None: ...
    def kernels(self) -> list[KernelTuple]: ...
    def launches(self) -> dict[int, LaunchTuple]: ...
    def transfers(self) -> list[TransferTuple]: ...
    def lanes(self, after_seq: int = -1, newest: int | None = None) -> list[LaneTuple]: ...
    def names(self) -> dict[int, tuple[str, int]]: ...
    def name(self, name_id: int) -> tuple[str, int] | None: ...
    def null_streams(self) -> dict[tuple[int, int], int]: ...
    def devices(self) -> dict[int, int]: ...
    def clock(self) -> tuple[int, int] | None: ...
    def counters(self) -> dict[str, Any]: ...
    def header(self) -> dict[str, Any]: ...
