// One picture of the plane: the edges, every visible node, the lanes over them, and the text;
// this is the painter the redraw loop (canvas.js) calls when something changed.
//
// Edges go from a process to each GPU it holds (brighter with its SM % there, grey when the driver
// does not say; a traced process's labelled with its busy share and copies' bandwidth there), from
// each GPU to the host and between NVLinked GPUs (link_edges.js: strands as thick as their bytes a
// second each way), leaving each node on the side that faces the other (a traced strip above or
// below the GPUs leaves from its bottom or top). A process's edges are one device
// pixel wide at any zoom, which the rasteriser draws far faster than a wider stroke (a whole
// 64-process graph's edges cost several times less); the edges of an isolated node are drawn
// wider. They are bucketed by style so each bucket is one stroke.
// An isolated node, its edges and its neighbours stay lit and the rest is dimmed; a node pointed
// at in the process list is outlined and its neighbourhood lit, the rest dimmed less. When node
// text would be too small to read in device pixels (canvas.js textIsLegible), it gives way to one
// title per node at a fixed screen size; a process's title carries its pid, so eight ranks of one
// name stay told apart.
//
// Constraints: nodes, edges and spans outside the view are culled; nothing here allocates per
// span. Before the first frame the plane says what it is waiting for.

import { COL, F, beginDraw, ctx, cssH, cssW, dpr, drawn, fit, flushText, setWorld, textIsLegible, textScreen, textWidth,
  toWorld, ui, view } from './canvas.js';
import { conn, demo } from './connection.js';
import { clamp01, isNum } from './format.js';
import { DEV_BAND, procRowY } from './geometry.js';
import { drawGpuRows } from './gpu_metrics_rows.js';
import { drawLanes } from './lanes.js';
import { litSets, model } from './layout.js';
import { drawCopyLabels, drawLinks, drawNvlinks } from './link_edges.js';
import { drawDevice, drawHost, drawProcess } from './nodes.js';
import { shownSnap } from './store.js';
import { drawTraced } from './traced.js';

const EDGE_ALPHA = [0.4, 0.6, 0.8, 1];   // by SM % quartile

// [x1, y1, x2, y2, vertical] of a process's edge to a GPU: from the side of the process facing it
function edgeAnchor(e) {
  const a = model.nodes.get(e.from), b = model.nodes.get(e.to);
  if (!a || !b) return null;
  const spread = ((a.pid * 7) % 7) * 2;
  if (a.form === 'strip' && (a.y + a.h <= b.y || a.y >= b.y + b.h)) {   // straight down (or up) to the GPU
    const down = a.y + a.h <= b.y, bx = b.x + b.w / 2 - 24 + spread * 4;
    return [Math.min(Math.max(bx, a.x + 20), a.x + a.w - 20), down ? a.y + a.h : a.y, bx, down ? b.y : b.y + b.h, true];
  }
  const ay = procRowY(a, e.row) - 4, by = b.y + DEV_BAND / 2 - 6 + spread;
  if (b.x >= a.x + a.w / 2) return [a.x + a.w, ay, b.x, by, false];
  return [a.x, ay, b.x + b.w, by, false];
}
function drawEdges(lit, dimAlpha, vx0, vy0, vx1, vy1) {
  const buckets = new Map();
  for (const e of model.edges) {
    if (!e.att) continue;   // a GPU's PCIe link to the host, an NVLink between GPUs: link_edges.js
    const p = edgeAnchor(e);
    if (!p) continue;
    if (Math.max(p[0], p[2]) < vx0 || Math.min(p[0], p[2]) > vx1 || Math.max(p[1], p[3]) < vy0 || Math.min(p[1], p[3]) > vy1) continue;
    const sm = e.att.sm_util_pct;
    const color = isNum(sm) ? COL.edge : COL.edgeNull, level = isNum(sm) ? Math.min(3, Math.floor(clamp01(sm / 100) * 4)) : 1;
    const dim = lit && !lit.edges.has(e.id), wide = lit && !dim;
    const key = color + '|' + level + '|' + dim + '|' + wide;
    let b = buckets.get(key);
    if (!b) { b = { color, level, dim, wide, pts: [] }; buckets.set(key, b); }
    b.pts.push(p);
    drawn.edges++;
  }
  const hair = 1 / (view.s * dpr);
  for (const b of buckets.values()) {
    ctx.strokeStyle = b.color; ctx.lineWidth = b.wide ? 2 / view.s : hair;
    ctx.globalAlpha = EDGE_ALPHA[b.level] * (b.dim ? dimAlpha * 0.6 : 1);
    ctx.beginPath();
    for (const [x1, y1, x2, y2, vertical] of b.pts) {
      ctx.moveTo(x1, y1);
      if (vertical) {
        const dy = Math.max(30, Math.abs(y2 - y1) * 0.5) * (y2 > y1 ? 1 : -1);
        ctx.bezierCurveTo(x1, y1 + dy, x2, y2 - dy, x2, y2);
      } else {
        const dx = Math.max(40, Math.abs(x2 - x1) * 0.5) * (x2 >= x1 ? 1 : -1);
        ctx.bezierCurveTo(x1 + dx, y1, x2 - dx, y2, x2, y2);
      }
    }
    ctx.stroke();
  }
  ctx.globalAlpha = 1;
}

