// Where nodes go: the plane laid out for the screen it is shown on.
//
// The GPUs stand in columns around the host, which sits in the middle so every GPU-to-host edge
// is short: [processes | GPUs] host [GPUs | processes]. Each column of GPUs has a lane of
// processes on its outer side, and a process goes to the lane of the GPUs it holds (a job on GPUs
// of several columns to the least loaded of their lanes). In a whole layout each lane is packed:
// its processes in the order of the GPUs they hold, each as near the middle of its GPUs as the
// others allow (least squares, pool-adjacent-violators), and an outer lane too tall for the
// block splits into sub-columns outward. A process that appears later goes to the free spot
// nearest its GPUs, so nothing else moves. A traced process with lanes is as wide as the block,
// so it goes above or below it, whichever is nearer, centred on it, and the bands grow outward.
// How many GPU columns (1, 2, 4, …) is decided by trying each and keeping the one whose fit shows
// text largest on this canvas.
//
// Room is left for what comes next on the same screen: EDGE_GAP between a lane and its GPUs is
// where an edge's bandwidth label goes, and the fitted view stops above the bottom bar, where the
// timeline scrubber goes.
//
// Constraints: world units only. Placing one node is O(n log n) per lane and sub-column tried,
// so a frame with nothing new costs nothing and a new process little; a whole layout (trying
// each column count) runs only when the set of GPUs or the canvas size changes.

import { DEV_H, DEV_W, HOST_W, PROC_W, TR_W, isStrip } from './geometry.js';

const ROW_GAP = 16;                    // between GPUs of one column
const EDGE_GAP = 64;                   // a lane and its GPUs: room for a labelled edge
const HOST_GAP = 48;                   // GPUs and the host
const INNER_GAP = 24;                  // a GPU column and the next column's lane
const LANE_STEP = PROC_W + 14;         // sub-columns of an outer lane
const COL_PEN = 400;                   // a sub-column further out is worth this much vertical distance
const CROSS_PEN = 0.5;                 // per world unit between a lane and a GPU it does not face
const BAND_GAP = 40;                   // the block and a traced node above or below it
export const MARGIN = 14;

// The frame for `indices` (GPU indices, sorted) in `cols` columns: each column's GPUs and lane,
// where each GPU and the host go, and the block's middle.
export function makeFrame(indices, cols, hostH) {
  const C = Math.max(1, Math.min(cols, indices.length || 1));
  const R = Math.max(1, Math.ceil(indices.length / C));
  const L = Math.ceil(C / 2), columns = [], dev = new Map();
  let x = 0;
  for (let c = 0; c < C; c++) {
    const left = c < L;
    const col = { left, outer: left ? c === 0 : c === C - 1, devX: 0, laneX: 0, devices: indices.slice(c * R, (c + 1) * R) };
    if (left) {
      col.laneX = x; x += PROC_W + EDGE_GAP; col.devX = x; x += DEV_W;
      if (c < L - 1) x += INNER_GAP;
    }
    if (c === L - 1) { x += HOST_GAP; col.hostX = x; x += HOST_W + HOST_GAP; }
    if (!left) {
      col.devX = x; x += DEV_W + EDGE_GAP; col.laneX = x; x += PROC_W;
      if (c < C - 1) x += INNER_GAP;
    }
    col.devices.forEach((d, r) => dev.set(d, { x: col.devX, y: r * (DEV_H + ROW_GAP), col: c }));
    columns.push(col);
  }
  const blockH = R * DEV_H + (R - 1) * ROW_GAP;
  const hostX = columns[L - 1].hostX;
  return { cols: C, columns, dev, width: x, mid: blockH / 2, blockH,
    host: { x: hostX, y: Math.round(blockH / 2 - hostH / 2) } };
}

