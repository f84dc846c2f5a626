// A hub's page: the fleet's overview, a tile per host, and any host's own plane on a click.
//
// The page starts on api/stream as ever. When its first frame is a hub's (a host in `hosts` has an
// `address`: another agent, followed), the page asks for the overview instead
// (api/stream?detail=hosts, fleet_stream.js) and draws one tile per host, up to a thousand:
// its name, state (up; stale and down in the warning and error colours, their bars dimmed: not
// live), one bar per GPU (utilization, grey where not available, red where lost), its memory in
// use over all GPUs, and its processes and running traced processes. A click on a tile opens that
// host's plane (api/stream?host=<name>, which the hub serves as that host's agent would: the
// graph, lanes included, drawn by the page's usual modules); the "fleet" button in the top bar,
// or Backspace, goes back. Drag pans and the wheel zooms the overview, F fits it.
//
// Constraints: no DOM text but through textContent; one path per colour per picture (a thousand
// tiles are some 20,000 rectangles), tiles outside the view culled, text only where it is legible;
// where a screen holds many tiles they come from cached bitmaps (fleet_tiles.js), so a frame costs
// a few image draws and the tiles that changed, not every rectangle again; the top bar's lines
// are touched only when they change;
// while the overview is shown its pointer and F/Esc keys are its own (the plane's listeners do not
// see them). main.js gives it every frame first (fleetFrame) and its painter (drawFleet).

import { COL, F, beginDraw, canvas, ctx, cssH, cssW, drawn, fitRect, flushText, markDirty, setWorld, text,
  textIsLegible, toWorld, view } from './canvas.js';
import { el, setStreamPath } from './connection.js';
import { isHostsFrame, nothingSeen, readHosts } from './fleet_stream.js';
import { GAP, TILE_H, TILE_W, drawBlocks, fillTiles, lineColour, paintTile, pathSet, tileLines, tileXY as placeOf,
  useBlocks } from './fleet_tiles.js';
import { fmtSpan } from './format.js';
import { nothingRead } from './stream.js';
import { store } from './store.js';

export { GAP, TILE_H, TILE_W };
export const OVERVIEW = 'api/stream?detail=hosts';

// which view the page is in: 'plane' (a single agent: nothing of this module), 'overview' or
// 'host' (one host of a hub, on the plane)
export const fleet = { mode: 'plane', host: null, state: nothingSeen, order: [], cols: 1, key: '', frames: 0,
  receivedAt: 0, tiles: [], tilesMin: Infinity, tilesMax: 0 };
let backBtn = null, hoverName = null;

function isHub(f) { return Array.isArray(f.hosts) && f.hosts.some(h => h && h.address); }

// One frame (parsed JSON), before the plane sees it: true when it is this module's (or a frame
// of a stream the page has left), false when the plane should take it.
export function fleetFrame(f) {
  if (isHostsFrame(f)) {
    if (fleet.mode !== 'overview') return true;
    try { fleet.state = readHosts(fleet.state, f); } catch (e) { fleet.state = nothingSeen; setStreamPath(OVERVIEW); return true; }
    fleet.frames++;
    fleet.receivedAt = performance.now();
    layOut();
    markDirty();
    return true;
  }
  if (fleet.mode === 'plane' && f && f.frame === 'full' && isHub(f)) { showOverview(); return true; }
  return fleet.mode === 'overview';
}

function showOverview() {
  fleet.mode = 'overview'; fleet.host = null; fleet.state = nothingSeen; fleet.key = '';
  Object.assign(store, { snap: null, lastSeq: null, traced: new Map(), reader: nothingRead, past: null });
  view.touched = false;
  if (backBtn) backBtn.hidden = true;
  setStreamPath(OVERVIEW);
  markDirty();
}

function openHost(name) {
  const tile = fleet.state.tiles.get(name);
  fleet.mode = 'host'; fleet.host = name;
  view.touched = false;
  el.tip.hidden = true; hoverName = null;
  if (backBtn) {
    backBtn.hidden = false;
    backBtn.textContent = '\u2190 fleet \u00b7 ' + name + (tile && tile.state !== 'up' ? ' (' + tile.state + ')' : '');
  }
  setStreamPath('api/stream?host=' + encodeURIComponent(name));
  markDirty();
}

