// The nodes' cards: a GPU's readings, the host's facts and problems, a process's hold on each
// GPU, and a traced process's lane strip text and its top kernels and transfers.
//
// Each draw* function draws one node at its place in the world (layout.js), in world units, with
// the canvas engine's primitives; `full` false (zoomed far out) draws the box alone. The spans
// of a lane strip are not drawn here but in screen space by lanes.js.
//
// Constraints: a value that is not available is drawn as a dash through cell(), which records
// it, never as 0; untrusted strings (names, command lines, kernel names) reach the canvas only
// through text(). What a strip says is also recorded in `drawn` for the test hook.

import { COL, F, NOT_SAMPLED, badge, bar, box, cell, ctx, drawn, text } from './canvas.js';
import { DASH, compact, exitText, fmtBytes, fmtNs, fmtPct, fmtRate, grp, isNum, num, retiredLines, retiredText,
  shortKernel, unitFor } from './format.js';
import { COUNT_X, HEAD_H, LABEL_W, LANE_H, MAX_LANES_DRAWN, ROW_H, STATS_X, STRIP_X, TRACK_W, TRACK_X,
  TR_LEFT_W } from './layout.js';

export function drawDevice(n, full) {
  const d = n.data, x = n.x, y = n.y, id = n.id;
  box(n, d.lost ? COL.lost : COL.border, d.lost ? '#3d1d20' : COL.head);
  if (!full) return;
  text('GPU ' + d.index, x + 10, y + 19, F.title, COL.text);
  if (d.lost) {
    // a lost GPU says so where the eye lands first; its readings below are all "—"
    const bw = badge('LOST', x + n.w - 8, y + 19, COL.lost, '#0d1117');
    text('stopped answering', x + n.w - 16 - bw, y + 19, F.small, '#ffa198', 'right');
    text(cell(d.name, String, id + '.name'), x + 64, y + 19, F.body, COL.dim, 'left', n.w - 64 - 130 - bw);
  } else {
    text(cell(d.name, String, id + '.name'), x + 64, y + 19, F.body, COL.dim, 'left', 190);
    if (d.mig_mode === 'enabled') badge('MIG', x + n.w - 8, y + 19, COL.warn, '#0d1117');
  }
  const rows = [
    ['util', d.utilization_gpu_pct, isNum(d.utilization_gpu_pct) ? d.utilization_gpu_pct / 100 : null, COL.sm,
      cell(d.utilization_gpu_pct, fmtPct, id + '.utilization_gpu_pct')],
    ['memory', d.memory_used_bytes, isNum(d.memory_used_bytes) && isNum(d.memory_total_bytes) && d.memory_total_bytes > 0
      ? d.memory_used_bytes / d.memory_total_bytes : null, COL.mem, memText(d, id)],
    ['temp', d.temperature_c, isNum(d.temperature_c) ? d.temperature_c / 100 : null, COL.temp,
      cell(d.temperature_c, v => Math.round(v) + ' °C', id + '.temperature_c')],
    ['power', d.power_draw_w, isNum(d.power_draw_w) && isNum(d.power_limit_w) && d.power_limit_w > 0
      ? d.power_draw_w / d.power_limit_w : null, COL.power,
      cell(d.power_draw_w, v => String(Math.round(v)), id + '.power_draw_w') + ' / ' + cell(d.power_limit_w, v => Math.round(v) + ' W', id + '.power_limit_w')],
    ['clocks', d.clock_sm_mhz, isNum(d.clock_sm_mhz) && n.maxSm > 0 ? d.clock_sm_mhz / n.maxSm : null, COL.clock,
      'SM ' + cell(d.clock_sm_mhz, String, id + '.clock_sm_mhz') + ' · mem ' + cell(d.clock_mem_mhz, v => v + ' MHz', id + '.clock_mem_mhz')],
  ];
  let ry = y + 48;
  for (const r of rows) {
    text(r[0], x + 10, ry, F.small, COL.dim);
    bar(x + 58, ry - 8, 76, 8, r[2], r[3]);
    text(r[4], x + n.w - 10, ry, F.body, COL.text, 'right', 156);
    ry += 20;
  }
  text('PCIe', x + 10, ry, F.small, COL.dim);
  text('tx ' + cell(d.pcie_tx_bytes_per_s, fmtRate, id + '.pcie_tx_bytes_per_s') + '   rx ' +
    cell(d.pcie_rx_bytes_per_s, fmtRate, id + '.pcie_rx_bytes_per_s'), x + n.w - 10, ry, F.body, COL.text, 'right', 230);
}
function memText(d, id) {
  const u = d.memory_used_bytes, t = d.memory_total_bytes;
  if (isNum(u) && isNum(t)) { const [dv, un] = unitFor(t); return num(u, dv) + ' / ' + num(t, dv) + ' ' + un; }
  return cell(u, fmtBytes, id + '.memory_used_bytes') + ' / ' + cell(t, fmtBytes, id + '.memory_total_bytes');
}

