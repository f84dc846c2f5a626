// The nodes' geometry: the size of every kind of node and where each part of a node sits inside
// it, in world units. Layout (layout.js, place.js), drawing (nodes.js, traced.js, lanes.js) and
// hit tests (interaction.js, hook.js) all measure against these, so they cannot disagree.
//
// The sizes are chosen for the screens the page is used on: at 1280x720, 8 GPUs and 16
// processes fit at a zoom of about 0.88, where the readings' font (13 world px, canvas.js F.value)
// is 11.5 CSS px. A GPU's utilization, memory and power rows and each row of a process have a
// sparkline of the last minutes (spark.js) between the bar and the number. Text that must never be cut (the host's problems, why tracing could not
// start) is wrapped here, and the node grows to hold it.
//
// Constraints: world units only; nothing drawn here. Pure functions of the node's data, so a
// frame with nothing new gives the same sizes (the layout stays put).

import { COL, F, wrap } from './canvas.js';
import { retiredLines } from './format.js';
import { gpuRowsHeight } from './gpu_metrics_layout.js';

// a GPU: a title band, then one row per reading: its name, a bar, a sparkline (util, memory and
// power), the number; the PCIe row is the label of the GPU's edge to the host, which leaves the
// card there; at the foot, the SM grid (sm_grid.js): a caption line across the card, the cells at
// the left with two lines beside them, and a line across under them (its clocks are in the
// hover). The card is as tall as 1280x720 allows with 8 GPUs in two columns of four at readings
// of 11 px (docs/ui.md)
export const DEV_W = 264, DEV_H = 168, DEV_BAND = 30, DEV_ROW0 = 48, DEV_ROW = 17, DEV_PCIE_ROW = 4;
// the foot: the caption's baseline and the lines' spacing, the cells' box (top, height, widest)
export const DEV_FOOT_Y = DEV_ROW0 + (DEV_PCIE_ROW + 1) * DEV_ROW - 3, DEV_FOOT_LINE = 11,
  DEV_GRID_Y = DEV_FOOT_Y + 4, DEV_GRID_H = 2 * DEV_FOOT_LINE - 2, DEV_GRID_W = 108;
export const DEV_BAR_X = 58, DEV_BAR_W = 42, DEV_SPARK_X = 106, DEV_VALUE_ROOM = DEV_W - 166;
export const SPARK_W = 44, SPARK_H = 11;
// the rows of a GPU card with a sparkline: [row, metric]
export const DEV_SPARK_ROWS = [[0, 'utilization_gpu_pct'], [1, 'memory_used_bytes'], [3, 'power_draw_w']];
// a process holding GPUs: a title band (name, user, pid), then one row per GPU it holds: the GPU,
// a sparkline of its SM % and memory there, SM %, memory
export const PROC_W = 232, PROC_BAND = 26, PROC_ROW0 = 42, PROC_ROW = 19, PROC_SPARK_X = 46;
// the host: a title band, its facts, then its problems, wrapped
export const HOST_W = 214, HOST_BAND = 30;
export const LINE_H = 14;
// a traced process with lanes: three columns (its GPUs and records; the lane strip; top kernels
// and transfers) under a title band and a line of facts
export const TR_W = 1300, TR_BAND = 30, TR_HEAD = 50, LANE_H = 16, LANES_Y = TR_HEAD + 18, AXIS_H = 22;
export const TR_LEFT_W = 210, STRIP_X = 222, LABEL_W = 104, TRACK_X = STRIP_X + LABEL_W + 6,
  TRACK_W = 450, COUNT_X = TRACK_X + TRACK_W + 8, COUNT_W = 74, STATS_X = COUNT_X + COUNT_W + 12;
export const KERNEL_ROWS = 6, STAT_ROW = 15;
export const MAX_LANES_DRAWN = 40;   // per traced node; the rest are counted, not drawn

// a traced process without lanes (tracing not started, failed, or no CUDA work yet) is a card
// of a plain process's size, not a strip
export function isStrip(tr) { return !!tr && tr.lanes.length > 0; }

export function procRows(p) { return Math.max(1, p ? p.attachments.length : 0); }
// baseline of row i of a process card (or of a traced node's left column)
export function procRowY(n, i) { return n.y + (n.tr && isStrip(n.tr) ? TR_HEAD + 16 : PROC_ROW0) + i * PROC_ROW; }
// where a sparkline sits: row `row` of GPU card n; row i of a process whose rows are w wide (a
// traced strip's left column is narrower, and so is its sparkline)
export function devSparkBox(n, row) { return { x: n.x + DEV_SPARK_X, y: n.y + DEV_ROW0 + row * DEV_ROW - 10, w: SPARK_W, h: SPARK_H }; }
export function procSparkW(w) { return w >= PROC_W ? SPARK_W : 32; }
export function procSparkBox(n, i, w) { return { x: n.x + PROC_SPARK_X, y: procRowY(n, i) - 10, w: procSparkW(w), h: SPARK_H }; }

