// The page's copy of the world: the latest frame in the plain form and, per traced process, the
// lanes of spans the page keeps itself.
//
// A frame arrives as parsed JSON (a live stream event, or a demo frame), stream.js reads it into
// the plain form, and ingest() applies it. A full frame replaces every lane; a delta's lanes
// carry only new spans, which are appended to what the lane kept, unless the delta says it
// skipped some (spans_skipped) or replaced the process (reset): then what was kept no longer
// joins up and is dropped. Each lane is trimmed to the sample the agent says it keeps
// (executions - spans_elided), and never holds more than MAX_KEEP spans whatever the agent says.
//
// While the timeline shows a past moment (scrub.js), the plane draws `store.past` (past.js builds
// it from the recorder's answers) while live frames keep arriving here, so going back to live
// shows the latest frame at once; shownSnap() and shownTraced() are what the plane shows.
//
// Constraints: ingest() never throws, and a frame it cannot apply changes nothing: it is counted
// as a resync (a delta that does not follow, or cannot be decoded: the caller reconnects for a
// full frame) or as a bad frame (ignored). Each lane stays ordered by start, with typed columns
// of its spans' starts, durations and kinds and a running sum of its durations, for the drawing's
// binary searches; a delta costs the spans it brings and trims, not the lane's length. No DOM.

import { spanName } from './answer_shape.js';
import { DELTA, DIRECTIONS, FrameError, SPAN_KINDS, nothingRead, read } from './stream.js';
import { isNum } from './format.js';

export const MAX_KEEP = 5000;        // spans kept per lane by the page, whatever the agent says
export const APPLIED = 'applied', IGNORED = 'ignored', RESYNC = 'resync';

export const store = {
  snap: null, lastSeq: null, traced: new Map(), frames: 0, full: 0, delta: 0, resyncs: 0,
  badFrames: 0, reader: nothingRead, receivedAt: 0,   // performance.now() when the latest frame was applied
  past: null,   // the past moment shown instead: {moment, windowS, frame, traced, ...} (past.js)
};
export function shownSnap() { return store.past ? store.past.frame : store.snap; }
export function shownTraced() { return store.past ? store.past.traced : store.traced; }

// Applies one frame: APPLIED, IGNORED (not a snapshot, counted in badFrames) or RESYNC (a delta
// that does not follow the frame the page has, or cannot be decoded against it; a new
// connection always starts with a full frame).
export function ingest(f) {
  if (!f || typeof f !== 'object') { store.badFrames++; return IGNORED; }
  const isDelta = f.frame === DELTA;
  let r, next;
  try {
    r = read(store.reader, f);
    next = keptTraced(r.frame.traced, isDelta);
  } catch (e) {
    const why = e instanceof FrameError ? e.why : null;
    if (why === FrameError.OUT_OF_STEP || (why !== FrameError.NOT_A_SNAPSHOT && isDelta)) { store.resyncs++; return RESYNC; }
    store.badFrames++; return IGNORED;
  }
  store.reader = r.state;
  store.traced = next;
  store.snap = r.frame;
  store.lastSeq = r.frame.seq;
  store.receivedAt = performance.now();
  store.frames++;
  if (isDelta) store.delta++; else store.full++;
  return APPLIED;
}

// The traced processes after a plain frame: each with the lanes the page keeps.
function keptTraced(traced, isDelta) {
  const prev = store.traced, next = new Map();
  for (const t of traced) {
    const old = isDelta && !t.reset ? prev.get(t.pid) : undefined;   // reset: a new process, same pid
    const lanes = [], laneMap = new Map();
    let t0 = Infinity, t1 = -Infinity, held = 0, execs = 0;
    for (const L of t.lanes) {
      const key = L.device + ':' + L.context + ':' + L.stream;
      const o = old && !(L.spans_skipped > 0) ? old.laneMap.get(key) : undefined;
      const lane = o && unchanged(o, L) ? o : keptLane(key, L, o);
      if (lane.spans.length) {
        if (lane.spans[0].start_us < t0) t0 = lane.spans[0].start_us;
        if (lane.end > t1) t1 = lane.end;
      }
      held += lane.spans.length; execs += L.executions;
      lanes.push(lane); laneMap.set(key, lane);
    }
    lanes.sort((a, b) => a.device - b.device || a.context - b.context || a.stream - b.stream);
    if (t0 === Infinity) { t0 = t.window_start_us; t1 = t.window_end_us; }
    next.set(t.pid, { info: t, lanes, laneMap, t0: isNum(t0) ? t0 : null, t1: isNum(t1) ? t1 : null, held, execs });
  }
  return next;
}

// a lane with nothing new and the same counters is kept as it is
function unchanged(o, L) {
  return L.spans.length === 0 && o.executions === L.executions && o.spans_elided === L.spans_elided
    && o.label === String(L.label);
}