export function drawHost(n, full) {
  const h = n.data, x = n.x, y = n.y;
  box(n, COL.host, '#241c35');
  if (!full) return;
  text(cell(h.hostname, String, 'host.hostname'), x + 10, y + 19, F.title, COL.text, 'left', n.w - 60);
  text('host', x + n.w - 10, y + 19, F.small, COL.host, 'right');
  text('driver ' + cell(h.driver_version, String, 'host.driver_version') + ' · CUDA ' +
    cell(h.cuda_driver_version, String, 'host.cuda_driver_version'), x + 10, y + 46, F.body, COL.text, 'left', n.w - 20);
  text('NVML ' + cell(h.nvml_version, String, 'host.nvml_version'), x + 10, y + 63, F.body, COL.dim, 'left', n.w - 20);
  text('sources: ' + (n.sources.length ? n.sources.join(', ') : 'none'), x + 10, y + 80, F.small, COL.dim, 'left', n.w - 20);
  let py = y + 98;
  const probs = h.problems || [];
  for (let i = 0; i < Math.min(probs.length, 6); i++) {
    const p = probs[i];
    const c = p.severity === 'error' ? COL.err : p.severity === 'warning' ? COL.warn : COL.dim;
    text((p.severity === 'error' ? '✖ ' : p.severity === 'warning' ? '▲ ' : '• ') + p.source + ': ' + p.message, x + 10, py, F.small, c, 'left', n.w - 20);
    py += 15;
  }
  for (const r of n.retired) {
    drawn.retired.push(retiredText(r));
    for (const line of retiredLines(r)) {
      text(line, x + 10, py, F.small, r.complete ? COL.dim : COL.warn, 'left', n.w - 20);
      py += 15;
    }
  }
}

