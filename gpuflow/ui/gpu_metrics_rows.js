// GPU-metric rows above a traced process's lanes (issue 21; docs/gpu-metrics.md, "PM sampling"): per
// GPU its lanes use, three counter rows on the lanes' own time axis, live and at a past moment
// alike (they follow the strip's window, tr.t0 .. tr.t1):
//
//   warps  warps in flight, % of the SM's warp slots: the line is the mean over the SMs, the band
//          from the least busy SM to the busiest (CUPTI PM sampling's min/avg/max across SMs)
//   SM     SM active, % of cycles an SM had work: the same line and band
//   mem    DRAM throughput, % of its peak (line); PCIe reads and writes (thin lines, scaled to the
//          window's greatest rate, which the value column states)
//
// Samples come from GET api/history for the strips' window, the pm_* series reduced by the agent
// to about two points per pixel (recorder.js's channel: one question in flight). A GPU without
// samples says why in its row (the first of the agent's pmsampling lines, e.g. no privilege), so
// a refusal is said where the rows would be, not only on the host's card.
//
// Constraints: drawn only when the agent samples GPU metrics (gpu_metrics_layout.js); world units,
// under the view's transform, after the lanes; untrusted text (the agent's lines) only through
// text(); a picture draws from what was last answered and never waits. What each row drew is kept
// in the picture's `drawn.pmRows` (canvas.js) for tests.

import { COL, F, ctx, drawn, markDirty, text } from './canvas.js';
import { TRACK_W, TRACK_X, COUNT_X, COUNT_W, LANES_Y } from './geometry.js';
import { ROW_H, SOURCE, gpuMetricsOn, laneGpus } from './gpu_metrics_layout.js';
import { channel, historyQuestion, seriesIndex } from './recorder.js';
import { isPast } from './scrub.js';
import { shownSnap } from './store.js';

export const PM_METRICS = ['pm_warps_active_pct', 'pm_warps_active_min_pct', 'pm_warps_active_max_pct',
  'pm_sm_active_pct', 'pm_sm_active_min_pct', 'pm_sm_active_max_pct', 'pm_dram_throughput_pct',
  'pm_pcie_read_bytes_per_s', 'pm_pcie_write_bytes_per_s'];
const POINTS = 2 * TRACK_W, LIVE_REFRESH_MS = 250;
const ROW_DEFS = [['warps', 'pm_warps_active', COL.sm], ['SM', 'pm_sm_active', COL.sm], ['mem', null, COL.xfer]];

export const pmRows = { index: new Map(), from: 0, to: 0, at: 0, answers: 0, error: null };
const ch = channel((q, doc) => {
  pmRows.index = seriesIndex(doc); pmRows.from = q.from; pmRows.to = q.to; pmRows.answers++; pmRows.error = null;
  markDirty();
}, (q, err) => { pmRows.error = err.message; });

// ask for [from, to) (seconds) unless the last answer covers it closely enough
function want(from, to) {
  const now = performance.now(), len = to - from, slack = len * 0.1;
  const same = Math.abs(from - pmRows.from) < slack && Math.abs(to - pmRows.to) < slack;
  if (same && (isPast() || now - pmRows.at < LIVE_REFRESH_MS)) return;
  if (ch.busy) return;
  pmRows.at = now;
  ch.ask(historyQuestion(from, to, PM_METRICS, POINTS));
}

function series(uuid, metric) {
  const m = pmRows.index.get('device|' + uuid);
  return m ? m.get(metric) : undefined;
}
// the x of time t (s) on node n's track, for the strip's window tr.t0 .. tr.t1 (µs)
function xOf(n, t) { return n.x + TRACK_X + (t * 1e6 - n.tr.t0) / (n.tr.t1 - n.tr.t0) * TRACK_W; }

