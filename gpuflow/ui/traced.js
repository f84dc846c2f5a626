// A traced process with lanes: its title and facts, its GPUs and records (left), the text of its
// lane strip (header, legend, one labelled row per CUDA stream, each row's counts, and a time axis
// with ticks and labels), and its top kernels and transfers (right). The spans themselves are
// drawn in screen space by lanes.js.
//
// A lane the program did not name is labelled "stream <id>" (its hover says why). Kernel names
// take the room the table has, from the function name on; counts are exact wherever they fit and
// abbreviated only where they do not; the hover has every name, count and total exactly
// (interaction.js). What a strip says is recorded in `drawn.strips` for the test hook.
//
// At a past moment (the timeline's, past.js) the strip shows the chosen window instead of the
// live sample: its header says which window and whether it is exact or reduced to the strip's
// pixels, the time axis counts back from the moment, a stretch retention let go is marked "not
// retained", and the right column has the window's own top kernels and transfers where it is
// exact (a reduced window has counts, not names: zoom in for them).
//
// Constraints: world units, the canvas engine's primitives; untrusted strings (names, kernel
// names) reach the canvas only through text(). Column widths are measured once per string
// (canvas.js caches widths), so a frame costs a few measurements at most.

import { COL, F, NOT_SAMPLED, box, cell, ctx, drawn, fit, text, textWidth } from './canvas.js';
import { DASH, compact, exitText, fmtBytes, fmtClock, fmtNs, fmtTick, fmtWindow, grp, kernelFrom } from './format.js';
import { COUNT_W, COUNT_X, KERNEL_ROWS, LABEL_W, LANE_H, MAX_LANES_DRAWN, STAT_ROW, STATS_X, STRIP_X,
  TRACK_W, TRACK_X, TR_BAND, TR_HEAD, TR_LEFT_W, kernelRowY, laneTop, procRowY } from './geometry.js';
import { drawHolds, procTitle } from './nodes.js';
import { shownSnap } from './store.js';

// what a lane is called on the strip: its NVTX name, "default", or, when the agent could only
// give the stream's id, "stream <id>"
export function isUnnamed(L) { return L.label === String(L.stream); }
export function laneName(L) { return isUnnamed(L) ? 'stream ' + L.stream : L.label; }
function multiDevice(tr) {
  if (tr.multi === undefined) tr.multi = tr.lanes.some(l => l.device !== tr.lanes[0].device);
  return tr.multi;
}
export function laneText(tr, L) { return (multiDevice(tr) ? L.device + '·' : '') + laneName(L); }
// an exact count where it fits in `w`, else abbreviated
function countText(n, w, f) { const s = grp(n); return textWidth(s, f) <= w ? s : compact(n); }

export function drawTraced(n, full) {
  const tr = n.tr, info = tr.info, x = n.x, y = n.y, id = n.id;
  const exited = info.state === 'exited';
  box(n, COL.traced, '#2d1a27', TR_BAND);
  if (!full) return;
  const e = exited ? exitText(info) : null;
  const badges = [['TRACED', COL.traced]];
  if (exited) badges.push(['EXITED ' + (e === null ? DASH : e), info.exit_status === 0 ? COL.dim : COL.warn]);
  procTitle(n, n.w, badges);
  const p = n.data;
  let sub = p && p.attachments.length ? p.attachments[0].kind + ' · ' : '';
  sub += 'session ' + String(info.session).slice(0, 8) + ' · ';
  sub += exited ? 'exited ' + (e === null ? cell(null, String, id + '.exit_status') : e) : (info.state || 'running');
  if (info.truncated) sub += ' · truncated';
  if (!p) sub = 'user ' + cell(null, String, id + '.user') + ' · ' + sub;
  text(sub, x + 10, y + 44, F.small, exited && info.exit_status ? COL.warn : COL.dim, 'left', n.w - 20);
  drawHolds(n, TR_LEFT_W);
  const rows = Math.max(1, p ? p.attachments.length : 0);
  const ly = procRowY(n, rows - 1) + 24;
  const ps = tr.past;
  text(ps ? grp(tr.execs) + ' executions in the window' : 'records ' + grp(info.records || 0), x + 10, ly, F.small, COL.dim);
  const agg = ps ? (ps.exact ? 'every execution of the window' : 'reduced to the strip\'s pixels')
    : info.complete === false ? 'aggregates incomplete (records dropped)' : 'aggregates complete';
  text(agg, x + 10, ly + 15, F.small, !ps && info.complete === false ? COL.warn : COL.dim, 'left', TR_LEFT_W - 16);
  ctx.fillStyle = COL.border;   // column separators
  ctx.fillRect(x + STRIP_X - 8, y + TR_HEAD - 2, 1, n.h - TR_HEAD - 4);
  ctx.fillRect(x + STATS_X - 8, y + TR_HEAD - 2, 1, n.h - TR_HEAD - 4);
  const strip = drawStrip(n, tr, info);
  strip.kernels = drawStats(n, info, tr.past);
  drawn.strips.push(strip);
}