// A lane of the frame as the page keeps it: `o`, what it kept of the lane before, if the new
// spans join up with it. Joining, only the spans appended and the spans trimmed are looked at
// (extended()): a delta brings a few dozen spans to a lane of thousands.
function keptLane(key, L, o) {
  const keep = Math.min(MAX_KEEP, Math.max(0, (L.executions | 0) - (L.spans_elided | 0)));
  if (o) return extended(key, L, o, keep);
  // a full frame, a new lane, or a delta that skipped spans: what was kept no longer joins up
  const spans = L.spans.slice();
  let lastSeq = -1;
  for (let i = 0; i < spans.length; i++) if (spans[i].seq > lastSeq) lastSeq = spans[i].seq;
  if (spans.length > keep) spans.splice(0, spans.length - keep);
  return laneOf(key, L, spans, lastSeq);
}

// -- a lane as the drawing reads it ------------------------------------------------------------
// Every lane, live or of a past window, gives the drawing (lanes.js) and the hover typed columns:
// `start` (µs) and `dur` (ns) of each span it holds, `kern` (1: a kernel, 0: a copy or memset),
// `cum`, the running sum of durations (µs; cum[i] is spans 0..i-1's plus a constant, which every
// difference taken cancels), `held` (how many), `maxDurUs`, `oneColour`, `end` (the latest end).
// A live lane also holds its spans as objects (`spans`, as the stream brought them); a past
// window's lane holds its answer's columns (`cols`, answer_shape.js) and makes a span object only
// when one is asked for (spanAt(), or `spans` for all of them: the hover and the test hook).
// A live lane's columns live in buffers with room to grow: a delta appends to them and a trim
// moves their start, with no copy of what stays.
const ROOM_MIN = 1024;
function room(cap) { return { cap, start: new Float64Array(cap), dur: new Float64Array(cap), kern: new Float64Array(cap), sums: new Float64Array(cap + 1) }; }
function write(b, at, spans, from, to) {
  for (let i = from; i < to; i++) {
    const s = spans[i], j = at + i;
    b.start[j] = s.start_us; b.dur[j] = s.dur_ns; b.kern[j] = s.kind === 'kernel' ? 1 : 0;
    b.sums[j + 1] = b.sums[j] + s.dur_ns / 1000;
  }
}

// A lane the drawing can use: `head`'s device, context, stream, label and counts, and `spans`
// (oldest first), with what the drawing's binary searches need.
export function laneOf(key, head, spans, lastSeq) {
  let m = 0, kernels = 0, end = -Infinity, sorted = true;
  for (let i = 0; i < spans.length; i++) {
    const sp = spans[i];
    if (sp.dur_ns > m) m = sp.dur_ns;
    if (sp.kind === 'kernel') kernels++;
    const e = sp.start_us + sp.dur_ns / 1000;
    if (e > end) end = e;
    if (i && sp.start_us < spans[i - 1].start_us) sorted = false;
  }
  // drawing and hover find spans by binary search on start: keep each lane ordered by start.
  // The agent lists spans by seq (ring order), which follows start within one stream, so
  // this sort is a safety net that almost never runs.
  if (!sorted) spans.sort((a, b) => a.start_us - b.start_us);
  const b = room(Math.max(ROOM_MIN, spans.length));
  write(b, 0, spans, 0, spans.length);
  return liveLane(key, head, spans, lastSeq, b, 0, m, kernels, end);
}

