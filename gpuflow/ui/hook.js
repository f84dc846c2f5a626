// The page's test hook: window.__gpuflow, a frozen object of read-only getters over the page's
// state, so that tests (tests/ui), bench/ui_frame.py and scripts/screenshots assert on state
// rather than on pixels and find where to point the mouse. docs/ui.md lists its fields.
//
// Constraints: the only global the page defines; read-only (getters, copies of what the page
// holds), so nothing outside the page can change what it shows. Every field is the same in live
// and demo mode; the bench fields stay empty unless ?demo=bench runs.

import { F, bench, canvas, cssH, cssW, dpr, drawn, loop, textBox, ui, view } from './canvas.js';
import { conn, demo, el } from './connection.js';
import { LABEL_W, LANE_H, STATS_X, TRACK_W, TRACK_X, kernelRowY, laneTop } from './geometry.js';
import { fleetState, tilePoint } from './fleet.js';
import { model } from './layout.js';
import { list } from './list.js';
import { past } from './past.js';
import { recorderStats } from './recorder.js';
import { retained } from './retained.js';
import { agentNow, momentNow, rangeFrom, rangeTo, scrub } from './scrub.js';
import { spark } from './spark.js';
import { seqsOf, shownSnap, shownTraced, spanAt, store } from './store.js';
import { timeline, trackRect, xOf } from './timeline.js';

