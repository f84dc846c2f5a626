// The graph's layout: the size of every node and where it sits in the world (the plane the
// view pans and zooms over), and the edges between nodes.
//
// Nodes keep their world position from the frame they first appear in: values changing or other
// processes coming and going never move them. Devices sit in a column by index, the host to the
// right, processes to the left at the free spot nearest the devices they hold.
//
// Constraints: world units only, nothing drawn here; the node geometry below is what the drawing
// (nodes.js, lanes.js) and the hit tests (interaction.js, hook.js) measure against. Placing a
// node is O(n log n) per column tried, so a frame with nothing new costs little.

import { isNum } from './format.js';

export const DEV_W = 300, DEV_H = 162, DEV_GAP = 22;
export const HOST_W = 270;
export const PROC_W = 252, HEAD_H = 42, ROW_H = 17;
export const TR_W = 1160, LANE_H = 15;
// traced node columns (offsets from the node's left edge)
export const TR_LEFT_W = 230, STRIP_X = 244, LABEL_W = 96, TRACK_X = STRIP_X + LABEL_W + 6,
  TRACK_W = 470, COUNT_X = TRACK_X + TRACK_W + 8, STATS_X = COUNT_X + 78;
const EDGE_GAP = 170, COL_STEP = 126, COL_PEN = 420, MARGIN = 14;
export const MAX_LANES_DRAWN = 40;   // per traced node; the rest are counted, not drawn

export const model = { nodes: new Map(), edges: [], order: [] };

function procHeight(p, tr) {
  const rows = Math.max(1, p ? p.attachments.length : 0);
  if (!tr) return HEAD_H + rows * ROW_H + 8;
  const left = HEAD_H + rows * ROW_H + 44;
  const nl = Math.min(tr.lanes.length, MAX_LANES_DRAWN);
  const strip = HEAD_H + 22 + Math.max(nl, 2) * LANE_H + (tr.lanes.length > MAX_LANES_DRAWN ? 16 : 0) + 10;
  const i = tr.info;
  const stats = HEAD_H + 18 + Math.min(i.kernels ? i.kernels.length : 0, 6) * 15 + 22
    + Math.max(1, i.transfers ? i.transfers.length : 0) * 15 + 40 + (i.cupti_status !== 'ok' ? 30 : 0);
  return Math.max(left, strip, stats) + 4;
}
function hostHeight(h, retired) { return 92 + (Math.min((h.problems || []).length, 6) + 2 * retired.length) * 15 + 6; }

