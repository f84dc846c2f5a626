"""``gpuflow hub --srv NAME``: the agents a DNS SRV name lists, from a real DNS server on loopback
(tests/support/dns_responder.py, UDP and TCP), asked again as the answer's TTL says, so an agent
added to DNS is followed and a removed one forgotten; a bad answer (NXDOMAIN, malformed, larger
than the hub reads, another question's id, a compression loop) is one problem line and loses
none of the agents followed; a truncated answer is asked again over TCP. The reader of answers
is also played hostile bytes directly."""

from __future__ import annotations

import asyncio
import concurrent.futures
import struct

import pytest

from dns_responder import DnsResponder, encode_name
from fleet_agents import Agent, Hub, wait_for
from gpuflow.collectors.fleet import srv

NAME = "_gpuflow._tcp.fleet.test"


@pytest.fixture
def dns():
    server = DnsResponder()
    yield server
    server.close()


@pytest.fixture
def agents():
    made: list[Agent] = []

    def make(name: str) -> Agent:
        made.append(Agent(name, interval_ms=200))
        return made[-1]
    yield make
    for a in made:
        a.stop()


@pytest.fixture
def hub_for(dns):
    made: list[Hub] = []

    def make(*args: str) -> Hub:
        made.append(Hub(args=("--srv", NAME, "--srv-resolver", dns.address, *args)))
        return made[-1]
    yield make
    for h in made:
        h.stop()


def srv_problems(hub: Hub) -> list[str]:
    return [p["message"] for p in hub.snapshot()["host"]["problems"] if p["message"].startswith("SRV ")]


def states(hub: Hub) -> dict[str, str]:
    return {n: h["state"] for n, h in hub.hosts().items()}


def test_agents_added_to_dns_are_followed_and_removed_ones_forgotten(dns, agents, hub_for):
    a, b = agents("node-a"), agents("node-b")
    dns.records[NAME] = [("localhost", a.port, 1)]
    hub = hub_for()
    wait_for(lambda: states(hub) == {"node-a": "up"}, 15, what="node-a from DNS")
    dns.records[NAME] = [("localhost", a.port, 1), ("localhost.", b.port, 1)]
    wait_for(lambda: states(hub) == {"node-a": "up", "node-b": "up"}, 10, what="node-b added")
    dns.records[NAME] = [("localhost", b.port, 1)]
    wait_for(lambda: states(hub) == {"node-b": "up"}, 10, what="node-a removed")
    assert srv_problems(hub) == []
    asked = dns.questions["udp"]
    wait_for(lambda: dns.questions["udp"] >= asked + 2, 5, what="the name asked again at its TTL")


BAD_ANSWERS = [
    ("nxdomain", "NXDOMAIN"),
    ("malformed", "runs past the end of the answer"),
    ("huge", "larger than 4096 bytes"),
    ("wrong_id", "datagrams with another id ignored"),
    ("loop", "does not point backwards"),
]


def test_a_bad_answer_is_one_line_and_loses_no_agent(dns, agents, hub_for):
    b = agents("node-b")
    dns.records[NAME] = [("localhost", b.port, 1)]
    hub = hub_for()
    wait_for(lambda: states(hub) == {"node-b": "up"}, 15, what="node-b from DNS")
    for mode, says in BAD_ANSWERS:
        dns.mode = mode
        line = wait_for(lambda: [p for p in srv_problems(hub) if says in p], 15, what=f"the {mode} line")[0]
        assert line.startswith(f"SRV {NAME}: ") and line.endswith("following the 1 agents it listed before")
        assert "\n" not in line and "localhost" not in line   # says what was wrong, not what was sent
        assert states(hub) == {"node-b": "up"}, mode
    dns.mode = "ok"
    wait_for(lambda: srv_problems(hub) == [], 10, what="the problem gone with a good answer")
    assert states(hub) == {"node-b": "up"}


def test_a_truncated_answer_is_asked_again_over_tcp(dns, agents, hub_for):
    a = agents("node-a")
    dns.records[NAME] = [("localhost", a.port, 30)]
    dns.mode = "truncated"
    hub = hub_for()
    wait_for(lambda: states(hub) == {"node-a": "up"}, 15, what="node-a from the TCP answer")
    assert dns.questions["tcp"] >= 1 and srv_problems(hub) == []


