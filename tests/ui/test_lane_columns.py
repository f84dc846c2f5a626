"""The typed columns the page draws a lane from (gpuflow/ui/store.js, answer_shape.js, run in
Chromium) hold what the lane's spans say.

* A live lane grown by delta frames (store.js extended(): the appended and trimmed spans only) is,
  after every frame, the lane laneOf() makes of the same spans from scratch: starts, durations and
  kernel flags span for span, the longest span, the latest end, one colour or not, and running
  sums whose differences match. The deltas bring spans of random kinds and lengths, trim the lane
  (spans_elided), now and then bring a span that starts before the lane's last (the lane is then
  sorted again) or skip some (the lane starts over).
* A window answer shaped off the page's thread and made into a past lane (windowLane) gives, span
  for span, the objects the answer's columns say (spanAt), ordered by start when the recorder
  listed them otherwise, and the window's kernels and transfers as tallied from those spans.
* A window the agent answers in the columnar form (format=columns, as the page asks) reads as the
  same window's JSON form does.
"""

from __future__ import annotations

import json
import random
import time

import pytest

pytestmark = pytest.mark.browser

KINDS = ["kernel", "memcpy", "memset"]
DIRECTIONS = ["h2d", "d2h", "d2d", "p2p", "h2h", "memset"]
NAMES = ["gemm<float>", "layer_norm", "ß∂ƒ", ""]

GROW = """async ([url, frames]) => {
  const m = await import(url);
  const bad = [];
  let applied = 0;
  for (const f of frames) {
    if (m.ingest(f) !== m.APPLIED) { bad.push('not applied: seq ' + f.seq); continue; }
    applied++;
    for (const [pid, t] of m.store.traced) for (const L of t.lanes) {
      const ref = m.laneOf(L.key, L, L.spans.slice(), L.lastSeq), n = L.spans.length, where = 'seq ' + f.seq + ' lane ' + L.key;
      if (L.held !== n || L.start.length !== n || L.dur.length !== n || L.kern.length !== n || L.cum.length !== n + 1) { bad.push(where + ': lengths'); continue; }
      for (let i = 0; i < n; i++) {
        const s = L.spans[i];
        if (L.start[i] !== s.start_us || L.dur[i] !== s.dur_ns || L.kern[i] !== (s.kind === 'kernel' ? 1 : 0)) { bad.push(where + ': span ' + i); break; }
        if (i && s.start_us < L.spans[i - 1].start_us) { bad.push(where + ': out of order at ' + i); break; }
      }
      if (L.maxDurUs !== ref.maxDurUs || L.end !== ref.end || L.oneColour !== ref.oneColour) bad.push(where + ': longest, end or colour');
      for (let a = 0; a <= n; a += 7) for (let b = a; b <= n; b += 13) {
        const got = L.cum[b] - L.cum[a], want = ref.cum[b] - ref.cum[a];
        if (Math.abs(got - want) > 1e-6 * Math.max(1, Math.abs(want))) { bad.push(where + ': sums ' + a + '..' + b); a = n + 1; break; }
      }
    }
  }
  return { applied, bad: bad.slice(0, 10) };
}"""

WINDOW = """async ([shapeUrl, storeUrl, text]) => {
  const shape = await import(shapeUrl), store = await import(storeUrl);
  const { doc, buffer } = shape.shapeAnswer(text, 'window');
  const w = shape.unpackAnswer(doc, buffer, 'window');
  return w.processes.map(p => ({
    pid: p.pid, kernels: p.kernels, transfers: p.transfers,
    lanes: p.lanes.map(L => {
      const lane = store.windowLane('k', L, L.spans || null);
      const spans = [];
      for (let i = 0; i < lane.held; i++) spans.push(store.spanAt(lane, i));
      return { spans, same: spans.every((s, i) => store.spanAt(lane, i) === s), held: lane.held,
        starts: Array.from(lane.start), kern: Array.from(lane.kern), sums: Array.from(lane.cum) };
    }),
  }));
}"""


def span(rng: random.Random, seq: int, start: int) -> dict:
    kind = rng.choice(KINDS)
    dur = rng.randrange(1_000, 4_000_000)
    if kind == "kernel":
        return {"seq": seq, "kind": kind, "start_us": start, "dur_ns": dur, "name": rng.choice(NAMES),
                "grid": [rng.randrange(1, 9), 1, 1], "block": [128, 1, 1], "bytes": None, "direction": None}
    return {"seq": seq, "kind": kind, "start_us": start, "dur_ns": dur, "name": None, "grid": None, "block": None,
            "bytes": rng.randrange(1, 1 << 20), "direction": "memset" if kind == "memset" else rng.choice(DIRECTIONS[:5])}


