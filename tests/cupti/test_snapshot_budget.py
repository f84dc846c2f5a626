"""What one traced process adds to the snapshot, bounded by the builder (docs/decoder.md, "Caps").

TracedBuilder shows a kernel name by name while the kernel table's names fit its JSON budget, and
lets each lane show its newest spans within an equal share of what the kernel table leaves of the
process's budget. Checked here, with both decoder twins on in-memory rings:

* the budgets hold in the agent's own JSON (``frames.dumps`` of ``to_json_dict``), whatever the
  names (4 KiB of characters JSON escapes, 6 bytes each), the kernel table and the lanes together
  within the process's;
* what is over budget is still exact: the kernels beyond it count together under
  ``(other kernel names)`` (their spans too), a lane's ``spans_elided`` is executions less spans;
* a name's fate is decided once: a table never loses an entry from one build to the next;
* the fixed parts the budgets reserve per entry bound the JSON of the most extreme entries;
* cut names end in ``…`` (decoder cuts, the producer's, demangled names past the demangler's bound).
"""

from __future__ import annotations

import json

import ringfuzz as F
from hostile import BufferRing, heavy_name

from gpuflow.collectors.cupti import _layout as L
from gpuflow.collectors.cupti import traced_builder as B
from gpuflow.collectors.cupti.demangle import AVAILABLE as DEMANGLER
from gpuflow.collectors.cupti.demangle import MAX_CHARS
from gpuflow.collectors.cupti.traced_activity import NO_FACTS, NO_LAUNCH
from gpuflow.core.snapshot import KernelLaunch, KernelStat, Lane, Snapshot, Span, _plain, _span_json  # /api/snapshot's forms
from gpuflow.transport.frames import dumps

WALL0 = 1_764_000_000_000_000_000


def build(builder, dec):
    return builder.build(dec, name="hostile", state="running", exit_status=None, truncated=False, now_ns=WALL0)


def json_bytes(traced, key):
    """The bytes ``key`` (kernels, lanes) of a traced process takes in /api/snapshot's JSON."""
    plain = Snapshot(seq=1, timestamp=0.0, traced=(traced,)).to_json_dict()["traced"][0]
    return len(dumps(plain[key]))


def feed(cls, records, **caps):
    ring = BufferRing(1 << 14)
    dec = cls(ring.buffer, **caps)
    ring.feed(dec, records)
    return ring, dec


def test_the_kernel_table_keeps_to_its_budget_and_the_rest_is_exact(decoder_impl):
    records = []
    for nid in range(1, 301):
        records += F.name_chunks(nid, heavy_name(nid, 1000))
        records += [F.kernel(nid, start=100, end=100 + nid), F.kernel(nid, start=0, end=0, flags=F.FLAG_NO_TIMING)]
    ring, dec = feed(decoder_impl.cls, records)
    builder = B.TracedBuilder(1, "s", dec.lane_span_cap, kernel_table_bytes=200_000)
    t = build(builder, dec)
    assert json_bytes(t, "kernels") <= 200_000 + 2 * B.KERNEL_JSON_FIXED
    named = [k for k in t.kernels if k.name != B.OTHER_KERNELS]
    (other,) = [k for k in t.kernels if k.name == B.OTHER_KERNELS]
    assert 0 < len(named) < 300 and builder.names_over_budget == 300 - len(named)
    assert sum(k.count for k in t.kernels) == 600 and other.count == 2 * (300 - len(named))
    assert other.timed == 300 - len(named) and other.total_ns == sum(range(len(named) + 1, 301))
    assert (other.min_ns, other.max_ns) == (len(named) + 1, 300)
    span_names = {s.name for lane in t.lanes for s in lane.spans}
    assert B.OTHER_KERNELS in span_names and span_names <= {k.name for k in t.kernels}
    # a later build, more launches of every name: the same entries, none lost, none added
    ring.feed(dec, [F.kernel(nid, start=100, end=101) for nid in range(1, 301)])
    t2 = build(builder, dec)
    assert [k.mangled for k in t2.kernels if k.name != B.OTHER_KERNELS] == [k.mangled for k in named]
    assert sum(k.count for k in t2.kernels) == 900


