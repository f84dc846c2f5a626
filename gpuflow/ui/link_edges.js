// The edges that carry bytes (issue 20; docs/ui.md, "Edges"): each GPU's PCIe link to the host,
// NVLinks between two GPUs of the host, and what a traced process moved to and from each GPU it
// used.
//
// * GPU to host: two strands, one each way (into the GPU: NVML's received bytes; out of it:
//   transmitted), each as thick as its measured bytes a second against the link's peak each way
//   (generation and width at their most: docs/gpu-metrics.md), an arrowhead halfway showing the
//   way the bytes go. The edge leaves the card at its PCIe row, whose text is its label ("in x ·
//   out y of z GB/s", nodes.js). Strands reach the host spread along its side, one pair per GPU.
// * GPU to GPU: where a GPU's NVLinks reach another GPU of the host (Device.links.nvlinks[]'s
//   remote_device_index), one edge per pair, its two strands each way as thick as the bytes a
//   second over those links, labelled "NVLink 0→1 x · 1→0 y GB/s". The snapshot has no NVLink
//   peak, so their thickness is on a fixed scale of their own (NV_MIN_RATE to NV_MAX_RATE,
//   logarithmic) and the label says no "of". Links that reach an NVSwitch have no peer GPU: they
//   are in the GPU's hover, not drawn. Two GPUs one above the other get short strands in the gap
//   between them; others a curve on the side of the host.
// * A traced process to a GPU: the label of its edge, just above or beside the GPU, says the
//   process's GPU busy share there (the union of its kernels over the last settled window) and its
//   copies' achieved bandwidth by direction, pinned and pageable apart (bytes over the time its
//   copies took: CUPTI's records).
//
// A rate not measured is a hairline, dashed, with no arrowhead; a measured zero is a thin solid
// strand. Widths are in screen pixels, so a link stays readable at any zoom.
//
// Constraints: world units, drawn by scene.js before the nodes; edges outside the view are
// skipped; a handful of strokes per GPU (nothing per span or per link of a pair); what was drawn
// is kept in `drawn.links` (canvas.js) for tests.

import { COL, F, ctx, drawn, text, view } from './canvas.js';
import { clamp01, fmtGB, fmtPct, isNum } from './format.js';
import { DEV_FOOT_Y, DEV_PCIE_ROW, DEV_ROW, DEV_ROW0 } from './geometry.js';
import { model } from './layout.js';

// the thickest a strand gets (at the link's peak), and the thinnest a measured one is (screen px)
export const MAX_PX = 7, MIN_PX = 1;
// NVLink's own scale: MIN_PX at or below NV_MIN_RATE bytes/s, MAX_PX at NV_MAX_RATE, logarithmic
export const NV_MIN_RATE = 1e8, NV_MAX_RATE = 1e12;
const LINE = 11;

// a strand's width for `rate` against `peak` (null: not measured)
export function strandPx(rate, peak) {
  if (!isNum(rate)) return null;
  return MIN_PX + (MAX_PX - MIN_PX) * (isNum(peak) && peak > 0 ? clamp01(rate / peak) : 0);
}
export function nvlinkPx(rate) {
  if (!isNum(rate)) return null;
  return MIN_PX + (MAX_PX - MIN_PX) * clamp01(Math.log(Math.max(rate, NV_MIN_RATE) / NV_MIN_RATE) / Math.log(NV_MAX_RATE / NV_MIN_RATE));
}

