"""A view's streams wait on the view, not on the board: a page watching one host of a hub is woken
when that host has something new, not at each snapshot other hosts' frames make; it still pings
and still ends when the board closes; a view's listener goes with its last stream."""

from __future__ import annotations

import threading
import time

from gpuflow.core.board import SnapshotBoard
from gpuflow.core.identity import Identity
from gpuflow.core.merge import merge_parts
from gpuflow.core.snapshot import Device, FleetHost, HostInfo, SnapshotPart
from gpuflow.transport.frames import FrameEncoder
from gpuflow.transport.settings import AppSettings
from gpuflow.transport.sse import PING, event_stream
from gpuflow.transport.stream_views import FULL, ViewFrames


def host_items(name: str, util: float) -> tuple[FleetHost, Device]:
    return (FleetHost(HostInfo(name=name), address=f"http://{name}:7717/", detail="full"),
            Device(0, f"GPU-{name}", utilization_gpu_pct=util, host=name))


def fleet(seq: int, *hosts: tuple[FleetHost, Device]):
    """A hub's snapshot of these hosts' items, the very objects (as a hub reuses a host's while its
    agent sent nothing new)."""
    part = SnapshotPart(source="fleet", hosts=tuple(h for h, _ in hosts), devices=tuple(d for _, d in hosts))
    return merge_parts([part], seq, 1000.0 + seq, Identity("hub", 1), 1.0)


class Streamed:
    """One stream's events, read on a thread of their own as a server reads them, with when each came."""

    def __init__(self, events) -> None:
        self.events, self.got = events, []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for event in self.events:
            self.got.append((time.monotonic(), event))

    def frames(self) -> list[bytes]:
        return [e for _, e in self.got if e != PING]


def watching(board: SnapshotBoard, host: str, **settings):
    views = ViewFrames(board, FrameEncoder(board))
    frames, _pusher, release = views.acquire(FULL, host)
    current, calls = frames.current, []

    def counted():
        calls.append(1)
        return current()
    frames.current = counted
    stream = Streamed(event_stream(frames.board, frames, AppSettings(**{"poll_s": 5.0, **settings}), lambda: False))
    return views, frames, release, stream, calls


def test_a_host_views_stream_is_not_woken_by_other_hosts_frames():
    a = host_items("a", 10.0)
    board = SnapshotBoard()
    board.publish(fleet(1, a, host_items("b", 0.0)))
    _views, _frames, release, stream, calls = watching(board, "a", ping_interval_s=30.0)
    time.sleep(0.2)
    assert len(stream.frames()) == 1 and len(calls) == 1   # the first, full frame
    for seq in range(2, 22):   # only b changes: 20 snapshots
        board.publish(fleet(seq, a, host_items("b", float(seq))))
        time.sleep(0.005)
    time.sleep(0.2)
    assert len(stream.frames()) == 1
    assert len(calls) == 1, "the stream woke for snapshots that did not change its host"
    board.publish(fleet(22, host_items("a", 55.0), host_items("b", 0.0)))   # a changes
    deadline = time.monotonic() + 2
    while len(stream.frames()) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(stream.frames()) == 2 and b'"utilization_gpu_pct":55.0' in stream.frames()[1]
    board.close()
    stream.thread.join(2)
    release()


def test_a_host_views_stream_still_pings_while_other_hosts_change():
    a = host_items("a", 10.0)
    board = SnapshotBoard()
    board.publish(fleet(1, a, host_items("b", 0.0)))
    _views, _frames, release, stream, _calls = watching(board, "a", ping_interval_s=0.2)
    t0 = time.monotonic()
    seq = 1
    while time.monotonic() - t0 < 1.0:
        seq += 1
        board.publish(fleet(seq, a, host_items("b", float(seq))))
        time.sleep(0.02)
    pings = [t for t, e in stream.got if e == PING]
    assert len(stream.frames()) == 1 and 3 <= len(pings) <= 6, stream.got
    assert all(later - earlier < 0.5 for earlier, later in zip([t0] + pings, pings))
    board.close()
    stream.thread.join(2)
    release()


def test_closing_the_board_ends_a_host_views_stream_at_once():
    board = SnapshotBoard()
    board.publish(fleet(1, host_items("a", 1.0)))
    _views, _frames, release, stream, _calls = watching(board, "a", ping_interval_s=30.0)
    time.sleep(0.1)
    t0 = time.monotonic()
    board.close()
    stream.thread.join(2)
    assert not stream.thread.is_alive() and time.monotonic() - t0 < 1.0   # its wait was 5 s
    release()


def test_a_views_listener_goes_with_its_last_stream():
    board = SnapshotBoard()
    board.publish(fleet(1, host_items("a", 1.0)))
    views = ViewFrames(board, FrameEncoder(board))
    first, _, release_first = views.acquire(FULL, "a")
    second, _, release_second = views.acquire(FULL, "a")
    assert first is second and len(board._listeners) == 1
    release_first()
    assert len(board._listeners) == 1
    release_second()
    assert len(board._listeners) == 0 and views.open_views() == {}


def test_a_derived_board_waits_for_its_view_and_wakes_for_a_new_one():
    a, b = host_items("a", 1.0), host_items("b", 2.0)
    board = SnapshotBoard()
    board.publish(fleet(1, a, b))
    views = ViewFrames(board, FrameEncoder(board))
    frames, _, release = views.acquire(FULL, "a")
    derived = frames.board
    seen = derived.latest().seq
    assert derived.wait_newer(seen, 0.05) is None
    board.publish(fleet(2, a, host_items("b", 3.0)))
    t0 = time.monotonic()
    assert derived.wait_newer(seen, 0.3) is None and time.monotonic() - t0 >= 0.25
    threading.Timer(0.1, lambda: board.publish(fleet(3, host_items("a", 4.0), b))).start()
    got = derived.wait_newer(seen, 3.0)
    assert got is not None and got.seq == 3 and got.devices[0].utilization_gpu_pct == 4.0
    release()
