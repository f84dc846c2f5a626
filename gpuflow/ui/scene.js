// One picture of the plane: the edges, every visible node, the lanes over them, and the text;
// this is the painter the redraw loop (canvas.js) calls when something changed.
//
// Edges go from a process to each GPU it holds (thicker with its SM %) and from each GPU to the
// host; they are bucketed by style so each bucket is one stroke. An isolated node, its edges and
// its neighbours stay lit, the rest is dimmed. Below LOD_TEXT zoom, node text gives way to one
// readable title per node.
//
// Constraints: nodes, edges and spans outside the view are culled; nothing here allocates per
// span. Before the first frame the plane says what it is waiting for.

import { COL, F, beginDraw, ctx, cssH, cssW, drawn, fit, flushText, setWorld, textScreen, toWorld, ui, view }
  from './canvas.js';
import { conn, demo } from './connection.js';
import { drawLanes } from './lanes.js';
import { HEAD_H, ROW_H, model } from './layout.js';
import { drawDevice, drawHost, drawProcess } from './nodes.js';
import { isNum, clamp01 } from './format.js';
import { store } from './store.js';

export const LOD_TEXT = 0.42;        // below this zoom, node text is replaced by one screen-size title

function edgeAnchor(e) {
  const a = model.nodes.get(e.from), b = model.nodes.get(e.to);
  if (!a || !b) return null;
  const y1 = e.att ? a.y + HEAD_H + 18 - 4 + e.row * ROW_H : a.y + a.h / 2;
  return [a.x + a.w, y1, b.x, b.y + (e.att ? 14 + ((a.pid * 7) % 7) * 2 : b.h / 2)];
}
function drawEdges(lit, vx0, vy0, vx1, vy1) {
  // bucket edges by style so each bucket is one stroke
  const buckets = new Map();
  for (const e of model.edges) {
    const p = edgeAnchor(e);
    if (!p) continue;
    if (Math.max(p[0], p[2]) < vx0 || Math.min(p[0], p[2]) > vx1 || Math.max(p[1], p[3]) < vy0 || Math.min(p[1], p[3]) > vy1) continue;
    let color, w, dash = false;
    if (e.att) {
      const sm = e.att.sm_util_pct;
      color = isNum(sm) ? COL.edge : COL.edgeNull;
      w = isNum(sm) ? 1 + Math.round(clamp01(sm / 100) * 3) : 1;
    } else { color = e.lost ? COL.lost : COL.hostEdge; w = 1.5; dash = e.lost; }
    const dim = lit && !lit.edges.has(e.id);
    const key = color + '|' + w + '|' + dash + '|' + dim;
    let b = buckets.get(key);
    if (!b) { b = { color, w, dash, dim, pts: [] }; buckets.set(key, b); }
    b.pts.push(p);
    drawn.edges++;
  }
  for (const b of buckets.values()) {
    ctx.strokeStyle = b.color; ctx.lineWidth = b.w;
    ctx.globalAlpha = b.dim ? 0.07 : 0.7;
    if (b.dash) ctx.setLineDash([6, 5]);
    ctx.beginPath();
    for (const [x1, y1, x2, y2] of b.pts) {
      const dx = Math.max(40, (x2 - x1) * 0.5);
      ctx.moveTo(x1, y1); ctx.bezierCurveTo(x1 + dx, y1, x2 - dx, y2, x2, y2);
    }
    ctx.stroke();
    if (b.dash) ctx.setLineDash([]);
  }
  ctx.globalAlpha = 1;
}

export function draw() {
  beginDraw();
  const empty = document.getElementById('empty');
  if (!store.snap) { empty.hidden = false; empty.textContent = emptyText(); return; }
  empty.hidden = true;
  const S = view.s;
  const [vx0, vy0] = toWorld(0, 0), [vx1, vy1] = toWorld(cssW, cssH);
  const full = S >= LOD_TEXT;
  drawn.text = full;
  const lit = ui.isolated ? litSets(ui.isolated) : null;
  ui.lit = lit;
  setWorld();
  drawEdges(lit, vx0, vy0, vx1, vy1);
  const visible = [];
  for (const n of model.order) {
    if (n.x > vx1 || n.x + n.w < vx0 || n.y > vy1 || n.y + n.h < vy0) continue;
    const alpha = lit && !lit.nodes.has(n.id) ? 0.16 : 1;
    if (alpha < 1) drawn.dimmed++;
    ctx.globalAlpha = alpha;
    if (n.kind === 'device') { drawDevice(n, full); drawn.devices++; }
    else if (n.kind === 'host') { drawHost(n, full); drawn.hosts++; }
    else { drawProcess(n, full); drawn.processes++; }
    drawn.nodes++;
    visible.push([n, alpha]);
  }
  ctx.globalAlpha = 1;
  for (const [n, alpha] of visible) if (n.tr) drawLanes(n, alpha);
  if (!full) drawTitles(visible);
  flushText();
  drawn.dashes = drawn.dashCells.length;
}
// zoomed out: one short title per node at a readable screen size instead of all the node text
function drawTitles(visible) {
  for (const [n, alpha] of visible) {
    const sw = Math.floor(n.w * view.s / 8) * 8;   // widths in 8 px steps keep the fit cache warm while zooming
    if (sw < 40) continue;
    const sx = view.x + n.x * view.s + 3, sy = view.y + n.y * view.s + 12;
    const t = n.kind === 'host' ? (n.data.hostname || 'host') : n.kind === 'device' ? 'GPU ' + n.data.index + (n.data.lost ? ' LOST' : '')
      : ((n.data ? n.data.name : n.tr.info.name) || String(n.pid)) + (n.tr ? ' ◆' : '');
    textScreen(fit(t, sw - 6, F.small), sx, sy, F.small, n.kind === 'device' && n.data.lost ? COL.lost : COL.text, alpha);
  }
}
export function litSets(id) {
  const nodes = new Set([id]), edges = new Set();
  for (const e of model.edges) if (e.from === id || e.to === id) { edges.add(e.id); nodes.add(e.from); nodes.add(e.to); }
  return { nodes, edges };
}
function emptyText() {
  if (demo) return 'starting demo…';
  if (conn.state === 'unreachable') return 'agent unreachable — retrying';
  if (conn.state === 'paused') return 'paused while the tab is hidden';
  return 'waiting for the agent…';
}
