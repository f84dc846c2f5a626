// The SM grid at the foot of a GPU's card, and what it shows (issues 20 and 21; docs/ui.md, "The SM
// grid"). Nothing measures an SM on its own, so nothing here is drawn per SM:
//
// * The cells: one per SM of the GPU, every one filled alike with the GPU's own means over all its
//   processes (NVML GPM): the cell's tint is the share of SMs busy, its fill from the bottom the SM
//   occupancy (active warps against the most an SM holds); over them, in the traced colour, a mark
//   at the theoretical occupancy of the traced kernel with the most time whose main launch
//   configuration ran on this GPU (docs/occupancy.md), where the cells are large enough to show it
//   (the warps bar beside them always does). The caption says the cells are GPU means.
// * Beside them, two lines: "busy" and "warps" with the GPM means and a bar each, and, when the
//   agent samples GPU metrics and has samples of this GPU (pm_spread.js), the spread across SMs that
//   PM sampling measures drawn on the bars as a band from the least to the busiest SM with a tick at
//   their mean, its range in figures after the bar. Under them, the traced kernel's theoretical
//   occupancy, limiter and waves; on a GPU no traced process used, its NVLinks to an NVSwitch
//   (link_edges.js), if it has some.
//
// The SM count is the one the traced processes' own records give (CUPTI's DEVICE record, matched
// to the GPU by its UUID: a process's device ordinals are its own); a GPU no traced process has
// described has no cells, and its caption says why (no traced process on it, or none of those on it
// described it: an agent from before the DEVICE facts), the means and the band still shown. The SM
// count and the launch table are facts of the whole run, read from the live frame also at a past
// moment; GPM means are live readings (a past moment's frame has none: past.js).
//
// Constraints: world units, under the view's transform; everything drawn through canvas.js; a value
// not known is "—" (cell()), never 0; nothing per SM (the cells are drawn a row at a time). What it
// drew is kept in `drawn.grids` (canvas.js) for tests.

import { COL, F, cell, ctx, drawn, text, view } from './canvas.js';
import { clamp01, isNum } from './format.js';
import { DEV_FOOT_LINE, DEV_FOOT_Y, DEV_GRID_H, DEV_GRID_W, DEV_GRID_Y } from './geometry.js';
import { gpuMetricsOn } from './gpu_metrics_layout.js';
import { switchLine } from './link_edges.js';
import { spreadOf, wantSpread } from './pm_spread.js';
import { store } from './store.js';

// the largest cell, the smallest (screen px) that carries the traced mark (smaller, the marks of
// every row run together into stripes: the warps bar carries it), and the bars beside the cells:
// the value's right edge, the bar, its height
const MARK_MIN_PX = 6, MAX_PITCH = 7, VALUE_X = 57, BAR_X = 61, BAR_W = 31, BAR_H = 5;
const BUSY_TINT = '#1f4d2b', BAND = COL.reduced;

// per live frame: GPU uuid -> [{ info: the traced process, dev: its TracedDevice }], and the UUIDs
// of the GPUs a traced process holds (its NVML attachments), described or not
let tracedOn = new Map(), tracedHeld = new Set(), tracedFrame = null;
export function tracedByUuid() {
  const f = store.snap;
  if (f === tracedFrame) return tracedOn;
  tracedFrame = f;
  tracedOn = new Map();
  tracedHeld = new Set();
  const pids = new Set();
  for (const info of (f && f.traced) || []) {
    pids.add(info.pid);
    for (const dev of info.devices || []) {
      if (!dev.uuid) continue;
      let l = tracedOn.get(dev.uuid);
      if (!l) { l = []; tracedOn.set(dev.uuid, l); }
      l.push({ info, dev });
    }
  }
  for (const p of (f && f.processes) || []) if (pids.has(p.pid)) for (const a of p.attachments) tracedHeld.add(a.device_uuid);
  return tracedOn;
}