def frames(seed: int, count: int) -> list[dict]:
    """A full frame, then deltas: 3 lanes, one all kernels (a one-colour lane), growing and trimmed."""
    rng = random.Random(seed)
    lanes = [{"stream": s, "seq": 0, "t": 1_764_000_000_000_000 + s * 1000, "execs": 0, "keep": keep, "kernels_only": s == 7}
             for s, keep in ((7, 300), (8, 120), (9, 500))]
    out = []
    for n in range(count):
        full = n == 0
        plain_lanes = []
        for L in lanes:
            new, skipped = [], 0
            for _ in range(rng.randrange(0, 40) if not full else rng.randrange(50, 400)):
                L["seq"] += 1
                L["t"] += rng.randrange(5, 3_000)
                start = L["t"] - (rng.randrange(1, 5_000) if rng.random() < 0.01 else 0)   # now and then out of order
                s = span(rng, L["seq"], start)
                if L["kernels_only"] and s["kind"] != "kernel":
                    s = {**s, "kind": "kernel", "name": "gemm<float>", "grid": [1, 1, 1], "block": [1, 1, 1], "bytes": None,
                         "direction": None}
                new.append(s)
            L["execs"] += len(new)
            if not full and rng.random() < 0.02 and new:   # the delta left some out: the page starts over
                skipped, new = len(new) // 2, new[len(new) // 2:]
            plain_lanes.append({"device": 0, "context": 1, "stream": L["stream"], "label": f"s{L['stream']}",
                                "executions": L["execs"], "spans_elided": max(0, L["execs"] - L["keep"]), "spans": new,
                                "spans_skipped": skipped})
        out.append({"schema": 1, "frame": "full" if full else "delta", "seq": 100 + n, "base_seq": None if full else 99 + n,
                    "timestamp": 1_764_000_000.0 + n / 20, "host": {"hostname": "h"}, "sources": ["cupti"], "devices": [],
                    "processes": [], "traced": [{"pid": 42, "session": "s", "name": "p", "state": "running",
                                                  "kernels": [], "transfers": [], "lanes": plain_lanes}]})
    return out


@pytest.fixture
def module_page(page, agent):
    """A page of the agent's origin (no UI running in it) and the URL of a module of the page's."""
    page.goto(agent.url + "healthz")
    return page, lambda name: agent.url + name


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_lane_grown_by_deltas_holds_the_columns_of_its_spans(module_page, seed):
    page, url = module_page
    fs = frames(seed, 400)
    got = page.evaluate(GROW, [url("store.js"), fs])
    assert got["bad"] == [] and got["applied"] == len(fs)


def test_a_window_answers_columns_make_the_spans_it_holds(module_page):
    page, url = module_page
    rng = random.Random(7)
    names = ["gemm<float>", "layer_norm", "ß∂ƒ"]
    lanes, want = [], []
    for stream in range(3):
        n = rng.randrange(40, 200)
        starts = sorted(rng.randrange(0, 10_000_000) for _ in range(n))
        if stream == 1:   # listed by seq, not by start: the page orders them
            i = n // 2
            starts[i], starts[i + 1] = starts[i + 1] + 1, starts[i]
        cols = {k: [] for k in ("seq", "start_us", "dur_ns", "kind", "name", "grid_x", "grid_y", "grid_z", "block_x",
                                "block_y", "block_z", "bytes", "direction")}
        spans = []
        for i in range(n):
            kind = rng.randrange(3)
            k = kind == 0
            row = {"seq": 1000 * stream + i, "start_us": 1_764_000_000_000_000 + starts[i], "dur_ns": rng.randrange(500, 3_000_000),
                   "kind": kind, "name": rng.randrange(len(names)) if k else -1,
                   "grid_x": rng.randrange(1, 100) if k else -1, "grid_y": 1 if k else -1, "grid_z": 1 if k else -1,
                   "block_x": 256 if k else -1, "block_y": 1 if k else -1, "block_z": 1 if k else -1,
                   "bytes": -1 if k else rng.randrange(1, 1 << 24), "direction": -1 if k else rng.randrange(len(DIRECTIONS))}
            for c, v in row.items():
                cols[c].append(v)
            spans.append({"seq": row["seq"], "kind": KINDS[kind], "start_us": row["start_us"], "dur_ns": row["dur_ns"],
                          "name": names[row["name"]] if k else None,
                          "grid": [row["grid_x"], 1, 1] if k else None, "block": [256, 1, 1] if k else None,
                          "bytes": None if k else row["bytes"], "direction": None if k else DIRECTIONS[row["direction"]]})
        cols["names"] = names
        lanes.append({"device": 0, "context": 1, "stream": stream, "label": f"s{stream}", "executions": n, "spans": cols})
        want.append(sorted(spans, key=lambda s: s["start_us"]))
    lanes.append({"device": 0, "context": 1, "stream": 9, "label": "busy", "executions": 90_000,
                  "buckets": {"start_us": 1_764_000_000_000_000, "width_us": 100.0, "count": [3, 0, 5], "busy_ns": [90, 0, 100_000]}})
    text = json.dumps({"from": 1_764_000_000.0, "to": 1_764_000_010.0, "pid": None, "width": 512, "sources": ["cupti"],
                       "processes": [{"pid": 42, "session": "s", "name": "p", "retained_from": 1.0, "retained_to": 2.0,
                                      "complete": True, "lanes": lanes}], "problems": []})
    (proc,) = page.evaluate(WINDOW, [url("answer_shape.js"), url("store.js"), text])
    for got, spans in zip(proc["lanes"], want):
        assert got["spans"] == spans and got["same"]
        assert got["starts"] == [s["start_us"] for s in spans] and got["kern"] == [1 if s["kind"] == "kernel" else 0 for s in spans]
        sums = [0.0]
        for s in spans:
            sums.append(sums[-1] + s["dur_ns"] / 1000)
        assert got["sums"] == pytest.approx(sums)
    assert proc["lanes"][3]["held"] == 0
    every = [s for spans in want for s in spans]
    kernels = {}
    for s in every:
        if s["kind"] == "kernel":
            k = kernels.setdefault(s["name"] or "(unnamed kernel)", {"count": 0, "total_ns": 0, "min_ns": s["dur_ns"], "max_ns": s["dur_ns"]})
            k["count"] += 1
            k["total_ns"] += s["dur_ns"]
            k["min_ns"], k["max_ns"] = min(k["min_ns"], s["dur_ns"]), max(k["max_ns"], s["dur_ns"])
    assert {k["name"]: {f: k[f] for f in ("count", "total_ns", "min_ns", "max_ns")} for k in proc["kernels"]} == kernels
    transfers = {}
    for s in every:
        if s["kind"] != "kernel":
            x = transfers.setdefault(s["direction"], {"count": 0, "bytes": 0, "total_ns": 0})
            x["count"] += 1
            x["bytes"] += s["bytes"]
            x["total_ns"] += s["dur_ns"]
    assert {x["direction"]: {f: x[f] for f in ("count", "bytes", "total_ns")} for x in proc["transfers"]} == transfers