// tiles in rows, as many columns as make the grid's shape the canvas's; fitted while the view is
// not the user's
function layOut() {
  fleet.order = [...fleet.state.tiles.keys()].sort();
  const n = fleet.order.length, key = n + ':' + Math.round(cssW) + 'x' + Math.round(cssH);
  if (key === fleet.key) return;
  fleet.key = key;
  fleet.cols = Math.max(1, Math.min(n, Math.round(Math.sqrt(n * (cssW / cssH) * (TILE_H + GAP) / (TILE_W + GAP)))));
  if (!view.touched) fitOverview();
}
function fitOverview() {
  const n = Math.max(1, fleet.order.length), rows = Math.ceil(n / fleet.cols);
  fitRect({ x0: 0, y0: 0, x1: fleet.cols * (TILE_W + GAP) - GAP, y1: rows * (TILE_H + GAP) - GAP });
}
function tileXY(i) { return placeOf(i, fleet.cols); }
function tileAt(sx, sy) {
  const [wx, wy] = toWorld(sx, sy);
  const c = Math.floor(wx / (TILE_W + GAP)), r = Math.floor(wy / (TILE_H + GAP));
  if (c < 0 || c >= fleet.cols || r < 0 || wx - c * (TILE_W + GAP) > TILE_W || wy - r * (TILE_H + GAP) > TILE_H) return null;
  return fleet.order[r * fleet.cols + c] || null;
}

// The painter's part: false unless the overview is shown (then it drew the picture).
export function drawFleet() {
  if (fleet.mode !== 'overview') return false;
  if (!fleet.key.endsWith(':' + Math.round(cssW) + 'x' + Math.round(cssH))) layOut();   // the canvas changed size
  beginDraw();
  header();
  const empty = document.getElementById('empty');
  empty.hidden = fleet.order.length > 0;
  if (!fleet.order.length) { empty.textContent = fleet.frames ? 'the hub follows no agent' : 'waiting for the hub…'; return true; }
  setWorld();
  const [vx0, vy0] = toWorld(0, 0), [vx1, vy1] = toWorld(cssW, cssH);
  const legible = textIsLegible(F.small.px);
  if (useBlocks(view.s)) {   // many tiles: from the cached blocks (fleet_tiles.js)
    const shown = drawBlocks(ctx, fleet.order, fleet.state.tiles, fleet.cols, fleet.key, view.s, legible, vx0, vy0, vx1, vy1);
    return shownTiles(shown);
  }
  const { paths, P } = pathSet(), shown = [];
  fleet.order.forEach((name, i) => {
    const [x, y] = tileXY(i);
    if (x > vx1 || x + TILE_W < vx0 || y > vy1 || y + TILE_H < vy0) return;
    const t = fleet.state.tiles.get(name);
    const [used, total] = paintTile(P, t, x, y);
    shown.push(name);
    if (!legible) return;
    const [, what] = tileLines(t, used, total);
    text(name, x + 10, y + 18, F.bold, COL.text, 'left', TILE_W - 20, 'tile:' + name);
    text(what, x + 10, y + 35, F.small, lineColour(t), 'left', TILE_W - 20);
  });
  fillTiles(ctx, paths, view.s);
  flushText();
  return shownTiles(shown);
}
function shownTiles(shown) {
  drawn.hosts = shown.length;
  fleet.tiles = shown;
  fleet.tilesMin = Math.min(fleet.tilesMin, shown.length); fleet.tilesMax = Math.max(fleet.tilesMax, shown.length);
  return true;
}

// the top bar's lines while the overview is shown: the fleet's counts, and how fresh they are
function header() {
  const n = { up: 0, stale: 0, down: 0 };
  let gpus = 0;
  for (const t of fleet.state.tiles.values()) { n[t.state] = (n[t.state] || 0) + 1; gpus += (t.gpus || []).length; }
  setText(el.host, fleet.state.tiles.size + ' hosts · ' + n.up + ' up · ' + n.stale + ' stale · ' + n.down + ' down · ' +
    gpus + ' GPUs');
  if (fleet.frames) setText(el.frame, 'seq ' + fleet.state.seq + ' · ' + fmtSpan((performance.now() - fleet.receivedAt) / 1000) + ' ago');
}
// a line of the top bar, touched only when it changes (a change lays the bar out again)
function setText(node, line) {
  if (node.textContent !== line) node.textContent = line;
}

function tip(name, cx, cy) {
  const t = fleet.state.tiles.get(name);
  if (!t) { el.tip.hidden = true; return; }
  const tipEl = el.tip, row = (k, v, bad) => {
    const r = document.createElement('div'); r.className = 'r';
    const a = document.createElement('span'); a.textContent = k;
    const b = document.createElement('span'); b.textContent = v; if (bad) b.className = 'w';
    r.append(a, b); tipEl.append(r);
  };
  tipEl.replaceChildren();
  const title = document.createElement('div'); title.className = 't'; title.textContent = name; tipEl.append(title);
  row('state', t.state + (t.restarts ? ' · restarted ' + t.restarts + '×' : ''), t.state !== 'up');
  row('agent', t.address || '—');
  if (typeof t.seen === 'number') row('last heard', fmtSpan(Math.max(0, Date.now() / 1000 - t.seen)) + ' ago');
  row('GPUs', String((t.gpus || []).length) + ((t.gpus || []).some(g => g[4]) ? ' (one lost)' : ''));
  for (const p of (t.problems || []).slice(0, 4)) row(p.severity, p.message, p.severity !== 'info');
  tipEl.hidden = false;
  tipEl.style.left = Math.max(8, Math.min(cx + 14, window.innerWidth - tipEl.offsetWidth - 8)) + 'px';
  tipEl.style.top = Math.max(8, Math.min(cy + 16, window.innerHeight - tipEl.offsetHeight - 8)) + 'px';
}

