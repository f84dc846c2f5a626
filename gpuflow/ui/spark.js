// Sparklines: each GPU's utilization, memory and power, and each process's SM % and memory on
// each GPU it holds, over the last minutes up to the moment shown (now, or the timeline's past
// moment): SPARK_S seconds, or as much as is retained when that is less (at least MIN_SPAN_S, so
// a young recorder's line fills in from the right), from GET api/history reduced to SPARK_POINTS points a series (the agent buckets them:
// metrics= and points=, docs/recorder.md) and refreshed every REFRESH_MS live, at most that often
// while scrubbing.
//
// A GPU's sparkline is its row's colour; its line is the mean of each bucket and the faint band
// behind it the bucket's least to greatest reading, so a stall or a peak inside a bucket still
// shows. A process's row has one sparkline for both of its readings: SM % as a green area, its
// memory as a blue line, each on its own scale (0-100 %, 0 to the GPU's memory). A reading not
// available leaves a gap, never a zero. Hovering one shows the bucket under the pointer (card.js).
//
// Constraints: a picture draws each sparkline as one bitmap (drawn again only when its series,
// scale or size step changes, at most RESIZED_PER_PICTURE a picture for a size step; at most
// MAX_BITMAPS kept), under the view's transform. Each drawn
// sparkline is recorded (drawn.sparks) with its box in CSS px for the test hook. The data asked
// is bounded: SPARK_POINTS points per series.

import { COL, ctx, dpr, drawn, markDirty, setWorld, view } from './canvas.js';
import { isNum } from './format.js';
import { channel, historyQuestion } from './recorder.js';
import { agentNow, isPast, momentNow, rangeFrom, rangeTo } from './scrub.js';

export const SPARK_S = 300, MIN_SPAN_S = 60, SPARK_POINTS = 48, REFRESH_MS = 2000;
export const SPARK_METRICS = ['utilization_gpu_pct', 'memory_used_bytes', 'power_draw_w', 'sm_util_pct'];

export const spark = { index: new Map(), from: 0, to: 0, span: SPARK_S, asked: null, at: 0, answers: 0, error: null };
const ch = channel((q, doc) => {
  spark.index = doc.index; spark.from = q.from; spark.to = q.to; spark.span = q.to - q.from;
  spark.answers++; spark.error = null;
  markDirty();
}, (q, err) => { spark.error = err.message; }, 'history');

// asks for the minutes up to the moment shown, unless asked less than REFRESH_MS ago (force: now)
export function refreshSparks(force) {
  const t = performance.now();
  if (!force && t - spark.at < REFRESH_MS) return;
  spark.at = t;
  const end = isPast() ? momentNow() : agentNow(), from = rangeFrom();
  const span = from === null ? SPARK_S : Math.min(SPARK_S, Math.max(MIN_SPAN_S, Math.ceil((rangeTo() - from) / 30) * 30));
  ch.ask(historyQuestion(end - span, end, SPARK_METRICS, SPARK_POINTS));
}
export function seriesOf(key, metric) {
  const m = spark.index.get(key);
  return m ? m.get(metric) : undefined;
}