function drawStrip(n, tr, info) {
  const x = n.x, y = n.y, id = n.id, hy = y + TR_HEAD + 8;
  const strip = { pid: n.pid, header: '', lanes: [], showing: tr.held, of: tr.execs, cupti: info.cupti_status,
    state: info.state, exit: info.state === 'exited' ? exitText(info) : null, axis: [], kernels: [] };
  const win = (tr.t0 !== null && tr.t1 !== null) ? (tr.t1 - tr.t0) * 1000 : null, ps = tr.past;
  if (ps) {
    strip.header = 'window ' + fmtWindow(ps.windowS) + ' up to ' + fmtClock(ps.moment, true) + ' · ' +
      (ps.exact ? 'exact: ' + grp(tr.execs) + ' executions' : 'reduced: ' + grp(tr.execs) + ' executions') +
      (ps.complete ? '' : ' · part no longer retained');
  } else {
    strip.header = 'window ' + cell(win, fmtNs, id + '.window') + ' · ' +
      cell(info.behind_live_ms, v => fmtNs(v * 1e6), id + '.behind_live_ms') + ' behind live · showing ' +
      grp(tr.held) + ' of ' + grp(tr.execs);
  }
  // legend, right-aligned on the header line
  let lx = x + COUNT_X + COUNT_W;
  const legend = ps ? [['not retained', NOT_SAMPLED, true], ...(ps.exact ? [] : [['reduced', COL.reduced, false]]), ['copy', COL.xfer, false],
    ['kernel', COL.sm, false]]
    : [['not sampled', NOT_SAMPLED, true], ['copy', COL.xfer, false], ['kernel', COL.sm, false]];
  for (const [label, color, bar] of legend) {
    lx -= textWidth(label, F.label);
    text(label, lx, hy, F.label, COL.dim);
    ctx.fillStyle = color;
    if (bar) ctx.fillRect(lx - 18, hy - 5, 14, 4); else ctx.fillRect(lx - 12, hy - 8, 8, 8);
    lx -= (bar ? 18 : 12) + 12;
  }
  text(strip.header, x + STRIP_X, hy, F.small, COL.text, 'left', lx - x - STRIP_X - 6);
  const nl = Math.min(tr.lanes.length, MAX_LANES_DRAWN);
  for (let i = 0; i < nl; i++) {
    const L = tr.lanes[i], ry = laneTop(n, i);
    ctx.fillStyle = i % 2 ? '#1a2029' : '#1e252f';
    ctx.fillRect(x + TRACK_X, ry, TRACK_W, LANE_H - 2);
    // before this lane's oldest kept span the agent counted executions the page does not hold:
    // mark the stretch "not sampled" so it never reads as an idle stream
    const gap = ps ? (ps.retainedFrom !== null ? ps.retainedFrom * 1e6 : tr.t0)   // a past window: what retention let go
      : L.executions > L.held && L.held ? L.start[0] : tr.t0;
    if (gap > tr.t0 && tr.t1 > tr.t0) {
      const w = Math.min(1, (gap - tr.t0) / (tr.t1 - tr.t0)) * TRACK_W;
      if (w > 0.5) { ctx.fillStyle = NOT_SAMPLED; ctx.fillRect(x + TRACK_X, ry + 5, w, LANE_H - 12); }
    }
    const shown = laneText(tr, L);
    text(shown, x + TRACK_X - 6, ry + 12, F.small, isUnnamed(L) ? COL.dim : COL.text, 'right', LABEL_W, id + '.lane' + i);
    const held = L.held;
    const c = ps ? countText(L.executions, COUNT_W, F.label) + (L.buckets ? ' ≈' : '')
      : [grp(held) + '/' + grp(L.executions), compact(held) + '/' + grp(L.executions), compact(held) + '/' + compact(L.executions)]
        .find(s => textWidth(s, F.label) <= COUNT_W) || compact(held) + '/' + compact(L.executions);
    text(c, x + COUNT_X, ry + 12, F.label, COL.dim, 'left', COUNT_W);
    strip.lanes.push({ label: L.label, shown, device: L.device, stream: L.stream, showing: held, of: L.executions,
      text: ps ? (L.buckets ? 'reduced: ' : 'exact: ') + grp(L.executions) + ' executions' : 'showing ' + grp(held) + ' of ' + grp(L.executions),
      counts: c, reduced: !!L.buckets });
    drawn.laneLabels.push(L.label);
  }
  let ay = laneTop(n, nl);
  if (tr.lanes.length > nl) { text('+' + (tr.lanes.length - nl) + ' more lanes', x + TRACK_X, ay + 12, F.small, COL.dim); ay += 16; }
  strip.axis = drawAxis(n, tr, ay + 2);
  return strip;
}

