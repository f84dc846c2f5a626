"""The caps as the CUPTI plugin offers them and the collector reports them (docs/decoder.md, "Caps").

* the plugin's options: ``GPUFLOW_MAX_*`` variables, the decoders' defaults and ranges, a wrong
  value refused in one line naming its variable;
* a real agent with those options and a ring socket: a traced process (a courier handing over a
  ring the compiled producer writes) that passes a cap is reported by a Problem naming the cap and
  its variable, while its figures stay exact;
* every cap and budget the decoders and the builder count has its Problem (``caps.problems``);
* a ring that lies in its header (head beyond the capacity, head going back, the agent's tail
  rewritten, the capacity rewritten) costs the agent that ring's tracing at most, and a ring 64
  times the agent's own is drained at most a ring of the agent's size per pass, yet to its head,
  pass after pass, once its process is gone or the agent stops (nothing published is left behind).
"""

from __future__ import annotations

import time

import pytest
import ringfuzz as F
from ringproducer import Courier

from gpuflow.collectors.cupti import _layout as L
from gpuflow.collectors.cupti import caps, options, plugin
from gpuflow.collectors.cupti.traced_builder import OTHER_KERNELS
from gpuflow.core.agent import Agent
from gpuflow.core.context import AgentConfig, CollectorContext
from gpuflow.core.options import OptionError
from gpuflow.core.plugins import get_plugin_manager

from .conftest import poll_until

ONLY_CUPTI = {"GPUFLOW_DISABLED_PLUGINS": "nvml", "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1"}


def messages(part, pid):
    return [p.message for p in part.problems if f"pid {pid}:" in p.message]


# -- the options -----------------------------------------------------------------------------------
def test_the_caps_are_options_read_from_their_variables():
    context = CollectorContext(AgentConfig(), environ={"GPUFLOW_MAX_NAMES": "100", "GPUFLOW_MAX_NAME_BYTES": "0x40",
                                                       "GPUFLOW_MAX_LANES": "8", "GPUFLOW_MAX_PENDING_NAMES": "2"})
    values = context.plugin_options(options.OPTIONS)
    assert options.caps(values) == L.Caps(max_names=100, max_name_bytes=64, max_lanes=8, max_pending_names=2)
    defaults = CollectorContext(AgentConfig(), environ={}).plugin_options(options.OPTIONS)
    assert options.caps(defaults) == L.Caps()  # the decoders' own defaults
    assert {o.name: o.env for o in options.CAP_OPTIONS} == caps.VARIABLES
    assert all(o.flag is None for o in options.CAP_OPTIONS)


@pytest.mark.parametrize(("variable", "value", "message"), [
    ("GPUFLOW_MAX_NAMES", "-1", "GPUFLOW_MAX_NAMES: must be between 0 and 1,048,576 names, got -1"),
    ("GPUFLOW_MAX_NAME_BYTES", "5000", "GPUFLOW_MAX_NAME_BYTES: must be between 1 and 4,096 bytes, got 5,000"),
    ("GPUFLOW_MAX_LANES", "0", "GPUFLOW_MAX_LANES: must be between 1 and 65,536 lanes, got 0"),
    ("GPUFLOW_MAX_PENDING_NAMES", "many", "GPUFLOW_MAX_PENDING_NAMES: expected a whole number of names"),
])
def test_a_wrong_cap_is_refused_in_one_line_naming_its_variable(variable, value, message):
    context = CollectorContext(AgentConfig(), environ={variable: value})
    with pytest.raises(OptionError) as info:
        context.plugin_options(options.OPTIONS)
    assert message in str(info.value) and "\n" not in str(info.value)