// -- the drawing ------------------------------------------------------------------------------------
// Each sparkline is drawn into a small bitmap of its own when its series, its scale or its size
// changes, and every picture draws the bitmap: one drawImage, whatever the points, the band and the
// area cost to rasterise. Measured before this (bench/ui_frame.py at a fixed zoom with text):
// stroking and filling every sparkline's points each picture doubled a picture's cost.
// How a picture draws the bitmap is most of what a sparkline costs (Chromium's software canvas,
// 152 bitmaps of 128x32 a picture: scaled or at a fraction of a pixel, filtered, 2.6-6.6 ms; pixel
// for pixel at a whole pixel 0.8 ms; scaled without filtering 1.2-1.4 ms; the picture's own fill
// 0.3-0.5 ms of each: docs/ui.md, Sparklines), so:
// * a still view (its scale as in the picture before, as while the timeline is dragged, or panning)
//   draws each sparkline from a bitmap of its box's own size in device pixels, pixel for pixel at
//   the nearest device pixel; a bitmap of another size is drawn anew for it, at most
//   RESIZED_PER_PICTURE a picture, the others scaled meanwhile and a later picture asked for;
// * a zoom draws each from the bitmap it has, scaled without filtering (the fleet overview's tiles
//   do the same), as long as that is at least the box's size and at most a step of 2^(1/4) larger;
//   else it is drawn anew at the box's size rounded up to such a step (so a zoom redraws it only at
//   every fourth of an octave), at most RESIZED_PER_PICTURE a picture; the still picture after
//   the zoom is asked for, and smooths them.
// A sparkline whose data, scale or colour changed is always drawn anew at once.
const STEPS_PER_OCTAVE = 4, MARGIN = 1, MAX_BITMAPS = 4096, RESIZED_PER_PICTURE = 16;
const bitmaps = new Map();   // id -> {s, top, color, as, from, points, w, image}
function stepWidth(px) { return Math.max(4, Math.round(Math.pow(2, Math.ceil(Math.log2(Math.max(2, px)) * STEPS_PER_OCTAVE) / STEPS_PER_OCTAVE))); }
let resizedIn = null, resized = 0, still = true, lastScale = NaN;   // per picture (its `drawn` record)

