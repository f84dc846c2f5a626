"""The page reads the stream's compact form (docs/snapshot.md, schema 2): names sent once and
referred to by id across deltas, spans rebuilt from arrays, a delta's skipped spans, and a delta
it cannot decode (the page starts over). The frames are the agent's own encoder's output for
hand-made snapshots, served in place of /api/stream.
"""

from __future__ import annotations

import pytest

from gpuflow.core.board import SnapshotBoard
from gpuflow.core.snapshot import KernelStat, Lane, Span, TracedProcess, kernel_order
from gpuflow.transport.frames import FrameEncoder
from snapshots import make_snapshot

from .conftest import hook, shot, until

pytestmark = pytest.mark.browser

A = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
     "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)")
B = "ampere_sgemm_128x64_tn"
PID = 777


def span(seq: int, name: str | None = A, kind: str = "kernel") -> Span:
    if kind != "kernel":
        return Span(seq=seq, kind=kind, start_us=1_764_473_412_000_000 + seq * 40, dur_ns=9000,
                    bytes=4096, direction="h2d" if kind == "memcpy" else "memset")
    return Span(seq=seq, kind="kernel", start_us=1_764_473_412_000_000 + seq * 40, dur_ns=20_000,
                name=name, grid=(256, 1, 1), block=(128, 2, 1))


def snapshot(seq: int, spans: tuple[Span, ...], executions: int, kernels: tuple[KernelStat, ...]):
    lane = Lane(device=0, context=1, stream=13, label="compute", executions=executions,
                spans_elided=executions - len(spans), spans=spans)
    t = TracedProcess(pid=PID, session="s", name="canned", cupti_status="ok", records=executions,
                      kernels=kernels, lanes=(lane,), window_start_us=spans[0].start_us,
                      window_end_us=spans[-1].start_us + 20)
    return make_snapshot(seq=seq, traced=(t,), timestamp=1_764_473_412.5 + seq * 0.05)


def encoded(snapshots, span_rate=None) -> list[bytes]:
    """The first snapshot as a full frame, each next one as the delta against the one before."""
    board = SnapshotBoard()
    enc = FrameEncoder(board, boot_epoch=1, span_rate=span_rate)
    out = []
    for i, s in enumerate(snapshots):
        board.publish(s)
        f = enc.current()
        out.append(f.full if i == 0 else f.delta)
    return out


def serve(page, agent, events: list[bytes]) -> None:
    """The page from the agent, its stream these events (and the same again on a reconnect)."""
    body = b"retry: 60000\n\n" + b"".join(events)
    page.route("**/api/stream", lambda route: route.fulfill(status=200, content_type="text/event-stream",
                                                            body=body))
    page.goto(agent.url)


def span_at(page, i: int) -> dict:
    return page.evaluate(f"window.__gpuflow.spanPoint({PID}, 0, {i})")["span"]


def test_names_sent_once_resolve_in_later_deltas(page, agent):
    ka = KernelStat(A, "_ZN2at6native29vectorized_elementwise_kernelILi4E", 2, 40_000, 20_000, 20_000, timed=2)
    kb = KernelStat(B, B, 1, 20_000, 20_000, 20_000, timed=1)
    frames = encoded([
        snapshot(1, (span(1), span(2)), 2, (ka,)),
        snapshot(2, (span(1), span(2), span(3, B), span(4, kind="memcpy")), 4, (ka, kb)),   # B is new
        snapshot(3, (span(1), span(2), span(3, B), span(4, kind="memcpy"), span(5), span(6, None)),
                 6, (ka, kb)),                                                    # no new name
    ])
    assert frames[2].count(B.encode()) == 0 and frames[1].count(A.encode()) == 0
    serve(page, agent, frames)
    until(page, "window.__gpuflow.frames === 3")
    assert hook(page, "deltaFrames") == 2 and hook(page, "resyncs") == 0
    assert page.evaluate(f"window.__gpuflow.laneSeqs({PID})")[0]["seqs"] == [1, 2, 3, 4, 5, 6]
    assert [span_at(page, i)["name"] for i in range(6)] == [A, A, B, None, A, None]
    s = span_at(page, 2)
    assert s["kind"] == "kernel" and s["grid"] == [256, 1, 1] and s["block"] == [128, 2, 1]
    c = span_at(page, 3)
    assert (c["kind"], c["bytes"], c["direction"], c["grid"]) == ("memcpy", 4096, "h2d", None)
    (strip,) = hook(page, "drawn")["strips"]
    assert strip["lanes"][0]["text"] == "showing 6 of 6"


