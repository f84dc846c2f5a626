// The nodes' cards: a GPU's readings, the host's facts and problems, a process's hold on each
// GPU, and the card of a traced process that has no lanes (yet, or ever: tracing could not start).
// A traced process with lanes is traced.js's.
//
// Each draw* function draws one node at its place in the world (layout.js), in world units, with
// the canvas engine's primitives; `full` false (text too small to read) draws the box alone. The
// numbers a reader comes for (a GPU's utilization, memory, temperature and power; a process's SM %
// and memory on each GPU, and its pid) are in the readings' font and queued with an id, so the
// test hook records the size and box each was drawn at.
//
// A GPU's utilization, memory and power rows and each row of a process carry a sparkline of the
// minutes up to the moment shown (spark.js queues them here and draws them all at once).
//
// Constraints: a value that is not available is drawn as a dash through cell(), which records
// it, never as 0; untrusted strings (names, users, messages) reach the canvas only through
// text(), fitted or wrapped, never cut mid-word where they must be read whole (geometry.js).

import { COL, F, badge, bar, box, cell, drawn, text, textWidth } from './canvas.js';
import { DASH, exitText, fmtBytes, fmtGB, fmtPct, isNum, num, retiredText, unitFor } from './format.js';
import { DEV_BAND, DEV_BAR_W, DEV_BAR_X, DEV_ROW, DEV_ROW0, DEV_SPARK_ROWS, DEV_VALUE_ROOM, HOST_BAND, LINE_H, PROC_BAND,
  PROC_SPARK_X, devSparkBox, procRowY, procSparkBox, procSparkW, tracedNote } from './geometry.js';
import { model } from './layout.js';
import { drawSmGrid } from './sm_grid.js';
import { queueSpark, seriesOf, sparkBaseline } from './spark.js';
import { unallocatedText, workloadLabel } from './workload.js';

