// The canvas engine: the plane (one <canvas>), the view over it (pan and zoom), the redraw loop,
// and the drawing primitives every node is made of (queued text, wrapped text, value cells, bars,
// boxes).
//
// The view maps world units (layout.js) to CSS pixels; the canvas is backed at the screen's
// pixel density. Nothing is drawn until something called markDirty(), and then once, in the next
// animation frame, by the painter main.js registers. Text is queued while the shapes are drawn
// and flushed at the end of the frame, grouped by font, at zoomed sizes rounded to half a pixel.
// How much text a node gets (its level of detail) is decided by the size text would have in
// device pixels: the zoom times the screen's pixel ratio (textIsLegible()).
//
// Constraints: one canvas, one 2D context, no DOM text on the plane (untrusted strings go to
// fillText only). Everything the last draw put on screen is recorded in `drawn`, for the test
// hook; a text queued with an id is recorded with the size and box it was drawn at (CSS px), so
// tests measure what a reader sees. With `bench.on` (?demo=bench) each frame's cost is recorded
// for bench/ui_frame.py, including a 1-pixel read-back that makes the rasteriser finish inside
// the timing. This module imports no other of the page's modules.

import { DASH, clamp01 } from './format.js';

export const COL = {
  bg: '#0d1117', node: '#161b22', head: '#1c2330', border: '#30363d', text: '#e6edf3',
  dim: '#8b949e', faint: '#6e7681', barBg: '#262c36', sm: '#3fb950', xfer: '#e3a23b',
  mem: '#58a6ff', temp: '#f0883e', power: '#bc8cff', clock: '#79c0ff', lost: '#f85149',
  traced: '#db61a2', host: '#a371f7', warn: '#d29922', err: '#f85149', edge: '#3fb950',
  edgeNull: '#6e7681', hostEdge: '#a371f7', hi: '#ffffff', reduced: '#39c5cf', past: '#d29922',
};
const FF = '"Segoe UI", Roboto, "Helvetica Neue", Arial, "Liberation Sans", sans-serif';
// fonts in world units; text is drawn in screen space at the zoomed size rounded to 0.5 px, so
// zooming reuses the rasteriser's glyph cache instead of rendering every glyph at a new size.
// `value` is the readings' font: the numbers a reader comes for are the largest text on a card.
function mkFont(weight, px) { return { w: weight, px, css: weight + ' ' + px + 'px ' + FF, sized: new Map() }; }
export const F = {
  title: mkFont('600', 14), value: mkFont('400', 13), body: mkFont('400', 12), small: mkFont('400', 11),
  bold: mkFont('600', 12), badge: mkFont('700', 10), label: mkFont('400', 10), screenTitle: mkFont('600', 12),
};
export const NOT_SAMPLED = '#3b4350';
// node text is drawn only when the smallest of it (F.small) would be at least this many device
// pixels tall; below that a node shows one title at a fixed screen size
export const LOD_MIN_DEVICE_PX = 8;

export const canvas = document.getElementById('plane');
export const ctx = canvas.getContext('2d', { alpha: false });
export const view = { s: 1, x: 0, y: 0, touched: false };
export let cssW = 1, cssH = 1, dpr = 1;

// the view that shows world rectangle b = {x0, y0, x1, y1} whole and centred, at most 1.6x
export const FIT_PAD = 14;
export function fitScale(bw, bh, w, h) { return Math.min((w - 2 * FIT_PAD) / bw, (h - 2 * FIT_PAD) / bh, 1.6); }
export function fitRect(b) {
  const bw = Math.max(1, b.x1 - b.x0), bh = Math.max(1, b.y1 - b.y0);
  view.s = Math.max(0.02, fitScale(bw, bh, cssW, cssH));
  view.x = (cssW - bw * view.s) / 2 - b.x0 * view.s;
  view.y = (cssH - bh * view.s) / 2 - b.y0 * view.s;
  markDirty();
}
export function toWorld(sx, sy) { return [(sx - view.x) / view.s, (sy - view.y) / view.s]; }
// is text of world size `px` at least LOD_MIN_DEVICE_PX device pixels at this zoom?
export function textIsLegible(px) { return px * view.s * dpr >= LOD_MIN_DEVICE_PX; }

let onResize = () => {};
export function setOnResize(fn) { onResize = fn; }
export function resize() {
  const r = canvas.getBoundingClientRect();
  dpr = window.devicePixelRatio || 1;
  const w0 = cssW, h0 = cssH;
  cssW = Math.max(1, r.width); cssH = Math.max(1, r.height);
  const w = Math.round(cssW * dpr), h = Math.round(cssH * dpr);
  if (canvas.width !== w || canvas.height !== h) { canvas.width = w; canvas.height = h; }
  onResize(w0 !== cssW || h0 !== cssH);
  markDirty();
}
export function setWorld() { ctx.setTransform(dpr * view.s, 0, 0, dpr * view.s, dpr * view.x, dpr * view.y); }

