"""GET /api/window?format=columns: the compact columnar form (gpuflow.transport.window_columns).

Through a real agent and app: the columnar answer holds exactly what the JSON answer holds (the
reader's document, its columns as lists, equals the JSON), blocks lie where the layout says (read
here by the documented offsets, without the reader), the same 400s, token and Host checks as the
JSON form, and a bad ``format`` is a 400 naming it. The reader refuses every malformed body with
one clear error, allocating nothing beyond what the body holds.
"""

from __future__ import annotations

import json
import random
import struct
from array import array

import pytest

import gpuflow
from gpuflow.core.recorded import LaneWindow, ProcessWindow, SpanBuckets, SpanColumns, WindowPart
from gpuflow.transport import window_columns as W

from .test_recorded_api import Broken, Retaining, client

INT64 = (-(1 << 63), (1 << 63) - 1)


def as_lists(value):
    if isinstance(value, dict):
        return {key: as_lists(v) for key, v in value.items()}
    if isinstance(value, list):
        return [as_lists(v) for v in value]
    return value.tolist() if isinstance(value, array) else value


def random_columns(rng: random.Random, n: int) -> SpanColumns:
    def column(lo=-1, hi=1 << 40):
        return array("q", [rng.choice((lo, hi, *INT64, rng.randrange(lo, hi))) for _ in range(n)])
    return SpanColumns(**{name: column() for name in W.SPAN_COLUMNS}, names=("gemm", "é∂ kernel", ""))


class Many:
    """Two processes, lanes of every kind: empty, exact with int64 extremes, reduced."""

    @gpuflow.hookimpl
    def query_window(self, context, start_s, end_s, pid, width_px):
        rng = random.Random(5)
        lanes = (LaneWindow(0, 1, 7, "compute", 3_000, spans=random_columns(rng, 3_000)),
                 LaneWindow(0, 1, 9, "empty", 0, spans=SpanColumns()),
                 LaneWindow(1, 1, 13, "dense", 10 ** 6, buckets=SpanBuckets(
                     start_us=1e6, width_us=0.5, count=array("q", range(1000)), busy_ns=array("q", [7] * 1000))))
        return WindowPart(source="many", processes=(
            ProcessWindow(pid=1, session="a", name="one", retained_from_s=None, retained_to_s=None, lanes=lanes,
                          complete=True),
            ProcessWindow(pid=2, session="b", name=None, retained_from_s=0.25, retained_to_s=3.5,
                          lanes=lanes[::-1], complete=False)))


def both_forms(c, **params):
    params = {"from": "1", "to": "2", **params}
    as_json = c.simulate_get("/api/window", params=params)
    columnar = c.simulate_get("/api/window", params={**params, "format": "columns"})
    assert as_json.status_code == columnar.status_code == 200, (as_json.text, columnar.status_code)
    assert columnar.headers["content-type"] == W.MEDIA_TYPE
    return as_json, columnar


@pytest.mark.parametrize("plugins", [(("rec", Retaining()),), (("many", Many()), ("broken", Broken())), ()])
def test_the_columnar_answer_holds_exactly_the_json_answer(plugins):
    c = client(*plugins)
    for params in ({}, {"width": "800"}, {"pid": "42", "width": "1"}):
        as_json, columnar = both_forms(c, **params)
        assert as_lists(W.read(columnar.content)) == json.loads(as_json.content)
        explicit = c.simulate_get("/api/window", params={"from": "1", "to": "2", **params, "format": "json"})
        assert explicit.content == as_json.content   # format=json is the default, byte for byte