export function drawDevice(n, full) {
  const d = n.data, x = n.x, y = n.y, id = n.id, ty = y + 20;
  box(n, d.lost ? COL.lost : COL.border, d.lost ? '#3d1d20' : COL.head, DEV_BAND);
  if (!full) { drawSmGrid(n, false); return; }
  const title = 'GPU ' + d.index;
  text(title, x + 10, ty, F.title, COL.text);
  let right = x + n.w - 8;
  if (d.lost) {
    // a lost GPU says so where the eye lands first; its readings below are all "—"
    right -= badge('LOST', right, ty, COL.lost, '#0d1117') + 6;
    text('stopped answering', right, ty, F.small, '#ffa198', 'right');
    right -= textWidth('stopped answering', F.small) + 8;
  } else if (d.mig_mode === 'enabled') right -= badge('MIG', right, ty, COL.warn, '#0d1117') + 6;
  const nx = x + 18 + textWidth(title, F.title);
  text(cell(d.name, String, id + '.name'), nx, ty, F.small, COL.dim, 'left', right - nx);
  const rows = [
    ['util', isNum(d.utilization_gpu_pct) ? d.utilization_gpu_pct / 100 : null, COL.sm,
      cell(d.utilization_gpu_pct, fmtPct, id + '.utilization_gpu_pct'), 'util'],
    ['memory', isNum(d.memory_used_bytes) && isNum(d.memory_total_bytes) && d.memory_total_bytes > 0
      ? d.memory_used_bytes / d.memory_total_bytes : null, COL.mem, memText(d, id), 'memory'],
    ['temp', isNum(d.temperature_c) ? d.temperature_c / 100 : null, COL.temp,
      cell(d.temperature_c, v => Math.round(v) + ' °C', id + '.temperature_c'), 'temp'],
    ['power', isNum(d.power_draw_w) && isNum(d.power_limit_w) && d.power_limit_w > 0 ? d.power_draw_w / d.power_limit_w : null,
      COL.power, cell(d.power_draw_w, v => String(Math.round(v)), id + '.power_draw_w') + ' / ' +
      cell(d.power_limit_w, v => Math.round(v) + ' W', id + '.power_limit_w'), 'power'],
  ];
  let ry = y + DEV_ROW0;
  for (const r of rows) {
    text(r[0], x + 10, ry, F.small, COL.dim);
    bar(x + DEV_BAR_X, ry - 8, DEV_BAR_W, 8, r[1], r[2]);
    text(r[3], x + n.w - 10, ry, F.value, COL.text, 'right', DEV_VALUE_ROOM, id + '.' + r[4]);
    ry += DEV_ROW;
  }
  deviceSparks(n, d);
  // PCIe both ways against the link's peak: the label of the edge to the host, which leaves here
  text('PCIe', x + 10, ry, F.small, COL.dim);
  text(pcieText(d, id), x + n.w - 10, ry, F.body, COL.text, 'right', n.w - 50, id + '.pcie');
  drawSmGrid(n, full);
}
// "in 2.3 · out 1.4 of 63.0 GB/s": into the GPU (NVML's rx), out of it (tx), the link's peak each way
export function pcieText(d, id) {
  const peak = d.links && isNum(d.links.pcie_peak_bytes_per_s) ? d.links.pcie_peak_bytes_per_s : null;
  return 'in ' + cell(d.pcie_rx_bytes_per_s, fmtGB, id + '.pcie_rx_bytes_per_s') + ' · out ' +
    cell(d.pcie_tx_bytes_per_s, fmtGB, id + '.pcie_tx_bytes_per_s') + ' of ' + cell(peak, fmtGB, id + '.pcie_peak_bytes_per_s') + ' GB/s';
}
// the scale each sparkline of a GPU is drawn against: its row's bar's
export const SPARK_COLORS = { utilization_gpu_pct: COL.sm, memory_used_bytes: COL.mem, power_draw_w: COL.power, sm_util_pct: COL.sm };
export function deviceSparkTop(d, metric) {
  return metric === 'utilization_gpu_pct' ? 100 : metric === 'memory_used_bytes' ? d.memory_total_bytes : d.power_limit_w;
}
function deviceSparks(n, d) {
  const key = 'device|' + d.uuid;
  for (const [row, metric] of DEV_SPARK_ROWS) {
    const box = devSparkBox(n, row), s = seriesOf(key, metric);
    if (!queueSpark(n.id + '.spark.' + metric, box, s, deviceSparkTop(d, metric) || highest(s), SPARK_COLORS[metric], 'line')) sparkBaseline(box);
  }
}
// the greatest reading of a series (a scale for a reading whose limit is not known)
function highest(s) {
  let m = 0;
  if (s) for (let i = 0; i < s.hi.length; i++) if (s.hi[i] > m) m = s.hi[i];
  return m * 1.1;
}
// a GPU's memory, the scale of a process's memory sparkline on it
export function deviceMemory(index) {
  const g = model.nodes.get('d:' + index);
  return g && g.data && isNum(g.data.memory_total_bytes) ? g.data.memory_total_bytes : null;
}
function memText(d, id) {
  const u = d.memory_used_bytes, t = d.memory_total_bytes;
  if (isNum(u) && isNum(t)) { const [dv, un] = unitFor(t); return num(u, dv) + ' / ' + num(t, dv) + ' ' + un; }
  return cell(u, fmtBytes, id + '.memory_used_bytes') + ' / ' + cell(t, fmtBytes, id + '.memory_total_bytes');
}

export function drawHost(n, full) {
  const h = n.data, x = n.x, y = n.y;
  box(n, COL.host, '#241c35', HOST_BAND);
  for (const r of n.retired) drawn.retired.push(retiredText(r));
  drawn.problems = n.lines.filter(l => l.kind !== 'facts').map(l => l.s);
  if (!full) return;
  text(cell(h.hostname, String, 'host.hostname'), x + 10, y + 20, F.title, COL.text, 'left', n.w - 60);
  text('host', x + n.w - 10, y + 20, F.small, COL.host, 'right');
  cell(h.driver_version, String, 'host.driver_version');
  cell(h.cuda_driver_version, String, 'host.cuda_driver_version');
  cell(h.nvml_version, String, 'host.nvml_version');
  let ly = y + HOST_BAND + 18;
  for (const l of n.lines) {   // wrapped to the card's width: nothing is cut
    ly += l.gap;
    text(l.s, x + 10, ly, l.f, l.color);
    ly += l.f === F.body ? 16 : LINE_H;
  }
}