// lays out the nodes of plain frame `f` and the traced processes the page keeps (store.traced)
export function rebuild(f, traced) {
  const N = model.nodes, seen = new Set();
  const get = (id, kind) => {
    let n = N.get(id);
    if (!n) { n = { id, kind, x: 0, y: 0, w: 0, h: 0, placed: false, maxSm: 0 }; N.set(id, n); }
    seen.add(id);
    return n;
  };
  const host = get('host', 'host');
  host.data = f.host || {}; host.sources = f.sources || []; host.retired = f.traced_retired || [];
  host.w = HOST_W; host.h = hostHeight(host.data, host.retired);
  let top = Infinity, bot = -Infinity;
  for (const d of f.devices) {
    const n = get('d:' + d.index, 'device');
    n.data = d; n.w = DEV_W; n.h = DEV_H;
    if (isNum(d.clock_sm_mhz) && d.clock_sm_mhz > n.maxSm) n.maxSm = d.clock_sm_mhz;
    n.x = 0; n.y = d.index * (DEV_H + DEV_GAP); n.placed = true;
    top = Math.min(top, n.y); bot = Math.max(bot, n.y + n.h);
  }
  if (top === Infinity) { top = 0; bot = DEV_H; }
  host.x = DEV_W + 150; host.y = Math.round((top + bot) / 2 - host.h / 2); host.placed = true;
  model.colMid = (top + bot) / 2;

  const procs = new Map();
  for (const p of f.processes || []) procs.set(p.pid, { p, tr: null });
  for (const [pid, tr] of traced) {
    const e = procs.get(pid);
    if (e) e.tr = tr; else procs.set(pid, { p: null, tr });
  }
  const grown = [], fresh = [];
  for (const [pid, e] of procs) {
    const n = get('p:' + pid, 'process');
    n.pid = pid; n.data = e.p; n.tr = e.tr;
    const w = e.tr ? TR_W : PROC_W, h = procHeight(e.p, e.tr);
    if (n.placed && (w > n.w || h > n.h)) grown.push(n);
    n.w = w; n.h = h;
    if (!n.placed) fresh.push(n);
  }
  for (const id of [...N.keys()]) if (!seen.has(id)) N.delete(id);
  // a node that grew (a new lane, a new attachment) pushes only the nodes it now overlaps
  for (const g of grown) {
    for (const o of N.values()) {
      if (o !== g && o.kind === 'process' && o.placed && overlaps(g, o, MARGIN - 1)) { o.placed = false; fresh.push(o); }
    }
  }
  fresh.sort((a, b) => (b.tr ? 1 : 0) - (a.tr ? 1 : 0) || attCount(b) - attCount(a) || a.pid - b.pid);
  for (const n of fresh) place(n);

  const edges = [];
  for (const n of N.values()) {
    if (n.kind !== 'process' || !n.data) continue;
    n.data.attachments.forEach((a, i) => {
      const to = 'd:' + a.device_index;
      if (N.has(to)) edges.push({ id: n.id + '>' + to, from: n.id, to, att: a, row: i });
    });
  }
  for (const d of f.devices) edges.push({ id: 'd:' + d.index + '>host', from: 'd:' + d.index, to: 'host', lost: !!d.lost });
  model.edges = edges;
  model.order = [host, ...[...N.values()].filter(n => n.kind === 'device'),
    ...[...N.values()].filter(n => n.kind === 'process').sort((a, b) => a.pid - b.pid)];
}
function attCount(n) { return n.data ? n.data.attachments.length : 0; }
function overlaps(a, b, m) {
  return a.x < b.x + b.w + m && b.x < a.x + a.w + m && a.y < b.y + b.h + m && b.y < a.y + a.h + m;
}
function targetY(n) {
  const ys = [];
  if (n.data) for (const a of n.data.attachments) {
    const d = model.nodes.get('d:' + a.device_index);
    if (d) ys.push(d.y + d.h / 2);
  }
  const c = ys.length ? ys.reduce((s, v) => s + v, 0) / ys.length : model.colMid;
  return c - n.h / 2;
}
// nearest free y in a column: the gaps between occupied intervals, each tried at the point closest
// to the target. O(n log n) per column; columns further left cost more.
function freeY(xl, xr, h, ty, self) {
  const occ = [];
  for (const o of model.nodes.values()) {
    if (o === self || o.kind !== 'process' || !o.placed) continue;
    if (o.x < xr + MARGIN && o.x + o.w > xl - MARGIN) occ.push([o.y - MARGIN, o.y + o.h + MARGIN]);
  }
  occ.sort((a, b) => a[0] - b[0]);
  let best = null, prevEnd = -Infinity;
  const consider = (gs, ge) => {
    if (ge - gs < h) return;
    const y = Math.min(Math.max(ty, gs), ge - h);
    const d = Math.abs(y - ty);
    if (!best || d < best.d) best = { y, d };
  };
  for (const [s, e] of occ) { consider(prevEnd, s); if (e > prevEnd) prevEnd = e; }
  consider(prevEnd, Infinity);
  return best;
}
function place(n) {
  const ty = targetY(n);
  let best = null;
  for (let c = 0; c < 60; c++) {
    const pen = c * COL_PEN;
    if (best && pen >= best.cost) break;
    const xr = -EDGE_GAP - c * COL_STEP;
    const r = freeY(xr - n.w, xr, n.h, ty, n);
    const cost = r.d + pen;
    if (!best || cost < best.cost) best = { cost, x: xr - n.w, y: r.y };
  }
  n.x = best.x; n.y = Math.round(best.y); n.placed = true;
}