def test_the_lanes_keep_to_their_budget_each_showing_its_newest_spans(decoder_impl):
    records = F.name_chunks(1, heavy_name(1, 1000))
    records += [F.kernel(1, stream=s, start=t, end=t + 1) for t in range(300) for s in range(8)]
    ring, dec = feed(decoder_impl.cls, records)
    builder = B.TracedBuilder(1, "s", dec.lane_span_cap, process_bytes=300_000, kernel_table_bytes=100_000)
    t = build(builder, dec)
    assert json_bytes(t, "lanes") <= builder.lanes_bytes <= 300_000 - json_bytes(t, "kernels") + 2
    assert all(lane.spans_elided == lane.executions - len(lane.spans) == 300 - len(lane.spans) for lane in t.lanes)
    shown = {len(lane.spans) for lane in t.lanes}
    assert len(shown) == 1 and 0 < shown.pop() < 300 and builder.spans_over_budget > 0
    assert all([s.start_us for s in lane.spans] == sorted(s.start_us for s in lane.spans) for lane in t.lanes)
    assert all(lane.spans[-1].dur_ns == 1 and lane.spans[-1].seq == max(s.seq for s in lane.spans) for lane in t.lanes)
    # more lanes appear: each lane's share shrinks, and every lane keeps to it
    ring.feed(dec, [F.kernel(1, stream=s, start=1000, end=1001) for s in range(8, 40)])
    t2 = build(builder, dec)
    assert json_bytes(t2, "lanes") <= builder.lanes_bytes and len(t2.lanes) == 40
    assert len(t2.lanes[0].spans) < len(t.lanes[0].spans)


def test_the_kernel_table_keeps_its_launch_configurations_within_its_budget(decoder_impl):
    """Each kernel shown by name has a launch configuration entry, which repeats its name's mangled
    form: with the demangled one too, 4,096 names of 4 KiB took 7.6 MB of /api/snapshot before the entries were charged."""
    records = []
    for nid in range(1, 301):
        records += F.name_chunks(nid, heavy_name(nid, 1000))
        records.append(F.kernel(nid, start=100, end=100 + nid))
    ring, dec = feed(decoder_impl.cls, records)
    builder = B.TracedBuilder(1, "s", dec.lane_span_cap, kernel_table_bytes=200_000)
    t = build(builder, dec)
    named = {(k.name, k.mangled) for k in t.kernels if k.name != B.OTHER_KERNELS}
    assert 0 < builder.names_over_budget and {x.mangled for x in t.kernel_launches} == {m for _n, m in named}
    assert json_bytes(t, "kernels") + json_bytes(t, "kernel_launches") <= 200_000 + 2 * B.KERNEL_JSON_FIXED


def test_the_kernel_table_and_the_lanes_keep_to_the_processs_budget_together(decoder_impl):
    """The kernel table (the complete aggregates) takes what it needs up to its own budget; the
    lanes (a sample) have what it leaves, so the process keeps to its budget as the table grows."""
    records = [F.kernel(0, stream=s, start=t, end=t + 1) for t in range(200) for s in range(8)]
    for nid in range(1, 121):
        records += F.name_chunks(nid, heavy_name(nid, 1000))
        records += [F.kernel(nid, stream=s, start=10_000 + nid, end=10_001 + nid) for s in range(8)]
    ring, dec = feed(decoder_impl.cls, records)
    builder = B.TracedBuilder(1, "s", dec.lane_span_cap, process_bytes=600_000, kernel_table_bytes=400_000)
    t = build(builder, dec)
    kernels, lanes = json_bytes(t, "kernels"), json_bytes(t, "lanes")
    assert 0 < builder.names_over_budget < 120 and kernels <= 400_000 + 2 * B.KERNEL_JSON_FIXED
    assert builder.spans_over_budget > 0 and lanes <= builder.lanes_bytes <= 600_000 - kernels + 2 * B.KERNEL_JSON_FIXED
    assert kernels + lanes <= 600_000 + 2 * B.KERNEL_JSON_FIXED
    # a builder whose table has a few names leaves its lanes more
    few = B.TracedBuilder(1, "s", dec.lane_span_cap, process_bytes=600_000, kernel_table_bytes=20_000)
    t2 = build(few, dec)
    assert few.lanes_bytes > builder.lanes_bytes and json_bytes(t2, "lanes") > lanes