// The lane `o` with delta lane L's new spans (those after its last seq) appended and its oldest
// trimmed to `keep`: the same lane laneOf() would make of the spans, from the appended and
// trimmed spans only. Its spans array and buffers are o's, grown in place (o is not read again:
// the frame before is gone).
function extended(key, L, o, keep) {
  const spans = o.spans, n0 = spans.length, incoming = L.spans;
  let lastSeq = o.lastSeq, m = o.maxDurNs, kernels = o.kernels, end = o.end;
  for (let i = 0; i < incoming.length; i++) {
    const s = incoming[i];
    if (s.seq <= lastSeq) continue;
    if (spans.length && s.start_us < spans[spans.length - 1].start_us) {   // out of order: the whole lane again
      for (let j = i; j < incoming.length; j++) if (incoming[j].seq > lastSeq) { spans.push(incoming[j]); lastSeq = incoming[j].seq; }
      if (spans.length > keep) spans.splice(0, spans.length - keep);
      return laneOf(key, L, spans, lastSeq);
    }
    spans.push(s); lastSeq = s.seq;
    if (s.dur_ns > m) m = s.dur_ns;
    if (s.kind === 'kernel') kernels++;
    const e = s.start_us + s.dur_ns / 1000;
    if (e > end) end = e;
  }
  let b = o.room, at = o.at;
  if (at + spans.length > b.cap) {   // no room left: what stays to the start of new buffers, the sums from 0
    const nb = room(Math.max(ROOM_MIN, 2 * spans.length));
    nb.start.set(b.start.subarray(at, at + n0)); nb.dur.set(b.dur.subarray(at, at + n0)); nb.kern.set(b.kern.subarray(at, at + n0));
    const base = b.sums[at];
    for (let i = 0; i <= n0; i++) nb.sums[i] = b.sums[at + i] - base;
    b = nb; at = 0;
  }
  write(b, at, spans, n0, spans.length);
  const cut = spans.length - keep;
  if (cut > 0) {
    let again = false;
    for (let i = 0; i < cut; i++) {
      const s = spans[i];
      if (s.kind === 'kernel') kernels--;
      if (s.dur_ns >= m || s.start_us + s.dur_ns / 1000 >= end) again = true;   // it may have held the longest or the last end
    }
    spans.splice(0, cut);
    at += cut;
    if (again) {
      m = 0; end = -Infinity;
      for (let i = 0; i < spans.length; i++) {
        const s = spans[i], e = s.start_us + s.dur_ns / 1000;
        if (s.dur_ns > m) m = s.dur_ns;
        if (e > end) end = e;
      }
    }
  }
  return liveLane(key, L, spans, lastSeq, b, at, m, kernels, end);
}
function liveLane(key, head, spans, lastSeq, b, at, maxDurNs, kernels, end) {
  const n = spans.length;
  return { key, device: head.device, context: head.context, stream: head.stream, label: String(head.label),
    executions: head.executions, spans_elided: head.spans_elided, spans, lastSeq, held: n,
    start: b.start.subarray(at, at + n), dur: b.dur.subarray(at, at + n), kern: b.kern.subarray(at, at + n),
    cum: b.sums.subarray(at, at + n + 1), maxDurNs, maxDurUs: maxDurNs / 1000, kernels,
    oneColour: kernels === 0 || kernels === n, end, room: b, at };
}

// A lane of a past window (past.js): `head`'s device, context, stream, label and counts, and
// `shaped`, an exact lane's columns as answer_shape.js read them, or null for a lane with none
// (a reduced window's: its buckets are the caller's to add).
export function windowLane(key, head, shaped) {
  const n = shaped ? shaped.n : 0, none = new Float64Array(0);
  const lane = { key, device: head.device, context: head.context, stream: head.stream, label: String(head.label),
    executions: head.executions, spans_elided: head.spans_elided, lastSeq: n ? shaped.cols.seq[n - 1] : -1, held: n,
    start: n ? shaped.start : none, dur: n ? shaped.dur : none, kern: n ? shaped.kern : none, cum: n ? shaped.cum : new Float64Array(1),
    maxDurNs: n ? shaped.maxDurNs : 0, maxDurUs: n ? shaped.maxDurNs / 1000 : 0, kernels: n ? shaped.kernels : 0,
    oneColour: !n || shaped.kernels === 0 || shaped.kernels === n, end: n ? shaped.end : -Infinity,
    cols: n ? shaped.cols : null, names: n ? shaped.names : [], made: null };
  Object.defineProperty(lane, 'spans', { get() { return allSpans(lane); }, enumerable: false });
  return lane;
}
// span i of lane L as an object (the same object each time it is asked for)
export function spanAt(L, i) {
  if (!L.cols) return L.spans[i];
  if (i < 0 || i >= L.held) return undefined;
  if (!L.made) L.made = new Array(L.held);
  return L.made[i] || (L.made[i] = madeSpan(L, i));
}
function allSpans(L) {
  const out = new Array(L.held);
  for (let i = 0; i < L.held; i++) out[i] = spanAt(L, i);
  return out;
}
// the span object a stream would have brought (the live spans' shape), from a past lane's columns
function madeSpan(L, i) {
  const c = L.cols, kind = SPAN_KINDS[c.kind[i]] || 'kernel', k = kind === 'kernel';
  return { seq: c.seq[i], kind, start_us: c.start_us[i], dur_ns: c.dur_ns[i], name: spanName(L.names, c.name[i]),
    grid: k ? [c.grid_x[i], c.grid_y[i], c.grid_z[i]] : null, block: k ? [c.block_x[i], c.block_y[i], c.block_z[i]] : null,
    bytes: c.bytes[i] >= 0 ? c.bytes[i] : null, direction: c.direction[i] >= 0 ? DIRECTIONS[c.direction[i]] || null : null };
}
// the seqs of the spans lane L holds, oldest first
export function seqsOf(L) { return L.cols ? Array.from(L.cols.seq) : L.spans.map(s => s.seq); }