// why a traced process without lanes has none, wrapped for its card (at a past moment, past.js
// says why)
export function tracedNote(info) {
  const msg = info.past_note ? info.past_note
    : info.cupti_status === 'ok' ? (info.state === 'exited' ? 'no CUDA work was seen' : 'no CUDA work seen yet')
    : info.cupti_status === 'starting' ? 'tracing is starting…'
    : 'tracing could not start: ' + info.cupti_status;
  const bad = info.cupti_status !== 'ok' && info.cupti_status !== 'starting';
  const lines = wrap(msg, PROC_W - 20, F.bold).map(s => ({ s, f: F.bold, color: bad ? COL.err : COL.dim }));
  if (info.cupti_detail) for (const s of wrap(info.cupti_detail, PROC_W - 20, F.small)) lines.push({ s, f: F.small, color: COL.dim });
  return { msg, lines };
}

export function nodeWidth(p, tr) { return isStrip(tr) ? TR_W : PROC_W; }
export function procHeight(p, tr) {
  const rows = procRows(p);
  if (!tr) return PROC_ROW0 + (rows - 1) * PROC_ROW + 10;
  if (!isStrip(tr)) return PROC_ROW0 + (rows - 1) * PROC_ROW + 10 + tracedNote(tr.info).lines.length * LINE_H + 6;
  const left = TR_HEAD + 16 + rows * PROC_ROW + 2 * STAT_ROW + 8;
  const nl = Math.min(tr.lanes.length, MAX_LANES_DRAWN);
  const strip = LANES_Y + gpuRowsHeight(p, tr) + nl * LANE_H + (tr.lanes.length > nl ? 16 : 0) + AXIS_H + 8;
  const i = tr.info, nk = Math.min(i.kernels ? i.kernels.length : 0, KERNEL_ROWS);
  const stats = TR_HEAD + 24 + Math.max(1, nk) * STAT_ROW + ((i.kernels || []).length > KERNEL_ROWS ? 13 : 0) + 30
    + Math.max(1, i.transfers ? i.transfers.length : 0) * STAT_ROW + (i.cupti_status !== 'ok' ? 16 : 0) + 10;
  return Math.max(left, strip, stats) + 4;
}
// top of lane row li of a traced node with lanes
// (GPU-metric rows, when on, come first: gpu_metrics_rows.js)
export function laneTop(n, li) { return n.y + LANES_Y + gpuRowsHeight(n.data, n.tr) + li * LANE_H; }
// baseline of kernel row i in a traced node's stats column
export function kernelRowY(n, i) { return n.y + TR_HEAD + 24 + i * STAT_ROW; }

// What the host's card says, line by line (wrapped to its width), after its title band: its
// facts, then every problem whole, the folded roll-up of earlier traced processes, and, when
// something is an error, where to look next.
export const DOCTOR_HINT = 'Run gpuflow doctor on this machine: it checks each part and says what to do.';
export function hostLines(h, sources, retired) {
  const lines = [];
  const add = (s, f, color, kind, gap) => { lines.push({ s, f, color, kind, gap: gap || 0 }); };
  const w = HOST_W - 20;
  add('driver ' + (h.driver_version || '—') + ' · CUDA ' + (h.cuda_driver_version || '—'), F.body, COL.text, 'facts');
  add('NVML ' + (h.nvml_version || '—'), F.body, COL.dim, 'facts');
  add('sources: ' + (sources.length ? sources.join(', ') : 'none'), F.small, COL.dim, 'facts');
  let error = false;
  for (const p of h.problems || []) {
    const c = p.severity === 'error' ? COL.err : p.severity === 'warning' ? COL.warn : COL.dim;
    const mark = p.severity === 'error' ? '✖ ' : p.severity === 'warning' ? '▲ ' : '• ';
    if (p.severity === 'error') error = true;
    wrap(mark + p.source + ': ' + p.message, w, F.small).forEach((s, k) => add(s, F.small, c, 'problem', k === 0 ? 5 : 0));
  }
  for (const r of retired) {
    retiredLines(r).forEach((line, k) => {
      wrap(line, w, F.small).forEach((s, j) => add(s, F.small, r.complete ? COL.dim : COL.warn, 'retired', k === 0 && j === 0 ? 5 : 0));
    });
  }
  if (error) wrap(DOCTOR_HINT, w, F.small).forEach((s, k) => add(s, F.small, COL.text, 'doctor', k === 0 ? 6 : 0));
  return lines;
}
export function hostHeight(lines) {
  let h = HOST_BAND + 18;
  for (const l of lines) h += l.gap + (l.f === F.body ? 16 : LINE_H);
  return h + 4;
}
