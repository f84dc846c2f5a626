// The graph's model: every node with its size and place in the world (the plane the view pans
// and zooms over), the edges between nodes, and fitting the view to some of them.
//
// A whole layout (place.js) is made when the set of GPUs changes, and when the canvas changes
// size while the view still follows the graph (the user has not panned or zoomed): the plane is
// laid out for the screen it has. Between those, nodes keep the place they got when they first
// appeared: values changing or other processes coming and going never move them. A node that
// grows (a new lane, a new GPU held) pushes only the nodes it now overlaps, and a traced process
// whose strip appears (its first lane) moves from a card in a lane to the band of strips.
//
// Constraints: world units only, nothing drawn here; node geometry is geometry.js's. A frame
// with nothing new costs a pass over the nodes.

import { cssH, cssW, fitRect, fitScale, view } from './canvas.js';
import { isNum } from './format.js';
import { DEV_H, DEV_W, HOST_W, hostHeight, hostLines, isStrip, nodeWidth, procHeight } from './geometry.js';
import { MARGIN, columnChoices, placeNode, placingOrder, trialLayout } from './place.js';

export const model = { nodes: new Map(), edges: [], order: [], frame: null, devKey: null, sizeKey: '', cols: 0 };

// lays out the nodes of plain frame `f` and the traced processes the page keeps (store.traced);
// `relayout` forces a whole layout for the current canvas
export function rebuild(f, traced, relayout) {
  const N = model.nodes, seen = new Set();
  const get = (id, kind) => {
    let n = N.get(id);
    if (!n) { n = { id, kind, x: 0, y: 0, w: 0, h: 0, placed: false, form: '' }; N.set(id, n); }
    seen.add(id);
    return n;
  };
  const host = get('host', 'host');
  host.data = f.host || {}; host.sources = f.sources || []; host.retired = f.traced_retired || [];
  host.lines = hostLines(host.data, host.sources, host.retired);
  const hostGrew = host.h && hostHeight(host.lines) > host.h;
  host.w = HOST_W; host.h = hostHeight(host.lines);
  const indices = [];
  for (const d of f.devices) {
    const n = get('d:' + d.index, 'device');
    n.data = d; n.w = DEV_W; n.h = DEV_H;
    indices.push(d.index);
  }
  indices.sort((a, b) => a - b);

  const procs = new Map();
  for (const p of f.processes || []) procs.set(p.pid, { p, tr: null });
  for (const [pid, tr] of traced) {
    const e = procs.get(pid);
    if (e) e.tr = tr; else procs.set(pid, { p: null, tr });
  }
  const grown = [], fresh = [], procNodes = [];
  for (const [pid, e] of procs) {
    const n = get('p:' + pid, 'process');
    n.pid = pid; n.data = e.p; n.tr = e.tr;
    const form = isStrip(e.tr) ? 'strip' : e.tr ? 'traced' : 'plain';
    const w = nodeWidth(e.p, e.tr), h = procHeight(e.p, e.tr);
    if (n.placed && n.form !== form) n.placed = false;          // a strip appeared: to the band
    else if (n.placed && (w > n.w || h > n.h)) grown.push(n);
    n.form = form; n.w = w; n.h = h;
    if (!n.placed) fresh.push(n);
    procNodes.push(n);
  }
  for (const id of [...N.keys()]) if (!seen.has(id)) N.delete(id);

  const devKey = indices.join(',');
  const sizeKey = Math.round(cssW) + 'x' + Math.round(cssH);
  if (relayout || model.devKey !== devKey || (model.sizeKey !== sizeKey && !view.touched)) {
    layoutAll(indices, host, procNodes);
    model.devKey = devKey; model.sizeKey = sizeKey;
  } else {
    const frame = model.frame;
    host.y = Math.round(frame.mid - host.h / 2);
    if (hostGrew) grown.push(host);
    // a node that grew pushes only the nodes it now overlaps
    for (const g of grown) {
      for (const o of N.values()) {
        if (o !== g && o.kind === 'process' && o.placed && overlaps(g, o, MARGIN - 1)) { o.placed = false; fresh.push(o); }
      }
    }
    const all = [...N.values()];
    for (const n of placingOrder(frame, fresh)) placeNode(frame, all, n);
  }

  const edges = [];
  for (const n of N.values()) {
    if (n.kind !== 'process' || !n.data) continue;
    n.data.attachments.forEach((a, i) => {
      const to = 'd:' + a.device_index;
      if (N.has(to)) edges.push({ id: n.id + '>' + to, from: n.id, to, att: a, row: i });
    });
  }
  for (const d of f.devices) edges.push({ id: 'd:' + d.index + '>host', from: 'd:' + d.index, to: 'host', lost: !!d.lost });
  // an NVLink between two GPUs of the host: one edge per pair, whichever of them reports the links
  const pairs = new Set();
  for (const d of f.devices) {
    for (const l of (d.links && d.links.nvlinks) || []) {
      const peer = l.remote_device_index;
      if (!isNum(peer) || peer === d.index || !N.has('d:' + peer)) continue;
      const [a, b] = d.index < peer ? [d.index, peer] : [peer, d.index];
      if (pairs.has(a + '~' + b)) continue;
      pairs.add(a + '~' + b);
      edges.push({ id: 'd:' + a + '~d:' + b, from: 'd:' + a, to: 'd:' + b, nvlink: true });
    }
  }
  model.edges = edges;
  model.order = [host, ...[...N.values()].filter(n => n.kind === 'device'),
    ...[...N.values()].filter(n => n.kind === 'process').sort((a, b) => a.pid - b.pid)];
}

// every node placed anew: each column count tried, the one whose fit is largest kept (fewer
// columns when within 2 %)
function layoutAll(indices, host, procNodes) {
  let best = null;
  for (const cols of columnChoices(indices.length)) {
    const t = trialLayout(indices, cols, host, procNodes);
    const b = t.bounds, s = fitScale(b.x1 - b.x0, b.y1 - b.y0, cssW, cssH);
    if (!best || s > best.s * 1.02) best = { s, t };
  }
  const { frame, at } = best.t;
  model.frame = frame; model.cols = frame.cols;
  for (const n of model.nodes.values()) {
    const p = at.get(n.id);
    if (p) { n.x = p.x; n.y = p.y; n.placed = true; }
  }
}
function overlaps(a, b, m) {
  return a.x < b.x + b.w + m && b.x < a.x + a.w + m && a.y < b.y + b.h + m && b.y < a.y + a.h + m;
}

export function bounds(ids) {
  let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
  for (const n of model.nodes.values()) {
    if (ids && !ids.has(n.id)) continue;
    x0 = Math.min(x0, n.x); y0 = Math.min(y0, n.y); x1 = Math.max(x1, n.x + n.w); y1 = Math.max(y1, n.y + n.h);
  }
  return x0 === Infinity ? null : { x0, y0, x1, y1 };
}
// fits the view to the nodes `ids` (all of them when null), whole and centred
export function fitTo(ids) {
  const b = bounds(ids);
  if (b) fitRect(b);
}
// the nodes an isolated (or pointed-at) node keeps lit: itself, its edges and its neighbours
export function litSets(id) {
  const nodes = new Set([id]), edges = new Set();
  for (const e of model.edges) if (e.from === id || e.to === id) { edges.add(e.id); nodes.add(e.from); nodes.add(e.to); }
  return { nodes, edges };
}