function at(c, t) {   // a point and the tangent of a cubic Bézier [x1, y1, c1x, c1y, c2x, c2y, x2, y2] at t
  const u = 1 - t;
  const x = u * u * u * c[0] + 3 * u * u * t * c[2] + 3 * u * t * t * c[4] + t * t * t * c[6];
  const y = u * u * u * c[1] + 3 * u * u * t * c[3] + 3 * u * t * t * c[5] + t * t * t * c[7];
  const tx = 3 * u * u * (c[2] - c[0]) + 6 * u * t * (c[4] - c[2]) + 3 * t * t * (c[6] - c[4]);
  const ty = 3 * u * u * (c[3] - c[1]) + 6 * u * t * (c[5] - c[3]) + 3 * t * t * (c[7] - c[5]);
  return [x, y, tx, ty];
}
// curve c moved `off` world units to the left of its chord (negative: to the right)
function shifted(c, off) {
  const dx = c[6] - c[0], dy = c[7] - c[1], len = Math.hypot(dx, dy) || 1, nx = dy / len * off, ny = -dx / len * off;
  return c.map((v, i) => v + (i % 2 ? ny : nx));
}
// one strand: `px` screen px wide (null: not measured, a dashed hairline, no head), with an
// arrowhead pointing from the curve's start to its end (`forward`) or back: halfway along a long
// strand, and at the far end of a short one (SHORT world units or less: the gap between two cards),
// where the strand stops at the head's base and the head is wider than the strand. Returns the
// head as drawn, {x, y, dx, dy}: its tip in CSS px of the canvas and the way it points (null: none)
const SHORT = 40;
function strand(c, px, forward, color, alpha) {
  ctx.globalAlpha = alpha;
  ctx.strokeStyle = color; ctx.fillStyle = color;
  ctx.lineWidth = (px === null ? 1 : px) / view.s;
  if (px === null) {
    ctx.setLineDash([5 / view.s, 4 / view.s]);
    ctx.beginPath(); ctx.moveTo(c[0], c[1]); ctx.bezierCurveTo(c[2], c[3], c[4], c[5], c[6], c[7]); ctx.stroke();
    ctx.setLineDash([]);
    return null;
  }
  const chord = Math.hypot(c[6] - c[0], c[7] - c[1]) || 1, s = forward ? 1 : -1;
  let tipX, tipY, ux, uy, len, half, line = c;
  if (chord <= SHORT) {
    ux = (c[6] - c[0]) / chord * s; uy = (c[7] - c[1]) / chord * s;
    [tipX, tipY] = forward ? [c[6], c[7]] : [c[0], c[1]];
    len = chord / 2.5; half = (px + 5) / 2 / view.s;
    const k = len / chord, dx = (c[6] - c[0]) * k, dy = (c[7] - c[1]) * k;
    line = forward ? [c[0], c[1], c[2], c[3], c[4], c[5], c[6] - dx, c[7] - dy] : [c[0] + dx, c[1] + dy, c[2], c[3], c[4], c[5], c[6], c[7]];
  } else {
    const p = at(c, 0.5), t = Math.hypot(p[2], p[3]) || 1;
    ux = p[2] / t * s; uy = p[3] / t * s;
    len = 2 * (4 + px) / view.s; half = 0.35 * len;
    tipX = p[0] + ux * len / 2; tipY = p[1] + uy * len / 2;
  }
  ctx.beginPath(); ctx.moveTo(line[0], line[1]); ctx.bezierCurveTo(line[2], line[3], line[4], line[5], line[6], line[7]); ctx.stroke();
  const bx = tipX - ux * len, by = tipY - uy * len;
  ctx.beginPath();
  ctx.moveTo(tipX, tipY);
  ctx.lineTo(bx - uy * half, by + ux * half);
  ctx.lineTo(bx + uy * half, by - ux * half);
  ctx.fill();
  return { x: view.x + tipX * view.s, y: view.y + tipY * view.s, dx: ux, dy: uy };
}
// a pair of strands along curve c, a -> b on the right of its way, b -> a on the other side: their heads
function strands(c, pxAB, pxBA, colorAB, colorBA, alpha) {
  const short = Math.hypot(c[6] - c[0], c[7] - c[1]) <= SHORT;   // heads wider than the strands, side by side
  const half = (px) => ((px === null ? 1 : px + (short ? 5 : 0)) / 2 + 1) / view.s;
  return [strand(shifted(c, -half(pxAB)), pxAB, true, colorAB, alpha), strand(shifted(c, half(pxBA)), pxBA, false, colorBA, alpha)];
}
function outside(c, vx0, vy0, vx1, vy1) {
  const xs = [c[0], c[2], c[4], c[6]], ys = [c[1], c[3], c[5], c[7]];
  return Math.max(...xs) < vx0 - 10 || Math.min(...xs) > vx1 + 10 || Math.max(...ys) < vy0 - 10 || Math.min(...ys) > vy1 + 10;
}

