"""The page's reader of the stream (gpuflow/ui/stream.js, run in Chromium) and the agent's own
(gpuflow.transport.wire.StreamReader) read the agent's encoding of the same snapshots to the same
plain frames, refuse the same broken ones, and see the same constants.

The frames are FrameEncoder's for generated histories: traced processes coming, going, coming
back and reusing a pid; spans of every shape (kernels with and without geometry, copies and
memsets in every direction, spans outside the usual shapes); kernel tables with ties; deltas
over a span budget (spans_skipped), and a full frame in the middle, as a client that fell
behind gets. tests/transport/test_wire_page.py reads the same constants from the module's text.
"""

from __future__ import annotations

import json
import random

import pytest

from gpuflow.core.board import SnapshotBoard
from gpuflow.core.snapshot import (
    SCHEMA_VERSION, TRANSFER_DIRECTIONS, CopyRate, KernelLaunch, KernelStat, Lane, Span, TracedDevice,
    TracedProcess, kernel_order,
)
from gpuflow.transport import wire
from gpuflow.transport.frames import FrameEncoder
from gpuflow.transport.wire import StreamReader
from snapshots import make_snapshot

pytestmark = pytest.mark.browser

T0 = 1_764_473_412_000_000
NAMES = ["void k<float>(float*)", "ampere_sgemm_128x64_tn", "ß∂ƒ", ""]

READ_ALL = """async ([url, frames]) => {
  const m = await import(url);
  let state = m.nothingRead;
  const out = [];
  for (const f of frames) {
    try { const r = m.read(state, f); state = r.state; out.push(r.frame); }
    catch (e) { out.push({ refused: e instanceof m.FrameError ? e.why : String(e) }); }
  }
  return out;
}"""


@pytest.fixture
def reader_page(page, agent):
    """A page of the agent's origin (no UI running in it) and the URL of its stream.js."""
    page.goto(agent.url + "healthz")
    return page, agent.url + "stream.js"


def read_in_page(reader_page, frames: list[dict]) -> list[dict]:
    page, url = reader_page
    return page.evaluate(READ_ALL, [url, frames])


def body(event: bytes) -> dict:
    (data,) = [l[len("data: "):] for l in event.decode().split("\n") if l.startswith("data: ")]
    return json.loads(data)


def random_span(rng: random.Random, seq: int) -> Span:
    start = T0 + seq * 50 + rng.randint(0, 20)
    shape = rng.random()
    if shape < 0.5:
        geometry = rng.choice([None, (256, 1, 1), (16, 32, 8)])
        return Span(seq=seq, kind="kernel", start_us=start, dur_ns=rng.randint(1, 10**7),
                    name=rng.choice(NAMES + [None]), grid=geometry,
                    block=None if geometry is None else (128, rng.choice((1, 2)), 1))
    if shape < 0.85:
        kind = rng.choice(("memcpy", "memset"))
        return Span(seq=seq, kind=kind, start_us=start, dur_ns=rng.randint(1, 10**6),
                    bytes=rng.choice((None, 4096, 1 << 40)),
                    direction="memset" if kind == "memset" else rng.choice(TRANSFER_DIRECTIONS))
    # outside the documented shapes: an unknown kind, a copy with a name, a kernel with bytes
    kind = rng.choice(("graph", "memcpy", "kernel"))
    return Span(seq=seq, kind=kind, start_us=start, dur_ns=rng.randint(1, 1000), name=rng.choice(NAMES),
                grid=rng.choice((None, (4, 1, 1))), bytes=rng.choice((None, 8)),
                direction=rng.choice((None, "h2d", "sideways")))


def history(seed: int) -> list:
    """Snapshots in which up to three traced processes come, go, come back, reuse their pid
    (a new session, or records going down) or stay as they were."""
    rng = random.Random(seed)
    out, alive = [], {}
    for seq in range(1, 11):
        if rng.random() < 0.8:   # else: the same contents as the snapshot before
            for pid in (101, 102, 103):
                r = rng.random()
                if r < 0.2:
                    alive.pop(pid, None)
                elif pid not in alive or r < 0.3:   # new, or a new process reusing the pid
                    alive[pid] = {"session": rng.choice(("s1", "s2")), "executions": {}, "records": 0,
                                  "kernels": {}, "lanes": rng.randint(0, 3)}
                p = alive.get(pid)
                if p is None:
                    continue
                p["records"] += rng.randint(0, 40)
                for j in range(p["lanes"]):
                    p["executions"][j] = p["executions"].get(j, 0) + rng.randint(0, 30)
                for name in rng.sample(NAMES, rng.randint(0, 2)):
                    k = p["kernels"].setdefault(name, [0, 0])
                    k[0] += rng.randint(1, 3)
                    k[1] += rng.choice((100, 200))
                    if rng.random() < 0.4:   # its launch figures change now and then
                        p.setdefault("occupancy", {})[name] = rng.choice((12.5, 50.0, None))
                p["busy"] = rng.choice((None, 0.0, 99.5))
        traced = []
        for pid, p in sorted(alive.items()):
            lanes = []
            for j in range(p["lanes"]):
                n = p["executions"].get(j, 0)
                kept = range(max(1, n - 24), n + 1) if n else ()
                lane_rng = random.Random(f"{seed}-{pid}-{p['session']}-{j}")   # a span never changes
                spans = {s: random_span(lane_rng, s) for s in range(1, n + 1)}
                lanes.append(Lane(device=j % 2, context=1, stream=13 + j, label=f"s{j}", executions=n,
                                  spans_elided=n - len(kept), spans=tuple(spans[s] for s in kept)))
            kernels = tuple(sorted((KernelStat(name, f"_Z{i}", c, t, 10, 90, c)
                                    for i, (name, (c, t)) in enumerate(sorted(p["kernels"].items()))),
                                   key=kernel_order))
            launches = tuple(KernelLaunch(k.mangled, 1, occupancy_pct=p.get("occupancy", {})[k.name],
                                          limiters="registers", waves_max=1.5)
                             for k in sorted(kernels, key=lambda k: k.mangled)
                             if k.name in p.get("occupancy", {}))
            devices = (TracedDevice(0, uuid="GPU-a", sm_count=132, compute_capability=(9, 0), busy_pct=p.get("busy"),
                                    copies=(CopyRate("h2d", "pinned", 2, 8192, 100, 81.92e9),)),)
            traced.append(TracedProcess(pid=pid, session=p["session"], name="p", cupti_status="ok",
                                        records=p["records"], kernels=kernels, lanes=tuple(lanes),
                                        devices=devices, kernel_launches=launches))
        out.append(make_snapshot(seq=seq, traced=tuple(traced), timestamp=1_764_473_412.5 + seq * 0.05))
    return out


