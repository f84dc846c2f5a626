"""A running process's kernel table is brought up to date at most every ``kernel_table_gap_s``
(the agent's ``KERNEL_TABLE_GAP_S``), while its lanes and counters follow every build; it is never
further behind than that, and exact at once when the process exits or the agent stops.

* the builder, on a real ring and decoder with a clock the test moves: within the gap a build keeps
  the last table (the same object) though its records moved; past the gap, or ``exact``, or an
  exited process, it is the decoder's; the kernels' launch entries follow the table; a gap of 0
  brings it up to date at every build;
  ``kernels_due`` says when a table is behind and old enough;
* the collector (real couriers, its drain and build rules, real time): a table kept while kernels
  keep coming; a process gone quiet gets its exact table one gap later with no other change; an
  exit and the agent's stop give the exact table at once.
"""

from __future__ import annotations

import time

from gpuflow.collectors.cupti import collector as collector_mod
from gpuflow.collectors.cupti.traced_builder import KERNEL_TABLE_GAP_S, TracedBuilder

from .conftest import WALL0, poll_until

CUPTI0 = 5_000_000
GAP_NS = 250_000_000


class Clock:
    def __init__(self) -> None:
        self.ns = 1_000_000_000

    def __call__(self) -> int:
        return self.ns


def counts(t):
    return {k.mangled: k.count for k in t.kernels}


def start(p):
    p.set_status(1, "")
    p.context(0, 1, 7)
    p.clock_sync(CUPTI0, WALL0)


def on_a_ring(decoder_impl, rings, *, stream_name=None):
    """A producer that ran one kernel, its decoder drained, and a builder of a 0.25 s gap on a
    clock the test moves: (producer, decoder, builder, clock)."""
    p = rings.producer()
    start(p)
    if stream_name:
        p.stream_name(0, 1, 13, stream_name)
    p.kernel(0, 1, 13, CUPTI0 + 1_000, CUPTI0 + 2_000, "_Z1av")
    d = decoder_impl.cls(rings.mapping(p))
    clock = Clock()
    d.drain()
    return p, d, TracedBuilder(p.pid, "s", d.lane_span_cap, kernel_table_gap_s=0.25, clock_ns=clock), clock


def build(builder, d, **kw):
    args = {"name": "demo", "state": "running", "exit_status": None, "truncated": False, "now_ns": WALL0}
    args.update(kw)
    return builder.build(d, **args)


def test_the_agent_keeps_a_table_a_quarter_of_a_second_at_most():
    assert KERNEL_TABLE_GAP_S == 0.25
    assert collector_mod.CuptiCollector.__init__.__kwdefaults__["kernel_table_gap_s"] == KERNEL_TABLE_GAP_S
    assert TracedBuilder.__init__.__kwdefaults__["kernel_table_gap_s"] == 0.0   # a builder alone: every build


def test_within_the_gap_the_table_is_kept_and_past_it_is_the_decoders(decoder_impl, rings):
    p, d, b, clock = on_a_ring(decoder_impl, rings)
    first = build(b, d)
    assert counts(first) == {"_Z1av": 1} and not b.kernels_due()
    p.kernel(0, 1, 13, CUPTI0 + 3_000, CUPTI0 + 4_000, "_Z1av")
    p.kernel(0, 1, 13, CUPTI0 + 5_000, CUPTI0 + 6_000, "_Z1bv")
    d.drain()
    clock.ns += GAP_NS - 1
    second = build(b, d)
    assert second.kernels is first.kernels                   # kept: the same object
    assert second.records == d.tail > first.records          # while the rest follows the decoder
    assert second.lanes[0].executions == 3
    assert b.kernels_due(exact=True) and not b.kernels_due()
    clock.ns += 1
    assert b.kernels_due()
    third = build(b, d)
    assert counts(third) == {"_Z1av": 2, "_Z1bv": 1} and not b.kernels_due(exact=True)
    # nothing decoded since: past the gap the table is still the same (nothing could have moved)
    clock.ns += 10 * GAP_NS
    assert build(b, d).kernels is third.kernels and not b.kernels_due()
    # the first records after a quiet spell longer than the gap: at once
    p.kernel(0, 1, 13, CUPTI0 + 7_000, CUPTI0 + 8_000, "_Z1bv")
    d.drain()
    assert counts(build(b, d)) == {"_Z1av": 2, "_Z1bv": 2}
    # exact, or the process exited: at once, within the gap
    p.kernel(0, 1, 13, CUPTI0 + 8_000, CUPTI0 + 8_500, "_Z1bv")
    d.drain()
    assert counts(build(b, d)) == {"_Z1av": 2, "_Z1bv": 2}
    assert counts(build(b, d, exact=True)) == {"_Z1av": 2, "_Z1bv": 3}
    p.kernel(0, 1, 13, CUPTI0 + 9_000, CUPTI0 + 9_500, "_Z1cv")
    d.drain()
    assert counts(build(b, d, state="exited", exit_status=0)) == {"_Z1av": 2, "_Z1bv": 3, "_Z1cv": 1}