// a process card's title band: name, user, pid, and badges (TRACED, EXITED) at the right end
export function procTitle(n, w, badges) {
  const p = n.data, info = n.tr ? n.tr.info : null, x = n.x, y = n.y + 18, id = n.id;
  let right = x + w - 10;
  for (const [s, bg] of badges) right -= badge(s, right + 2, y, bg, '#0d1117') + 6;
  const pid = 'pid ' + n.pid;
  text(pid, right, y, F.value, COL.dim, 'right', 0, id + '.pid');
  right -= textWidth(pid, F.value) + 8;
  const name = cell(p ? p.name : info.name, String, id + '.name');
  const room = right - x - 10;
  // the user beside the name when both fit; else the name has the room (the user is in the
  // hover and the process list)
  const userText = p ? cell(p.user, String, id + '.user') : null;
  const nameW = Math.min(textWidth(name, F.title), room);
  text(name, x + 10, y, F.title, COL.text, 'left', nameW);
  let used = nameW;
  if (userText !== null && nameW + 6 + textWidth(userText, F.small) <= room) {
    text(userText, x + 16 + nameW, y, F.small, COL.dim);
    used += 6 + textWidth(userText, F.small);
  }
  // who it belongs to (its pod, container or job: workload.js), where it fits; the whole of it
  // is in the hover and the process list
  const who = p ? p.workload : null, wl = workloadLabel(who);
  if (wl && room - used - 8 >= textWidth('…', F.small) * 4) {
    text(wl, x + 18 + used, y, F.small, unallocatedText(who) ? COL.warn : COL.dim, 'left', room - used - 8, id + '.workload');
  }
}
// one row per GPU the process holds: its SM % (bar and number) and its memory on that GPU
export function drawHolds(n, w) {
  const p = n.data, x = n.x, id = n.id;
  if (!p || !p.attachments.length) {
    const exited = n.tr && n.tr.info.state === 'exited';
    text(exited ? 'holds no GPU (exited)' : 'holds no GPU', x + 10, procRowY(n, 0), F.small, COL.dim);
    return;
  }
  const sw = procSparkW(w);
  p.attachments.forEach((a, i) => {
    const cid = id + '.gpu' + a.device_index, y = procRowY(n, i);
    text('GPU ' + a.device_index, x + 10, y, F.small, COL.dim);
    // the sparkline of its SM % (area) and memory (line) here; with no history yet, the SM % bar
    const box = procSparkBox(n, i, w), key = 'process|' + n.pid + '|' + a.device_uuid;
    const sm = queueSpark(cid + '.spark.sm_util_pct', box, seriesOf(key, 'sm_util_pct'), 100, COL.sm, 'area');
    const mem = seriesOf(key, 'memory_used_bytes');
    const memTop = deviceMemory(a.device_index) || highest(mem);
    const mm = queueSpark(cid + '.spark.memory_used_bytes', box, mem, memTop, COL.mem, 'line');
    if (!sm && !mm) bar(box.x, y - 8, box.w, 7, isNum(a.sm_util_pct) ? a.sm_util_pct / 100 : null, COL.sm);
    text('SM ' + cell(a.sm_util_pct, fmtPct, cid + '.sm_util_pct'), x + PROC_SPARK_X + sw + 6, y, F.value, COL.text, 'left', 0, cid + '.sm');
    text(cell(a.memory_used_bytes, fmtBytes, cid + '.memory_used_bytes'), x + w - 10, y, F.value, COL.text, 'right', 0, cid + '.memory');
  });
}
export function drawProcess(n, full) {
  const tr = n.tr, info = tr ? tr.info : null, exited = info && info.state === 'exited';
  box(n, tr ? COL.traced : COL.border, tr ? '#2d1a27' : COL.head, PROC_BAND);
  if (!full) return;
  if (!tr) { procTitle(n, n.w, []); drawHolds(n, n.w); return; }
  // a traced process without lanes: why there are none, whole
  const e = exited ? exitText(info) : null;
  procTitle(n, n.w, exited ? [['EXITED ' + (e === null ? DASH : e), info.exit_status === 0 ? COL.dim : COL.warn]]
    : [['TRACED', COL.traced]]);
  drawHolds(n, n.w);
  const note = tracedNote(info);
  let ly = procRowY(n, Math.max(1, n.data ? n.data.attachments.length : 1) - 1) + 6 + LINE_H;
  for (const l of note.lines) { text(l.s, n.x + 10, ly, l.f, l.color); ly += LINE_H; }
  drawn.strips.push({ pid: n.pid, header: note.msg, lanes: [], showing: 0, of: 0, cupti: info.cupti_status,
    state: info.state, exit: exited ? exitText(info) : null, axis: [], kernels: [] });
}