def stream_of(snapshots, span_rate, full_at=()) -> list[dict]:
    """The frames a client is sent: a full frame, then deltas (a full one at ``full_at``)."""
    board = SnapshotBoard()
    enc = FrameEncoder(board, boot_epoch=1, span_rate=span_rate)
    frames = []
    for i, s in enumerate(snapshots):
        board.publish(s)
        f = enc.current()
        frames.append(body(f.full if i == 0 or i in full_at else f.delta))
    return frames


def read_in_python(frames: list[dict]) -> list[dict]:
    reader, out = StreamReader(), []
    for f in frames:
        out.append(json.loads(json.dumps(reader.read(json.loads(json.dumps(f))))))
    return out


def test_the_page_sees_the_agents_constants(reader_page):
    page, url = reader_page
    got = page.evaluate("""async (url) => { const m = await import(url);
      return [m.PLAIN_SCHEMA, m.STREAM_SCHEMA, m.FULL, m.DELTA, m.SPAN_KINDS, m.DIRECTIONS, m.OMITTABLE]; }""", url)
    assert got == [SCHEMA_VERSION, wire.WIRE_SCHEMA, wire.FULL, wire.DELTA, list(wire.KINDS),
                   list(wire.DIRECTIONS), list(wire.OMITTABLE)]


@pytest.mark.parametrize("seed", range(8))
def test_both_readers_read_the_agents_stream_to_the_same_plain_frames(reader_page, seed):
    snapshots = history(seed)
    frames = stream_of(snapshots, span_rate=None if seed % 2 else 400, full_at=(6,) if seed % 3 == 0 else ())
    assert any(t.get("names") for f in frames for t in f["traced"])   # the compact form, names and all
    python = read_in_python(frames)
    assert read_in_page(reader_page, frames) == python
    # and the frames both read are the snapshots' plain form: a full frame exactly
    plain = json.loads(json.dumps(snapshots[0].to_json_dict()))
    assert {k: v for k, v in python[0].items() if k not in ("frame", "base_seq", "schema")} == \
        {k: v for k, v in plain.items() if k != "schema"}


def test_the_histories_cover_what_the_readers_must_agree_on():
    # the comparison above is only as good as the frames it reads: they hold every span shape,
    # deltas that skipped spans, left-out kernels and lanes, and a process replacing its namesake
    frames = [f for seed in range(8) for f in stream_of(history(seed), None if seed % 2 else 400)]
    traced = [t for f in frames for t in f["traced"]]
    rows = [r for t in traced for l in t.get("lanes", ()) for r in l["spans"]]
    assert {r[3] for r in rows if len(r) > 3} >= {0, 1, 2, "graph", "memcpy", "kernel"}
    assert any(l.get("spans_skipped", 0) > 0 for t in traced for l in t.get("lanes", ()))
    deltas = [t for f in frames if f["frame"] == "delta" for t in f["traced"]]
    assert any("kernels" not in t for t in deltas) and any("lanes" not in t for t in deltas)
    assert any("kernel_launches" not in t for t in deltas) and any(t.get("kernel_launches") for t in deltas)
    assert any(t.get("reset") for t in deltas)


def test_both_readers_refuse_the_same_broken_frames(reader_page):
    frames = stream_of(history(3)[:3], span_rate=None)
    stray = dict(frames[1], base_seq=99)                      # a delta on another base
    unknown = json.loads(json.dumps(frames[1]))
    for t in unknown["traced"]:                               # a process it never had, kernels left out
        t.update(session="elsewhere")
        t.pop("kernels", None)
    cases = {"out of step": [frames[0], stray], "undecodable": [frames[0], unknown]}
    assert any(t.get("lanes") is not None for t in unknown["traced"])
    for why, sequence in cases.items():
        got = read_in_page(reader_page, sequence)
        assert got[1] == {"refused": why}, why
        reader = StreamReader()
        reader.read(sequence[0])
        with pytest.raises(ValueError):
            reader.read(sequence[1])