// the overview's own pointer, wheel and keys (installed before the plane's, which then do not see
// them while it is shown), and the top bar's way back
export function installFleet() {
  backBtn = document.createElement('button');
  backBtn.type = 'button'; backBtn.id = 'fleetbtn'; backBtn.hidden = true;
  backBtn.title = 'back to the fleet (Backspace)';
  backBtn.addEventListener('click', showOverview);
  document.getElementById('conn').after(backBtn);
  let drag = null;
  const mine = (e) => { if (fleet.mode !== 'overview') return false; e.stopImmediatePropagation(); return true; };
  const xy = (e) => { const r = canvas.getBoundingClientRect(); return [e.clientX - r.left, e.clientY - r.top]; };
  canvas.addEventListener('pointerdown', (e) => {
    if (!mine(e) || e.button !== 0) return;
    drag = { x: e.clientX, y: e.clientY, vx: view.x, vy: view.y, moved: false };
    canvas.setPointerCapture(e.pointerId);
  });
  canvas.addEventListener('pointermove', (e) => {
    if (!mine(e)) return;
    if (drag) {
      const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (!drag.moved && Math.abs(dx) + Math.abs(dy) > 4) { drag.moved = true; el.tip.hidden = true; }
      if (drag.moved) { view.x = drag.vx + dx; view.y = drag.vy + dy; view.touched = true; markDirty(); }
      return;
    }
    const [sx, sy] = xy(e), name = tileAt(sx, sy);
    hoverName = name;
    if (name) tip(name, e.clientX, e.clientY); else el.tip.hidden = true;
  });
  canvas.addEventListener('pointerleave', (e) => { if (mine(e)) { hoverName = null; el.tip.hidden = true; } });
  canvas.addEventListener('pointerup', (e) => {
    if (!mine(e) || !drag) return;
    const d = drag; drag = null;
    if (d.moved) return;
    const [sx, sy] = xy(e), name = tileAt(sx, sy);
    if (name) openHost(name);
  });
  canvas.addEventListener('wheel', (e) => {
    if (!mine(e)) return;
    e.preventDefault();
    const [sx, sy] = xy(e);
    const dy = e.deltaMode === 1 ? e.deltaY * 16 : e.deltaMode === 2 ? e.deltaY * 400 : e.deltaY;
    const ns = Math.min(8, Math.max(0.01, view.s * Math.exp(-dy * 0.0015)));
    const [wx, wy] = toWorld(sx, sy);
    view.s = ns; view.x = sx - wx * ns; view.y = sy - wy * ns; view.touched = true;
    markDirty();
  }, { passive: false });
  window.addEventListener('keydown', (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey || (e.target && e.target.tagName === 'INPUT')) return;
    if (fleet.mode === 'host' && e.key === 'Backspace') { e.preventDefault(); showOverview(); return; }
    if (fleet.mode !== 'overview') return;
    if (e.key === 'f' || e.key === 'F') { e.stopImmediatePropagation(); view.touched = false; fitOverview(); }
    else if (e.key === 'Escape') { e.stopImmediatePropagation(); el.tip.hidden = true; }
  });
}

// for the test hook: what the overview holds and drew
export function fleetState() {
  let gpus = 0;
  for (const t of fleet.state.tiles.values()) gpus += (t.gpus || []).length;
  return { mode: fleet.mode, host: fleet.host, frames: fleet.frames, hosts: fleet.order.slice(), drawn: fleet.tiles.slice(), gpus,
    tilesDrawn: [fleet.tilesMin === Infinity ? 0 : fleet.tilesMin, fleet.tilesMax],
    states: Object.fromEntries([...fleet.state.tiles].map(([k, t]) => [k, t.state])), hover: hoverName };
}
// page coordinates of the middle of a host's tile (null when it has none)
export function tilePoint(name) {
  const i = fleet.order.indexOf(name);
  if (i < 0) return null;
  const [x, y] = tileXY(i), r = canvas.getBoundingClientRect();
  return { x: r.left + view.x + (x + TILE_W / 2) * view.s, y: r.top + view.y + (y + TILE_H / 2) * view.s };
}