def test_the_blocks_lie_where_the_layout_says():
    """Read by the module docstring's offsets alone: D + o + 8·n·k, little-endian int64."""
    body = both_forms(client(("many", Many())))[1].content
    magic, version, header_len, reserved = struct.unpack_from("<4sIII", body, 0)
    assert (magic, version, reserved) == (b"GFWC", 1, 0)
    header = json.loads(body[16:16 + header_len])
    assert (header["format"], header["dtype"]) == ("columns", "<i8")
    assert header["span_columns"] == list(W.SPAN_COLUMNS) and header["bucket_columns"] == ["count", "busy_ns"]
    data = 16 + header_len + (-(16 + header_len) % 8)
    assert data % 8 == 0 and not any(body[16 + header_len:data])
    expected = Many().query_window(None, 1, 2, None, None).processes
    end = data
    for proc, want in zip(header["processes"], expected):
        for lane, want_lane in zip(proc["lanes"], want.lanes):
            if want_lane.spans is not None:
                n, o = lane["spans"]["rows"], lane["spans"]["offset"]
                for k, name in enumerate(header["span_columns"]):
                    at = data + o + 8 * n * k
                    assert list(struct.unpack_from(f"<{n}q", body, at)) == list(getattr(want_lane.spans, name))
                end = data + o + 8 * n * 13
            else:
                n, o = lane["buckets"]["rows"], lane["buckets"]["offset"]
                assert list(struct.unpack_from(f"<{n}q", body, data + o)) == list(want_lane.buckets.count)
                assert list(struct.unpack_from(f"<{n}q", body, data + o + 8 * n)) == list(want_lane.buckets.busy_ns)
                end = data + o + 16 * n
    assert end == len(body)


def test_a_bad_format_is_400_naming_it_never_echoing_it():
    c = client(("rec", Retaining()))
    for value in ("xml", "COLUMNS", "columns2", ""):
        r = c.simulate_get("/api/window", params={"from": "1", "to": "2", "format": value})
        assert r.status_code == 400 and "format must be one of json, columns" in r.json["error"]
        if len(value) > 2:
            assert value not in r.text
    # the range's own checks come first, as in the JSON form
    r = c.simulate_get("/api/window", params={"from": "3", "to": "2", "format": "columns"})
    assert r.status_code == 400 and "to must be after from" in r.json["error"]


def test_the_columnar_form_needs_the_token_and_an_allowed_host_like_every_data_route():
    token = "s3cr3t-t0ken-for-the-tests-0123456789"
    c = client(("rec", Retaining()), token=token)
    params = {"from": "1", "to": "2", "format": "columns"}
    refused = c.simulate_get("/api/window", params=params)
    assert refused.status_code == 401 and not refused.content.startswith(W.MAGIC)
    bearer = {"Authorization": f"Bearer {token}"}
    wrong_host = c.simulate_get("/api/window", params=params, headers={**bearer, "Host": "evil.example"})
    assert wrong_host.status_code in (400, 403) and not wrong_host.content.startswith(W.MAGIC)
    ok = c.simulate_get("/api/window", params=params, headers=bearer)
    assert ok.status_code == 200 and W.read(ok.content)["processes"][0]["pid"] == 42
    head = c.simulate_head("/api/window", params=params, headers=bearer)
    assert head.status_code == 200 and head.headers["content-type"] == W.MEDIA_TYPE


def test_a_non_finite_number_in_the_header_is_null_as_in_the_json_form():
    nan_lane = LaneWindow(0, 1, 7, "x", 5, buckets=SpanBuckets(start_us=float("nan"), width_us=2.5,
                                                                count=array("q", [5]), busy_ns=array("q", [1])))
    part = WindowPart(source="odd", processes=(ProcessWindow(pid=3, session="s", name=None, retained_from_s=float("nan"),
                                                             retained_to_s=None, lanes=(nan_lane,), complete=True),))

    class Odd:
        @gpuflow.hookimpl
        def query_window(self, context, start_s, end_s, pid, width_px):
            return part

    as_json, columnar = both_forms(client(("odd", Odd())), width="1")
    doc = W.read(columnar.content)
    assert as_lists(doc) == json.loads(as_json.content)
    assert doc["processes"][0]["retained_from"] is None and doc["processes"][0]["lanes"][0]["buckets"]["start_us"] is None