// what the user picked: the isolated node, the node a process-list row points at, the hovered
// thing, and the lit set of the isolated (or pointed-at) node
export const ui = { isolated: null, highlight: null, hover: null, lit: null };

// the redraw loop; `animate`, when set, runs every animation frame and keeps them coming
export const loop = { dirty: false, draws: 0, lastDrawMs: 0, animate: null };
// per-frame costs while ?demo=bench runs (bench/ui_frame.py reads them through the test hook)
export const bench = { on: false, draw: [], ingest: [], pendingIngest: 0, intervals: [], lastTs: 0, t: 0, showLag: [] };
let rafPending = false, paint = () => {};
export function setPainter(fn) { paint = fn; }
export function markDirty() {
  loop.dirty = true;
  if (!rafPending) { rafPending = true; requestAnimationFrame(onAnimationFrame); }
}
// other work due in the next animation frame (the timeline's words and track): it runs in the loop's
// own animation frame, before the plane's picture (what it queues meanwhile too), and does not ask
// for one
const frameTasks = [];
export function nextFrame(fn) {
  frameTasks.push(fn);
  if (!rafPending) { rafPending = true; requestAnimationFrame(onAnimationFrame); }
}
function onAnimationFrame(ts) {
  rafPending = false;
  if (loop.animate) loop.animate(ts);
  while (frameTasks.length) for (const fn of frameTasks.splice(0)) fn();
  if (!loop.dirty) return;
  loop.dirty = false;
  const t = performance.now();
  paint();
  if (bench.on) ctx.getImageData(0, 0, 1, 1);   // make the rasteriser finish inside the timing
  loop.lastDrawMs = performance.now() - t;
  loop.draws++;
  if (bench.on) {
    bench.draw.push(loop.lastDrawMs + bench.pendingIngest);
    bench.pendingIngest = 0;
    if (bench.lastTs) bench.intervals.push(ts - bench.lastTs);
    bench.lastTs = ts;
  }
  if (loop.animate && !rafPending) { rafPending = true; requestAnimationFrame(onAnimationFrame); }
}