function path(n, s, pick, y0, h, top) {
  if (!s) return 0;
  ctx.beginPath();
  let open = false, drawn = 0;
  for (let i = 0; i < s.t.length; i++) {
    const v = pick(s, i);
    const x = xOf(n, s.t[i]);
    if (!(v === v) || x < n.x + TRACK_X - 1 || x > n.x + TRACK_X + TRACK_W + 1) { open = false; continue; }
    const y = y0 + h - Math.min(1, Math.max(0, v / top)) * h;
    if (open) ctx.lineTo(x, y); else ctx.moveTo(x, y);
    open = true; drawn++;
  }
  ctx.stroke();
  return drawn;
}
function band(n, lo, hi, y0, h) {
  if (!lo || !hi || lo.t.length !== hi.t.length) return;
  for (let i = 0; i < lo.t.length; i++) {
    const a = lo.lo[i], b = hi.hi[i];
    if (!(a === a) || !(b === b)) continue;
    const x = xOf(n, lo.t[i]), w = Math.max(0.5, xOf(n, lo.t[i] + lo.res[i]) - x);
    if (x + w < n.x + TRACK_X || x > n.x + TRACK_X + TRACK_W) continue;
    const ya = y0 + h - Math.min(1, a / 100) * h, yb = y0 + h - Math.min(1, b / 100) * h;
    ctx.fillRect(x, yb, w, Math.max(0.5, ya - yb));
  }
}
function last(s) {
  if (!s) return NaN;
  for (let i = s.t.length - 1; i >= 0; i--) if (s.v[i] === s.v[i]) return s.v[i];
  return NaN;
}
function why() {
  const f = shownSnap(), lines = ((f && f.host && f.host.problems) || []).filter(p => p.source === SOURCE);
  const bad = lines.find(p => p.severity !== 'info');
  return bad ? bad.message : lines.length ? 'no samples in this window yet' : 'the agent has not said yet';
}

// the rows of traced strip n, after its lanes; asks for its window when the answer does not cover it
export function drawGpuRows(n, alpha) {
  const tr = n.tr;
  if (!tr || !tr.lanes.length || tr.t0 === null || !(tr.t1 > tr.t0) || !gpuMetricsOn()) return;
  want(tr.t0 / 1e6, tr.t1 / 1e6);
  const gpus = laneGpus(n.data, tr);
  let y = n.y + LANES_Y;
  ctx.globalAlpha = alpha;
  for (const g of gpus) {
    const label = 'GPU' + (g.uuid ? g.device : ' ?') + ' ';
    const has = g.uuid && series(g.uuid, 'pm_warps_active_pct');
    for (const [row, base, color] of ROW_DEFS) {
      ctx.fillStyle = '#161b22';
      ctx.fillRect(n.x + TRACK_X, y, TRACK_W, ROW_H - 2);
      text(label + row, n.x + TRACK_X - 6, y + 10, F.label, COL.dim, 'right', undefined, n.id + '.pm' + g.device + '.' + row);
      const rec = { pid: n.pid, device: g.device, uuid: g.uuid, row, points: 0, value: null };
      if (!has) {
        if (row === 'warps') text('GPU metrics: ' + why(), n.x + TRACK_X + 4, y + 10, F.label, COL.warn, 'left', TRACK_W - 8, n.id + '.pm' + g.device + '.why');
        (drawn.pmRows ||= []).push(rec);
        y += ROW_H;
        continue;
      }
      ctx.lineWidth = 1.2;
      if (base) {
        ctx.fillStyle = color; ctx.globalAlpha = alpha * 0.25;
        band(n, series(g.uuid, base + '_min_pct'), series(g.uuid, base + '_max_pct'), y, ROW_H - 2);
        ctx.globalAlpha = alpha; ctx.strokeStyle = color;
        rec.points = path(n, series(g.uuid, base + '_pct'), (s, i) => s.v[i], y, ROW_H - 2, 100);
        rec.value = last(series(g.uuid, base + '_pct'));
        text(rec.value === rec.value ? rec.value.toFixed(0) + ' %' : '—', n.x + COUNT_X, y + 10, F.label, COL.text, 'left', COUNT_W);
      } else {
        const rd = series(g.uuid, 'pm_pcie_read_bytes_per_s'), wr = series(g.uuid, 'pm_pcie_write_bytes_per_s');
        let top = 0;
        for (const s of [rd, wr]) if (s) for (const v of s.hi) if (v > top) top = v;
        ctx.strokeStyle = COL.xfer;
        rec.points = path(n, series(g.uuid, 'pm_dram_throughput_pct'), (s, i) => s.v[i], y, ROW_H - 2, 100);
        ctx.strokeStyle = COL.reduced; ctx.lineWidth = 0.6;
        if (top > 0) { path(n, rd, (s, i) => s.v[i], y, ROW_H - 2, top); path(n, wr, (s, i) => s.v[i], y, ROW_H - 2, top); }
        rec.value = last(series(g.uuid, 'pm_dram_throughput_pct'));
        text((rec.value === rec.value ? rec.value.toFixed(0) + ' %' : '—') + (top > 0 ? ' ·' + (top / 1e9).toFixed(1) + 'G' : ''),
          n.x + COUNT_X, y + 10, F.label, COL.text, 'left', COUNT_W);
      }
      (drawn.pmRows ||= []).push(rec);
      y += ROW_H;
    }
  }
  ctx.globalAlpha = 1;
}
