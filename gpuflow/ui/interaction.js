// What the mouse and keys do on the plane, and the hover card that tells what is under the cursor.
//
// Drag pans, the wheel zooms about the cursor, a click isolates a node (again, or on empty
// space, clears it), F fits everything or the isolated node and its neighbours, Esc clears, P
// shows or hides the process list; the timeline's keys (space, arrows, End, E) are timeline.js's,
// which sees every key first. Hovering finds the node, a sparkline and the moment under the
// cursor in it, and on a traced strip the span, the bucket of a reduced past window, the lane
// label, the "not sampled" (or, in a past window, "not retained") stretch or the kernel or
// transfer row under the cursor (binary search on the lane's starts). The card is rebuilt after every draw while the pointer is on the
// plane (afterDraw()), from the latest frame and the view as it is now: values refresh while it
// is shown, and when the view moves under a still pointer (F, a new frame's fit) the card follows
// what is under it, or goes.
//
// Constraints: the card is a fixed-position element kept inside the window, filled by card.js
// (textContent only). Any change to what is shown goes through markDirty(), never a draw of its
// own.

import { F, canvas, cssH, cssW, markDirty, textIsLegible, toWorld, ui, view } from './canvas.js';
import { fillCard } from './card.js';
import { el } from './connection.js';
import { COUNT_X, DEV_SPARK_ROWS, KERNEL_ROWS, LANE_H, MAX_LANES_DRAWN, STATS_X, STAT_ROW, STRIP_X, TRACK_W, TRACK_X,
  TR_LEFT_W, devSparkBox, kernelRowY, laneTop, procSparkBox } from './geometry.js';
import { firstAtOrAfter } from './lanes.js';
import { fitTo, litSets, model, rebuild } from './layout.js';
import { pointAt, seriesOf } from './spark.js';
import { shownSnap, shownTraced, spanAt, store } from './store.js';
import { timelineKey } from './timeline.js';
import { statsRows } from './traced.js';

