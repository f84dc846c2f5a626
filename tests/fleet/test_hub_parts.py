"""The hub's pure parts: the bounded SSE parser, targets (URLs, file_sd), the credentials file, the
backoff's bounds, and the frame checks against the snapshot's own types."""

from __future__ import annotations

import json
import os
import random
from dataclasses import replace

import pytest

from gpuflow.collectors.fleet import parse
from gpuflow.collectors.fleet.credentials import parse_credentials, read_credentials
from gpuflow.collectors.fleet.link import MAX_BACKOFF_S, Link
from gpuflow.collectors.fleet.sse_events import SseParser, StreamTooLarge
from gpuflow.collectors.fleet.targets import Target, TargetError, parse_file_sd, parse_url
from snapshots import lane, make_snapshot


# -- SSE -------------------------------------------------------------------------------------------
STREAM = (b"retry: 2000\n\nid: 17-1\nevent: snapshot\ndata: {\"a\": 1}\n\n: ping\n\n"
          b"id: 17-2\r\nevent: snapshot\r\ndata: line one\r\ndata: line two\r\n\r\n"
          b"data:no space\nunknown: field\n\nevent: empty\n\n")


@pytest.mark.parametrize("seed", range(30))
def test_events_come_out_the_same_however_the_bytes_are_cut(seed):
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(STREAM)), rng.randint(0, 12)))
    parser, events = SseParser(max_line=1024), []
    for a, b in zip([0] + cuts, cuts + [len(STREAM)]):
        events += parser.feed(STREAM[a:b])
    assert [(e.event, e.id, e.data) for e in events] == [
        ("snapshot", "17-1", b'{"a": 1}'), ("snapshot", "17-2", b"line one\nline two"),
        ("message", "17-2", b"no space")]
    assert parser.retry_ms == 2000 and parser.comments == 1 and parser.last_id == "17-2"


def test_a_line_or_an_event_over_the_bound_is_refused_before_more_is_held():
    parser = SseParser(max_line=100)
    with pytest.raises(StreamTooLarge):
        for _ in range(1000):
            parser.feed(b"x" * 50)   # a line that never ends
    assert len(parser._buf) <= 200
    parser = SseParser(max_line=100)
    with pytest.raises(StreamTooLarge):
        parser.feed(b"data: " + b"y" * 60 + b"\ndata: " + b"y" * 60 + b"\n")   # two lines, one event
    parser = SseParser(max_line=100)
    assert parser.feed(b"retry: 99999999999999\n\nretry: -5\n\nretry: 12\n\n") == [] and parser.retry_ms == 12


# -- targets ---------------------------------------------------------------------------------------
def test_target_urls():
    assert parse_url("http://gpu-node-1:7717") == Target("http", "gpu-node-1", 7717, "/")
    assert parse_url("HTTPS://GPUS.example.org/gpuflow") == Target("https", "gpus.example.org", 443, "/gpuflow/")
    assert parse_url("http://[::1]:9000/").address == "[::1]:9000"
    assert parse_url("http://[::1]:9000/").fallback_name == "1_9000"
    assert parse_url("http://10.0.0.5:7717").fallback_name == "10.0.0.5_7717"


@pytest.mark.parametrize("bad, why", [
    ("ftp://x:1", "scheme"), ("http://u:p@x:1", "no credentials"), ("http://x:1/?a=1", "no query"),
    ("http://x:1/#t", "no query or fragment"), ("http://:1", "names no host"), ("http://x:99999", "not a URL"),
    ("http://x y:1", "no spaces"), ("http://x:1/a/../b", "path"), ("http://ex%41mple:1", "neither"),
    ("x:1", "scheme"), ("", "expected a URL"),
])
def test_a_bad_target_url_says_what_is_wrong(bad, why):
    with pytest.raises(TargetError, match=why):
        parse_url(bad)