def test_an_empty_window_is_a_well_formed_body():
    body = both_forms(client())[1].content
    doc = W.read(body)
    assert doc["processes"] == [] and doc["sources"] == [] and len(body) % 8 == 0


def good_body() -> bytes:
    return both_forms(client(("rec", Retaining())), width="800")[1].content


def with_header(body: bytes, change) -> bytes:
    """``body`` with its header rewritten by ``change`` (its column data kept, the padding redone)."""
    header_len = struct.unpack_from("<I", body, 8)[0]
    data = 16 + header_len + (-(16 + header_len) % 8)
    header = json.loads(body[16:16 + header_len])
    change(header)
    text = json.dumps(header).encode()
    return struct.pack("<4sIII", b"GFWC", 1, len(text), 0) + text + bytes(-(16 + len(text)) % 8) + body[data:]


def lanes(header):
    return header["processes"][0]["lanes"]


@pytest.mark.parametrize("mangle,message", [
    (lambda b: b[:10], "shorter than its preamble"),
    (lambda b: b"GFWX" + b[4:], "bad magic"),
    (lambda b: b[:4] + struct.pack("<I", 2) + b[8:], "version 2"),
    (lambda b: b[:8] + struct.pack("<I", len(b)) + b[12:], "beyond the body"),
    (lambda b: b[:8] + struct.pack("<I", W.MAX_HEADER_BYTES + 1) + b[12:], "beyond the body or the limit"),
    (lambda b: b[:16] + b"\xff" + b[17:], "not UTF-8 JSON"),
    (lambda b: b + b"\0" * 8, "does not end where its last block ends"),
    (lambda b: b[:-8], "past the body"),
    (lambda b: with_header(b, lambda h: h.update(dtype="<i4")), "int64 columns"),
    (lambda b: with_header(b, lambda h: h["span_columns"].reverse()), "int64 columns"),
    (lambda b: with_header(b, lambda h: h.update(processes={})), "processes must be a list"),
    (lambda b: with_header(b, lambda h: lanes(h)[0].update(buckets={"rows": 0, "offset": 0})), "spans or buckets"),
    (lambda b: with_header(b, lambda h: lanes(h)[0]["spans"].update(offset=8)), "where the previous lane's end"),
    (lambda b: with_header(b, lambda h: lanes(h)[0]["spans"].update(rows=-1)), "non-negative whole number"),
    (lambda b: with_header(b, lambda h: lanes(h)[0]["spans"].update(rows=1.5)), "non-negative whole number"),
    (lambda b: with_header(b, lambda h: lanes(h)[1]["buckets"].update(rows=1 << 60)), "past the body"),
    (lambda b: with_header(b, lambda h: lanes(h)[0]["spans"].update(names="gemm")), "list of names"),
])
def test_the_reader_refuses_a_malformed_body_in_one_line(mangle, message):
    body = mangle(good_body())
    with pytest.raises(W.ColumnsFormatError, match=message):
        W.read(body)


def test_the_reader_refuses_non_zero_padding():
    body = good_body()
    header_len = struct.unpack_from("<I", body, 8)[0]
    pad = -(16 + header_len) % 8
    if not pad:   # make room for padding: one more space in the header
        body = with_header(body, lambda h: h.update(sources=h["sources"] + [""]))
        header_len = struct.unpack_from("<I", body, 8)[0]
        pad = -(16 + header_len) % 8
    assert pad
    bad = bytearray(body)
    bad[16 + header_len] = 1
    with pytest.raises(W.ColumnsFormatError, match="padding"):
        W.read(bytes(bad))


def test_the_reader_does_not_touch_the_body_it_is_given():
    body = bytearray(good_body())
    before = bytes(body)
    doc = W.read(body)
    body[-1] ^= 0xFF   # the columns are copies: changing the body afterwards changes nothing read
    assert bytes(body) != before and as_lists(doc) == as_lists(W.read(before))