let drag = null;
// where the pointer is on the plane (CSS px of the canvas and of the window), when it is on it
const pointer = { inside: false, sx: 0, sy: 0, cx: 0, cy: 0 };
function canvasXY(e) { const r = canvas.getBoundingClientRect(); return [e.clientX - r.left, e.clientY - r.top]; }
function nodeAt(wx, wy) {
  for (let i = model.order.length - 1; i >= 0; i--) {
    const n = model.order[i];
    if (wx >= n.x && wx <= n.x + n.w && wy >= n.y && wy <= n.y + n.h) return n;
  }
  return null;
}
function hitTest(sx, sy) {
  const [wx, wy] = toWorld(sx, sy);
  const n = nodeAt(wx, wy);
  if (!n) return null;
  const hit = { node: n.id };
  if (!textIsLegible(F.small.px)) return hit;   // its parts, once they are drawn
  if (sparkHit(n, wx, wy, hit)) return hit;
  if (n.form === 'strip') stripHit(n, wx, wy, hit);
  return hit;
}
// a sparkline under the pointer (a little taller than drawn, so it is easy to point at): its
// series and the point at the time under the pointer
function sparkHit(n, wx, wy, hit) {
  const boxes = [];
  if (n.kind === 'device') {
    for (const [row, metric] of DEV_SPARK_ROWS) boxes.push([devSparkBox(n, row), 'device|' + n.data.uuid, [metric], n.data.index]);
  } else if (n.kind === 'process' && n.data) {
    const w = n.form === 'strip' ? TR_LEFT_W : n.w;
    n.data.attachments.forEach((a, i) => boxes.push([procSparkBox(n, i, w), 'process|' + n.pid + '|' + a.device_uuid,
      ['sm_util_pct', 'memory_used_bytes'], a.device_index]));
  }
  for (const [b, key, metrics, device] of boxes) {
    if (wx < b.x || wx > b.x + b.w || wy < b.y - 3 || wy > b.y + b.h + 3) continue;
    const main = seriesOf(key, metrics[0]) || seriesOf(key, metrics[1]);
    const at = pointAt(b, wx, main);
    hit.spark = { box: b, key, metrics, device, t: at.t, point: at.i >= 0 ? main.t[at.i] : null,
      values: metrics.map(m => { const s = seriesOf(key, m), j = s && at.i >= 0 ? pointAt(b, wx, s).i : -1;
        return j >= 0 ? { metric: m, t: s.t[j], res: s.res[j], v: s.v[j], lo: s.lo[j], hi: s.hi[j] } : { metric: m, t: null }; }) };
    return true;
  }
  return false;
}
function stripHit(n, wx, wy, hit) {
  const tr = n.tr, lx = wx - n.x;
  if (lx >= STATS_X - 4) {   // the top kernels and transfers
    const rows = statsRows(n), ks = tr.info.kernels || [], ts = tr.info.transfers || [];
    for (let i = 0; i < Math.min(ks.length, KERNEL_ROWS); i++) {
      const y = kernelRowY(n, i);
      if (wy > y - STAT_ROW + 3 && wy <= y + 3) { hit.kernel = ks[i]; hit.kernelIndex = i; return; }
    }
    rows.transferY.forEach((y, i) => { if (wy > y - STAT_ROW + 3 && wy <= y + 3) hit.transfer = ts[i]; });
    return;
  }
  const li = Math.floor((wy - laneTop(n, 0)) / LANE_H);
  if (li < 0 || li >= Math.min(tr.lanes.length, MAX_LANES_DRAWN)) return;
  if (lx >= TRACK_X && lx <= TRACK_X + TRACK_W && tr.t0 !== null) {
    const L = tr.lanes[li], k = TRACK_W * view.s / (tr.t1 - tr.t0);   // screen px per µs
    const t = tr.t0 + (lx - TRACK_X) / TRACK_W * (tr.t1 - tr.t0), tol = 3 / k;
    const st = L.start, du = L.dur, held = L.held;
    let i = firstAtOrAfter(st, held, t + tol) - 1, best = -1, bd = Infinity;
    for (let j = i; j >= 0 && j > i - 64; j--) {
      const a = st[j], b = a + du[j] / 1000;
      const d = t < a ? a - t : t > b ? t - b : 0;
      if (d < bd) { bd = d; best = j; }
      if (b < t - L.maxDurUs - tol) break;
    }
    const ps = tr.past;
    if (L.buckets) {   // a reduced past window: the bucket under the pointer
      const b = L.buckets, i = Math.floor((t - b.start_us) / b.width_us);
      if (i >= 0 && i < b.count.length && b.count[i] > 0) {
        hit.bucket = { lane: L, laneIndex: li, count: b.count[i], busy_ns: b.busy_ns[i], from_us: b.start_us + i * b.width_us, width_us: b.width_us };
      }
    } else if (best >= 0 && bd <= tol) { hit.span = spanAt(L, best); hit.lane = li; hit.laneObj = L; }
    else if (!ps && L.executions > held && (!held || t < st[0])) hit.notSampled = L;
    if (!hit.span && !hit.bucket && ps && ps.retainedFrom !== null && t < ps.retainedFrom * 1e6) hit.notRetained = ps;
  } else if (lx >= STRIP_X && lx < TRACK_X) hit.laneLabel = tr.lanes[li];
  else if (lx >= COUNT_X && lx < STATS_X) hit.laneLabel = tr.lanes[li];
}
function sameHit(a, b) {
  if (!a || !b) return a === b;
  return a.node === b.node && a.span === b.span && a.laneLabel === b.laneLabel && a.notSampled === b.notSampled &&
    a.kernel === b.kernel && a.transfer === b.transfer && a.notRetained === b.notRetained &&
    (a.bucket ? b.bucket && a.bucket.from_us === b.bucket.from_us && a.bucket.lane === b.bucket.lane : !b.bucket) &&
    (a.spark ? b.spark && a.spark.key === b.spark.key && a.spark.metrics[0] === b.spark.metrics[0] && a.spark.point === b.spark.point : !b.spark);
}
// the card for what is under the still pointer, after every draw: the frame or the view may have
// changed under it
export function afterDraw() {
  if (drag || !pointer.inside) return;
  const h = hitTest(pointer.sx, pointer.sy);
  if (!sameHit(h, ui.hover)) markDirty();
  ui.hover = h;
  if (h) showTip(h); else hideTip();
}
function fitNow() {
  // a layout made for another canvas size (the window changed while the view was the user's)
  // is made again for this one first
  const stale = model.sizeKey !== Math.round(cssW) + 'x' + Math.round(cssH);
  if (shownSnap() && stale && !ui.isolated) rebuild(shownSnap(), shownTraced(), true);
  fitTo(ui.isolated ? litSets(ui.isolated).nodes : null);
  view.touched = !!ui.isolated;
}