// -- GPU to host ----------------------------------------------------------------------------------
// the curve of GPU a's PCIe edge, from its PCIe row to the host's side at `hy`
function pcieCurve(a, b, hy) {
  const toRight = b.x >= a.x + a.w;
  const x1 = toRight ? a.x + a.w : a.x, y1 = a.y + DEV_ROW0 + DEV_PCIE_ROW * DEV_ROW - 4;
  const x2 = toRight ? b.x : b.x + b.w;
  const dx = Math.max(40, Math.abs(x2 - x1) * 0.5) * (x2 >= x1 ? 1 : -1);
  return [x1, y1, x1 + dx, y1, x2 - dx, hy, x2, hy];
}
// where each GPU's edge meets the host: its side's GPUs in order of height, spread along the side
function hostEnds(host, edges) {
  const sides = new Map(), ends = new Map();
  for (const e of edges) {
    const a = model.nodes.get(e.from);
    if (!a) continue;
    const side = a.x < host.x ? 'l' : 'r';
    if (!sides.has(side)) sides.set(side, []);
    sides.get(side).push(a);
  }
  for (const list of sides.values()) {
    list.sort((p, q) => p.y - q.y || p.x - q.x);
    const step = Math.min(16, (host.h - 24) / Math.max(1, list.length));
    list.forEach((a, i) => ends.set(a.id, host.y + host.h / 2 + (i - (list.length - 1) / 2) * step));
  }
  return ends;
}
export function drawLinks(lit, dimAlpha, vx0, vy0, vx1, vy1) {
  const host = model.nodes.get('host');
  const toHost = model.edges.filter(e => e.to === 'host');
  const ends = host ? hostEnds(host, toHost) : new Map();
  for (const e of toHost) {
    const a = model.nodes.get(e.from);
    if (!a) continue;
    const d = a.data, peak = d.links && isNum(d.links.pcie_peak_bytes_per_s) ? d.links.pcie_peak_bytes_per_s : null;
    const c = pcieCurve(a, host, ends.get(a.id));
    if (outside(c, vx0, vy0, vx1, vy1)) continue;
    const alpha = lit && !lit.edges.has(e.id) ? dimAlpha * 0.6 : 0.9;
    const pin = d.lost ? null : strandPx(d.pcie_rx_bytes_per_s, peak), pout = d.lost ? null : strandPx(d.pcie_tx_bytes_per_s, peak);
    // out of the GPU toward the host on one side of the chord, into it on the other
    const [outHead, inHead] = strands(c, pout, pin, d.lost ? COL.lost : COL.xfer, d.lost ? COL.lost : COL.mem, alpha);
    drawn.links.push({ id: e.id, kind: 'pcie', in_px: pin, out_px: pout, in: d.pcie_rx_bytes_per_s, out: d.pcie_tx_bytes_per_s, peak,
      in_head: inHead, out_head: outHead });
    drawn.edges++;
  }
  ctx.globalAlpha = 1;
}