export function draw() {
  beginDraw();
  const empty = document.getElementById('empty');
  if (!shownSnap()) { empty.hidden = false; empty.textContent = emptyText(); return; }
  empty.hidden = true;
  const [vx0, vy0] = toWorld(0, 0), [vx1, vy1] = toWorld(cssW, cssH);
  const full = textIsLegible(F.small.px);
  drawn.text = full;
  const focus = ui.isolated || (ui.highlight && model.nodes.has(ui.highlight) ? ui.highlight : null);
  const lit = focus ? litSets(focus) : null;
  const dimAlpha = ui.isolated ? 0.16 : 0.4;
  ui.lit = ui.isolated ? lit : null;
  drawn.highlighted = ui.highlight && model.nodes.has(ui.highlight) ? ui.highlight : null;
  setWorld();
  drawEdges(lit, dimAlpha, vx0, vy0, vx1, vy1);
  drawLinks(lit, dimAlpha, vx0, vy0, vx1, vy1);
  drawNvlinks(lit, dimAlpha, vx0, vy0, vx1, vy1, full);
  drawCopyLabels(edgeAnchor, lit, dimAlpha, full);
  const visible = [];
  for (const n of model.order) {
    if (n.x > vx1 || n.x + n.w < vx0 || n.y > vy1 || n.y + n.h < vy0) continue;
    const alpha = lit && !lit.nodes.has(n.id) ? dimAlpha : 1;
    if (alpha < 1) drawn.dimmed++;
    ctx.globalAlpha = alpha;
    if (n.kind === 'device') { drawDevice(n, full); drawn.devices++; }
    else if (n.kind === 'host') { drawHost(n, full); drawn.hosts++; }
    else { if (n.form === 'strip') drawTraced(n, full); else drawProcess(n, full); drawn.processes++; }
    drawn.nodes++;
    visible.push([n, alpha]);
  }
  ctx.globalAlpha = 1;
  for (const [n, alpha] of visible) if (n.form === 'strip') { drawLanes(n, alpha); drawGpuRows(n, alpha); }
  if (!full) drawTitles(visible);
  flushText();
  drawn.dashes = drawn.dashCells.length;
}
// text too small to read: one short title per node at a readable screen size instead
function drawTitles(visible) {
  for (const [n, alpha] of visible) {
    const sw = Math.floor(n.w * view.s / 8) * 8;   // widths in 8 px steps keep the fit cache warm while zooming
    if (sw < 40) continue;
    const sx = view.x + n.x * view.s + 3, sy = view.y + n.y * view.s + 13;
    let shown;
    if (n.kind === 'process') {   // the pid always; the name in the room left
      const pid = ' ' + n.pid + (n.tr ? ' ◆' : ''), room = sw - 6 - textWidth(pid, F.screenTitle);
      const name = (n.data ? n.data.name : n.tr.info.name) || '?';
      shown = room >= 24 ? fit(name, room, F.screenTitle) + pid : pid.trim();
    } else {
      shown = fit(n.kind === 'host' ? (n.data.hostname || 'host') : 'GPU ' + n.data.index + (n.data.lost ? ' LOST' : ''), sw - 6, F.screenTitle);
    }
    textScreen(shown, sx, sy, F.screenTitle, n.kind === 'device' && n.data.lost ? COL.lost : COL.text, alpha);
    drawn.titles.push({ id: n.id, s: shown });
  }
}
function emptyText() {
  if (demo) return 'starting demo…';
  if (conn.state === 'unreachable') return 'agent unreachable — retrying';
  if (conn.state === 'paused') return 'paused while the tab is hidden';
  return 'waiting for the agent…';
}