def test_lane_labels_are_cut_so_that_the_heads_fit_the_least_the_lanes_have(decoder_impl):
    """Stream names are kept whole up to 4 KiB by the decoder (its names' cap); 256 of them, every
    byte escaped in JSON, would take 6 MB of lane heads, beyond what a process may add in all."""
    records = [F.context(0, 1, 7)]
    for s in range(L.DEFAULT_MAX_LANES):
        records += F.name_chunks(1 + s, heavy_name(1 + s), F.FLAG_NAME_STREAM) + [F.stream_name(1 + s, 0, 1, 100 + s)]
        records.append(F.copy(1, 64, stream=100 + s, start=10, end=20))
    _ring, dec = feed(decoder_impl.cls, records)
    assert all(len(text) == L.NAME_MAX for text, _flags in dec.names().values())
    t = build(B.TracedBuilder(1, "s", dec.lane_span_cap), dec)
    assert len(t.lanes) == L.DEFAULT_MAX_LANES and all(len(lane.spans) == 1 for lane in t.lanes)
    assert all(lane.label.endswith(B.CUT_MARK) and len(lane.label.encode()) <= B.LABEL_MAX_BYTES + len(B.CUT_MARK.encode())
               for lane in t.lanes)
    assert json_bytes(t, "lanes") <= B.LANES_MIN_BYTES