function nodeRect(id) {
  const n = model.nodes.get(id);
  if (!n) return null;
  const r = canvas.getBoundingClientRect();
  return { x: r.left + view.x + n.x * view.s, y: r.top + view.y + n.y * view.s, w: n.w * view.s, h: n.h * view.s };
}
// page coordinates of the middle of span i (index into the lane's kept spans) of lane li of a traced pid
function spanPoint(pid, li, i) {
  const n = model.nodes.get('p:' + pid);
  if (!n || !n.tr || !n.tr.lanes[li]) return null;
  const tr = n.tr, L = tr.lanes[li], s = spanAt(L, i < 0 ? L.held + i : i);
  if (!s) return null;
  const r = canvas.getBoundingClientRect(), k = TRACK_W * view.s / (tr.t1 - tr.t0);
  const a = view.x + (n.x + TRACK_X) * view.s + (s.start_us - tr.t0) * k;
  const w = Math.max(s.dur_ns * 0.001 * k, 1);
  return { x: r.left + a + w / 2, y: r.top + view.y + (laneTop(n, li) + LANE_H / 2) * view.s,
    span: { seq: s.seq, kind: s.kind, name: s.name, dur_ns: s.dur_ns, bytes: s.bytes, direction: s.direction, grid: s.grid, block: s.block } };
}
// page coordinates of a point in the world
function pagePoint(wx, wy) {
  const r = canvas.getBoundingClientRect();
  return { x: r.left + view.x + wx * view.s, y: r.top + view.y + wy * view.s };
}
// page coordinates of the label of lane li, and of kernel row i, of a traced pid's strip
function laneLabelPoint(pid, li) {
  const n = model.nodes.get('p:' + pid);
  if (!n || n.form !== 'strip' || !n.tr.lanes[li]) return null;
  return pagePoint(n.x + TRACK_X - LABEL_W / 2, laneTop(n, li) + LANE_H / 2);
}
function kernelRow(pid, i) {
  const n = model.nodes.get('p:' + pid);
  if (!n || n.form !== 'strip' || !(n.tr.info.kernels || [])[i]) return null;
  return pagePoint(n.x + STATS_X + 40, kernelRowY(n, i) - 4);
}
// page coordinates of the point `frac` (0: oldest, 1: newest) along drawn sparkline `id`
// (`d:0.spark.utilization_gpu_pct`, `p:42.gpu0.spark.sm_util_pct`), on its middle line
function sparkPoint(id, frac) {
  const b = drawn.sparks.find(s => s.id === id);
  if (!b) return null;
  const r = canvas.getBoundingClientRect();
  return { x: r.left + b.x + Math.min(1, Math.max(0, frac)) * b.w, y: r.top + b.y + b.h / 2 };
}
// the devices and processes of the frame the plane shows (the latest, or a past moment's), as
// the page holds them (no spans)
function frameSummary() {
  const f = shownSnap();
  if (!f) return null;
  return { seq: f.seq, devices: f.devices.map(d => ({ index: d.index, name: d.name, lost: !!d.lost })),
    processes: (f.processes || []).map(p => ({ pid: p.pid, name: p.name, devices: p.attachments.map(a => a.device_index) })),
    traced: (f.traced || []).map(t => ({ pid: t.pid, state: t.state, lanes: t.lanes.length })) };
}
// the timeline: its state, the moment asked and the moment shown, the range, where the track is
function timelineState() {
  const r = trackRect(), shown = store.past;
  return { mode: scrub.mode, moment: momentNow(), now: agentNow(), windowS: scrub.windowS, gone: scrub.gone,
    nothingKept: scrub.nothingKept, retained: scrub.retained ? { from: rangeFrom(), to: rangeTo(), said: scrub.retained.to } : null,
    shown: shown ? { moment: shown.moment, windowS: shown.windowS, width: shown.width } : null, shows: past.shows,
    track: { x: r.left, y: r.top, w: r.width, h: r.height }, retainedAnswers: retained.answers,
    texts: ['tl-state', 'tl-moment', 'tl-window', 'tl-retained', 'tl-msg'].map(id => document.getElementById(id).textContent),
    exports: timeline.exports, lastExport: timeline.lastExport, recorder: Object.assign({}, recorderStats),
    sparkAnswers: spark.answers, spark: { from: spark.from, to: spark.to } };
}
// the lanes of the past window the plane shows, per traced pid: exact seqs or reduced counts
function pastLanes() {
  if (!store.past) return null;
  return [...shownTraced()].map(([pid, t]) => ({ pid, exact: t.past.exact, complete: t.past.complete, execs: t.execs,
    t0: t.t0, t1: t.t1, kernels: t.info.kernels.map(k => ({ name: k.name, count: k.count })),
    lanes: t.lanes.map(L => ({ key: L.key, label: L.label, executions: L.executions,
      seqs: L.buckets ? null : seqsOf(L), buckets: L.buckets ? L.buckets.count.length : null })) }));
}
// defines window.__gpuflow, once, from main.js
export function installHook() {
  const hook = {};
  const ro = (name, fn) => Object.defineProperty(hook, name, { get: fn, enumerable: true });
  ro('frames', () => store.frames);
  ro('fullFrames', () => store.full);
  ro('deltaFrames', () => store.delta);
  ro('resyncs', () => store.resyncs);
  ro('badFrames', () => store.badFrames);
  ro('lastSeq', () => store.lastSeq);
  ro('connection', () => conn.state);
  ro('connects', () => conn.connects);
  ro('demo', () => demo);
  ro('isolated', () => ui.isolated);
  ro('draws', () => loop.draws);
  ro('pendingDraw', () => loop.dirty);   // true between a change (frame, input) and the draw showing it
  ro('lastDrawMs', () => loop.lastDrawMs);
  ro('view', () => ({ s: view.s, x: view.x, y: view.y, w: cssW, h: cssH, dpr }));
  ro('viewTouched', () => view.touched);
  ro('graph', () => ({ nodes: [...model.nodes.keys()].sort(), edges: model.edges.map(e => e.id).sort() }));
  ro('drawn', () => JSON.parse(JSON.stringify(Object.assign({}, drawn, { texts: drawn.texts.map(textBox) }))));
  ro('counts', () => ({ nodes: drawn.nodes, devices: drawn.devices, processes: drawn.processes, edges: drawn.edges,
    lanes: drawn.lanes, spans: drawn.spans, dashes: drawn.dashes }));
  ro('lanesKept', () => [...store.traced].map(([pid, t]) => ({ pid, lanes: t.lanes.map(L => ({ key: L.key, label: L.label,
    held: L.spans.length, executions: L.executions, spans_elided: L.spans_elided, lastSeq: L.lastSeq })) })));
  ro('hover', () => {
    const h = ui.hover;
    if (!h) return null;
    const s = h.span;
    return { node: h.node, lane: h.laneObj ? h.laneObj.label : null, tip: el.tip.hidden ? null : el.tip.textContent,
      seq: h.seq === undefined ? null : h.seq, laneLabel: h.laneLabel ? h.laneLabel.label : null,
      kernel: h.kernel ? h.kernel.name : null, transfer: h.transfer ? h.transfer.direction : null,
      spark: h.spark ? { key: h.spark.key, metrics: h.spark.metrics, t: h.spark.t, values: h.spark.values } : null,
      bucket: h.bucket ? { count: h.bucket.count, busy_ns: h.bucket.busy_ns, from_us: h.bucket.from_us, width_us: h.bucket.width_us } : null,
      span: s ? { seq: s.seq, kind: s.kind, name: s.name, dur_ns: s.dur_ns, bytes: s.bytes, direction: s.direction, grid: s.grid, block: s.block } : null };
  });
  ro('highlight', () => ui.highlight);
  ro('layout', () => ({ columns: model.cols, sizeKey: model.sizeKey }));
  ro('list', () => ({ open: list.open, key: list.key, dir: list.dir, pids: list.order.slice() }));
  ro('bench', () => ({ draw: bench.draw.slice(), ingest: bench.ingest.slice(), intervals: bench.intervals.slice(), showLag: bench.showLag.slice() }));
  ro('timeline', timelineState);
  ro('pastLanes', pastLanes);
  ro('fleet', fleetState);
  hook.tilePoint = tilePoint;
  hook.nodeRect = nodeRect;
  hook.trackX = (t) => xOf(t);
  hook.sparkPoint = sparkPoint;
  hook.laneSeqs = (pid) => {
    const t = store.traced.get(pid);
    return t ? t.lanes.map(L => ({ key: L.key, seqs: seqsOf(L) })) : null;
  };
  hook.spanPoint = spanPoint;
  hook.laneLabelPoint = laneLabelPoint;
  hook.kernelRow = kernelRow;
  hook.frame = frameSummary;
  hook.kernelsOf = (pid) => {
    const t = store.traced.get(pid);
    return t ? t.info.kernels.map(k => ({ name: k.name, mangled: k.mangled, count: k.count, total_ns: k.total_ns })) : null;
  };
  hook.fonts = Object.freeze(Object.fromEntries(Object.entries(F).map(([k, f]) => [k, f.css])));
  hook.benchReset = () => { bench.draw.length = 0; bench.ingest.length = 0; bench.intervals.length = 0; bench.showLag.length = 0; bench.lastTs = 0; };
  Object.freeze(hook);
  Object.defineProperty(window, '__gpuflow', { value: hook, writable: false, enumerable: false, configurable: false });
}