def test_a_delta_that_skipped_spans_replaces_what_the_lane_kept(page, agent):
    base = tuple(span(s) for s in range(1, 11))
    busy = tuple(span(s) for s in range(1, 211))   # 200 new spans, 50 ms later
    frames = encoded([snapshot(1, base, 10, ()), snapshot(2, busy, 210, ())], span_rate=1000)
    serve(page, agent, frames)
    until(page, "window.__gpuflow.frames === 2")
    # a budget of 1,000 spans/s for 50 ms: the newest 50, and the 10 older ones dropped (they no
    # longer join up with the new ones)
    assert page.evaluate(f"window.__gpuflow.laneSeqs({PID})")[0]["seqs"] == list(range(161, 211))
    (strip,) = hook(page, "drawn")["strips"]
    assert strip["lanes"][0]["text"] == "showing 50 of 210"
    assert hook(page, "resyncs") == 0


def test_a_delta_naming_an_unknown_id_makes_the_page_start_over(page, agent):
    frames = encoded([snapshot(1, (span(1),), 1, ()), snapshot(2, (span(1), span(2)), 2, ())])
    bad = frames[1].replace(b",0,0,256,", b",0,9,256,")   # span 2's name id 0 -> 9 (no such name)
    assert bad.count(b",0,9,256,") == 1
    serve(page, agent, [frames[0], bad])
    until(page, "window.__gpuflow.resyncs >= 1 && window.__gpuflow.connects >= 2")
    assert hook(page, "fullFrames") >= 1 and hook(page, "badFrames") == 0


def test_the_folded_roll_up_of_earlier_processes_shows_on_the_host(page, agent):
    from dataclasses import replace

    from gpuflow.core.snapshot import RetiredTraced, TransferStat
    retired = RetiredTraced(session="s", processes=1145, failed=2, records=5_000_000,
                            kernels=(KernelStat(A, "_Z1av", 4_580_000, 9_000_000, 1000, 9000, 4_580_000),),
                            transfers=(TransferStat("h2d", 1145, 1 << 30, 10**9, 1145),))
    first = replace(snapshot(1, (span(1),), 1, ()), traced_retired=(retired,))
    folded_more = replace(retired, processes=1146, truncated=1)
    second = replace(snapshot(2, (span(1), span(2)), 2, ()), traced_retired=(folded_more,))
    third = replace(snapshot(3, (span(1), span(2), span(3)), 3, ()), traced_retired=(folded_more,))
    frames = encoded([first, second, third])
    assert b"traced_retired" not in frames[2]  # unchanged: the delta leaves it out
    serve(page, agent, frames)
    until(page, "window.__gpuflow.frames >= 3 && !window.__gpuflow.pendingDraw")
    texts = hook(page, "drawn")["retired"]
    assert texts == ["1,146 earlier traced processes (folded): 4,580,000 launches · 2 failed · INCOMPLETE"]
    shot(page, "live-retired")


def test_a_delta_that_leaves_out_unchanged_kernels_and_lanes_keeps_what_the_page_has(page, agent):
    from dataclasses import replace

    k = (KernelStat(A, "_Z1av", 7, 140_000, 20_000, 20_000, 7),)
    quiet = snapshot(3, (span(1), span(2)), 2, k)   # nothing new on the lane either
    frames = encoded([snapshot(1, (span(1),), 1, k), snapshot(2, (span(1), span(2)), 2, k),
                      replace(quiet, timestamp=quiet.timestamp + 0.05)])
    assert b'"kernels"' not in frames[1] and b'"kernels"' not in frames[2]
    assert b'"lanes"' in frames[1] and b'"lanes"' not in frames[2]
    serve(page, agent, frames)
    until(page, "window.__gpuflow.frames >= 3 && !window.__gpuflow.pendingDraw")
    assert hook(page, "resyncs") == 0 and hook(page, "badFrames") == 0
    kernels = page.evaluate(f"window.__gpuflow.kernelsOf({PID})")
    assert [(x["name"], x["count"]) for x in kernels] == [(A, 7)]
    assert page.evaluate(f"window.__gpuflow.laneSeqs({PID})")[0]["seqs"] == [1, 2]