// what the last draw put on screen, for the test hook
export let drawn = emptyDrawn();
function emptyDrawn() {
  return { nodes: 0, devices: 0, processes: 0, hosts: 0, edges: 0, lanes: 0, spans: 0, buckets: 0, rects: 0,
    dimmed: 0, dashes: 0, dashCells: [], laneLabels: [], strips: [], retired: [], problems: [], texts: [], sparks: [],
    titles: [], text: true, highlighted: null, grids: [], links: [] };
}
// a clean slate: the record emptied, the whole canvas the background colour
export function beginDraw() {
  drawn = emptyDrawn();
  curFont = '';
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.globalAlpha = 1;
  ctx.fillStyle = COL.bg;
  ctx.fillRect(0, 0, cssW, cssH);
  ctx.textBaseline = 'alphabetic';
}
let curFont = '';
function font(css) { if (css !== curFont) { ctx.font = css; curFont = css; } }
function sizedPx(f, S) { return Math.max(1, Math.round(f.px * S * 2) / 2); }
function sizedFont(f, S) {
  const q = sizedPx(f, S);
  let css = f.sized.get(q);
  if (!css) { css = f.w + ' ' + q + 'px ' + FF; f.sized.set(q, css); }
  return css;
}
// ellipsis fitting is done once per (string, width, font) in world units: zoom never re-measures
const fitCache = new Map();
export function fit(s, maxW, f) {
  const key = f.css + '\u0001' + maxW + '\u0001' + s;
  let r = fitCache.get(key);
  if (r !== undefined) return r;
  if (textWidth(s, f) <= maxW) r = s;
  else {
    let lo = 0, hi = s.length;
    while (lo < hi) { const m = (lo + hi + 1) >> 1; if (textWidth(s.slice(0, m) + '…', f) <= maxW) lo = m; else hi = m - 1; }
    r = s.slice(0, lo) + '…';
  }
  if (fitCache.size > 4000) fitCache.clear();
  fitCache.set(key, r);
  return r;
}
// `s` broken into lines no wider than maxW (world units) at font f: at spaces where it can, and
// inside a word only when the word alone is wider than the line. Nothing is left out.
const wrapCache = new Map();
export function wrap(s, maxW, f) {
  const key = f.css + '\u0001' + maxW + '\u0001' + s;
  let lines = wrapCache.get(key);
  if (lines) return lines;
  lines = [];
  let line = '';
  for (const word of String(s).split(/ +/)) {
    const tryLine = line ? line + ' ' + word : word;
    if (textWidth(tryLine, f) <= maxW) { line = tryLine; continue; }
    if (line) lines.push(line);
    let rest = word;
    while (textWidth(rest, f) > maxW && rest.length > 1) {   // a word wider than the line: cut it
      let n = rest.length - 1;
      while (n > 1 && textWidth(rest.slice(0, n), f) > maxW) n--;
      lines.push(rest.slice(0, n));
      rest = rest.slice(n);
    }
    line = rest;
  }
  if (line || !lines.length) lines.push(line);
  if (wrapCache.size > 500) wrapCache.clear();
  wrapCache.set(key, lines);
  return lines;
}
// text is queued while the shapes are drawn and flushed at the end of the frame, grouped by font;
// `id` records the text with the size and box it is drawn at (drawn.texts)
let textOps = [];
export function text(s, x, y, f, color, align, maxW, id) {
  textOps.push([maxW ? fit(s, maxW, f) : s, x, y, f, color, align || 'left', ctx.globalAlpha, false, id]);
}
export function textScreen(s, sx, sy, f, color, alpha) { textOps.push([s, sx, sy, f, color, 'left', alpha, true, undefined]); }
// widths in world units, measured on a context of the font's own (no font switching on the
// drawing context, whose every change of font is parsed again)
const widthCache = new Map(), measurers = new Map();
function measurer(f) {
  let m = measurers.get(f.css);
  if (!m) { m = new OffscreenCanvas(1, 1).getContext('2d'); m.font = f.css; measurers.set(f.css, m); }
  return m;
}
export function textWidth(s, f) {
  const key = f.css + '\u0001' + s;
  let w = widthCache.get(key);
  if (w === undefined) { w = measurer(f).measureText(s).width; if (widthCache.size > 4000) widthCache.clear(); widthCache.set(key, w); }
  return w;
}
export function flushText() {
  if (!textOps.length) return;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  const S = view.s, groups = new Map();
  for (const op of textOps) {
    const css = op[7] ? op[3].css : sizedFont(op[3], S);
    let g = groups.get(css);
    if (!g) { g = []; groups.set(css, g); }
    g.push(op);
    if (op[8] !== undefined) record(op, S);
  }
  let fill = '', align = '', alpha = -1;
  for (const [css, ops] of groups) {
    font(css);
    for (const op of ops) {
      if (op[4] !== fill) { ctx.fillStyle = fill = op[4]; }
      if (op[5] !== align) { ctx.textAlign = align = op[5]; }
      if (op[6] !== alpha) { ctx.globalAlpha = alpha = op[6]; }
      if (op[7]) ctx.fillText(op[0], op[1], op[2]);
      else ctx.fillText(op[0], view.x + op[1] * S, view.y + op[2] * S);
    }
  }
  ctx.globalAlpha = 1;
  textOps = [];
}
// a recorded text: its string, font and size, and where it was anchored (CSS px of the canvas);
// its box is measured only when the test hook asks (textBox), so drawing pays nothing for it
function record(op, S) {
  drawn.texts.push({ id: op[8], s: op[0], font: op[3], px: sizedPx(op[3], S), ax: view.x + op[1] * S,
    by: view.y + op[2] * S, align: op[5], alpha: op[6] });
}
// a recorded text as the hook gives it: size in CSS px, and its box (x, y the top left)
export function textBox(t) {
  const w = textWidth(t.s, t.font) * t.px / t.font.px;
  const x = t.align === 'right' ? t.ax - w : t.align === 'center' ? t.ax - w / 2 : t.ax;
  return { id: t.id, s: t.s, px: t.px, x, y: t.by - t.px * 0.8, w, h: t.px * 1.05, alpha: t.alpha };
}
// a value cell: null/undefined is drawn as "—" and recorded, never as 0
export function cell(v, fmt, id) {
  if (v === null || v === undefined || (typeof v === 'number' && !isFinite(v))) { drawn.dashCells.push(id); return DASH; }
  return fmt(v);
}
export function bar(x, y, w, h, frac, color) {
  ctx.fillStyle = COL.barBg;
  ctx.fillRect(x, y, w, h);
  if (frac === null || frac === undefined || !isFinite(frac)) {
    ctx.strokeStyle = COL.faint; ctx.lineWidth = 1; ctx.setLineDash([3, 3]);
    ctx.strokeRect(x + 0.5, y + 0.5, w - 1, h - 1); ctx.setLineDash([]);
    return;
  }
  ctx.fillStyle = color;
  ctx.fillRect(x, y, w * clamp01(frac), h);
}
export function box(n, border, headColor, headH) {
  ctx.fillStyle = COL.node;
  ctx.fillRect(n.x, n.y, n.w, n.h);
  if (headColor) { ctx.fillStyle = headColor; ctx.fillRect(n.x, n.y, n.w, headH || 28); }
  const picked = ui.isolated === n.id || ui.highlight === n.id;
  ctx.strokeStyle = ui.highlight === n.id ? COL.hi : border; ctx.lineWidth = picked ? 2.5 : 1;
  ctx.strokeRect(n.x + 0.5, n.y + 0.5, n.w - 1, n.h - 1);
}
export function badge(s, x, y, bg, fg) {
  const w = textWidth(s, F.badge) + 10;
  ctx.fillStyle = bg; ctx.fillRect(x - w, y - 11, w, 15);
  text(s, x - w + 5, y, F.badge, fg);
  return w;
}