BOTH_FORMS = """async ([shapeUrl, windows]) => {
  const shape = await import(shapeUrl), out = [];
  for (const params of windows) {
    const q = new URLSearchParams(params).toString();
    const text = await (await fetch('api/window?' + q)).text();
    const body = await (await fetch('api/window?' + q + '&format=columns')).arrayBuffer();
    const a = shape.shapeAnswer(text, 'window'), b = shape.shapeAnswer(body, 'window');
    const lanes = a.doc.processes.flatMap(p => p.lanes);
    // what each process's head says of the recorder (retained_from, retained_to, complete) is as of
    // each question; the lanes and their columns are the window's own
    const lanesOf = (d) => JSON.stringify(d.processes.map(p => [p.pid, p.session, p.name, p.kernels, p.transfers, p.lanes]));
    out.push({ same: lanesOf(a.doc) === lanesOf(b.doc) && a.doc.from === b.doc.from && a.doc.to === b.doc.to && a.doc.width === b.doc.width &&
      a.buffer.length === b.buffer.length && a.buffer.every((x, i) => Object.is(x, b.buffer[i])),
      exact: lanes.filter(L => L.spans).length, reduced: lanes.filter(L => L.buckets).length,
      spans: lanes.reduce((n, L) => n + (L.spans ? L.spans.n : 0), 0) });
  }
  return out;
}"""


def test_a_window_in_the_columnar_form_reads_as_its_json_form(page, busy_agent):
    # The page asks its windows in the columnar form (int64 blocks, format=columns): read from the
    # agent's own encoder, each gives the page the very document and columns the JSON form gives,
    # exact lanes and reduced ones alike (a block read at the wrong place, a sign or a high word
    # lost, a column taken for another, would differ).
    page.goto(busy_agent.url + "healthz")
    deadline = time.monotonic() + 20
    while True:
        t = busy_agent.snapshot()["timestamp"]
        exact = busy_agent.get("api/window", **{"from": t - 0.3, "to": t})
        if sum(len(L["spans"]["seq"]) for p in exact["processes"] for L in p["lanes"] if "spans" in L) > 100:
            break
        assert time.monotonic() < deadline, "the busy agent recorded no spans"
        time.sleep(0.5)
    # windows the agent has finished recording (a span is recorded when it ends: one ending now would
    # come between the two questions)
    time.sleep(1.5)
    windows = [{"from": t - 0.3, "to": t}, {"from": t - 2, "to": t, "width": 64}, {"from": t - 1, "to": t - 0.2, "width": 4096}]
    got = page.evaluate(BOTH_FORMS, [busy_agent.url + "answer_shape.js", [{k: str(v) for k, v in w.items()} for w in windows]])
    assert all(g["same"] for g in got), got
    assert got[0]["spans"] > 100 and got[0]["reduced"] == 0 and got[1]["reduced"] > 0
