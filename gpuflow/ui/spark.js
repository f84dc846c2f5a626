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
// Constraints: the drawing is batched: every sparkline of a colour is one path, stroked or
// filled once per picture, one device pixel wide, in world units under the view's transform;
// nothing is allocated per point. Each drawn sparkline is recorded (drawn.sparks) with its box
// in CSS px for the test hook. The data asked is bounded: SPARK_POINTS points per series.

import { COL, ctx, dpr, drawn, markDirty, view } from './canvas.js';
import { isNum } from './format.js';
import { channel, historyQuestion, seriesIndex } from './recorder.js';
import { agentNow, isPast, momentNow, rangeFrom, rangeTo } from './scrub.js';

export const SPARK_S = 300, MIN_SPAN_S = 60, SPARK_POINTS = 48, REFRESH_MS = 2000;
export const SPARK_METRICS = ['utilization_gpu_pct', 'memory_used_bytes', 'power_draw_w', 'sm_util_pct'];

export const spark = { index: new Map(), from: 0, to: 0, span: SPARK_S, asked: null, at: 0, answers: 0, error: null };
const ch = channel((q, doc) => {
  spark.index = seriesIndex(doc); spark.from = q.from; spark.to = q.to; spark.span = q.to - q.from;
  spark.answers++; spark.error = null;
  markDirty();
}, (q, err) => { spark.error = err.message; });

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

// -- the batched drawing --------------------------------------------------------------------------
// per colour: [band polygons, line polylines, area polygons], each a flat list of world points
// with NaN,NaN between pieces
const batches = new Map();
function batch(color, alpha) {
  const key = color + '|' + alpha;
  let b = batches.get(key);
  if (!b) { b = { color, alpha, band: [], line: [], area: [] }; batches.set(key, b); }
  return b;
}
// one sparkline of series s in box {x, y, w, h} (world), values scaled to [0, top]; `as` is
// 'line' (with its band) or 'area'; drawn at the context's alpha when queued (a dimmed node's
// sparklines are dimmed). Returns how many points it drew.
export function queueSpark(id, box, s, top, color, as) {
  if (!s || !(top > 0)) { drawn.sparks.push(sparkRecord(id, box, 0)); return 0; }
  const t0 = spark.from, kx = box.w / spark.span, ky = box.h / top, base = box.y + box.h;
  const b = batch(color, ctx.globalAlpha), line = as === 'area' ? b.area : b.line;
  let n = 0, open = false, first = 0;
  for (let i = 0; i < s.t.length; i++) {
    const t = s.t[i];
    if (t < t0 - s.res[i] || t > spark.to) continue;
    const x = box.x + Math.max(0, Math.min(box.w, (t - t0 + s.res[i] / 2) * kx)), v = s.v[i];
    if (!isNum(v)) { if (open) close(line, as, base, first); open = false; continue; }
    const y = base - Math.min(top, Math.max(0, v)) * ky;
    if (!open) { first = line.length; if (as === 'area') line.push(x, base); open = true; }
    line.push(x, y);
    if (as === 'line' && isNum(s.lo[i]) && isNum(s.hi[i]) && s.hi[i] > s.lo[i]) {
      const hi = base - Math.min(top, s.hi[i]) * ky, lo = base - Math.min(top, Math.max(0, s.lo[i])) * ky;
      b.band.push(x - kx * s.res[i] / 2, hi, kx * s.res[i], lo - hi);
    }
    n++;
  }
  if (open) close(line, as, base, first);
  drawn.sparks.push(sparkRecord(id, box, n));
  return n;
}
// what the test hook reads of a drawn sparkline: its id, points drawn and box in CSS px
function sparkRecord(id, box, points) {
  return { id, points, x: view.x + box.x * view.s, y: view.y + box.y * view.s, w: box.w * view.s, h: box.h * view.s };
}
function close(line, as, base, first) {
  if (as === 'area') line.push(line[line.length - 2], base);
  line.push(NaN, NaN);
  if (line.length - first <= 4 && as === 'line') {   // a single point: a short tick, so it shows
    line.splice(line.length - 2, 0, line[first] + 1.5, line[first + 1]);
  }
}
// draws everything queued since the last flush (scene.js, after the nodes)
export function flushSparks() {
  const hair = 1 / (view.s * dpr);
  for (const b of batches.values()) {
    const color = b.color;
    if (b.band.length) {
      ctx.globalAlpha = 0.22 * b.alpha; ctx.fillStyle = color; ctx.beginPath();
      for (let i = 0; i < b.band.length; i += 4) ctx.rect(b.band[i], b.band[i + 1], Math.max(b.band[i + 2], hair), b.band[i + 3]);
      ctx.fill();
    }
    if (b.area.length) { ctx.globalAlpha = 0.55 * b.alpha; ctx.fillStyle = color; trace(b.area, true); ctx.fill(); }
    if (b.line.length) {
      ctx.globalAlpha = b.alpha; ctx.strokeStyle = color; ctx.lineWidth = hair * 1.5; trace(b.line, false); ctx.stroke();
    }
    b.band.length = 0; b.area.length = 0; b.line.length = 0;
  }
  ctx.globalAlpha = 1;
}
function trace(pts, closed) {
  ctx.beginPath();
  let pen = false;
  for (let i = 0; i < pts.length; i += 2) {
    const x = pts[i], y = pts[i + 1];
    if (x !== x) { if (closed && pen) ctx.closePath(); pen = false; continue; }
    if (pen) ctx.lineTo(x, y); else { ctx.moveTo(x, y); pen = true; }
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
