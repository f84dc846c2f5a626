"""A deliberately simple reference model of what the decoder must report for a producer's pushes.

It never reads the ring: it is fed the same operations the test pushes through the compiled
producer (with the producer's verdict, written or dropped) and applies the documented rules
(docs/decoder.md) in the most direct way — lists and dicts, no shared code with the decoders.
The producer's own documented rules are applied too: a record with start=end=0 or end<start is
sent without timing; a name's chunks (ceil(len/48), at least one) precede the first record that
uses it, once; rejected pushes send nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CHUNK = 48
DIRECTION_OF_KIND = {1: "h2d", 3: "h2d", 2: "d2h", 4: "d2h", 5: "d2d", 6: "d2d", 7: "d2d", 8: "d2d",
                     9: "h2h", 10: "p2p"}
DIRECTIONS = ("h2d", "d2h", "d2d", "p2p", "h2h", "memset")


@dataclass
class Model:
    cap: int
    head: int = 0
    dropped: int = 0
    invalid: int = 0
    sent: set[tuple[int, bytes]] = field(default_factory=set)  # (kind, text) already in the ring
    kernels: dict[bytes | None, list[Any]] = field(default_factory=dict)  # text -> [n, timed, total, min, max]
    transfers: dict[str, list[int]] = field(default_factory=dict)  # dir -> [n, timed, bytes, total]
    lanes: dict[tuple[int, int, int], list[Any]] = field(default_factory=dict)  # key -> [executions, spans]
    stream_names: dict[tuple[int, int, int], bytes] = field(default_factory=dict)
    null_streams: dict[tuple[int, int], int] = field(default_factory=dict)
    sync: tuple[int, int] | None = None  # latest CLOCK_SYNC record written
    header_sync: tuple[int, int] | None = None  # the producer refreshes the header's pair even on a drop

    def _names_first(self, kind: int, text: bytes | None) -> None:
        if text is None:
            return
        text = text[:4096]
        if (kind, text) not in self.sent:
            self.sent.add((kind, text))
            self.head += max(1, -(-len(text) // CHUNK))

    def _lane(self, key: tuple[int, int, int]) -> list[Any]:
        return self.lanes.setdefault(key, [0, []])

    @staticmethod
    def _timing(start: int, end: int) -> tuple[bool, int, int]:
        if (start == 0 and end == 0) or end < start:
            return False, 0, 0
        return True, start, end

    def push(self, written: bool, op: tuple[Any, ...]) -> None:
        if op[0] == "clock_sync":
            self.header_sync = (op[1], op[2])
        if not written:
            self.dropped += 1
            return
        kind = op[0]
        if kind == "kernel":
            _, dev, ctx, stream, start, end, name, grid, block = op
            self._names_first(1, name)
            seq = self.head
            self.head += 1
            timed, start, end = self._timing(start, end)
            st = self.kernels.setdefault(name, [0, 0, 0, None, None])
            st[0] += 1
            lane = self._lane((dev, ctx, stream))
            lane[0] += 1
            if timed:
                d = end - start
                st[1] += 1
                st[2] += d
                st[3] = d if st[3] is None else min(st[3], d)
                st[4] = d if st[4] is None else max(st[4], d)
                lane[1].append((seq, "kernel", start, end, name, grid, block, None, None))
        elif kind in ("memcpy", "memset"):
            if kind == "memcpy":
                _, dev, ctx, stream, start, end, copy_kind, nbytes, src_dev, dst_dev = op
                direction = DIRECTION_OF_KIND.get(copy_kind)
                if direction == "d2d" and src_dev != dst_dev:  # between two devices: peer-to-peer
                    direction = "p2p"
            else:
                _, dev, ctx, stream, start, end, nbytes = op
                direction = "memset"
            seq = self.head
            self.head += 1
            if direction is None:  # the test producer sends unknown memory kinds: unclassifiable
                self.invalid += 1
                return
            timed, start, end = self._timing(start, end)
            t = self.transfers.setdefault(direction, [0, 0, 0, 0])
            t[0] += 1
            t[2] += nbytes
            lane = self._lane((dev, ctx, stream))
            lane[0] += 1
            if timed:
                t[1] += 1
                t[3] += end - start
                lane[1].append((seq, kind, start, end, None, None, None, nbytes, direction))
        elif kind == "stream_name":
            _, dev, ctx, stream, name = op
            self._names_first(2, name)
            self.head += 1
            self._lane((dev, ctx, stream))
            self.stream_names[(dev, ctx, stream)] = name[:4096]
        elif kind == "context":
            _, dev, ctx, null_stream = op
            self.head += 1
            self.null_streams[(dev, ctx)] = null_stream
        elif kind == "clock_sync":
            _, cupti_ns, wall_ns = op
            self.head += 1
            self.sync = (cupti_ns, wall_ns)
        else:  # pragma: no cover
            raise ValueError(op)

    # -- what the decoder should report, in its accessors' shapes (names as text) -------------
    def expected_kernels(self) -> dict[bytes | None, tuple[Any, ...]]:
        return {name: tuple(v) for name, v in self.kernels.items()}

    def expected_clock(self) -> tuple[int, int] | None:
        return self.sync if self.sync is not None else self.header_sync

    def expected_transfers(self) -> list[tuple[Any, ...]]:
        return [(d, *self.transfers.get(d, [0, 0, 0, 0])) for d in DIRECTIONS]

    def expected_lanes(self) -> dict[tuple[int, int, int], tuple[int, int, list[Any]]]:
        out = {}
        for key, (executions, spans) in self.lanes.items():
            if executions == 0:
                continue
            kept = spans[-self.cap:] if self.cap else []
            out[key] = (executions, len(kept), kept)
        return out
