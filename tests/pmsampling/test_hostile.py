"""A sampler that is wrong or hostile: the compiled test producer (pm_test_producer.c, the format's
own header and producer) started by a real agent in the helper's place, and connections that are
not the agent's helpers at all. Whatever they send, the agent keeps only what it believes, says
what it refused, stays responsive and bounded, and stops on time."""

from __future__ import annotations

import math
import os
import socket
import time

import pytest

from gpuflow.collectors.pmsampling import samples_layout as L
from gpuflow.collectors.pmsampling.plugin import SLOT
from gpuflow.collectors.pmsampling.samplers import KILL_WAIT_S, STOP_WAIT_S

from .test_sampler import history, lines, wait_for

UUID = "GPU-20212223-2425-2627-2829-2a2b2c2d2e2f"   # the test producer's


@pytest.fixture
def producing(make_agent, built, monkeypatch):
    def start(case: str):
        monkeypatch.setenv("GPUFLOW_PM_TEST_SCENARIO", case)
        return make_agent(sampler=str(built["producer"]))
    return start


def refused_line(agent) -> str:
    got = [m for s, m in lines(agent) if m.startswith("the PM samplers' rings held")]
    return got[0] if got else ""


def test_a_good_ring_is_read_exactly(producing):
    agent = producing("good")
    wait_for(lambda: history(agent) and len(history(agent)[0].t_s) == 200)
    series = {s.metric: s for s in history(agent)}
    assert set(series) == set(L.METRICS)
    t = series["pm_warps_active_pct"].t_s
    assert all(b - a == pytest.approx(0.001, abs=2e-6) for a, b in zip(t, t[1:]))
    assert abs(t[0] - time.time()) < 30   # placed by its clock pair on the agent's clock
    for k in range(200):
        assert series["pm_sm_active_pct"].value[k] == k % 100
        assert series["pm_pcie_write_bytes_per_s"].value[k] == pytest.approx(1e6 * k, rel=1e-6)
    assert series["pm_sm_active_pct"].entity == ("device", UUID)
    assert not refused_line(agent)


def test_records_it_cannot_believe_are_left_out_and_counted(producing):
    agent = producing("bad_records")
    wait_for(lambda: refused_line(agent) and history(agent) and len(history(agent)[0].t_s) == 200)
    assert refused_line(agent) == ("the PM samplers' rings held what the agent does not believe, left out: 3 bad "
                                   "duration, 1 out of order, 2 unknown kind, 3 value out of bounds")
    series = {s.metric: s for s in history(agent)}
    warps, dram, peak = (series[m].value for m in ("pm_warps_active_pct", "pm_dram_throughput_pct",
                                                  "pm_sm_active_max_pct"))
    assert math.isnan(warps[90]) and math.isnan(dram[110]) and math.isnan(peak[130])   # NaN, inf, 1e30
    assert warps[150] == 150 % 100   # valid bits beyond the slots: ignored, the slots kept
    assert sum(math.isnan(v) for s in series.values() for v in s.value) == 3


@pytest.mark.parametrize("case, refused", [
    ("no_clock", "200 no clock"),
    ("clock_far", "1 clock untrusted, 200 no clock"),
    ("lying_head", "1 lying head"),
])
def test_a_ring_that_cannot_place_its_samples_gives_none(producing, case, refused):
    agent = producing(case)
    wait_for(lambda: refused_line(agent).endswith(refused))
    assert not history(agent)


def test_header_text_is_printable_and_an_unknown_status_is_named(producing):
    agent = producing("garbage_text")
    got = wait_for(lambda: [m for s, m in lines(agent) if "unknown status" in m])
    assert got[0].startswith("GPU 0 (\ufffd\ufffd<b>?[31m???")   # cut at its field, control bytes shown as ?
    assert got[0].endswith("(unknown status 999): " + "x" * L.DETAIL_MAX)
    assert all(c.isprintable() for c in got[0])