# -- a real agent ----------------------------------------------------------------------------------
def test_an_agent_passes_its_caps_to_the_decoders_and_reports_the_ones_reached(rings, tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    socket_path = private / "ring.sock"
    p = rings.producer()
    p.set_status(1, "")
    for i in range(5):
        p.kernel(0, 1, 13 + i, 10, 20, f"kernel_{i}")  # five names on five lanes: past both caps
    agent = Agent(AgentConfig(options={"cupti": {"max_names": 2, "max_lanes": 3}}),
                  get_plugin_manager(environ=ONLY_CUPTI), environ={"GPUFLOW_RING_SOCKET": str(socket_path)})
    agent.start()
    child = Courier(rings.lib, p, socket_path)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            snap = agent.board.latest()
            if snap is not None and snap.traced and len(messages(snap, child.pid)) >= 2:
                break
            time.sleep(0.05)
        (t,) = snap.traced
        assert sorted((k.name, k.count) for k in t.kernels) == [
            (OTHER_KERNELS, 3), ("kernel_0", 1), ("kernel_1", 1)] and len(t.lanes) == 3
        found = messages(snap, child.pid)
        assert any("max_names cap, 2; GPUFLOW_MAX_NAMES sets it" in m for m in found), found
        assert any("max_lanes cap, 3; GPUFLOW_MAX_LANES sets it" in m for m in found), found
    finally:
        child.kill()
        agent.stop()


def test_every_cap_and_budget_has_its_problem():
    seen = {"names_folded": 9, "names_cut": 2, "lane_overflow": 5, "names_unfinished": 1,
            "names_over_budget": 3, "spans_over_budget": True, "lanes_bytes": 1_234_567, "lane_share_bytes": 12_345,
            "demangled_budget": 4_194_304, "demangle_timeout": True}
    found = {key: (message, severity) for key, message, severity in caps.problems(42, seen, L.Caps())}
    assert set(found) == {"cap-names", "cap-name-bytes", "lanes", "cap-pending", "budget-kernels", "budget-lanes",
                          "budget-demangled", "demangle-time"}
    assert all(message.startswith("pid 42: ") for message, _severity in found.values())
    for key, variable in (("cap-names", "GPUFLOW_MAX_NAMES"), ("cap-name-bytes", "GPUFLOW_MAX_NAME_BYTES"),
                          ("lanes", "GPUFLOW_MAX_LANES"), ("cap-pending", "GPUFLOW_MAX_PENDING_NAMES")):
        assert variable in found[key][0]
    assert "3.5 MiB" in found["budget-kernels"][0] and "at most 3.5 MiB, within the 4.5 MiB" in found["budget-lanes"][0]
    assert "1,234,567 bytes" in found["budget-lanes"][0] and "12,345 bytes" in found["budget-lanes"][0]
    assert "4,194,304 characters" in found["budget-demangled"][0] and "mangled" in found["demangle-time"][0]
    assert caps.problems(42, dict.fromkeys(seen, 0), L.Caps()) == []


# -- rings that lie --------------------------------------------------------------------------------
@pytest.mark.parametrize("lie", ["head_past_capacity", "head_back", "capacity"])
def test_a_header_that_lies_stops_that_rings_tracing_only(collector_factory, rings, lie):
    liar, liar_child = rings.traced()
    honest, honest_child = rings.traced()
    for p in (liar, honest):
        p.set_status(1, "")
        p.kernel(0, 1, 13, 10, 20, "_Z1kv")
    c = collector_factory()
    poll_until(c, lambda part: len(part.traced) == 2)
    if lie == "head_past_capacity":
        liar.set_head(liar.head + liar.capacity + 1)
    elif lie == "head_back":
        liar.set_head(liar.head - 1)
    else:
        liar.corrupt_header(capacity=liar.capacity * 4)
    honest.kernel(0, 1, 13, 30, 40, "_Z1kv")
    part = poll_until(c, lambda part: any("unreadable" in m for m in messages(part, liar_child.pid)))
    by_pid = {t.pid: t for t in part.traced}
    assert by_pid[liar_child.pid].truncated and by_pid[liar_child.pid].kernels[0].count == 1
    assert part.problems[[p.message for p in part.problems].index(messages(part, liar_child.pid)[0])].severity == "error"
    part = poll_until(c, lambda part: {t.pid: t for t in part.traced}[honest_child.pid].kernels[0].count == 2)
    assert not {t.pid: t for t in part.traced}[honest_child.pid].truncated


def test_a_rewritten_tail_is_the_agents_own_again_at_the_next_drain(collector_factory, rings):
    p, child = rings.traced()
    p.set_status(1, "")
    p.kernel(0, 1, 13, 10, 20, "_Z1kv")
    c = collector_factory()
    poll_until(c, lambda part: part.traced)
    p.header.tail = (1 << 64) - 1   # the producer writes the consumer's counter
    p.kernel(0, 1, 13, 30, 40, "_Z1kv")
    part = poll_until(c, lambda part: part.traced[0].kernels[0].count == 2)
    assert p.tail == p.head and not part.traced[0].truncated and not messages(part, child.pid)


def test_a_ring_far_larger_than_the_agents_is_drained_a_ring_of_the_agents_size_per_pass(collector_factory, rings):
    p, child = rings.traced(capacity=1 << 14)
    p.set_status(1, "")
    p.kernel(0, 1, 13, 10, 20, "_Z1kv")
    for _ in range((1 << 14) - p.head):
        p.push_raw(F.kernel(0))
    c = collector_factory(drain_max_records=1024)
    c.poll()
    assert p.tail == 1024                       # one pass: at most drain_max_records
    part = poll_until(c, lambda part: part.traced and part.traced[0].records == 1 << 14)
    assert sum(k.count for k in part.traced[0].kernels) == (1 << 14) - 1


def full_ring(rings, capacity: int):
    """A ring of ``capacity`` records, every one published: a kernel name and kernels of it."""
    p = rings.producer(capacity=capacity)
    p.set_status(1, "")
    p.kernel(0, 1, 13, 10, 20, "_Z1kv")
    for _ in range(capacity - p.head):
        p.push_raw(F.kernel(0))
    return p


def test_a_gone_process_is_drained_to_its_head_however_far_behind_the_agent_was(collector_factory, rings):
    # more than a pass behind when its process exits (an agent short of CPU, or paused): its final
    # drain takes every record published, in passes, and its counts are complete
    p = full_ring(rings, 1 << 14)
    p.mark_exited()
    pid = rings.gone(p)
    c = collector_factory(drain_max_records=1000)
    part = poll_until(c, lambda part: part.traced and part.traced[0].state == "exited")
    t = part.traced[0]
    assert (t.pid, p.tail, t.records) == (pid, 1 << 14, 1 << 14)
    assert sum(k.count for k in t.kernels) == (1 << 14) - 1 and not t.truncated


def test_an_agent_stopping_drains_every_ring_to_its_head(collector_factory, rings):
    p = full_ring(rings, 1 << 13)
    rings.courier(p)
    c = collector_factory(drain_max_records=1000)
    c.poll()
    assert p.tail == 1000                       # a running process: one pass
    c.stop()
    assert p.tail == 1 << 13 and c.part().traced[0].records == 1 << 13
