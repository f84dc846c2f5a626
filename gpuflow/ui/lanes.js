// A traced process's lanes, one row per CUDA stream, drawn in screen space.
//
// Each span becomes a rect in CSS pixels, neighbours closer than half a pixel merge into one
// run, and each run is shaded by how much of it was busy (a run of 1-µs copies spread over a
// pixel-wide stretch of 0.7 ms is faint, back-to-back kernels are solid), so sub-pixel spans stay
// visible without claiming the stream was busy. The runs of one colour and shade are filled
// together, each its own rectangle: the software rasteriser fills a lone rectangle faster than a
// path of hundreds of them (runs of one colour never overlap: a run starts more than half a pixel
// after the last one ended). Off-screen lanes and spans outside the visible part of the track are
// skipped (binary search on start), and a dense stretch of a one-colour lane is jumped over using
// the lane's running sum of durations. Spans are read from the lane's typed columns (start, duration, kernel
// or not, running sum: store.js), live or of a past window alike. A lane of a past window reduced to pixel
// buckets by the recorder (past.js) is drawn bucket by bucket in the reduced colour, each shaded
// by the share of its time the stream was busy, neighbours of one shade merged.
//
// Constraints: this is the page's hot loop (16 lanes × 2,000 spans redrawn every frame in
// ?demo=bench): no allocation per span, no object read per span, no text, one fill style per
// colour and shade.

import { COL, ctx, cssH, cssW, dpr, drawn, setWorld, ui, view } from './canvas.js';
import { LANE_H, MAX_LANES_DRAWN, TRACK_W, TRACK_X, laneTop } from './geometry.js';

