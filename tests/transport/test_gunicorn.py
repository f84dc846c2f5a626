"""A real gunicorn process (gthread, one worker) fed by the fake collector, real HTTP/SSE clients.

Checks what only a real server shows: the lazy agent start inside the worker, chunked SSE
framing, concurrent streams, disconnect cleanup, the cap, the Host check and the token flow over
the wire, and a graceful SIGTERM with streams open (with and without gunicorn_conf's hooks).
"""

from __future__ import annotations

import http.client
import json
import threading
import time

import pytest

from gpuflow.transport.wire import StreamReader
from servers import Gunicorn, SseClient, http_get

pytestmark = pytest.mark.slow

TOKEN = "tok-" + "x" * 40


@pytest.fixture(scope="module")
def server():
    g = Gunicorn(env={"GPUFLOW_FAKE_RATE_HZ": "10", "GPUFLOW_PING_S": "0.5"})
    yield g
    g.stop()


@pytest.fixture(scope="module")
def secured():
    g = Gunicorn(env={"GPUFLOW_FAKE_RATE_HZ": "10", "GPUFLOW_TOKEN": TOKEN,
                      "GPUFLOW_MAX_STREAMS": "3"}, conf=True)
    yield g
    g.stop()


def streams_open(port: int, headers: dict | None = None) -> int:
    status, _, body = http_get(port, "/healthz", headers)
    return json.loads(body)["streams"]