def test_no_record_follows_none_and_says_so(dns, hub_for):
    dns.records[NAME] = []
    hub = hub_for()
    wait_for(lambda: any("no agent is listed" in p for p in srv_problems(hub)), 10, what="the line")
    assert states(hub) == {}


def test_bad_srv_flags_stop_the_hub_with_one_line():
    for args, says in ((("--srv", "10.0.0.1"), "a DNS name"), (("--srv", "bad name!"), "neither a DNS name"),
                       (("--srv", NAME, "--srv-resolver", "dns.example:53"), "an IP address"),
                       (("--srv", NAME, "--srv-resolver", "127.0.0.1:99999"), "1 to 65535")):
        with pytest.raises(AssertionError) as failed:
            Hub(args=args)
        assert says in str(failed.value) and "--srv" in str(failed.value), args


def message(qid: int, answers: bytes, count: int, flags: int = 0x8580) -> bytes:
    return (struct.pack("!HHHHHH", qid, flags, 1, count, 0, 0) + encode_name(NAME)
            + struct.pack("!HH", srv.TYPE_SRV, srv.CLASS_IN) + answers)


def record(target: str, port: int, ttl: int = 60, owner: bytes | None = None) -> bytes:
    rdata = struct.pack("!HHH", 1, 1, port) + encode_name(target)
    return (owner or encode_name(NAME)) + struct.pack("!HHIH", srv.TYPE_SRV, srv.CLASS_IN, ttl, len(rdata)) + rdata


def test_the_reader_takes_records_and_the_smallest_ttl():
    found, ttl = srv.parse_answer(message(7, record("gpu-1.fleet.test", 7717, 90) + record("GPU-2.fleet.test.", 7718, 30),
                                          2), 7, NAME)
    assert found == [("gpu-1.fleet.test", 7717), ("gpu-2.fleet.test", 7718)] and ttl == 30
    pointer = struct.pack("!H", 0xC00C)   # the owner name compressed to the question's
    found, _ = srv.parse_answer(message(7, record("gpu-1.fleet.test", 7717, owner=pointer), 1), 7, NAME)
    assert found == [("gpu-1.fleet.test", 7717)]
    assert srv.parse_answer(message(7, record("", 7717), 1), 7, NAME) == ([], 60)   # "." : no service


@pytest.mark.parametrize("raw, says", [
    (b"\x00\x07", "shorter than a DNS header"),
    (message(8, b"", 0), "not an answer to the question asked"),
    (message(7, b"", 0, flags=0x8582), "SERVFAIL"),
    (message(7, record("gpu-1.fleet.test", 0), 1), "port 0"),
    (message(7, record("gpu_1!.fleet.test", 7717), 1), "not a DNS name"),
    (message(7, record("gpu-1.fleet.test", 7717), 2), "runs past the end"),
    (message(7, struct.pack("!H", 0xC0FF) + b"\0" * 10, 1), "does not point backwards"),
    (message(7, b"\x7f" + b"a" * 20, 1), "unknown kind"),
    (message(7, (b"\x3f" + b"a" * 63) * 5 + b"\0" + b"\0" * 10, 1), "past 255 bytes"),
])
def test_the_reader_refuses_hostile_answers_in_one_line(raw, says):
    with pytest.raises(srv.SrvError) as refused:
        srv.parse_answer(raw, 7, NAME)
    assert says in str(refused.value)


def test_a_silent_resolver_is_said_so_within_the_bound(dns):
    dns.mode = "silent"
    with pytest.raises(srv.SrvError, match="no answer from the resolver within 2 s"):
        run_alone(srv.resolve(srv.SrvName(NAME), ("127.0.0.1", dns.port)))


def run_alone(coro):
    """``asyncio.run(coro)`` on a thread of its own: the session's Playwright (tests/conftest.py)
    keeps an event loop running on the main thread of a test process that drove a browser before."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()