// draws sparkline `id` of series s in box {x, y, w, h} (world), values scaled to [0, top]; `as` is
// 'line' (with its band) or 'area'; at the context's alpha (a dimmed node's sparklines are
// dimmed). Returns how many points it drew.
export function queueSpark(id, box, s, top, color, as) {
  if (!s || !(top > 0)) { drawn.sparks.push(sparkRecord(id, box, 0)); return 0; }
  if (resizedIn !== drawn) { resizedIn = drawn; resized = 0; still = view.s === lastScale; lastScale = view.s; }
  const px = box.w * view.s * dpr, exact = Math.max(4, Math.round(px));   // the box's width on screen, device pixels
  let bm = bitmaps.get(id);
  const changed = !bm || bm.s !== s || bm.top !== top || bm.color !== color || bm.as !== as || bm.from !== spark.from;
  const fits = !changed && (still ? bm.w === exact : bm.w >= px - 0.5 && bm.w <= stepWidth(px));
  let redraw = changed;
  if (!changed && !fits) {
    if (resized < RESIZED_PER_PICTURE) { resized++; redraw = true; } else markDirty();   // its turn comes in a later picture
  }
  if (redraw) {
    if (bm && bm.image) bm.image.close();
    if (!bm && bitmaps.size >= MAX_BITMAPS) forget();   // sparklines of nodes long gone
    bm = render(s, top, color, as, still ? exact : stepWidth(px), box);
    bm.s = s; bm.top = top; bm.color = color; bm.as = as; bm.from = spark.from;
    bitmaps.set(id, bm);
  }
  if (bm.points) {
    if (still && bm.w === exact) {   // pixel for pixel, at a whole device pixel
      ctx.setTransform(1, 0, 0, 1, 0, 0);
      ctx.drawImage(bm.image, Math.round(dpr * (view.x + box.x * view.s)) - MARGIN, Math.round(dpr * (view.y + box.y * view.s)) - MARGIN);
      setWorld();
    } else {
      const u = box.w / bm.w;   // world units per bitmap pixel
      if (!still) { ctx.imageSmoothingEnabled = false; markDirty(); }   // the still picture after smooths it
      ctx.drawImage(bm.image, box.x - MARGIN * u, box.y - MARGIN * u, box.w + 2 * MARGIN * u, box.h + 2 * MARGIN * u);
      ctx.imageSmoothingEnabled = true;
    }
  }
  drawn.sparks.push(sparkRecord(id, box, bm.points));
  return bm.points;
}
// what the test hook reads of a drawn sparkline: its id, points drawn and box in CSS px
function sparkRecord(id, box, points) {
  return { id, points, x: view.x + box.x * view.s, y: view.y + box.y * view.s, w: box.w * view.s, h: box.h * view.s };
}
// the bitmap of one sparkline, `w` pixels wide (w x h pixels inside a margin of MARGIN)
function render(s, top, color, as, w, box) {
  const h = Math.max(3, Math.round(w * box.h / box.w));
  const t0 = spark.from, kx = w / spark.span, ky = h / top, base = MARGIN + h;
  const band = [], line = [];
  let n = 0, open = false, first = 0;
  for (let i = 0; i < s.t.length; i++) {
    const t = s.t[i];
    if (t < t0 - s.res[i] || t > spark.to) continue;
    const x = MARGIN + Math.max(0, Math.min(w, (t - t0 + s.res[i] / 2) * kx)), v = s.v[i];
    if (!isNum(v)) { if (open) close(line, as, base, first); open = false; continue; }
    const y = base - Math.min(top, Math.max(0, v)) * ky;
    if (!open) { first = line.length; if (as === 'area') line.push(x, base); open = true; }
    line.push(x, y);
    if (as === 'line' && isNum(s.lo[i]) && isNum(s.hi[i]) && s.hi[i] > s.lo[i]) {
      const hi = base - Math.min(top, s.hi[i]) * ky, lo = base - Math.min(top, Math.max(0, s.lo[i])) * ky;
      band.push(x - kx * s.res[i] / 2, hi, kx * s.res[i], lo - hi);
    }
    n++;
  }
  if (open) close(line, as, base, first);
  const bm = { points: n, w, image: null };
  if (!n) return bm;
  const g = scratch(w + 2 * MARGIN, h + 2 * MARGIN);
  g.fillStyle = color; g.strokeStyle = color;
  if (band.length) {
    g.globalAlpha = 0.22; g.beginPath();
    for (let i = 0; i < band.length; i += 4) g.rect(band[i], band[i + 1], Math.max(band[i + 2], 1), band[i + 3]);
    g.fill();
  }
  g.globalAlpha = as === 'area' ? 0.55 : 1;
  trace(g, line, as === 'area');
  if (as === 'area') g.fill(); else { g.lineWidth = Math.max(1.25, w / 32); g.stroke(); }
  bm.image = g.canvas.transferToImageBitmap();   // the fastest source for drawImage; the scratch is blank again
  return bm;
}
// the one canvas every sparkline is drawn on before it becomes a bitmap, sized for it
let scratchCtx = null;
function scratch(w, h) {
  if (!scratchCtx) scratchCtx = new OffscreenCanvas(w, h).getContext('2d');
  const c = scratchCtx.canvas;
  if (c.width !== w) c.width = w;
  if (c.height !== h) c.height = h;
  scratchCtx.globalAlpha = 1;
  return scratchCtx;
}
function forget() {
  for (const bm of bitmaps.values()) if (bm.image) bm.image.close();
  bitmaps.clear();
}
function close(line, as, base, first) {
  if (as === 'area') line.push(line[line.length - 2], base);
  line.push(NaN, NaN);
  if (line.length - first <= 4 && as === 'line') {   // a single point: a short tick, so it shows
    line.splice(line.length - 2, 0, line[first] + 1.5, line[first + 1]);
  }
}
function trace(g, pts, closed) {
  g.beginPath();
  let pen = false;
  for (let i = 0; i < pts.length; i += 2) {
    const x = pts[i], y = pts[i + 1];
    if (x !== x) { if (closed && pen) g.closePath(); pen = false; continue; }
    if (pen) g.lineTo(x, y); else { g.moveTo(x, y); pen = true; }
  }
}
// the empty box of a sparkline with nothing to draw yet: a faint baseline
export function sparkBaseline(box) {
  ctx.fillStyle = COL.barBg;
  ctx.fillRect(box.x, box.y + box.h - 1, box.w, 1);
}

// the time under world x in a sparkline box, and the point of series s there (hover)
export function pointAt(box, wx, s) {
  const t = spark.from + (wx - box.x) / box.w * spark.span;
  if (!s) return { t, i: -1 };
  let best = -1, bd = Infinity;
  for (let i = 0; i < s.t.length; i++) {
    const mid = s.t[i] + s.res[i] / 2, d = Math.abs(mid - t);
    if (d < bd && d <= s.res[i]) { bd = d; best = i; }
  }
  return { t, i: best };
}