def test_file_sd_groups_with_schemes_and_bounds():
    doc = [{"targets": ["a:1", "b:2"], "labels": {"__scheme__": "https", "job": "gpuflow"}},
           {"targets": ["a:1", "[::1]:3"]}]
    assert parse_file_sd(json.dumps(doc).encode(), "f", 10) == (
        Target("https", "a", 1), Target("https", "b", 2), Target("http", "a", 1), Target("http", "::1", 3))
    for bad, why in (({"targets": []}, "list of target groups"), ([{"targets": ["a"]}], "port is missing"),
                     ([{"targets": ["http://a:1"]}], "host:port"), ([{"targets": ["a:1"], "labels": {"__scheme__": "ftp"}}], "__scheme__"),
                     ([{"targets": [f"h{i}:1" for i in range(11)]}], "more than 10 targets")):
        with pytest.raises(TargetError, match=why):
            parse_file_sd(json.dumps(bad).encode(), "f", 10)
    with pytest.raises(TargetError, match="not JSON"):
        parse_file_sd(b"[" * 100_000, "f", 10)


# -- credentials -----------------------------------------------------------------------------------
def test_credentials_by_target_and_for_every_other():
    creds = parse_credentials(json.dumps({"a:1": "Tok-a-1234567890", "https://b:2/": "Tok-b-1234567890",
                                          "*": "Tok-any-123456789"}).encode(), "c")
    assert creds.token_for(Target("http", "a", 1)) == "Tok-a-1234567890"
    assert creds.token_for(Target("https", "b", 2)) == "Tok-b-1234567890"
    assert creds.token_for(Target("http", "c", 3)) == "Tok-any-123456789"
    assert "Tok" not in repr(creds)
    for bad, why in (([], "JSON object"), ({"a:1": 5}, "a token is text"), ({"a:1": "has space"}, "printable"),
                     ({"nope": "Tok-a-1234567890"}, "host:port")):
        with pytest.raises(ValueError, match=why) as err:
            parse_credentials(json.dumps(bad).encode(), "c")
        assert "has space" not in str(err.value)


def test_a_credentials_file_others_can_read_or_that_is_not_yours_is_refused(tmp_path):
    path = tmp_path / "creds.json"
    path.write_text(json.dumps({"*": "Tok-any-123456789"}))
    path.chmod(0o644)
    with pytest.raises(ValueError, match="other users have access"):
        read_credentials(str(path))
    path.chmod(0o600)
    assert read_credentials(str(path)).default == "Tok-any-123456789"
    os.chown(path, 65534, 65534)
    with pytest.raises(ValueError, match="owned by uid 65534"):
        read_credentials(str(path))


# -- backoff -----------------------------------------------------------------------------------------
class _Hub:
    credentials = None


def test_the_backoff_grows_from_retry_never_below_it_never_past_30_s():
    link = Link(parse_url("http://a:1"), _Hub())
    link.retry_ms = 2000
    for failures in range(40):
        link.failures = failures
        d = link.delay()
        assert min(2.0 * 2 ** failures, MAX_BACKOFF_S) <= d <= MAX_BACKOFF_S
    assert link.delay(wait_at_least=25.0) >= 25.0


# -- frames ------------------------------------------------------------------------------------------
def test_a_real_snapshots_parts_read_back_as_the_same_objects_tagged_with_the_hubs_name():
    snap = make_snapshot(lanes=(lane(13, [1, 2, 3]),))
    plain = json.loads(json.dumps(snap.to_json_dict()))
    devices = parse.devices(plain["devices"], "node-x")
    assert [d.host for d in devices] == ["node-x", "node-x"]
    assert devices == tuple(replace(d, host="node-x") for d in snap.devices)
    traced = parse.traced(plain["traced"], "node-x")
    assert traced == tuple(replace(t, host="node-x", lanes=tuple(replace(l, spans=tuple(l.spans)) for l in t.lanes))
                           for t in snap.traced)


def test_a_text_many_hosts_and_frames_say_is_held_once():
    """A hub of a thousand agents holds each host's latest state: the same GPU model, driver,
    kernel names ... are one object, however many hosts and frames say them (each frame's JSON
    reading makes them anew)."""
    snap = make_snapshot(lanes=(lane(13, [1, 2, 3]),))
    frames = [json.loads(json.dumps(snap.to_json_dict())) for _ in range(3)]
    read = [(parse.devices(f["devices"], f"node-{i}"), parse.traced(f["traced"], f"node-{i}"))
            for i, f in enumerate(frames)]
    assert all(f["devices"][0]["uuid"] is not frames[0]["devices"][0]["uuid"] for f in frames[1:])
    for devices, traced in read[1:]:
        assert devices[0].uuid is read[0][0][0].uuid and devices[0].name is read[0][0][0].name
        assert traced[0].session is read[0][1][0].session and traced[0].name is read[0][1][0].name
