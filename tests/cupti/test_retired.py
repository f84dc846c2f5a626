"""A long session stays bounded: older exited processes are folded into the session's roll-up.

Real rings from the compiled test producer, each handed over by a process that has exited by the
time the collector takes it (so it is drained once and finished). The roll-up's totals plus the
kept processes' totals must equal everything produced, exactly; a pid that comes back with a new
ring is a new process, not ignored.
"""

from __future__ import annotations

import os

from gpuflow.cli.summary import format_summary
from gpuflow.collectors.cupti import collector as collector_mod
from gpuflow.core.snapshot import Snapshot

from .test_collector import poll_until

KERNEL = "_Z13attention_fwdPKfPfi"


def written_ring(rings, kernels, *, exited=True, copy_bytes=4096):
    p = rings.producer()
    p.set_status(1, "")
    p.context(0, 1, 7)
    for i in range(kernels):
        p.kernel(0, 1, 7, 1_000_000 + 1000 * i, 1_000_400 + 1000 * i, KERNEL)
    p.memcpy(0, 1, 7, 2_000_000, 2_001_000, 1, copy_bytes)
    if exited:
        p.mark_exited()
    return p


def finished_ring(rings, kernels, **kw) -> int:
    """A ring handed over by a process that is gone; its pid."""
    return rings.gone(written_ring(rings, kernels, **kw))


def totals(part):
    kernels = sum(k.count for t in part.traced for k in t.kernels)
    kernels += sum(k.count for r in part.traced_retired for k in r.kernels)
    copies = sum(x.bytes for t in part.traced for x in t.transfers)
    copies += sum(x.bytes for r in part.traced_retired for x in r.transfers)
    return kernels, copies


def test_exited_processes_beyond_the_kept_number_are_folded_exactly(collector_factory, rings, monkeypatch):
    monkeypatch.setattr(collector_mod, "EXITED_KEPT", 4)
    c = collector_factory()
    expected_kernels = expected_bytes = 0
    for i in range(11):
        finished_ring(rings, kernels=i + 1, copy_bytes=1000 * (i + 1))
        expected_kernels += i + 1
        expected_bytes += 1000 * (i + 1)
        poll_until(c, lambda part: len(part.traced) + sum(r.processes for r in part.traced_retired) == i + 1)
    part = c.part()
    assert len(part.traced) == 4 and all(t.state == "exited" for t in part.traced)
    (retired,) = part.traced_retired
    assert (retired.session, retired.processes, retired.truncated, retired.complete) == (rings.session, 7, 0, True)
    assert totals(part) == (expected_kernels, expected_bytes)
    # the kept ones are the four most recent: they carry 8..11 kernels
    assert sorted(t.kernels[0].count for t in part.traced) == [8, 9, 10, 11]
    (k,) = retired.kernels
    assert (k.mangled, k.count, k.timed, k.min_ns, k.max_ns) == (KERNEL, 28, 28, 400, 400)
    text = format_summary(part.traced, retired=part.traced_retired)
    assert "7 earlier exited processes, folded together" in text and "28 kernel launches" in text


def test_a_truncated_process_makes_the_roll_up_incomplete(collector_factory, rings, monkeypatch):
    monkeypatch.setattr(collector_mod, "EXITED_KEPT", 1)
    c = collector_factory()
    finished_ring(rings, kernels=2, exited=False)  # died without its exit flush
    poll_until(c, lambda part: part.traced)
    finished_ring(rings, kernels=3)
    part = poll_until(c, lambda part: part.traced_retired)
    (retired,) = part.traced_retired
    assert (retired.processes, retired.truncated, retired.complete) == (1, 1, False)
    assert "INCOMPLETE" in format_summary(part.traced, retired=part.traced_retired)


def test_a_pid_that_comes_back_is_a_new_process(collector_factory, rings):
    """One process, two rings one after the other (as when a traced process execs: the first
    image's connection closes at the exec, the new image hands over a ring of its own)."""
    c = collector_factory()
    first = written_ring(rings, kernels=2)
    conn = first.hand_over(rings.socket_path)
    poll_until(c, lambda part: part.traced and part.traced[0].state == "running")
    conn.close()
    second = written_ring(rings, kernels=5)
    conn = second.hand_over(rings.socket_path)
    part = poll_until(c, lambda part: part.traced_retired)
    assert [(t.pid, t.state, t.kernels[0].count) for t in part.traced] == [(os.getpid(), "running", 5)]
    assert part.traced_retired[0].processes == 1 and totals(part) == (7, 8192)
    conn.close()


def test_a_second_ring_from_a_process_whose_first_is_open_is_refused(collector_factory, rings):
    c = collector_factory()
    first = written_ring(rings, kernels=2, exited=False)
    conn = first.hand_over(rings.socket_path)
    poll_until(c, lambda part: part.traced)
    other = written_ring(rings, kernels=9)
    again = other.hand_over(rings.socket_path)
    part = poll_until(c, lambda part: part.problems)
    assert [(t.pid, t.kernels[0].count) for t in part.traced] == [(os.getpid(), 2)]
    assert f"refused (second_ring); the last: pid {os.getpid()} sent a second ring" in part.problems[0].message
    conn.close()
    again.close()


def test_the_roll_up_reaches_the_plain_json(collector_factory, rings, monkeypatch):
    monkeypatch.setattr(collector_mod, "EXITED_KEPT", 0)
    c = collector_factory()
    finished_ring(rings, kernels=3)
    part = poll_until(c, lambda part: part.traced_retired)
    assert part.traced == ()
    doc = Snapshot(seq=1, timestamp=0.0, traced_retired=part.traced_retired).to_json_dict()
    (r,) = doc["traced_retired"]
    assert (r["processes"], r["complete"], r["kernels"][0]["count"], r["transfers"][0]["direction"]) == (
        1, True, 3, "h2d")


def test_problems_of_folded_processes_become_one_counted_problem(collector_factory, rings, monkeypatch):
    monkeypatch.setattr(collector_mod, "EXITED_KEPT", 1)
    c = collector_factory()
    for _ in range(4):
        p = written_ring(rings, kernels=1, exited=False)
        p.push_raw(bytes(64))  # a malformed record: a warning Problem for this process
        p.mark_exited()
        pid = rings.gone(p)
        poll_until(c, lambda part, pid=pid: any(t.pid == pid and t.state == "exited" for t in part.traced))
    part = c.part()
    own = [pr for pr in part.problems if f"pid {part.traced[0].pid}:" in pr.message]
    folded = [pr for pr in part.problems if "earlier traced process(es)" in pr.message]
    assert len(part.problems) == len(own) + 1 and len(folded) == 1
    assert folded[0].message.startswith("3 earlier traced process(es)") and folded[0].severity == "warning"
    assert "malformed ring records" in folded[0].message