// ticks at round times before the frame's own time (a past window's moment), 1-2-5 steps about
// 80 world units apart
function drawAxis(n, tr, ay) {
  const ticks = [], f = shownSnap();
  if (tr.t0 === null || !(tr.t1 > tr.t0) || !f) return ticks;
  const x0 = n.x + TRACK_X, nowUs = (tr.past ? tr.past.moment : f.timestamp) * 1e6, span = tr.t1 - tr.t0;
  const raw = span * 80 / TRACK_W, p = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map(m => m * p).find(s => s >= raw);
  ctx.fillStyle = COL.border;
  ctx.fillRect(x0, ay, TRACK_W, 1);
  for (let k = Math.ceil((tr.t0 - nowUs) / step); k * step <= tr.t1 - nowUs; k++) {
    const rel = k * step, tx = x0 + (nowUs + rel - tr.t0) / span * TRACK_W;
    ctx.fillStyle = COL.faint;
    ctx.fillRect(tx - 0.5, ay, 1, 5);
    const label = fmtTick(rel, step);
    const lw = textWidth(label, F.label);
    if (tx - lw / 2 < x0 - 2 || tx + lw / 2 > x0 + TRACK_W + COUNT_W) continue;   // clear of the labels beside
    text(label, tx, ay + 16, F.label, COL.dim, 'center');
    ticks.push({ label, rel_us: rel, x: tx - n.x });
  }
  if (ticks.length) text(tr.past ? 'before the moment' : 'before the frame', x0 - 6, ay + 16, F.label, COL.faint, 'right');
  return ticks;
}