def test_a_delta_with_only_the_changed_kernels_updates_the_table_in_the_agents_order(page, agent):
    def table(b_count):
        return tuple(sorted((KernelStat(A, "_Z1av", 3, 300, 100, 100, 3),
                             KernelStat(B, "_Z1bv", b_count, 100 * b_count, 100, 100, b_count)),
                            key=kernel_order))
    frames = encoded([snapshot(1, (span(1),), 1, table(5)), snapshot(2, (span(1), span(2)), 2, table(2))])
    assert frames[1].count(b'"count"') == 1   # only B's entry travels
    serve(page, agent, frames)
    until(page, "window.__gpuflow.frames >= 2 && !window.__gpuflow.pendingDraw")
    assert hook(page, "resyncs") == 0 and hook(page, "badFrames") == 0
    kernels = page.evaluate(f"window.__gpuflow.kernelsOf({PID})")
    assert [(x["name"], x["count"]) for x in kernels] == [(A, 3), (B, 2)]


def test_a_process_new_to_a_delta_with_nothing_yet_and_one_reusing_a_pid_read_whole(page, agent):
    from dataclasses import replace

    empty = replace(snapshot(2, (span(1),), 1, ()), traced=(
        TracedProcess(pid=PID, session="s", name="canned", cupti_status="starting"),))
    old = snapshot(3, tuple(span(s) for s in range(1, 31)), 30, (KernelStat(B, "_Z1bv", 30, 600_000, 20_000, 20_000, 30),))
    reused = snapshot(4, (span(1), span(2)), 2, (KernelStat(A, "_Z1av", 2, 40_000, 20_000, 20_000, 2),))
    frames = encoded([replace(empty, seq=1, traced=()), empty, old, reused])
    assert b'"reset":true' in frames[3] and b'"kernels":[]' in frames[1]
    serve(page, agent, frames)
    until(page, "window.__gpuflow.frames >= 4 && !window.__gpuflow.pendingDraw")
    assert hook(page, "resyncs") == 0 and hook(page, "badFrames") == 0
    kernels = page.evaluate(f"window.__gpuflow.kernelsOf({PID})")
    assert [(x["name"], x["count"]) for x in kernels] == [(A, 2)]
    assert page.evaluate(f"window.__gpuflow.laneSeqs({PID})")[0]["seqs"] == [1, 2]


def random_history(seed: int):
    """Snapshots in which up to three traced processes come, go, come back, gain or lose kernel
    names (a pid reused) and lanes, or stay as they were."""
    import random
    rng = random.Random(seed)
    out, contents = [], {}
    for seq in range(1, 9):
        if seq == 1 or rng.random() < 0.75:   # else: the same contents again
            contents = {pid: (rng.randint(0, 3), rng.randint(0, 2)) for pid in (101, 102, 103)
                        if rng.random() < 0.6}
        traced = []
        for pid, (n_kernels, n_lanes) in sorted(contents.items()):
            kernels = tuple(sorted((KernelStat(f"k{i}", f"_Z2k{i}v", seq + i, 1000 * (seq + i), 10, 90, seq + i)
                                    for i in range(n_kernels)),
                                   key=kernel_order))
            lanes = tuple(Lane(device=0, context=1, stream=13 + j, label=f"s{j}", executions=seq,
                               spans_elided=seq - 1, spans=(span(seq, f"k{j}"),)) for j in range(n_lanes))
            traced.append(TracedProcess(pid=pid, session="s", name="p", cupti_status="ok", records=seq,
                                        kernels=kernels, lanes=lanes))
        out.append(make_snapshot(seq=seq, traced=tuple(traced), timestamp=1_764_473_412.5 + seq * 0.05))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_any_history_of_processes_reads_back_in_the_page_as_the_agent_has_it(page, agent, seed):
    snaps = random_history(seed)
    serve(page, agent, encoded(snaps))
    until(page, f"window.__gpuflow.frames >= {len(snaps)} && !window.__gpuflow.pendingDraw")
    assert hook(page, "resyncs") == 0 and hook(page, "badFrames") == 0
    last = snaps[-1]
    for pid in (101, 102, 103):
        t = next((t for t in last.traced if t.pid == pid), None)
        got = page.evaluate(f"window.__gpuflow.kernelsOf({pid})")
        if t is None:
            assert got is None
            continue
        assert [(k["name"], k["count"]) for k in got] == [(k.name, k.count) for k in t.kernels]
        lanes = page.evaluate(f"window.__gpuflow.laneSeqs({pid})")
        assert [L["seqs"] for L in lanes] == [[last.seq]] * len(t.lanes)