def wait_for(predicate, timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.mark.serial   # a duration assert: the parallel pass's load once took it to 1.06 s
def test_first_event_within_a_second_of_connecting(server):
    c = SseClient(server.port)  # the very first request: it also starts the agent in the worker
    ev = c.next_frame()
    elapsed = time.monotonic() - c.opened_at
    c.close()
    assert elapsed < 1.0, elapsed
    assert c.status == 200
    assert c.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert c.headers["cache-control"] == "no-cache" and c.headers["x-accel-buffering"] == "no"
    assert c.headers["transfer-encoding"] == "chunked"
    assert ev.retry == 2000 and ev.event == "snapshot"
    assert ev.json["frame"] == "full" and ev.json["seq"] == ev.seq
    assert ev.json["sources"] == ["fake"] and ev.json["traced"][0]["lanes"]


def test_deltas_on_the_wire_chain_and_carry_every_new_span_exactly_once(server):
    c = SseClient(server.port)
    reader = StreamReader()  # decodes the compact form; raises on a delta that does not chain
    full = reader.read(c.next_frame().json)
    have = {s["seq"] for t in full["traced"] for l in t["lanes"] for s in l["spans"]}
    last_seq, new = full["seq"], []
    for _ in range(8):
        ev = c.next_frame()
        assert ev.json["frame"] == "delta" and ev.json["base_seq"] == last_seq
        d = reader.read(ev.json)
        assert d["devices"] and d["processes"] and d["traced"][0]["kernels"]
        for t in d["traced"]:
            for lane in t["lanes"]:
                assert lane["spans_elided"] == lane["executions"] - min(lane["executions"], 64)
                assert lane["spans_skipped"] == 0  # a light load: every new span travels
                new.extend(s["seq"] for s in lane["spans"])
        last_seq = d["seq"]
    c.close()
    assert not have & set(new) and len(new) == len(set(new))
    # the fake numbers spans consecutively across lanes: nothing was skipped
    assert sorted(new) == list(range(max(have) + 1, max(have) + 1 + len(new)))


def test_last_event_id_reconnect_gets_a_full_frame(server):
    c = SseClient(server.port)
    c.next_frame()
    last = c.next_frame()
    c.close()
    again = SseClient(server.port, headers={"Last-Event-ID": last.id})
    ev = again.next_frame()
    again.close()
    assert ev.json["frame"] == "full" and ev.seq >= last.seq
    assert ev.id.split("-")[0] == last.id.split("-")[0]  # same agent boot


def test_fifty_concurrent_streams_all_receive_frames_and_clean_up(server):
    assert wait_for(lambda: streams_open(server.port) == 0)  # earlier tests' streams are gone
    clients = [SseClient(server.port) for _ in range(50)]
    try:
        firsts = [c.next_frame() for c in clients]
        seconds = [c.next_frame() for c in clients]
        assert all(f.json["frame"] == "full" for f in firsts)
        assert all(s.seq > f.seq for f, s in zip(firsts, seconds))
        assert streams_open(server.port) == 50
    finally:
        for c in clients:
            c.close()
    assert wait_for(lambda: streams_open(server.port) == 0), streams_open(server.port)


def test_keepalive_ping_comment(tmp_path):
    g = Gunicorn(env={"GPUFLOW_FAKE_RATE_HZ": "0", "GPUFLOW_PING_S": "0.3"})
    try:
        c = SseClient(g.port)
        c.next_frame()
        t0 = time.monotonic()
        ev = c.next_event()
        c.close()
        assert ev.comments == ["ping"] and ev.data == ""
        assert time.monotonic() - t0 < 1.5
    finally:
        g.stop()


@pytest.mark.parametrize("path", ["/", "/api/snapshot", "/api/stream", "/metrics", "/healthz"])
def test_foreign_host_is_403(server, path):
    status, headers, body = http_get(server.port, path, {"Host": "attacker.example"})
    assert status == 403 and b"Host" in body
    assert headers["x-content-type-options"] == "nosniff"


def test_post_is_405(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    conn.request("POST", "/api/snapshot", body=b"{}", headers={"Host": "localhost"})
    r = conn.getresponse()
    assert r.status == 405 and r.getheader("Allow") == "GET, HEAD"
    conn.close()


def test_snapshot_and_metrics_over_http(server):
    status, headers, body = http_get(server.port, "/api/snapshot")
    assert status == 200 and headers["cache-control"] == "no-store"
    host = json.loads(body)["host"]["name"]   # the host's name in the fleet (NODE_NAME or the hostname)
    status, headers, body = http_get(server.port, "/metrics")
    text = body.decode()
    assert status == 200
    assert f'gpuflow_gpu_utilization_ratio{{Hostname="{host}",gpu="0",name="GPUFlow Fake GPU",' in text
    assert "gpuflow_process_" not in text


def test_token_flow_end_to_end(secured):
    port = secured.port
    assert http_get(port, "/api/snapshot")[0] == 401
    assert SseClient(port).status == 401
    status, headers, _ = http_get(port, f"/?token={TOKEN}")
    assert status == 200 and "set-cookie" not in headers   # the page takes no token, sets no cookie
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    c = SseClient(port, headers=bearer)
    assert c.status == 200 and c.next_frame().json["frame"] == "full"
    c.close()
    assert http_get(port, "/metrics", bearer)[0] == 200
    assert http_get(port, "/metrics")[0] == 401
    assert http_get(port, "/api/snapshot", {"Authorization": "Bearer wrong"})[0] == 401


def test_stream_cap_answers_503_with_retry_after(secured):
    port = secured.port
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert wait_for(lambda: streams_open(port, bearer) == 0)
    held = [SseClient(port, headers=bearer) for _ in range(3)]
    try:
        for c in held:
            c.next_frame()
        over = SseClient(port, headers=bearer)
        assert over.status == 503 and over.headers["retry-after"].isdigit()
        over.close()
        held.pop().close()
        assert wait_for(lambda: streams_open(port, bearer) == 2)
        again = SseClient(port, headers=bearer)
        assert again.status == 200
        held.append(again)
    finally:
        for c in held:
            c.close()


@pytest.mark.parametrize("conf", [False, True], ids=["plain", "gunicorn_conf"])
def test_graceful_sigterm_with_open_streams(tmp_path, conf):
    stop_file = tmp_path / "stopped"
    g = Gunicorn(env={"GPUFLOW_FAKE_RATE_HZ": "10", "GPUFLOW_FAKE_STOP_FILE": str(stop_file),
                      "GPUFLOW_MAX_STREAMS": "3"}, threads=6, conf=conf)
    clients = [SseClient(g.port) for _ in range(3)]
    for c in clients:
        c.next_frame()
    ended: dict[int, int | None] = {}

    def read_to_the_end(i: int, c: SseClient) -> None:
        """A browser's part: read on, and close at the end of the stream (gunicorn's graceful
        close waits up to 2 s for the client to close: one that reads only later makes it wait)."""
        for n in range(100):
            if c.next_event() is None:
                ended[i] = n
                break
        else:
            ended[i] = None
        c.close()

    readers = [threading.Thread(target=read_to_the_end, args=(i, c)) for i, c in enumerate(clients)]
    for t in readers:
        t.start()
    took = g.stop(timeout=10)
    out = g.output()
    for t in readers:
        t.join(10)
    assert took < 3.0, (took, out)
    assert g.proc.returncode == 0, out
    # every stream ended cleanly (no hang): EOF after at most a few frames
    assert sorted(ended) == [0, 1, 2] and None not in ended.values(), ended
    assert stop_file.read_text() == "stopped\n"  # the agent was stopped at worker exit
    # post_worker_init ran (only with the conf file): it warns that 6 threads are too few
    assert ("too few threads" in out) is conf, out