const SHADES = [1, 0.62, 0.36, 0.2];
function shadeOf(density) { return density >= 0.5 ? 0 : density >= 0.1 ? 1 : density >= 0.01 ? 2 : 3; }
// runs by colour and shade: 0-3 kernels, 4-7 copies and memsets, 8-11 reduced buckets
const RUN_COLORS = [COL.sm, COL.xfer, COL.reduced];
const runBuf = Array.from({ length: 12 }, () => ({ a: new Float64Array(4096), n: 0 }));
function pushRun(bucket, x, y, w, h) {
  const r = runBuf[bucket];
  if (r.n + 4 > r.a.length) { const a = new Float64Array(r.a.length * 2); a.set(r.a); r.a = a; }
  r.a[r.n] = x; r.a[r.n + 1] = y; r.a[r.n + 2] = w; r.a[r.n + 3] = h;
  r.n += 4;
}
// the index of the first of the n starts (ascending) at or after tUs
export function firstAtOrAfter(start, n, tUs) {
  let lo = 0, hi = n;
  while (lo < hi) { const m = (lo + hi) >> 1; if (start[m] < tUs) lo = m + 1; else hi = m; }
  return lo;
}
// the visible buckets of a reduced lane as runs: [x0, x1) of one shade, neighbours merged
function bucketRuns(bk, tr, tx0, k, vis0, vis1, sy, lh) {
  const wu = bk.width_us, count = bk.count, busy = bk.busy_ns;
  if (!(wu > 0)) return;
  const first = Math.max(0, Math.floor((tr.t0 + (vis0 - tx0) / k - bk.start_us) / wu));
  const last = Math.min(count.length - 1, Math.ceil((tr.t0 + (vis1 - tx0) / k - bk.start_us) / wu));
  let rx0 = -1, rx1 = -1, rs = -1;
  for (let i = first; i <= last; i++) {
    if (!(count[i] > 0)) continue;
    let a = tx0 + (bk.start_us + i * wu - tr.t0) * k, b = a + wu * k;
    if (a < vis0) a = vis0;
    if (b > vis1) b = vis1;
    if (b - a < 1) b = a + 1;
    const shade = shadeOf(busy[i] / (wu * 1000));
    drawn.buckets += count[i];
    if (shade === rs && a <= rx1 + 0.5) { if (b > rx1) rx1 = b; continue; }
    if (rs >= 0) pushRun(8 + rs, rx0, sy, rx1 - rx0, lh);
    rx0 = a; rx1 = b; rs = shade;
  }
  if (rs >= 0) pushRun(8 + rs, rx0, sy, rx1 - rx0, lh);
}
export function drawLanes(n, alpha) {
  const tr = n.tr;
  if (!tr || !tr.lanes.length || tr.t0 === null || tr.t1 <= tr.t0) return;
  const S = view.s;
  const tx0 = view.x + (n.x + TRACK_X) * S, tw = TRACK_W * S;
  const vis0 = Math.max(tx0, 0), vis1 = Math.min(tx0 + tw, cssW);
  if (vis1 <= vis0) return;
  const k = tw / (tr.t1 - tr.t0);            // CSS px per µs
  const tVis0 = tr.t0 + (vis0 - tx0) / k, tVis1 = tr.t0 + (vis1 - tx0) / k;
  for (const r of runBuf) r.n = 0;
  const ny = Math.min(tr.lanes.length, MAX_LANES_DRAWN);
  const rowTop = laneTop(n, 0);
  const lh = (LANE_H - 4) * S;
  for (let li = 0; li < ny; li++) {
    const L = tr.lanes[li], st = L.start, du = L.dur, kn = L.kern, cum = L.cum, held = L.held;
    const sy = view.y + (rowTop + li * LANE_H + 1) * S;
    if (sy > cssH || sy + lh < 0) continue;
    if (L.buckets) { drawn.lanes++; bucketRuns(L.buckets, tr, tx0, k, vis0, vis1, sy, lh); continue; }
    if (!held) continue;
    drawn.lanes++;
    let i = firstAtOrAfter(st, held, tVis0 - L.maxDurUs);
    // current run per colour: [x0, x1, busy px]; index 0 kernels, 1 copies and memsets
    let kx0 = -1, kx1 = -1, kb = 0, cx0 = -1, cx1 = -1, cb = 0;
    const one = L.oneColour;
    for (; i < held; i++) {
      const s0 = st[i], kernel = kn[i] === 1;
      if (s0 > tVis1) break;
      let a = tx0 + (s0 - tr.t0) * k, b = a + du[i] * 0.001 * k;
      if (b < vis0) continue;
      drawn.spans++;
      if (a < vis0) a = vis0;
      if (b > vis1) b = vis1;
      const busy = b - a;
      if (b - a < 1) b = a + 1;
      if (kernel) {
        if (a <= kx1 + 0.5) { if (b > kx1) kx1 = b; kb += busy; }
        else { if (kx1 >= 0) pushRun(shadeOf(kb / (kx1 - kx0)), kx0, sy, kx1 - kx0, lh); kx0 = a; kx1 = b; kb = busy; }
      } else {
        if (a <= cx1 + 0.5) { if (b > cx1) cx1 = b; cb += busy; }
        else { if (cx1 >= 0) pushRun(4 + shadeOf(cb / (cx1 - cx0)), cx0, sy, cx1 - cx0, lh); cx0 = a; cx1 = b; cb = busy; }
      }
      // dense stretch of a one-colour lane: every span starting inside the current run merges
      // into it, so jump over them (a stream runs one thing at a time: they end before the
      // last of them starts, and that last one is still looked at, since it may extend the
      // run). Their busy time comes from the lane's running sum of durations.
      if (one && i + 2 < held) {
        const tNext = tr.t0 + ((kernel ? kx1 : cx1) + 0.5 - tx0) / k;
        if (st[i + 2] < tNext) {
          const j = firstAtOrAfter(st, held, tNext);
          const skipped = (cum[j - 1] - cum[i + 1]) * k;
          if (kernel) kb += skipped; else cb += skipped;
          drawn.spans += j - 2 - i;
          i = j - 2;
        }
      }
    }
    if (kx1 >= 0) pushRun(shadeOf(kb / (kx1 - kx0)), kx0, sy, kx1 - kx0, lh);
    if (cx1 >= 0) pushRun(4 + shadeOf(cb / (cx1 - cx0)), cx0, sy, cx1 - cx0, lh);
  }
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  for (let b = 0; b < runBuf.length; b++) {
    const r = runBuf[b];
    if (!r.n) continue;
    ctx.globalAlpha = alpha * SHADES[b % 4];
    ctx.fillStyle = RUN_COLORS[b >> 2];
    for (let q = 0; q < r.n; q += 4) ctx.fillRect(r.a[q], r.a[q + 1], r.a[q + 2], r.a[q + 3]);
    drawn.rects += r.n / 4;
  }
  const hs = ui.hover && ui.hover.span && ui.hover.node === n.id ? ui.hover : null;
  if (hs) {
    const a = tx0 + (hs.span.start_us - tr.t0) * k, w = Math.max(hs.span.dur_ns * 0.001 * k, 1);
    const sy = view.y + (rowTop + hs.lane * LANE_H + 1) * S;
    ctx.globalAlpha = alpha;
    ctx.strokeStyle = COL.hi; ctx.lineWidth = 1.5;
    ctx.strokeRect(a - 1, sy - 1, w + 2, lh + 2);
  }
  ctx.globalAlpha = 1;
  setWorld();
}