function overlapsX(o, xl, xr) { return o.x < xr + MARGIN && o.x + o.w > xl - MARGIN; }
// nearest free y for a node of height h in the x range [xl, xr], nearest to ty, among `placed`
function freeY(placed, xl, xr, h, ty, self) {
  const occ = [];
  for (const o of placed) {
    if (o === self || !o.placed || !overlapsX(o, xl, xr)) continue;
    occ.push([o.y - MARGIN, o.y + o.h + MARGIN]);
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

// the GPUs a process holds that the frame shows
function heldDevices(frame, n) {
  const out = [];
  if (n.data) for (const a of n.data.attachments) { const d = frame.dev.get(a.device_index); if (d) out.push(d); }
  return out;
}
function columnsOf(frame, n) { return new Set(heldDevices(frame, n).map(d => d.col)); }

// Places node n (a process) in `frame` among the nodes already placed.
export function placeNode(frame, placed, n) {
  const held = heldDevices(frame, n), ty = targetY(frame, n);
  let best = null;
  if (isStrip(n.tr)) {   // above or below the block, centred on it
    const x = Math.round((frame.cx === undefined ? frame.width / 2 : frame.cx) - TR_W / 2);
    for (const target of [-BAND_GAP - n.h, frame.blockH + BAND_GAP]) {
      const r = freeY(placed, x, x + n.w, n.h, target, n);
      if (!best || r.d < best.cost) best = { cost: r.d, x, y: r.y };
    }
  } else {
    const cols = held.length ? [...new Set(held.map(d => d.col))] : [0];
    for (const c of cols) {
      const col = frame.columns[c];
      const laneMid = col.laneX + PROC_W / 2;
      let cross = 0;
      for (const d of held) if (d.col !== c) cross += Math.abs(d.x + DEV_W / 2 - laneMid) * CROSS_PEN;
      for (let k = 0; k < (col.outer ? 60 : 1); k++) {
        const pen = cross + k * COL_PEN;
        if (best && pen >= best.cost) break;
        const x = col.left ? col.laneX - k * LANE_STEP : col.laneX + k * LANE_STEP;
        const r = freeY(placed, x, x + n.w, n.h, ty, n);
        if (!best || r.d + pen < best.cost) best = { cost: r.d + pen, x, y: r.y };
      }
    }
  }
  n.x = best.x; n.y = Math.round(best.y); n.placed = true;
}

// the order a whole layout places processes in: those whose GPUs stand in one column first
// (their lane is certain), the largest first; then those spanning columns, where there is room;
// then the traced strips, outside everything
export function placingOrder(frame, procs) {
  const rank = (n) => isStrip(n.tr) ? 2 : columnsOf(frame, n).size > 1 ? 1 : 0;
  const atts = (n) => n.data ? n.data.attachments.length : 0;
  return procs.slice().sort((a, b) => rank(a) - rank(b) || atts(b) - atts(a) || a.pid - b.pid);
}

// A whole layout of `procs` (process nodes with their sizes) around the GPUs `indices` in `cols`
// columns: positions by node id and the world bounds of everything.
export function trialLayout(indices, cols, host, procs) {
  const frame = makeFrame(indices, cols, host.h);
  const placed = [];
  for (const [index, p] of frame.dev) placed.push({ id: 'd:' + index, x: p.x, y: p.y, w: DEV_W, h: DEV_H, placed: true });
  placed.push({ id: 'host', x: frame.host.x, y: frame.host.y, w: host.w, h: host.h, placed: true });
  const copy = (n) => ({ id: n.id, pid: n.pid, data: n.data, tr: n.tr, w: n.w, h: n.h, x: 0, y: 0, placed: false });
  const ordered = placingOrder(frame, procs).map(copy);
  packLanes(frame, placed, ordered.filter(t => !isStrip(t.tr)));
  frame.cx = (boundsOf(placed).x0 + boundsOf(placed).x1) / 2;
  for (const t of ordered) if (isStrip(t.tr)) { placeNode(frame, placed, t); placed.push(t); }
  const at = new Map();
  for (const o of placed) at.set(o.id, o);
  return { frame, at, bounds: boundsOf(placed) };
}
function boundsOf(nodes) {
  let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
  for (const o of nodes) { x0 = Math.min(x0, o.x); y0 = Math.min(y0, o.y); x1 = Math.max(x1, o.x + o.w); y1 = Math.max(y1, o.y + o.h); }
  return { x0, y0, x1, y1 };
}
// the y where a process would sit centred on the GPUs it holds
function targetY(frame, n) {
  const held = heldDevices(frame, n);
  return (held.length ? held.reduce((s, d) => s + d.y + DEV_H / 2, 0) / held.length : frame.mid) - n.h / 2;
}
// Every process of a whole layout into a lane (its GPUs' column, the least loaded one when they
// span several), each lane split into sub-columns when taller than the block (outer lanes only),
// each sub-column packed.
function packLanes(frame, placed, nodes) {
  const lanes = frame.columns.map(() => []), load = frame.columns.map(() => 0);
  for (const n of nodes) {   // placingOrder: processes of one column first, so spans see the load
    const held = heldDevices(frame, n);
    const cols = held.length ? [...new Set(held.map(d => d.col))] : [0];
    const mine = (c) => held.filter(d => d.col === c).length;
    const c = cols.reduce((b, c) => load[c] < load[b] || (load[c] === load[b] && mine(c) > mine(b)) ? c : b, cols[0]);
    lanes[c].push(n); load[c] += n.h + MARGIN;
  }
  const cap = Math.max(frame.blockH, ...nodes.map(n => n.h)) * 1.15;
  lanes.forEach((items, c) => {
    const col = frame.columns[c];
    items.forEach(n => { n.ty = targetY(frame, n); });
    items.sort((a, b) => a.ty - b.ty || a.pid - b.pid);
    const subs = [];
    let cur = [], h = 0;
    for (const n of items) {
      if (col.outer && cur.length && h + n.h > cap) { subs.push(cur); cur = []; h = 0; }
      cur.push(n); h += n.h + MARGIN;
    }
    if (cur.length) subs.push(cur);
    subs.forEach((sub, k) => {
      const x = col.left ? col.laneX - k * LANE_STEP : col.laneX + k * LANE_STEP;
      packColumn(sub);
      for (const n of sub) { n.x = x; n.placed = true; placed.push(n); }
    });
  });
}
// y for each of `items` (sorted by target y) so none overlaps the next and the sum of squared
// distances to their targets is least: isotonic regression (pool adjacent violators) on the
// targets less each item's offset in the stack
function packColumn(items) {
  const blocks = [];
  let off = 0;
  const offs = items.map(n => { const o = off; off += n.h + MARGIN; return o; });
  items.forEach((n, i) => {
    blocks.push({ sum: n.ty - offs[i], count: 1 });
    while (blocks.length > 1) {
      const b = blocks[blocks.length - 1], a = blocks[blocks.length - 2];
      if (a.sum / a.count <= b.sum / b.count) break;
      a.sum += b.sum; a.count += b.count; blocks.pop();
    }
  });
  let i = 0;
  for (const b of blocks) for (let k = 0; k < b.count; k++, i++) items[i].y = Math.round(b.sum / b.count + offs[i]);
}

// the column counts worth trying for n GPUs: 1, then even counts (a column each side of the
// host) up to n, at most 8
export function columnChoices(n) {
  const out = [1];
  for (let c = 2; c <= Math.min(n, 8); c += 2) out.push(c);
  return out;
}
