"""The CUPTI collector: taking handed-over rings, draining, exit handling, truncation, release, the
end-of-run summary.

Traced processes are real processes (couriers, tests/support/ring_courier.c: each hands a ring the
test writes over from a pid of its own, then exits with a status or is killed), so the end of a
process is the end of its connection, as for a traced program. Most tests drive ``poll()`` by
hand; a few run the drain thread.
"""

from __future__ import annotations

import time

from gpuflow.cli.summary import NO_CUDA, format_summary

from .conftest import WALL0, poll_until


def fill(p, n=3):
    p.set_status(1, "")
    p.context(0, 1, 7)
    p.clock_sync(1_000_000, WALL0)
    p.stream_name(0, 1, 13, "compute")
    for i in range(n):
        p.kernel(0, 1, 13, 1_000_000 + 1000 * i, 1_000_500 + 1000 * i, "_Z13attention_fwdPKfPfi")
    p.memcpy(0, 1, 7, 1_000_000, 1_002_000, 1, 4096)


def test_a_running_process_is_taken_and_drained(collector_factory, rings):
    p, child = rings.traced()
    fill(p)
    notes: list[int] = []
    c = collector_factory(notes=notes)
    part = poll_until(c, lambda part: part.traced)
    (t,) = part.traced
    assert (t.pid, t.session, t.state, t.cupti_status, t.truncated, t.exit_status) == (
        child.pid, rings.session, "running", "ok", False, None)
    assert t.name == "ring_courier"   # the peer's /proc/<pid>/comm, not anything in the ring
    assert t.kernels[0].count == 3 and [l.label for l in t.lanes] == ["default", "compute"]
    assert t.records == p.head and p.tail == p.head  # the consumer stored tail in the ring
    assert notes
    # nothing new: the same object, no notify
    before = len(notes)
    time.sleep(0.06)
    c.poll()
    assert c.part() is part and len(notes) == before
    p.kernel(0, 1, 13, 2_000_000, 2_000_100, "_Z13attention_fwdPKfPfi")
    part2 = poll_until(c, lambda new: new is not part)
    assert part2.traced[0].kernels[0].count == 4 and len(notes) > before
    assert c.saw_cuda


def test_a_clean_exit_is_final_and_keeps_its_figures(collector_factory, rings):
    p, child = rings.traced()
    fill(p)
    c = collector_factory()
    poll_until(c, lambda part: part.traced)
    p.kernel(0, 1, 13, 3_000_000, 3_000_900, "_Z13attention_fwdPKfPfi")  # published just before exit
    p.mark_exited()
    assert child.exit(3) == 3
    c.record_exit(child.pid, 3)
    part = poll_until(c, lambda part: part.traced[0].state == "exited")
    (t,) = part.traced
    assert (t.state, t.exit_status, t.truncated, t.kernels[0].count) == ("exited", 3, False, 4)
    p.kernel(0, 1, 13, 4_000_000, 4_000_900, "_Z13attention_fwdPKfPfi")  # no one reads the ring now
    time.sleep(0.06)
    c.poll()
    assert c.part() is part


def test_a_producer_that_died_without_its_exit_flush_is_truncated(collector_factory, rings):
    p, child = rings.traced()
    fill(p)
    c = collector_factory()
    poll_until(c, lambda part: part.traced)
    child.kill()
    part = poll_until(c, lambda part: part.traced[0].state == "exited")
    t = part.traced[0]
    assert t.truncated and t.exit_status is None
    c.record_exit(child.pid, 137)  # the CLI learns the status after the ring is gone
    part = poll_until(c, lambda part: part.traced[0].exit_status == 137)
    assert part.traced[0].truncated and part.traced[0].kernels[0].count == 3


def test_an_exit_status_recorded_before_the_ring_is_seen_is_applied(collector_factory, rings):
    p, child = rings.traced()
    fill(p)
    p.mark_exited()
    c = collector_factory()
    c.record_exit(child.pid, 0)  # the plugin's process_exited may come before the first drain
    child.exit(0)
    part = poll_until(c, lambda part: part.traced and part.traced[0].state == "exited")
    assert part.traced[0].exit_status == 0


def test_a_process_gone_before_its_ring_is_taken_is_drained_once(collector_factory, rings):
    p = rings.producer()
    fill(p, n=5)
    p.mark_exited()
    pid = rings.gone(p)
    c = collector_factory()
    part = poll_until(c, lambda part: part.traced)
    t = part.traced[0]
    assert (t.pid, t.state, t.truncated, t.kernels[0].count, t.name) == (pid, "exited", False, 5, None)