function procHeader(n, full) {
  const p = n.data, tr = n.tr, x = n.x, y = n.y, id = n.id, info = tr ? tr.info : null;
  const exited = info && info.state === 'exited';
  box(n, tr ? COL.traced : COL.border, tr ? '#2d1a27' : COL.head);
  if (!full) return;
  const name = p ? p.name : info.name;
  let right = x + n.w - 8;
  if (tr) right -= badge('TRACED', right, y + 19, COL.traced, '#0d1117') + 6;
  if (exited) {
    const e = exitText(info);
    right -= badge('EXITED ' + (e === null ? DASH : e), right, y + 19, info.exit_status === 0 ? COL.dim : COL.warn, '#0d1117') + 6;
  }
  text(cell(name, String, id + '.name'), x + 10, y + 19, F.title, COL.text, 'left', (tr ? 300 : 150));
  text('pid ' + n.pid, right, y + 19, F.body, COL.dim, 'right');
  const user = p ? p.user : null;
  let sub = 'user ' + cell(user, String, id + '.user');
  if (p && p.attachments.length) sub += ' · ' + p.attachments[0].kind;
  if (tr) {
    sub += ' · session ' + String(info.session).slice(0, 8);
    if (exited) {
      const e = exitText(info);
      sub += ' · exited ' + (e === null ? cell(null, String, id + '.exit_status') : e);
    } else sub += ' · ' + (info.state || 'running');
    if (info.truncated) sub += ' · truncated';
  }
  text(sub, x + 10, y + 40, F.small, exited && info.exit_status ? COL.warn : COL.dim, 'left', (tr ? TR_LEFT_W + 500 : n.w - 20));
}
function drawAttachments(n, x0, w) {
  const p = n.data, y0 = n.y + HEAD_H + 18, id = n.id;
  if (!p || !p.attachments.length) {
    text(n.tr && n.tr.info.state === 'exited' ? 'holds no GPU (exited)' : 'holds no GPU', x0 + 10, y0, F.small, COL.dim);
    return y0;
  }
  let y = y0;
  for (const a of p.attachments) {
    const cid = id + '.gpu' + a.device_index;
    text('GPU ' + a.device_index, x0 + 10, y, F.small, COL.dim);
    bar(x0 + 56, y - 8, 54, 8, isNum(a.sm_util_pct) ? a.sm_util_pct / 100 : null, COL.sm);
    text('SM ' + cell(a.sm_util_pct, fmtPct, cid + '.sm_util_pct'), x0 + 116, y, F.small, COL.text);
    text(cell(a.memory_used_bytes, fmtBytes, cid + '.memory_used_bytes'), x0 + w - 10, y, F.small, COL.text, 'right');
    y += ROW_H;
  }
  return y - ROW_H;
}
export function drawProcess(n, full) {
  procHeader(n, full);
  if (!full) return;
  if (!n.tr) { drawAttachments(n, n.x, n.w); return; }
  const tr = n.tr, info = tr.info, x = n.x, y = n.y, id = n.id;
  let ly = drawAttachments(n, x, TR_LEFT_W) + 22;
  text('records ' + grp(info.records || 0), x + 10, ly, F.small, COL.dim);
  const agg = info.cupti_status !== 'ok' && !info.records ? 'no trace data'
    : info.complete === false ? 'aggregates incomplete (records dropped)' : 'aggregates complete';
  text(agg, x + 10, ly + 15, F.small, info.complete === false ? COL.warn : COL.dim, 'left', TR_LEFT_W - 16);
  // separators
  ctx.fillStyle = COL.border;
  ctx.fillRect(x + STRIP_X - 8, y + 30, 1, n.h - 36);
  ctx.fillRect(x + STATS_X - 8, y + 30, 1, n.h - 36);
  drawStripText(n, tr, info, x, y, id);
  drawStats(n, tr, info, x + STATS_X, y + HEAD_H + 18, id);
}
function drawStripText(n, tr, info, x, y, id) {
  const sy = y + HEAD_H + 18;
  const strip = { pid: n.pid, header: '', lanes: [], showing: tr.held, of: tr.execs, cupti: info.cupti_status,
    state: info.state, exit: info.state === 'exited' ? exitText(info) : null };
  if (!tr.lanes.length) {
    const msg = info.cupti_status === 'ok' ? 'no CUDA work seen yet'
      : info.cupti_status === 'starting' ? 'tracing is starting…'
      : 'tracing could not start: ' + info.cupti_status;
    text(msg, x + STRIP_X, sy + 14, F.bold, info.cupti_status === 'ok' || info.cupti_status === 'starting' ? COL.dim : COL.err, 'left', TRACK_W + LABEL_W);
    if (info.cupti_detail) text(info.cupti_detail, x + STRIP_X, sy + 30, F.small, COL.dim, 'left', TRACK_W + LABEL_W + 60);
    strip.header = msg;
    drawn.strips.push(strip);
    return;
  }
  const win = (tr.t0 !== null && tr.t1 !== null) ? (tr.t1 - tr.t0) * 1000 : null;
  const hdr = 'window ' + cell(win, fmtNs, id + '.window') + ' · ' +
    cell(info.behind_live_ms, v => fmtNs(v * 1e6), id + '.behind_live_ms') + ' behind live · showing ' +
    grp(tr.held) + ' of ' + grp(tr.execs);
  strip.header = hdr;
  text(hdr, x + STRIP_X, sy - 2, F.small, COL.text, 'left', COUNT_X + 70 - STRIP_X);
  // legend
  ctx.fillStyle = COL.sm; ctx.fillRect(x + COUNT_X - 196, y + 31, 8, 8);
  ctx.fillStyle = COL.xfer; ctx.fillRect(x + COUNT_X - 140, y + 31, 8, 8);
  ctx.fillStyle = NOT_SAMPLED; ctx.fillRect(x + COUNT_X - 90, y + 33, 14, 4);
  text('kernel', x + COUNT_X - 185, y + 39, F.label, COL.dim);
  text('copy', x + COUNT_X - 129, y + 39, F.label, COL.dim);
  text('not sampled', x + COUNT_X - 72, y + 39, F.label, COL.dim);
  const ny = Math.min(tr.lanes.length, MAX_LANES_DRAWN);
  let ry = sy + 6;
  for (let i = 0; i < ny; i++) {
    const L = tr.lanes[i];
    ctx.fillStyle = i % 2 ? '#1a2029' : '#1e252f';
    ctx.fillRect(x + TRACK_X, ry, TRACK_W, LANE_H - 2);
    // before this lane's oldest kept span the agent counted executions the page does not hold:
    // mark the stretch "not sampled" so it never reads as an idle stream
    if (L.executions > L.spans.length && L.spans.length && tr.t1 > tr.t0) {
      const w = (L.spans[0].start_us - tr.t0) / (tr.t1 - tr.t0) * TRACK_W;
      if (w > 0.5) { ctx.fillStyle = NOT_SAMPLED; ctx.fillRect(x + TRACK_X, ry + 4, w, LANE_H - 10); }
    }
    const lab = (multiDevice(tr) ? L.device + '·' : '') + L.label;
    text(lab, x + TRACK_X - 6, ry + 11, F.small, COL.text, 'right', LABEL_W);
    text(compact(L.spans.length) + '/' + compact(L.executions), x + COUNT_X, ry + 11, F.label, COL.dim, 'left', 70);
    strip.lanes.push({ label: L.label, device: L.device, stream: L.stream, showing: L.spans.length, of: L.executions,
      text: 'showing ' + grp(L.spans.length) + ' of ' + grp(L.executions) });
    drawn.laneLabels.push(L.label);
    ry += LANE_H;
  }
  if (tr.lanes.length > ny) text('+' + (tr.lanes.length - ny) + ' more lanes', x + TRACK_X, ry + 11, F.small, COL.dim);
  drawn.strips.push(strip);
}
function multiDevice(tr) {
  if (tr.multi === undefined) tr.multi = tr.lanes.some(l => l.device !== tr.lanes[0].device);
  return tr.multi;
}
function drawStats(n, tr, info, x, y, id) {
  const w = n.x + n.w - x - 10;
  text('top kernels', x, y - 2, F.bold, COL.text);
  text('count', x + w - 64, y - 2, F.label, COL.dim, 'right');
  text('total', x + w, y - 2, F.label, COL.dim, 'right');
  let ky = y + 14;
  const ks = info.kernels || [];
  const none = info.state === 'exited' ? 'none' : 'none yet';
  if (!ks.length) { text(none, x, ky, F.small, COL.dim); ky += 15; }
  for (let i = 0; i < Math.min(ks.length, 6); i++) {
    const k = ks[i];
    text(shortKernel(k.name || k.mangled), x, ky, F.small, COL.sm, 'left', w - 120);
    text(compact(k.count), x + w - 64, ky, F.small, COL.text, 'right');
    text(fmtNs(k.total_ns), x + w, ky, F.small, COL.text, 'right');
    ky += 15;
  }
  if (ks.length > 6) { text('+' + (ks.length - 6) + ' more', x, ky, F.label, COL.dim); ky += 12; }
  ky += 8;
  text('transfers', x, ky, F.bold, COL.text);
  ky += 15;
  const ts = info.transfers || [];
  if (!ts.length) { text(none, x, ky, F.small, COL.dim); ky += 15; }
  for (const t of ts) {
    text(t.direction, x, ky, F.small, COL.xfer);
    text(compact(t.count) + '×', x + 52, ky, F.small, COL.text);
    text(fmtBytes(t.bytes), x + w - 64, ky, F.small, COL.text, 'right');
    text(fmtNs(t.total_ns), x + w, ky, F.small, COL.text, 'right');
    ky += 15;
  }
  ky += 6;
  const dr = (info.dropped_ring || 0), dc = (info.dropped_cupti || 0);
  if (dr || dc) text('dropped: ' + grp(dr) + ' ring, ' + grp(dc) + ' CUPTI', x, ky, F.bold, COL.err, 'left', w);
  else text('no records dropped', x, ky, F.small, COL.dim);
  ky += 16;
  if (info.cupti_status !== 'ok') text('CUPTI: ' + info.cupti_status, x, ky, F.bold, info.cupti_status === 'starting' ? COL.dim : COL.err, 'left', w);
}