// -- GPU to GPU -------------------------------------------------------------------------------------
// the bytes a second over GPU a's links to GPU b, each way (a's own counters, else b's), how many
// links join them and how many of those are down
export function nvlinkRates(a, b) {
  const over = (d, peer) => ((d && d.links && d.links.nvlinks) || []).filter(l => l.remote_device_index === peer);
  const sum = (links, f) => { let s = null; for (const l of links) if (isNum(l[f])) s = (s || 0) + l[f]; return s; };
  const la = over(a, b.index), lb = over(b, a.index);
  let ab = sum(la, 'tx_bytes_per_s'), ba = sum(la, 'rx_bytes_per_s');
  if (ab === null) ab = sum(lb, 'rx_bytes_per_s');
  if (ba === null) ba = sum(lb, 'tx_bytes_per_s');
  // a link is down when either end says so
  const down = (links) => links.filter(l => l.state === 'down').length;
  return { ab, ba, links: Math.max(la.length, lb.length), down: Math.max(down(la), down(lb)) };
}
export function nvlinkText(a, b, r) {
  if (r.links > 0 && r.down === r.links) return 'NVLink ' + a.index + '–' + b.index + ': ' + (r.links === 1 ? 'its link is' : 'all ' + r.links + ' links are') + ' down';
  const gb = v => (v === null ? '—' : fmtGB(v));
  return 'NVLink ' + a.index + '→' + b.index + ' ' + gb(r.ab) + ' · ' + b.index + '→' + a.index + ' ' + gb(r.ba) + ' GB/s' +
    (r.down ? ' · ' + r.down + ' of ' + r.links + ' down' : '');
}
// "NVLink (NVSwitch) in x · out y GB/s": a GPU's links that reach no GPU of the host (an NVSwitch),
// summed; null when it has none with a rate. It is the GPU's own line (sm_grid.js), not an edge.
export function switchLine(d) {
  let tx = null, rx = null, n = 0;
  for (const l of (d.links && d.links.nvlinks) || []) {
    if (isNum(l.remote_device_index)) continue;
    n++;
    if (isNum(l.tx_bytes_per_s)) tx = (tx || 0) + l.tx_bytes_per_s;
    if (isNum(l.rx_bytes_per_s)) rx = (rx || 0) + l.rx_bytes_per_s;
  }
  if (!n || (tx === null && rx === null)) return null;
  const gb = v => (v === null ? '—' : fmtGB(v));
  return 'NVLink (NVSwitch) in ' + gb(rx) + ' · out ' + gb(tx) + ' GB/s';
}
// [curve from a to b, label x, y, align]: short strands in the gap of two GPUs one above the other,
// else a curve on the side of the host
function nvlinkPlace(a, b, host) {
  const hostRight = host && host.x > a.x;
  const side = (n) => (hostRight ? n.x + n.w : n.x);
  const inward = hostRight ? -1 : 1;
  if (Math.abs(a.x - b.x) < 1) {
    const [u, l] = a.y < b.y ? [a, b] : [b, a];
    if (l.y - (u.y + u.h) <= 40) {
      const x = side(u) + inward * 24, y1 = u.y + u.h, y2 = l.y, my = (y1 + y2) / 2;
      const c = u === a ? [x, y1, x, my, x, my, x, y2] : [x, y2, x, my, x, my, x, y1];
      return [c, x + inward * 20, my + 3.5, hostRight ? 'right' : 'left'];
    }
    const x = side(a), ya = a.y + DEV_FOOT_Y, yb = b.y + DEV_FOOT_Y, bulge = -inward * (26 + Math.abs(yb - ya) * 0.05);
    const c = [x, ya, x + bulge * 1.3, ya, x + bulge * 1.3, yb, x, yb];
    return [c, x + bulge, (ya + yb) / 2, hostRight ? 'left' : 'right'];
  }
  const x1 = side(a), x2 = side(b), y1 = a.y + DEV_FOOT_Y, y2 = b.y + DEV_FOOT_Y;
  const dx = Math.max(40, Math.abs(x2 - x1) * 0.5) * (x2 >= x1 ? 1 : -1);
  const c = [x1, y1, x1 + dx, y1, x2 - dx, y2, x2, y2], m = at(c, 0.5);
  return [c, m[0], m[1] - 6, 'center'];
}
export function drawNvlinks(lit, dimAlpha, vx0, vy0, vx1, vy1, full) {
  const host = model.nodes.get('host');
  for (const e of model.edges) {
    if (!e.nvlink) continue;
    const a = model.nodes.get(e.from), b = model.nodes.get(e.to);
    if (!a || !b) continue;
    const [c, lx, ly, align] = nvlinkPlace(a, b, host);
    if (outside(c, vx0, vy0, vx1, vy1)) continue;
    const r = nvlinkRates(a.data, b.data), alpha = lit && !lit.edges.has(e.id) ? dimAlpha * 0.6 : 0.9;
    const down = r.links > 0 && r.down === r.links;
    const pab = down ? null : nvlinkPx(r.ab), pba = down ? null : nvlinkPx(r.ba);
    const [abHead, baHead] = strands(c, pab, pba, down ? COL.lost : COL.host, down ? COL.lost : COL.host, alpha);
    const s = nvlinkText(a.data, b.data, r);
    if (full) {
      ctx.globalAlpha = lit && !lit.edges.has(e.id) ? dimAlpha : 1;
      text(s, lx, ly, F.label, down ? COL.lost : COL.host, align, 200, e.id + '.label');
    }
    drawn.links.push({ id: e.id, kind: 'nvlink', ab: r.ab, ba: r.ba, ab_px: pab, ba_px: pba, links: r.links, down: r.down, label: s,
      ab_head: abHead, ba_head: baHead });
    drawn.edges++;
  }
  ctx.globalAlpha = 1;
}