def test_a_name_first_seen_within_the_gap_is_shown_on_its_lane(decoder_impl, rings):
    """Its lane needs its shown name before the table has its entry: the name is admitted by the
    rule the table's refresh follows, and its entry comes with the next one."""
    p, d, b, _clock = on_a_ring(decoder_impl, rings, stream_name="compute")
    first = build(b, d)
    p.kernel(0, 1, 13, CUPTI0 + 3_000, CUPTI0 + 4_000, "_Z13attention_fwdPKfPfi")
    d.drain()
    t = build(b, d)
    assert t.kernels is first.kernels
    shown = [k.name for k in build(b, d, exact=True).kernels if k.mangled == "_Z13attention_fwdPKfPfi"]
    assert list(t.lanes[0].spans)[-1].name == shown[0] != "_Z1av"


def test_the_launch_entries_follow_the_table(decoder_impl, rings):
    """A kernel's launch entry (its configurations, occupancy) is made with the table: kept while
    the table is, brought up to date when it is."""
    p, d, b, clock = on_a_ring(decoder_impl, rings)
    first = build(b, d)
    assert [(x.mangled, x.configs, x.block_threads) for x in first.kernel_launches] == [("_Z1av", 1, 1)]
    p.kernel(0, 1, 13, CUPTI0 + 3_000, CUPTI0 + 4_000, "_Z1av", grid=(4, 1, 1), block=(128, 1, 1))
    d.drain()
    kept = build(b, d)
    assert kept.kernels is first.kernels and kept.kernel_launches is first.kernel_launches
    clock.ns += GAP_NS
    moved = build(b, d)
    assert [(x.mangled, x.configs) for x in moved.kernel_launches] == [("_Z1av", 2)]
    p.kernel(0, 1, 13, CUPTI0 + 5_000, CUPTI0 + 6_000, "_Z1av", grid=(4, 1, 1), block=(64, 1, 1))
    d.drain()
    assert [x.configs for x in build(b, d, exact=True).kernel_launches] == [3]


def test_a_gap_of_zero_brings_the_table_up_to_date_at_every_build(decoder_impl, rings):
    p = rings.producer()
    start(p)
    d = decoder_impl.cls(rings.mapping(p))
    clock = Clock()
    b = TracedBuilder(p.pid, "s", d.lane_span_cap, clock_ns=clock)
    for i in range(1, 4):
        p.kernel(0, 1, 13, CUPTI0 + 1_000 * i, CUPTI0 + 1_000 * i + 500, "_Z1av")
        d.drain()
        assert counts(build(b, d)) == {"_Z1av": i} and not b.kernels_due()


def test_a_table_is_kept_while_kernels_come_and_exact_at_an_exit(collector_factory, rings):
    p, child = rings.traced()
    start(p)
    p.kernel(0, 1, 13, CUPTI0 + 1_000, CUPTI0 + 2_000, "_Z1av")
    c = collector_factory(kernel_table_gap_s=3600.0)   # within the gap all along
    first = poll_until(c, lambda part: part.traced).traced[0]
    assert counts(first) == {"_Z1av": 1}
    for i in range(1, 4):
        p.kernel(0, 1, 13, CUPTI0 + 1_000 * i + 2_000, CUPTI0 + 1_000 * i + 2_500, "_Z1av")
        t = poll_until(c, lambda part, i=i: part.traced[0].lanes[0].executions == 1 + i).traced[0]
        assert t.kernels is first.kernels and t.records == p.head
    p.kernel(0, 1, 13, CUPTI0 + 9_000, CUPTI0 + 9_500, "_Z1bv")
    p.mark_exited()
    assert child.exit(0) == 0
    t = poll_until(c, lambda part: part.traced[0].state == "exited").traced[0]
    assert counts(t) == {"_Z1av": 4, "_Z1bv": 1}


def test_a_process_gone_quiet_has_its_exact_table_one_gap_later(collector_factory, rings, monkeypatch):
    monkeypatch.setattr(collector_mod, "REFRESH_IDLE_S", 3600.0)   # no other build comes
    p, _child = rings.traced()
    start(p)
    p.kernel(0, 1, 13, CUPTI0 + 1_000, CUPTI0 + 2_000, "_Z1av")
    gap = 0.4
    c = collector_factory(kernel_table_gap_s=gap)
    first = poll_until(c, lambda part: part.traced).traced[0]
    p.kernel(0, 1, 13, CUPTI0 + 3_000, CUPTI0 + 4_000, "_Z1av")
    written = time.monotonic()
    behind = poll_until(c, lambda part: part.traced[0].records == p.head).traced[0]
    if time.monotonic() - written < gap:   # taken within the gap (a slow machine may be past it)
        assert behind.kernels is first.kernels
    # nothing more comes: no drain changes anything, yet a build brings the table up to date
    exact = poll_until(c, lambda part: counts(part.traced[0]) == {"_Z1av": 2}, timeout=10).traced[0]
    assert time.monotonic() - written >= gap - 0.1   # not before the gap (less the first build's head start)
    assert exact.records == behind.records and exact.lanes == behind.lanes


def test_the_agents_stop_gives_the_exact_table(collector_factory, rings):
    p, _child = rings.traced()
    start(p)
    p.kernel(0, 1, 13, CUPTI0 + 1_000, CUPTI0 + 2_000, "_Z1av")
    c = collector_factory(kernel_table_gap_s=3600.0)
    first = poll_until(c, lambda part: part.traced).traced[0]
    p.kernel(0, 1, 13, CUPTI0 + 3_000, CUPTI0 + 4_000, "_Z1cv")
    t = poll_until(c, lambda part: part.traced[0].records == p.head).traced[0]
    assert t.kernels is first.kernels
    c.stop()
    assert counts(c.part().traced[0]) == {"_Z1av": 1, "_Z1cv": 1}
