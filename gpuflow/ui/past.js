// The plane at a past moment: what past.js asks the recorder for the moment the timeline chose
// (scrub.js), and the frame it builds from the answers, in the plain form every frame has, so the
// same layout, drawing, hover and process list show it.
//
// * Devices: the live frame's facts (index, name, memory total, power limit, its PCIe link at its
//   most and which NVLinks it has: fixed, so not kept over time) with the readings of GET
//   api/history at the moment: the last sample at or before it (recorder.js valueAt), "—" where
//   there is none or it was not available. History keeps no GPM means and no NVLink rates: those
//   are "—" at a past moment, never the live ones. History is asked in chunks of ±CHUNK_S
//   around the moment, so dragging within a minute asks nothing more.
// * Processes: those whose per-GPU readings have a sample at the moment; their names, users and
//   how they held a GPU are what the page saw in live frames (history keeps numbers only), "—"
//   for one it never saw.
// * Traced processes: GET api/window for the chosen window, [moment - window, moment], reduced to
//   the strip's pixel width (exact once a lane has no more executions than pixels), in the
//   columnar form (int64 blocks the reader maps, not decimal text it parses): per lane
//   its exact spans or its per-pixel buckets, the window's own top kernels and transfers when it
//   is exact, and whether retention already let part of it go.
//
// The plane changes only once both answers hold the moment; until then it shows the moment
// before. A moment the recorder has let go (scrub.gone) is not asked again: what was shown stays.
//
// Constraints: at most one request of each kind in flight (recorder.js), so a drag asks for the
// latest moment only; the names remembered are bounded (MAX_NAMES pids, oldest forgotten first).
// No drawing here.

import { dpr, view } from './canvas.js';
import { fmtClock, isNum } from './format.js';
import { TRACK_W } from './geometry.js';
import { STALE_AFTER, channel, historyQuestion, valueAt, windowQuestion } from './recorder.js';
import { isPast, momentNow, scrub } from './scrub.js';
import { store, windowLane } from './store.js';
import { DIRECTIONS, kernelOrder } from './stream.js';

export const CHUNK_S = 30;
const MAX_NAMES = 4096;
export const DEVICE_READINGS = ['utilization_gpu_pct', 'utilization_memory_pct', 'memory_used_bytes', 'temperature_c',
  'power_draw_w', 'clock_sm_mhz', 'clock_mem_mhz', 'pcie_tx_bytes_per_s', 'pcie_rx_bytes_per_s'];
const PROCESS_READINGS = ['memory_used_bytes', 'sm_util_pct', 'mem_util_pct'];

export const past = { chunk: null, chunkAsked: null, window: null, windowKey: '', shows: 0, error: null };
let onShow = () => {};
// fn(shown) is called when the plane has a new past moment to show
export function setOnShow(fn) { onShow = fn; }

// -- what live frames said about processes (history keeps numbers, not names) -------------------
const names = new Map();
export function remember(f) {
  for (const p of f.processes || []) {
    const kinds = {};
    for (const a of p.attachments) kinds[a.device_uuid] = a.kind;
    names.delete(p.pid);
    names.set(p.pid, { name: p.name, user: p.user, cmdline: p.cmdline, kinds });
  }
  while (names.size > MAX_NAMES) names.delete(names.keys().next().value);
}

// -- asking --------------------------------------------------------------------------------------
// the chunk asked last is `chunkAsked` until its answer is in: a moment it will hold is not asked again
const chunks = channel((q, doc) => {
  const index = doc.index;
  past.chunk = { from: q.from, to: q.to, index, entities: entitiesOf(index), dataFrom: doc.retained_from, dataTo: doc.retained_to,
    newestRes: doc.newest_resolution_s };
  if (past.chunkAsked && past.chunkAsked.q === q) past.chunkAsked = null;
  past.error = null;
  tryShow();
}, (q, err) => { past.error = err.message; past.chunkAsked = null; }, 'history');
const windows = channel((q, doc) => {
  past.window = { q, doc };
  past.error = null;
  tryShow();
}, (q, err) => { past.error = err.message; past.windowKey = ''; }, 'window');