@pytest.mark.parametrize("case, why", [
    ("unsealed", "the ring is not sealed against shrinking, growing and further seals"),
    ("pipe", "the descriptor is not a regular file"),
])
def test_a_descriptor_that_is_not_a_sealed_ring_is_refused(producing, case, why):
    agent = producing(case)
    got = wait_for(lambda: [m for s, m in lines(agent) if "was refused" in m])
    assert len(got) == 1 and got[0].startswith(f"GPU 0: no GPU metrics: the sampler's ring was refused: {why}")


@pytest.mark.parametrize("case, refused", [
    ("two_fds", "1 descriptor count"),
    ("bad_hello", "1 not a hello"),
    ("silent", "1 no message"),
])
def test_a_handover_that_is_not_one_is_refused(producing, case, refused):
    agent = producing(case)
    wait_for(lambda: refused_line(agent).endswith(refused), timeout=15)
    assert not history(agent)


def test_a_flood_is_read_a_ring_at_a_time_and_its_drops_counted(producing):
    agent = producing("flood")
    collector = agent.context.slots[SLOT]
    wait_for(lambda: collector._feeds[0].facts is not None and collector._feeds[0].facts.samples_dropped > 0)
    time.sleep(2.5)   # the producer floods for 2 s
    held = collector.store.held()
    assert held <= collector.store.budget_bytes // 44
    collector._publish(force=True)
    wait_for(lambda: "samples dropped (the agent read too slowly)" in lines(agent)[0][1])
    assert "in the future" in refused_line(agent)   # its made-up times ran past the agent's clock
    assert agent.running


def test_a_helper_that_gives_up_says_why(producing):
    agent = producing("exit_early")
    got = wait_for(lambda: [m for s, m in lines(agent) if "exited" in m])
    assert got == ["GPU 0: no GPU metrics: the PM sampler exited with status 3 before handing its samples over: "
                   "pm_test_producer: giving up before the handover, as asked"]


def test_the_helper_never_sees_the_agents_token(producing, monkeypatch):
    monkeypatch.setenv("GPUFLOW_TOKEN", "a-token-the-helper-must-not-see-1234567890")
    agent = producing("show_env")
    got = wait_for(lambda: [m for s, m in lines(agent) if "exited" in m])
    assert got[0].endswith(": token=unset")


def test_a_helper_that_ignores_stopping_is_killed(producing):
    agent = producing("deaf")
    feed = wait_for(lambda: agent.context.slots[SLOT]._feeds.get(0))
    wait_for(lambda: feed.ring is not None)
    started = time.monotonic()
    agent.stop()
    assert feed.sampler.exit_status == 128 + 9
    assert time.monotonic() - started < STOP_WAIT_S + KILL_WAIT_S + 3


def test_only_the_agents_own_helpers_may_hand_over(producing):
    agent = producing("good")
    collector = agent.context.slots[SLOT]
    path = str(collector._socket.path)
    stranger = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    stranger.connect(path)   # this test's pid is no helper of the agent's
    fd = os.memfd_create("stranger")
    stranger.sendmsg([L.HELLO], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fd.to_bytes(4, "little"))])
    wait_for(lambda: refused_line(agent).endswith("1 not our sampler"))
    try:
        assert stranger.recv(8) == b""   # closed unread
    except ConnectionResetError:         # (with its hello unread)
        pass
    stranger.close()
    os.close(fd)
    assert len({s.entity for s in history(agent)}) == 1


def test_another_user_cannot_reach_the_socket(producing):
    from other_user import ATTACKER_UID, as_user, can_play_users, wait_child

    if not can_play_users():
        pytest.skip("playing another user needs root (CI runs as root)")
    agent = producing("good")
    path = str(agent.context.slots[SLOT]._socket.path)

    def attempt() -> None:   # returns (exit 0) only when the connect is refused
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            s.connect(path)
        except PermissionError:
            return
        raise AssertionError("another user reached the samplers' socket")

    assert wait_child(as_user(ATTACKER_UID, attempt), timeout=10) == 0
