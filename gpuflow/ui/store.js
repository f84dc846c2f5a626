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
// full frame) or as a bad frame (ignored). Each lane stays ordered by start, with a running sum
// of its durations, for the drawing's binary searches. No DOM.

import { DELTA, FrameError, nothingRead, read } from './stream.js';
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
// spans join up with it.
function keptLane(key, L, o) {
  const incoming = L.spans;
  let spans, lastSeq;
  if (o) {
    spans = o.spans; lastSeq = o.lastSeq;
    for (let i = 0; i < incoming.length; i++) {
      const s = incoming[i];
      if (s.seq > lastSeq) { spans.push(s); lastSeq = s.seq; }
    }
  } else {   // a full frame, a new lane, or a delta that skipped spans: what was kept no longer joins up
    spans = incoming.slice();
    lastSeq = -1;
    for (let i = 0; i < spans.length; i++) if (spans[i].seq > lastSeq) lastSeq = spans[i].seq;
  }
  const keep = Math.min(MAX_KEEP, Math.max(0, (L.executions | 0) - (L.spans_elided | 0)));
  if (spans.length > keep) spans.splice(0, spans.length - keep);
  return laneOf(key, L, spans, lastSeq);
}

// A lane the drawing can use: `head`'s device, context, stream, label and counts, and `spans`
// (oldest first), with what the drawing's binary searches need. Also how past.js makes the
// lanes of a past window.
export function laneOf(key, head, spans, lastSeq) {
  const lane = { key, device: head.device, context: head.context, stream: head.stream, label: String(head.label),
    executions: head.executions, spans_elided: head.spans_elided, spans, lastSeq, maxDurUs: 0, oneColour: true, end: -Infinity };
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
  // running sum of durations (µs): the drawing gets the busy time of a jumped-over stretch
  const cum = new Float64Array(spans.length + 1);
  for (let i = 0; i < spans.length; i++) cum[i + 1] = cum[i] + spans[i].dur_ns / 1000;
  lane.cum = cum;
  lane.maxDurUs = m / 1000;
  lane.oneColour = kernels === 0 || kernels === spans.length;
  lane.end = end;
  return lane;
}