// the stats column's rows: top kernels, then transfers, each row's baseline
export function statsRows(n) {
  const info = n.tr.info, ks = info.kernels || [], nk = Math.min(ks.length, KERNEL_ROWS);
  let ty = kernelRowY(n, Math.max(1, nk)) + (ks.length > KERNEL_ROWS ? 13 : 0) + 10;
  const transfersHead = ty;
  const ts = info.transfers || [];
  const transferY = ts.map((_, i) => ty + 16 + i * STAT_ROW);
  ty += 16 + Math.max(1, ts.length) * STAT_ROW + 4;
  return { nk, transfersHead, transferY, dropsY: ty };
}
function drawStats(n, info, ps) {
  const x = n.x + STATS_X, y = n.y + TR_HEAD + 8, right = n.x + n.w - 10, w = right - x;
  // a reduced past window has counts, not names: say how to get them
  const none = ps ? (ps.exact ? 'none in this window' : 'reduced window: zoom in (wheel over the timeline)')
    : info.state === 'exited' ? 'none' : 'none yet';
  const ks = info.kernels || [], ts = info.transfers || [], rows = statsRows(n);
  // the count and total columns are as wide as their widest entry; the name takes the rest
  const countMax = 70;
  const kCounts = ks.slice(0, rows.nk).map(k => countText(k.count, countMax, F.small));
  const tCounts = ts.map(t => countText(t.count, countMax, F.small) + '×');
  const totals = ks.slice(0, rows.nk).map(k => fmtNs(k.total_ns)).concat(ts.map(t => fmtNs(t.total_ns)));
  const totalW = Math.max(textWidth('total', F.label), ...totals.map(s => textWidth(s, F.small)));
  const countW = Math.max(textWidth('launches', F.label), ...kCounts.concat(tCounts).map(s => textWidth(s, F.small)));
  const countRight = right - totalW - 12, room = countRight - countW - 12 - x;
  text(ps ? 'top kernels in the window' : 'top kernels', x, y, F.bold, COL.text);
  text('launches', countRight, y, F.label, COL.dim, 'right');
  text('total', right, y, F.label, COL.dim, 'right');
  const out = [];
  if (!ks.length) text(none, x, kernelRowY(n, 0), F.small, COL.dim, 'left', w);
  for (let i = 0; i < rows.nk; i++) {
    const k = ks[i], ky = kernelRowY(n, i), full = k.name || k.mangled || '', from = kernelFrom(full);
    const shown = fit(from, room, F.small);
    text(shown, x, ky, F.small, COL.sm);
    text(kCounts[i], countRight, ky, F.small, COL.text, 'right');
    text(fmtNs(k.total_ns), right, ky, F.small, COL.text, 'right');
    out.push({ name: full, from, shown, room, columnW: w, shownW: textWidth(shown, F.small), count: k.count, countText: kCounts[i] });
  }
  if (ks.length > KERNEL_ROWS) text('+' + (ks.length - KERNEL_ROWS) + ' more kernels', x, kernelRowY(n, rows.nk) - 2, F.label, COL.dim);
  text('transfers', x, rows.transfersHead, F.bold, COL.text);
  if (!ts.length) text(none, x, rows.transfersHead + 16, F.small, COL.dim, 'left', w);
  ts.forEach((t, i) => {
    const ty = rows.transferY[i];
    text(t.direction, x, ty, F.small, COL.xfer);
    text(fmtBytes(t.bytes), x + 52, ty, F.small, COL.text, 'left', room - 52);
    text(tCounts[i], countRight, ty, F.small, COL.text, 'right');
    text(fmtNs(t.total_ns), right, ty, F.small, COL.text, 'right');
  });
  const dr = (info.dropped_ring || 0), dc = (info.dropped_cupti || 0);
  if (ps) {
    text(ps.complete ? 'the whole window is retained' : 'part of the window is no longer retained', x, rows.dropsY,
      F.small, ps.complete ? COL.dim : COL.warn, 'left', w);
    return out;
  }
  if (dr || dc) text('dropped: ' + grp(dr) + ' ring, ' + grp(dc) + ' CUPTI', x, rows.dropsY, F.bold, COL.err, 'left', w);
  else text('no records dropped', x, rows.dropsY, F.small, COL.dim);
  if (info.cupti_status !== 'ok') text('CUPTI: ' + info.cupti_status, x, rows.dropsY + 16, F.bold, info.cupti_status === 'starting' ? COL.dim : COL.err, 'left', w);
  return out;
}