// does the chunk hold the readings of moment t?
function covers(c, t) {
  if (!c) return false;
  if (c.dataTo === null || c.dataTo === undefined) return t >= c.from && t < c.to;   // nothing kept: nothing to wait for
  const oldest = c.dataFrom !== null && c.dataFrom >= c.from;   // the chunk reaches back past what is kept
  return (oldest || t >= c.from + CHUNK_S / 4) && t < c.to && t <= c.dataTo + STALE_AFTER(c.newestRes);
}
// the strip's width in device pixels, in steps of √2 so a zoom asks again only now and then
export function stripPixels() {
  const px = Math.max(64, Math.min(4096, TRACK_W * view.s * dpr));
  return Math.round(Math.pow(2, Math.round(Math.log2(px) * 2) / 2));
}

// Asks for what the moment the timeline chose needs, if not asked already: the history chunk
// holding it and the chosen window. Live: forgets the past.
export function requestMoment() {
  if (!isPast()) { past.window = null; past.windowKey = ''; return; }
  if (scrub.gone) return;
  const t = momentNow(), w = scrub.windowS, width = stripPixels();
  if (!covers(past.chunk, t) && !(past.chunkAsked && covers(past.chunkAsked, t))) {
    const q = historyQuestion(t - CHUNK_S, t + CHUNK_S);
    past.chunkAsked = { q, from: t - CHUNK_S, to: t + CHUNK_S, dataTo: t, dataFrom: t - CHUNK_S, newestRes: 1 };
    chunks.ask(q);
  }
  const key = t + '|' + w + '|' + width;
  if (key === past.windowKey) return;
  past.windowKey = key;
  const q = windowQuestion(t - w, t, width, true);
  q.moment = t; q.windowS = w; q.askedAt = performance.now();
  windows.ask(q);
}

// both answers in: the moment of the latest window, if the chunk holds it
function tryShow() {
  const w = past.window;
  if (!w || !isPast()) return;
  if (!covers(past.chunk, w.q.moment)) { requestMoment(); return; }
  const live = store.snap;
  if (!live) return;
  const frame = frameAt(live, past.chunk, w.q.moment);
  const traced = tracedOf(w.doc, w.q, live);
  frame.traced = [...traced.values()].map(t => t.info);
  past.shows++;
  onShow({ moment: w.q.moment, windowS: w.q.windowS, width: w.q.width, frame, traced, askedAt: w.q.askedAt });
}

// -- the frame at a moment -------------------------------------------------------------------------
// a chunk's series by entity, read once when it arrives (every moment of a drag reads them):
// devices by UUID, and each process's readings on one GPU
function entitiesOf(index) {
  const devices = new Map(), processes = [];
  for (const [key, m] of index) {
    if (key.startsWith('device|')) { devices.set(key.slice(7), m); continue; }
    const parts = key.split('|');
    if (parts[0] === 'process' && parts.length === 3) {
      const pid = Number(parts[1]);
      if (Number.isInteger(pid)) processes.push({ pid, uuid: parts[2], m });
    }
  }
  return { devices, processes };
}
function frameAt(live, chunk, t) {
  const ix = chunk.entities, byUuid = new Map();
  const devices = live.devices.map(d => {
    const m = ix.devices.get(d.uuid);
    const out = Object.assign({}, d);
    let any = false;
    for (const f of DEVICE_READINGS) {
      const v = m ? valueAt(m.get(f), t) : undefined;
      out[f] = isNum(v) ? v : null;
      if (isNum(v)) any = true;
    }
    out.lost = !!d.lost && !any;
    out.gpm = null; out.gpm_instances = [];
    if (d.links) out.links = linksThen(d.links);
    byUuid.set(d.uuid, d.index);
    return out;
  });
  const procs = new Map();
  for (const { pid, uuid, m } of ix.processes) {
    if (!byUuid.has(uuid)) continue;
    const read = {};
    let held = false;
    for (const f of PROCESS_READINGS) {
      const v = valueAt(m.get(f), t);
      read[f] = isNum(v) ? v : null;
      if (isNum(v)) held = true;
    }
    if (!held) continue;
    const seen = names.get(pid);
    let p = procs.get(pid);
    if (!p) {
      p = { pid, name: seen ? seen.name : null, user: seen ? seen.user : null, cmdline: seen ? seen.cmdline : null, attachments: [] };
      procs.set(pid, p);
    }
    p.attachments.push({ device_index: byUuid.get(uuid), device_uuid: uuid, kind: seen && seen.kinds[uuid] || null,
      memory_used_bytes: read.memory_used_bytes, sm_util_pct: read.sm_util_pct, mem_util_pct: read.mem_util_pct });
  }
  for (const p of procs.values()) p.attachments.sort((a, b) => a.device_index - b.device_index);
  const host = Object.assign({}, live.host, { problems: [] });
  return { schema: live.schema, seq: live.seq, timestamp: t, host, sources: live.sources, devices,
    processes: [...procs.values()].sort((a, b) => a.pid - b.pid), traced: [], traced_retired: [], past: true };
}