def test_copies_cost_their_fixed_part_only(decoder_impl):
    records = [F.copy(1, 4096, stream=s, start=t, end=t + 2) for t in range(400) for s in range(4)]
    _ring, dec = feed(decoder_impl.cls, records)
    t = build(B.TracedBuilder(1, "s", dec.lane_span_cap, process_bytes=200_000), dec)
    assert json_bytes(t, "lanes") <= 200_000
    assert all(len(lane.spans) == (200_000 // 4 - B.LANE_JSON_FIXED - 6) // (B.SPAN_JSON_FIXED + 4)
               for lane in t.lanes)


def test_the_fixed_parts_bound_the_most_extreme_entries():
    big = (1 << 64) - 1
    name = "n"
    span = Span(seq=big, kind="kernel", start_us=-(big // 1000) - (1 << 64) // 1000, dur_ns=big, name=name,
                grid=((1 << 32) - 1, 65535, 65535), block=(65535, 65535, 65535))
    copy = Span(seq=big, kind="memset", start_us=-(1 << 65) // 1000, dur_ns=big, bytes=big, direction="memset")
    assert len(dumps(_span_json(span))) - B.json_cost(name) <= B.SPAN_JSON_FIXED
    assert len(dumps(_span_json(copy))) - len("null") <= B.SPAN_JSON_FIXED
    summed = 4096 * big  # an "other" entry sums saturated totals of every name
    kernel = KernelStat(name=name, mangled=name, count=summed, total_ns=summed, min_ns=big, max_ns=big, timed=summed)
    assert len(dumps(_plain(kernel))) - 2 * B.json_cost(name) <= B.KERNEL_JSON_FIXED
    launch = KernelLaunch(mangled=name, configs=4, configs_more=big, device=(1 << 32) - 1,
                          block_threads=1024 ** 3, registers=255, shared_bytes=big, occupancy_pct=100 / 3,
                          blocks_per_sm=big, limiters="registers+shared+warps+blocks+cluster", waves_min=big / 3,
                          waves_max=big / 3, occupancy_min_pct=100 / 7, occupancy_max_pct=100 / 3,
                          unavailable=NO_FACTS + NO_LAUNCH)
    assert len(dumps(_plain(launch))) - B.json_cost(name) <= B.LAUNCH_JSON_FIXED
    lane = Lane(device=(1 << 32) - 1, context=(1 << 32) - 1, stream=(1 << 32) - 1, label=name, executions=big,
                spans_elided=big)
    assert len(dumps(_plain(lane))) - B.json_cost(name) <= B.LANE_JSON_FIXED


def test_cut_names_end_in_the_marker(decoder_impl):
    records = (F.name_chunks(1, b"_Z" + b"k" * 300) + F.name_chunks(2, b"s" * 200, F.FLAG_NAME_STREAM)
               + [F.stream_name(2, 0, 1, 13), F.kernel(1, stream=13)])
    _ring, dec = feed(decoder_impl.cls, records, max_name_bytes=100)
    t = build(B.TracedBuilder(1, "s", dec.lane_span_cap), dec)
    (k,) = t.kernels
    assert k.mangled == "_Z" + "k" * 98 + B.CUT_MARK and k.name == k.mangled
    assert t.lanes[0].label == "s" * 100 + B.CUT_MARK and t.lanes[0].spans[0].name == k.name


def test_a_demangled_name_past_the_demanglers_bound_is_cut(decoder_impl):
    # each parameter repeats the previous one twice: 133 bytes that demangle to 106,432 characters
    mangled = "_Z1f1PI1AS0_E" + "".join(f"S_IS{i:X}_S{i:X}_E" for i in range(1, 13))
    _ring, dec = feed(decoder_impl.cls, F.name_chunks(1, mangled.encode()) + [F.kernel(1)])
    (k,) = build(B.TracedBuilder(1, "s", dec.lane_span_cap), dec).kernels
    assert k.mangled == mangled
    if DEMANGLER:
        assert len(k.name) == MAX_CHARS + 1 and k.name.startswith("f(P<A, A>") and k.name.endswith(B.CUT_MARK)


def test_json_cost_bounds_both_forms_of_a_name():
    for text in ("plain", "\x01\"\\\x1b", "€😀", heavy_name(5).decode()):
        assert B.json_cost(text) >= len(json.dumps(text, ensure_ascii=False).encode())
        assert B.json_cost(text) >= len(json.dumps(text).encode())


def test_the_kernel_entries_direct_json_is_every_field_of_kernelstat():
    """A kernel table of thousands is built without the generic walk: the same dict, field for field."""
    from dataclasses import asdict, fields

    stat = KernelStat(name="n", mangled="_Zn", count=3, total_ns=30, min_ns=5, max_ns=15, timed=2)
    encoded = _plain(stat)
    assert list(encoded) == [f.name for f in fields(KernelStat)] and encoded == asdict(stat)


def test_the_sessions_roll_up_keeps_to_a_processs_kernel_budget_exactly():
    """Exited processes fold into the session's roll-up (retire.py): a program that starts process
    after process, each with its own thousands of names, grew it without bound (40 processes of
    500 names: 20,000 entries). It keeps to a traced process's kernel budget now; the names that
    find no room count together, exactly, and a name that found none never gets an entry later."""
    from gpuflow.collectors.cupti.retire import fold
    from gpuflow.core.snapshot import RetiredTraced, TracedProcess

    def process(pid: int) -> TracedProcess:
        kernels = tuple(KernelStat(name=f"k{pid}_{i}_" + "x" * 200, mangled=f"_Z{pid}_{i}" + "y" * 200, count=2,
                                   total_ns=10 * (i + 1), min_ns=1, max_ns=9, timed=2) for i in range(500))
        return TracedProcess(pid=pid, session="s", state="exited", kernels=kernels)

    rolled = None
    for pid in range(40):
        rolled = fold(rolled, process(pid))
    doc = Snapshot(seq=1, timestamp=0.0, traced_retired=(rolled,)).to_json_dict()["traced_retired"][0]
    assert len(dumps(doc["kernels"])) <= B.KERNEL_TABLE_BYTES + B.KERNEL_JSON_FIXED + 64
    assert len(rolled.kernels) <= L.DEFAULT_MAX_NAMES + 2
    assert sum(k.count for k in rolled.kernels) == 40 * 500 * 2
    (other,) = [k for k in rolled.kernels if k.name == B.OTHER_KERNELS]
    named = {k.name for k in rolled.kernels} - {B.OTHER_KERNELS}
    assert other.count == 2 * (20_000 - len(named)) and (other.min_ns, other.max_ns) == (1, 9)
    again = fold(rolled, process(39))  # the last one's names again: they found no room before
    assert {k.name for k in again.kernels} == named | {B.OTHER_KERNELS}
    assert isinstance(again, RetiredTraced) and sum(k.count for k in again.kernels) == 41 * 1000