def test_stop_drains_everything_and_leaves_running_programs_alone(collector_factory, rings):
    p, child = rings.traced()
    fill(p)
    c = collector_factory()
    c.start()
    poll_until(c, lambda part: part.traced)
    for i in range(50):
        p.kernel(0, 1, 13, 5_000_000 + i, 5_000_001 + i, "_Z4lastv")
    c.stop()
    t = c.part().traced[0]
    assert {k.mangled: k.count for k in t.kernels} == {"_Z13attention_fwdPKfPfi": 3, "_Z4lastv": 50}
    assert t.state == "running"
    assert not rings.socket_path.exists() and not rings.socket_path.parent.exists()
    assert p.kernel(0, 1, 13, 6_000_000, 6_000_001, "_Z4lastv")   # the program writes on, unread
    assert child.running()


def test_the_drain_thread_follows_a_busy_ring_without_losing_records(collector_factory, rings):
    p, child = rings.traced(capacity=1024)
    p.set_status(1, "")
    c = collector_factory(drain_interval_s=0.005)
    c.start()
    written = 0
    deadline = time.monotonic() + 60
    for i in range(5000):  # ~5x the ring: only a live consumer keeps up
        while not p.kernel(0, 1, 13, 10 + i, 20 + i, "_Z1kv"):
            assert time.monotonic() < deadline, f"the drain thread stopped draining after {written} records"
            time.sleep(0.002)
        written += 1
    p.mark_exited()
    child.exit(0)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (c.part().traced and c.part().traced[0].state == "exited"):
        time.sleep(0.02)
    t = c.part().traced[0]
    assert t.kernels[0].count == written == 5000
    assert t.dropped_ring == p.dropped  # each wait above was a counted drop
    assert t.lanes[0].executions == 5000 and t.lanes[0].spans_elided == 5000 - 512


def test_malformed_rings_become_problems_not_crashes(collector_factory, rings):
    bad = rings.producer()
    bad.corrupt_header(version=9)
    bad_pid = rings.courier(bad).pid
    corrupt, corrupt_child = rings.traced()
    corrupt.push_raw(bytes(64))
    good = rings.producer()
    fill(good)
    good.mark_exited()
    good_pid = rings.gone(good)
    c = collector_factory()
    part = poll_until(c, lambda part: len(part.traced) == 2 and part.problems)
    by_pid = {t.pid: t for t in part.traced}
    assert by_pid[corrupt_child.pid].truncated and not by_pid[good_pid].truncated
    messages = " | ".join(pr.message for pr in part.problems)
    assert (f"1 ring handover(s) refused (not_a_ring); the last: pid {bad_pid}: its ring was refused: "
            "unsupported ring version 9") in messages
    assert f"pid {corrupt_child.pid}: 1 malformed ring records were skipped (1 bad_type)" in messages


def test_torn_counters_mid_session_stop_that_ring_only(collector_factory, rings):
    p, child = rings.traced()
    fill(p)
    c = collector_factory()
    poll_until(c, lambda part: part.traced)
    p.set_head(1)
    part = poll_until(c, lambda part: part.traced[0].truncated)
    assert part.traced[0].state == "running" and part.traced[0].kernels[0].count == 3
    assert any("became unreadable" in pr.message and pr.severity == "error" for pr in part.problems)
    p.set_head(10**6)  # no longer read: nothing changes, and nothing crashes
    child.kill()
    part = poll_until(c, lambda part: part.traced[0].state == "exited")
    assert part.traced[0].truncated and part.traced[0].kernels[0].count == 3


def test_summary(collector_factory, rings):
    c = collector_factory()
    c.poll()
    assert format_summary(c.part().traced) == NO_CUDA
    p = rings.producer()
    fill(p)
    p.memcpy(0, 1, 7, 5, 0, 2, 1 << 20)  # untimed
    p.kernel(0, 1, 13, 0, 0, "_Z13attention_fwdPKfPfi")  # untimed: counts, but not in the mean
    p.add_cupti_dropped(2)
    p.mark_exited()
    pid = rings.gone(p)
    c.record_exit(pid, 130)
    poll_until(c, lambda part: part.traced)
    text = format_summary(c.part().traced)
    assert f"pid {pid} (?): exited with status 130; CUPTI ok;" in text
    assert "DROPPED: 0 records (ring full), 2 (inside CUPTI)" in text
    assert "4 kernel launches, 1 kernels" in text and "attention_fwd" in text
    # 1500 ns over 3 timed launches; no occupancy (the producer's kernels record no configuration)
    assert "         4        1.5 µs        500 ns          —  —                               —  attention_fwd" in text
    assert "h2d: 1 transfers, 4.0 KiB, 2.0 µs" in text and "d2h: 1 transfers, 1.0 MiB, —" in text


def test_format_summary_marks_truncation():
    from gpuflow.core.snapshot import TracedProcess

    text = format_summary((TracedProcess(pid=1, session="s", truncated=True, state="exited"),))
    assert text.startswith("pid 1 (?): exited; CUPTI starting; 0 records\n  TRUNCATED")
    assert text.endswith("  no kernels\n")
