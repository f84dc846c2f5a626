"""The snapshot board's listeners: told of each snapshot after the board has it, and of its close;
one that fails is logged and the frames and the others go on; one stopped is told nothing more."""

from __future__ import annotations

import logging

from gpuflow.core.board import SnapshotBoard
from gpuflow.core.snapshot import Snapshot


def snap(seq: int) -> Snapshot:
    return Snapshot(seq=seq, timestamp=1.0)


def test_listeners_are_told_each_snapshot_after_the_board_has_it_and_its_close(caplog):
    board, told = SnapshotBoard(), []

    def broken(_s):
        raise RuntimeError("a listener's bug")
    board.listen(broken)
    stop = board.listen(lambda s: told.append((s, board.latest())))
    with caplog.at_level(logging.ERROR, logger="gpuflow.core.board"):
        board.publish(snap(1))
        board.publish(snap(2))
    assert [(s.seq, latest.seq) for s, latest in told] == [(1, 1), (2, 2)]
    assert board.latest().seq == 2 and "a board listener failed" in caplog.text
    board.close()
    assert told[-1] == (None, board.latest())
    stop()
    stop()   # idempotent
    board.publish(snap(3))
    assert len(told) == 3


def test_a_listener_of_a_closed_board_is_told_at_once():
    board, told = SnapshotBoard(), []
    board.close()
    board.listen(told.append)
    assert told == [None]