// -- a traced process to a GPU ------------------------------------------------------------------
// "h2d 53.2 pinned · 11.9 pageable GB/s", one line a direction, of a traced process's copies on one GPU
export function copyLines(copies) {
  const by = new Map();
  for (const c of copies || []) {
    if (c.direction !== 'h2d' && c.direction !== 'd2h') continue;
    if (!by.has(c.direction)) by.set(c.direction, {});
    by.get(c.direction)[c.memory] = c.bytes_per_s;
  }
  const lines = [];
  for (const dir of ['h2d', 'd2h']) {
    const m = by.get(dir);
    if (!m) continue;
    const kinds = ['pinned', 'pageable', 'other'].filter(k => k in m)
      .map(k => (isNum(m[k]) ? fmtGB(m[k]) : '—') + ' ' + k);
    lines.push(dir + ' ' + kinds.join(' · ') + ' GB/s');
  }
  return lines;
}
// the label of a traced process's edge to the GPU its TracedDevice `dev` is: busy share, copies
export function edgeLines(dev) {
  const lines = [];
  if (isNum(dev.busy_pct)) lines.push('busy ' + fmtPct(dev.busy_pct) + (isNum(dev.busy_window_ms) ? ' of ' + fmtWindowMs(dev.busy_window_ms) : ''));
  return lines.concat(copyLines(dev.copies));
}
function fmtWindowMs(ms) { return ms >= 1000 ? (ms / 1000).toFixed(ms % 1000 ? 1 : 0) + ' s' : Math.round(ms) + ' ms'; }

// labels on the traced processes' edges to the GPUs they used; `anchor` gives an edge's ends
// [x1, y1, x2, y2, vertical] (scene.js)
export function drawCopyLabels(anchor, lit, dimAlpha, full) {
  if (!full) return;
  for (const e of model.edges) {
    if (!e.att) continue;
    const p = model.nodes.get(e.from);
    if (!p || !p.tr) continue;
    const dev = (p.tr.info.devices || []).find(x => x.uuid && x.uuid === e.att.device_uuid);
    const lines = dev ? edgeLines(dev) : [];
    if (!lines.length) continue;
    const q = anchor(e);
    if (!q) continue;
    ctx.globalAlpha = lit && !lit.edges.has(e.id) ? dimAlpha : 1;
    // just off the GPU's end of the edge: above (or below) it for a strip's straight edge, beside it otherwise
    const up = q[3] > q[1];
    lines.forEach((s, i) => {
      const k = up ? lines.length - 1 - i : i;
      const x = q[4] ? q[2] + 6 : q[0] + (q[2] - q[0]) * 0.62, y = q[4] ? (up ? q[3] - 5 - k * LINE : q[3] + 12 + k * LINE)
        : (q[1] + (q[3] - q[1]) * 0.62) - 4 - (lines.length - 1 - i) * LINE;
      text(s, x, y, F.label, COL.traced, q[4] ? 'left' : 'center', 180, e.id + '.copies' + i);
    });
    drawn.links.push({ id: e.id, kind: 'traced', lines });
  }
  ctx.globalAlpha = 1;
}