// what a GPU's grid shows: its SM count, its GPM means, and the traced kernel with the most time
// whose main configuration ran on it ({launch, kernel, pid, device}), of every traced process on it
export function gridFacts(d) {
  const on = tracedByUuid().get(d.uuid) || [];
  let sms = null, top = null, topNs = -1;
  for (const { info, dev } of on) {
    if (sms === null && isNum(dev.sm_count) && dev.sm_count > 0) sms = dev.sm_count;
    const launches = (info.kernel_launches || []).filter(x => x.device === dev.device);
    if (!launches.length) continue;
    // a launch is named by its kernel table entry's mangled name
    const kernels = new Map();
    for (const k of info.kernels || []) if (!kernels.has(k.mangled)) kernels.set(k.mangled, k);
    for (const x of launches) {
      const k = kernels.get(x.mangled), ns = k ? k.total_ns : 0;
      if (ns > topNs) { top = { launch: x, kernel: k || null, pid: info.pid, device: dev.device }; topNs = ns; }
    }
  }
  const g = d.gpm || null;
  return { sms, top, traced: on, tracedHere: on.length > 0 || tracedHeld.has(d.uuid),
    busy: g && isNum(g.sm_util_pct) ? g.sm_util_pct : null, occupancy: g && isNum(g.sm_occupancy_pct) ? g.sm_occupancy_pct : null };
}

// the pitch and columns of `n` square cells in a box w x h: the largest cells that fit
export function layoutCells(n, w, h) {
  let best = { pitch: 0, cols: 1, rows: 1 };
  for (let rows = 1; rows <= n; rows++) {
    const cols = Math.ceil(n / rows), pitch = Math.min(w / cols, h / rows, MAX_PITCH);
    if (pitch > best.pitch) best = { pitch, cols, rows };
    if (h / rows < best.pitch) break;
  }
  return best;
}
// The cells: every one alike, so they are drawn a row at a time, then the gaps between the cells of
// a row in the card's colour: a dozen rectangles whatever the count (a rectangle per cell cost a
// picture about 2 ms for 8 GPUs of 132 SMs). Rows are `pitch` apart, a cell `pitch - 1` square.
function drawCells(n, L, x, y, busy, occupancy, theo) {
  const rows = Math.ceil(n / L.cols), cs = L.pitch - 1, a0 = ctx.globalAlpha;
  const rowRects = (from, h) => {
    ctx.beginPath();
    for (let r = 0; r < rows; r++) ctx.rect(x, y + r * L.pitch + from, Math.min(L.cols, n - r * L.cols) * L.pitch - 1, h);
  };
  rowRects(0, cs);
  ctx.fillStyle = COL.barBg; ctx.fill();
  if (busy !== null) {   // the share of SMs busy as the cells' tint: the same in every cell
    ctx.globalAlpha = a0 * (0.25 + 0.75 * clamp01(busy / 100));
    ctx.fillStyle = BUSY_TINT; ctx.fill();
    ctx.globalAlpha = a0;
  }
  if (occupancy !== null) {   // the occupancy as their fill from the bottom
    const fh = cs * clamp01(occupancy / 100);
    rowRects(cs - fh, fh);
    ctx.fillStyle = COL.sm; ctx.fill();
  }
  if (theo !== null && L.pitch * view.s >= MARK_MIN_PX) {   // the traced kernel's theoretical occupancy: a mark at that height
    rowRects(cs - cs * clamp01(theo / 100) - 0.4, 0.8);
    ctx.fillStyle = COL.traced; ctx.fill();
  }
  ctx.beginPath();
  for (let c = 1; c < L.cols; c++) ctx.rect(x + c * L.pitch - 1, y, 1, rows * L.pitch);
  ctx.fillStyle = COL.node; ctx.fill();
}

// "regs+smem": a limiter as the line has room for (the hover says it whole)
const SHORT = { registers: 'regs', shared_memory: 'smem', warps: 'warps', blocks: 'blocks' };
export function limiterText(l) { return l ? l.split('+').map(x => SHORT[x] || x).join('+') : '—'; }
export function wavesText(L) {
  if (!isNum(L.waves_min) || !isNum(L.waves_max)) return '';
  const a = L.waves_min.toFixed(1), b = L.waves_max.toFixed(1);
  return ' · ' + (a === b ? a : a + '–' + b) + ' waves';
}
// the traced line: the kernel's theoretical occupancy, limiter and waves, or why not
export function tracedLine(g) {
  if (!g.top) return g.traced.length ? 'traced: no launch configuration on it yet' : null;
  const L = g.top.launch;
  if (!isNum(L.occupancy_pct)) return 'traced: occupancy —' + (L.unavailable ? ' (' + L.unavailable + ')' : '');
  return 'traced ' + Math.round(L.occupancy_pct) + ' % · ' + limiterText(L.limiters) + wavesText(L);
}