// a GPU's links at a past moment: what is fixed of them; what is measured, not kept, is null. The
// same for every moment of one live frame's links (a drag shows a moment a frame, and a GPU of the
// bench has 18 NVLinks), so made once for them; nothing draws on them but to read.
const linksOfLive = new WeakMap();
function linksThen(l) {
  let then = linksOfLive.get(l);
  if (then) return then;
  const none = { tx_bytes_per_s: null, rx_bytes_per_s: null, tx_bytes_total: null, rx_bytes_total: null, state: null };
  then = Object.assign({}, l, { pcie_gen: null, pcie_width: null, pcie_tx_bytes_total: null, pcie_rx_bytes_total: null,
    nvlinks: (l.nvlinks || []).map(x => Object.assign({}, x, none)) });
  linksOfLive.set(l, then);
  return then;
}

// -- the traced processes of a window --------------------------------------------------------------
// Each lane from the answer's columns as answer_shape.js read them (off the page's thread), with no
// object per span; the window's kernels and transfers as it tallied them.
function tracedOf(doc, q, live) {
  const out = new Map(), liveInfo = new Map((live.traced || []).map(t => [t.pid, t]));
  for (const p of doc.processes || []) {
    const lanes = [], laneMap = new Map();
    let held = 0, execs = 0, exact = true;
    for (const L of p.lanes || []) {
      const key = L.device + ':' + L.context + ':' + L.stream, head = { device: L.device, context: L.context,
        stream: L.stream, label: L.label, executions: L.executions, spans_elided: 0 };
      let lane;
      if (L.spans) {
        lane = windowLane(key, head, L.spans);
        held += lane.held;
      } else if (L.buckets) {
        lane = windowLane(key, head, null);
        const b = L.buckets;
        lane.buckets = { start_us: b.start_us, width_us: b.width_us, count: b.count, busy_ns: b.busy_ns };
        exact = false;
      } else continue;
      execs += L.executions;
      lanes.push(lane); laneMap.set(key, lane);
    }
    lanes.sort((a, b) => a.device - b.device || a.context - b.context || a.stream - b.stream);
    const now = liveInfo.get(p.pid), same = now && now.session === p.session;
    const ended = same && now.state === 'exited' && isNum(p.retained_to) && q.moment > p.retained_to + 0.5;
    const info = { pid: p.pid, session: p.session, name: p.name, state: ended ? 'exited' : 'running',
      exit_status: ended ? now.exit_status : null, truncated: false, cupti_status: 'ok', cupti_detail: null,
      records: execs, dropped_ring: 0, dropped_cupti: 0, complete: p.complete !== false,
      kernels: exact ? p.kernels.slice().sort(kernelOrder) : [], transfers: exact ? p.transfers.slice().sort((a, b) => DIRECTIONS.indexOf(a.direction) - DIRECTIONS.indexOf(b.direction)) : [],
      lanes: lanes.map(l => ({ device: l.device, context: l.context, stream: l.stream, label: l.label })),
      past_note: lanes.length ? null : 'nothing in this window' + (isNum(p.retained_from) && isNum(p.retained_to)
        ? ' (retained ' + fmtClock(p.retained_from) + ' – ' + fmtClock(p.retained_to) + ')' : '') };
    out.set(p.pid, { info, lanes, laneMap, held, execs, t0: (q.moment - q.windowS) * 1e6, t1: q.moment * 1e6,
      past: { moment: q.moment, windowS: q.windowS, exact, complete: p.complete !== false,
        retainedFrom: isNum(p.retained_from) ? p.retained_from : null, retainedTo: isNum(p.retained_to) ? p.retained_to : null } });
  }
  return out;
}