// the plane's and the window's listeners, installed once by main.js; `toggleList` shows or hides
// the process list
export function installInteraction(toggleList) {
  canvas.addEventListener('pointerdown', (e) => {
    if (e.button !== 0) return;
    drag = { x: e.clientX, y: e.clientY, vx: view.x, vy: view.y, moved: false };
    canvas.setPointerCapture(e.pointerId);
  });
  canvas.addEventListener('pointermove', (e) => {
    const [sx, sy] = canvasXY(e);
    Object.assign(pointer, { inside: true, sx, sy, cx: e.clientX, cy: e.clientY });
    if (drag) {
      const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (!drag.moved && Math.abs(dx) + Math.abs(dy) > 4) { drag.moved = true; canvas.classList.add('dragging'); hideTip(); }
      if (drag.moved) { view.x = drag.vx + dx; view.y = drag.vy + dy; view.touched = true; markDirty(); }
      return;
    }
    const h = hitTest(sx, sy);
    if (!sameHit(h, ui.hover)) markDirty();
    ui.hover = h;
    if (h) showTip(h); else hideTip();
  });
  canvas.addEventListener('pointerleave', () => {
    pointer.inside = false;
    if (!drag) { ui.hover = null; hideTip(); markDirty(); }
  });
  canvas.addEventListener('pointerup', (e) => {
    if (!drag) return;
    const d = drag; drag = null;
    canvas.classList.remove('dragging');
    if (d.moved) return;
    const [sx, sy] = canvasXY(e);
    const [wx, wy] = toWorld(sx, sy);
    const n = nodeAt(wx, wy);
    ui.isolated = n && ui.isolated !== n.id ? n.id : null;
    markDirty();
  });
  canvas.addEventListener('wheel', (e) => {
    e.preventDefault();
    const [sx, sy] = canvasXY(e);
    const dy = e.deltaMode === 1 ? e.deltaY * 16 : e.deltaMode === 2 ? e.deltaY * 400 : e.deltaY;
    const ns = Math.min(8, Math.max(0.02, view.s * Math.exp(-dy * 0.0015)));
    const [wx, wy] = toWorld(sx, sy);
    view.s = ns; view.x = sx - wx * ns; view.y = sy - wy * ns; view.touched = true;
    markDirty();
  }, { passive: false });
  window.addEventListener('keydown', (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.target && (e.target.tagName === 'INPUT' || e.target.tagName === 'TEXTAREA')) return;
    if (timelineKey(e)) return;
    if (e.key === 'f' || e.key === 'F') fitNow();
    else if (e.key === 'p' || e.key === 'P') toggleList();
    else if (e.key === 'Escape') { ui.isolated = null; ui.hover = null; hideTip(); markDirty(); }
  });
}

function showTip(h) {
  const n = model.nodes.get(h.node);
  if (!n) return hideTip();
  const t = el.tip;
  fillCard(t, h, n);
  h.seq = store.lastSeq;
  t.hidden = false;
  const w = t.offsetWidth, hh = t.offsetHeight;
  t.style.left = Math.max(8, Math.min(pointer.cx + 14, window.innerWidth - w - 8)) + 'px';
  t.style.top = (pointer.cy + 16 + hh > window.innerHeight ? Math.max(8, pointer.cy - hh - 10) : pointer.cy + 16) + 'px';
}
function hideTip() { el.tip.hidden = true; }