// a bar of the foot: the GPM mean as its fill, the PM band and mean over it; its figures
function meanBar(x, y, label, v, band, id, theo) {
  text(label, x, y, F.label, COL.dim, 'left');
  text(cell(v, p => Math.round(p) + ' %', id), x + VALUE_X, y, F.label, COL.text, 'right', undefined, id);
  const bx = x + BAR_X, by = y - BAR_H - 1;
  ctx.fillStyle = COL.barBg; ctx.fillRect(bx, by, BAR_W, BAR_H);
  if (v === null) { ctx.strokeStyle = COL.faint; ctx.lineWidth = 0.6; ctx.strokeRect(bx + 0.3, by + 0.3, BAR_W - 0.6, BAR_H - 0.6); }
  else { ctx.fillStyle = COL.sm; ctx.fillRect(bx, by, BAR_W * clamp01(v / 100), BAR_H); }
  if (band && isNum(band.min) && isNum(band.max)) {
    const a0 = ctx.globalAlpha;
    ctx.globalAlpha = a0 * 0.45; ctx.fillStyle = BAND;
    const x0 = bx + BAR_W * clamp01(band.min / 100), x1 = bx + BAR_W * clamp01(band.max / 100);
    ctx.fillRect(x0, by - 1.5, Math.max(0.8, x1 - x0), BAR_H + 3);
    ctx.globalAlpha = a0;
    if (isNum(band.avg)) { ctx.fillStyle = BAND; ctx.fillRect(bx + BAR_W * clamp01(band.avg / 100) - 0.5, by - 2, 1, BAR_H + 4); }
    text(Math.round(band.min) + '–' + Math.round(band.max), bx + BAR_W + 4, y, F.label, BAND, 'left', undefined, id + '.band');
  }
  if (theo !== null) { ctx.fillStyle = COL.traced; ctx.fillRect(bx + BAR_W * clamp01(theo / 100) - 0.6, by - 2, 1.2, BAR_H + 4); }
}

export function drawSmGrid(n, full) {
  const d = n.data, id = n.id, x = n.x + 10, y = n.y + DEV_GRID_Y;
  if (d.lost) return;
  const g = gridFacts(d);
  const on = gpuMetricsOn();
  if (on) wantSpread();
  const spread = on ? spreadOf(d.uuid) : null;
  const theo = g.top && isNum(g.top.launch.occupancy_pct) ? g.top.launch.occupancy_pct : null;
  const rec = { id, sms: g.sms, cells: 0, cols: 0, pitch: 0, sm_util_pct: g.busy, occupancy_pct: g.occupancy,
    theoretical_pct: theo, top: g.top ? (g.top.kernel ? g.top.kernel.name : g.top.launch.mangled) : null,
    band: spread ? { sm: spread.sm || null, warps: spread.warps || null } : null, caption: null, lines: [] };
  drawn.grids.push(rec);
  let right = x;
  if (g.sms !== null) {
    const L = layoutCells(g.sms, DEV_GRID_W, DEV_GRID_H);
    drawCells(g.sms, L, x, y, g.busy, g.occupancy, theo);
    right = x + L.cols * L.pitch + 7;
    Object.assign(rec, { cells: g.sms, cols: L.cols, pitch: L.pitch });
  }
  if (!full) return;
  const fy = n.y + DEV_FOOT_Y, room = n.x + n.w - 10 - x;
  rec.caption = g.sms === null ? 'SM count not known: ' + (g.tracedHere ? 'no traced process described it' : 'no traced process on this GPU')
    : g.sms + ' SMs · ' + (spread ? 'cells: GPU means · band: SM spread (PM)' : 'each cell the GPU mean (GPM)');
  text(rec.caption, x, fy, F.label, COL.dim, 'left', room, id + '.grid.caption');
  const ly = fy + DEV_FOOT_LINE;
  meanBar(right, ly, 'busy', g.busy, spread && spread.sm, id + '.gpm.sm_util_pct', null);
  meanBar(right, ly + DEV_FOOT_LINE, 'warps', g.occupancy, spread && spread.warps, id + '.gpm.sm_occupancy_pct', theo);
  // under them the traced kernel; a GPU no traced process used has the room for its NVLinks to a switch
  const t = tracedLine(g), nv = t === null ? switchLine(d) : null;
  if (t !== null) text(t, x, ly + 2 * DEV_FOOT_LINE, F.label, g.top ? COL.traced : COL.faint, 'left', room, id + '.grid.traced');
  else if (nv !== null) text(nv, x, ly + 2 * DEV_FOOT_LINE, F.label, COL.host, 'left', room, id + '.nvswitch');
  rec.lines = [t === null ? nv : t];
}
