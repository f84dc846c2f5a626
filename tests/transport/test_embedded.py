"""The embedded threaded server (gpuflow watch/run): same wire checks, plus bind errors, prompt
shutdown with open streams, and no interference with signals or child processes."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from gpuflow.core.agent import Agent
from gpuflow.core.context import AgentConfig
from gpuflow.core.plugins import get_plugin_manager
from gpuflow.transport.app import AppSettings, create_app
from gpuflow.transport.server import EmbeddedServer, PortInUseError, ServerStartError
from servers import FAKE_ENV, SseClient, http_get

TOKEN = "embedded-token-123"


def make_app(**settings):
    pm = get_plugin_manager(["gpuflow.testing.fake_collector"], environ=dict(FAKE_ENV))
    agent = Agent(AgentConfig(options={"fake": {"rate_hz": 10}}), pm)
    settings.setdefault("poll_s", 0.1)
    return create_app(agent, settings=AppSettings(**settings))


@pytest.fixture
def served(request):
    app = make_app(**getattr(request, "param", {}))
    server = EmbeddedServer(app, "127.0.0.1", 0)
    server.serve_in_thread()
    yield server
    server.shutdown()
    app.close()


def test_port_zero_gives_the_real_port_and_url(served):
    assert served.port > 0 and served.url == f"http://127.0.0.1:{served.port}/"
    assert http_get(served.port, "/healthz")[0] == 200


def test_first_event_within_a_second_then_deltas(served):
    c = SseClient(served.port)  # the first request starts the agent lazily
    first = c.next_frame()
    assert time.monotonic() - c.opened_at < 1.0
    second = c.next_frame()
    c.close()
    assert c.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert first.retry == 2000 and first.json["frame"] == "full"
    assert second.json["frame"] == "delta" and second.json["base_seq"] == first.seq


def test_last_event_id_gets_full(served):
    c = SseClient(served.port)
    ev = c.next_frame()
    c.close()
    again = SseClient(served.port, headers={"Last-Event-ID": ev.id})
    assert again.next_frame().json["frame"] == "full"
    again.close()


def test_twenty_concurrent_streams(served):
    """Each of twenty streams gets a full frame, then deltas on what it received. A stream whose
    client fell behind (its thread woke after the agent had published twice) gets a full frame
    after the gap instead, as the protocol says: never a delta on a frame it did not receive."""
    clients = [SseClient(served.port) for _ in range(20)]
    try:
        last = [c.next_frame() for c in clients]
        assert all(f.json["frame"] == "full" for f in last)
        for client, received in zip(clients, last):
            for _ in range(10):  # a delta within ten frames, however loaded the machine
                frame = client.next_frame()
                assert frame.seq > received.seq
                if frame.json["frame"] == "delta":
                    assert frame.json["base_seq"] == received.seq
                    break
                assert frame.json["frame"] == "full" and frame.seq > received.seq + 1
                received = frame
            else:
                raise AssertionError("ten frames and not one delta")
    finally:
        for c in clients:
            c.close()


@pytest.mark.parametrize("served", [{"max_streams": 2}], indirect=True)
def test_cap(served):
    held = [SseClient(served.port) for _ in range(2)]
    for c in held:
        c.next_frame()
    over = SseClient(served.port)
    assert over.status == 503 and over.headers["retry-after"] == "5"
    for c in held + [over]:
        c.close()


def test_foreign_host(served):
    assert http_get(served.port, "/api/stream", {"Host": "attacker.example"})[0] == 403


@pytest.mark.parametrize("served", [{"token": TOKEN}], indirect=True)
def test_token_flow(served):
    status, headers, _ = http_get(served.port, f"/?token={TOKEN}")
    assert status == 200 and "set-cookie" not in headers   # the page takes no token, sets no cookie
    c = SseClient(served.port, headers={"Authorization": f"Bearer {TOKEN}"})
    assert c.status == 200 and c.next_frame().json["frame"] == "full"
    c.close()
    assert SseClient(served.port).status == 401
    assert http_get(served.port, "/metrics", {"Authorization": f"Bearer {TOKEN}"})[0] == 200


def test_shutdown_is_prompt_with_streams_open():
    app = make_app()
    server = EmbeddedServer(app, "127.0.0.1", 0)
    server.serve_in_thread()
    clients = [SseClient(server.port) for _ in range(5)]
    for c in clients:
        c.next_frame()
    t0 = time.monotonic()
    server.shutdown()
    assert time.monotonic() - t0 < 1.5
    assert app.state.slots.open == 0
    for c in clients:
        while c.next_event() is not None:
            pass
        c.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=1).close()
    server.shutdown()  # idempotent
    app.close()


def test_shutdown_returns_once_every_request_is_done_with_its_connection():
    """A request still being answered when shutdown begins (here its answer's last part comes
    0.3 s later; a stream's thread is the same after it gave its slot back) is waited for, within
    drain_s: none is left in progress when shutdown returns."""
    started = threading.Event()

    def slow(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])
        started.set()
        yield b"first"
        time.sleep(0.3)
        yield b"last"

    server = EmbeddedServer(slow, "127.0.0.1", 0)
    server.serve_in_thread()
    got = []
    client = threading.Thread(target=lambda: got.append(http_get(server.port, "/")))
    client.start()
    assert started.wait(5)
    t0 = time.monotonic()
    server.shutdown()
    took = time.monotonic() - t0
    assert server.active_connections == 0 and took < server.drain_s + 0.5, took
    client.join(5)
    assert got and got[0][0] == 200


def test_port_in_use_is_a_one_line_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(PortInUseError) as err:
            EmbeddedServer(make_app(), "127.0.0.1", port)
    msg = str(err.value)
    assert str(port) in msg and "in use" in msg and "\n" not in msg
    assert isinstance(err.value, ServerStartError)


def test_unbindable_address_is_a_clear_error():
    with pytest.raises(ServerStartError, match="cannot listen on 192.0.2.1"):
        EmbeddedServer(make_app(), "192.0.2.1", 0)  # TEST-NET-1: not on this machine


def test_ipv6_loopback():
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    try:
        server = EmbeddedServer(make_app(), "::1", 0)
    except ServerStartError as exc:
        pytest.skip(f"no IPv6 loopback here: {exc}")
    server.serve_in_thread()
    try:
        assert server.url == f"http://[::1]:{server.port}/"
        assert http_get(server.port, "/healthz", host="::1",
                        headers={"Host": f"[::1]:{server.port}"})[0] == 200
    finally:
        server.shutdown()
        server.app.close()


def test_leaves_signals_and_children_alone():
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD)}
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(7)"])
    app = make_app()
    server = EmbeddedServer(app, "127.0.0.1", 0)
    server.serve_in_thread()
    c = SseClient(server.port)
    c.next_frame()
    time.sleep(0.3)  # the child has exited by now; nobody but us may reap it
    c.close()
    server.shutdown()
    app.close()
    assert child.wait(timeout=5) == 7
    assert {s: signal.getsignal(s) for s in before} == before
    assert not [t for t in threading.enumerate() if t.name == "gpuflow-http"]
