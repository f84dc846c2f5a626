// What the mouse and keys do on the plane, and the hover card that tells what is under the cursor.
//
// Drag pans, the wheel zooms about the cursor, a click isolates a node (again, or on empty
// space, clears it), F fits everything or the isolated node and its neighbours, Esc clears.
// Hovering finds the node, and on a traced node the span, the lane label or the "not sampled"
// stretch under the cursor (binary search on the lane's starts), and fills the card.
//
// Constraints: the card is built with createElement and textContent only (names, command lines
// and kernel names are untrusted); it is a fixed-position element kept inside the window. Any
// change to what is shown goes through markDirty(), never a draw of its own.

import { canvas, fitTo, markDirty, toWorld, ui, view } from './canvas.js';
import { el } from './connection.js';
import { DASH, exitText, fmtBytes, fmtDim, fmtNs, fmtPct, fmtRate, grp, retiredText, shortKernel } from './format.js';
import { firstIndexAtOrAfter } from './lanes.js';
import { HEAD_H, LANE_H, MAX_LANES_DRAWN, STRIP_X, TRACK_W, TRACK_X, model } from './layout.js';
import { LOD_TEXT, litSets } from './scene.js';
import { store } from './store.js';

let drag = null;
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
  const tr = n.tr;
  if (tr && tr.lanes.length && view.s >= LOD_TEXT * 0.5) {
    const rowTop = n.y + HEAD_H + 18 + 6;
    const li = Math.floor((wy - rowTop) / LANE_H);
    if (li >= 0 && li < Math.min(tr.lanes.length, MAX_LANES_DRAWN)) {
      const lx = wx - n.x;
      if (lx >= TRACK_X && lx <= TRACK_X + TRACK_W && tr.t0 !== null) {
        const L = tr.lanes[li], k = TRACK_W * view.s / (tr.t1 - tr.t0);   // screen px per µs
        const t = tr.t0 + (lx - TRACK_X) / TRACK_W * (tr.t1 - tr.t0), tol = 3 / k;
        const sp = L.spans;
        let i = firstIndexAtOrAfter(sp, t + tol) - 1, best = null, bd = Infinity;
        for (let j = i; j >= 0 && j > i - 64; j--) {
          const s = sp[j], a = s.start_us, b = a + s.dur_ns / 1000;
          const d = t < a ? a - t : t > b ? t - b : 0;
          if (d < bd) { bd = d; best = s; }
          if (b < t - L.maxDurUs - tol) break;
        }
        if (best && bd <= tol) { hit.span = best; hit.lane = li; hit.laneObj = L; }
        else if (L.executions > sp.length && (!sp.length || t < sp[0].start_us)) hit.notSampled = L;
      } else if (lx >= STRIP_X && lx < TRACK_X) hit.laneLabel = tr.lanes[li];
    }
  }
  return hit;
}
function sameHit(a, b) {
  if (!a || !b) return a === b;
  return a.node === b.node && a.span === b.span && a.laneLabel === b.laneLabel && a.notSampled === b.notSampled;
}
// the plane's and the window's listeners, installed once by main.js
export function installInteraction() {
  canvas.addEventListener('pointerdown', (e) => {
    if (e.button !== 0) return;
    drag = { x: e.clientX, y: e.clientY, vx: view.x, vy: view.y, moved: false };
    canvas.setPointerCapture(e.pointerId);
  });
  canvas.addEventListener('pointermove', (e) => {
    if (drag) {
      const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (!drag.moved && Math.abs(dx) + Math.abs(dy) > 4) { drag.moved = true; canvas.classList.add('dragging'); hideTip(); }
      if (drag.moved) { view.x = drag.vx + dx; view.y = drag.vy + dy; view.touched = true; markDirty(); }
      return;
    }
    const [sx, sy] = canvasXY(e);
    const h = hitTest(sx, sy);
    if (!sameHit(h, ui.hover)) { ui.hover = h; markDirty(); }
    if (h) showTip(h, e.clientX, e.clientY); else hideTip();
  });
  canvas.addEventListener('pointerleave', () => { if (!drag) { ui.hover = null; hideTip(); markDirty(); } });
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
    if (e.key === 'f' || e.key === 'F') {
      fitTo(ui.isolated ? ui.lit && ui.lit.nodes || litSets(ui.isolated).nodes : null);
      view.touched = !!ui.isolated;
    } else if (e.key === 'Escape') {
      ui.isolated = null; ui.hover = null; hideTip(); markDirty();
    }
  });
}

function row(k, v, warn) {
  const d = document.createElement('div'); d.className = 'r';
  const a = document.createElement('span'); a.textContent = k;
  const b = document.createElement('span'); b.textContent = v;
  if (warn) b.className = 'w';
  d.append(a, b); return d;
}
function nz(v, fmt) { return v === null || v === undefined ? DASH : fmt ? fmt(v) : String(v); }
function showTip(h, cx, cy) {
  const n = model.nodes.get(h.node);
  if (!n) return hideTip();
  const t = el.tip;
  t.replaceChildren();
  const title = document.createElement('div'); title.className = 't';
  t.append(title);
  if (h.span) {
    const s = h.span;
    title.textContent = s.kind === 'kernel' ? (s.name || '(unnamed kernel)') : s.kind + ' ' + nz(s.direction);
    t.append(row('lane', h.laneObj.label + ' · GPU ' + h.laneObj.device + ' · stream ' + h.laneObj.stream));
    t.append(row('kind', s.kind), row('duration', fmtNs(s.dur_ns)));
    if (s.kind === 'kernel') t.append(row('grid', fmtDim(s.grid)), row('block', fmtDim(s.block)));
    else t.append(row('bytes', nz(s.bytes, fmtBytes)), row('direction', nz(s.direction)));
    const ago = store.snap ? store.snap.timestamp * 1e6 - s.start_us : null;
    t.append(row('started', ago === null ? DASH : fmtNs(ago * 1000) + ' before the frame'));
    t.append(row('seq', String(s.seq)));
  } else if (h.notSampled) {
    const L = h.notSampled;
    title.textContent = 'not sampled · lane ' + L.label;
    t.append(row('kept', 'the most recent ' + grp(L.spans.length) + ' executions of this stream'));
    t.append(row('not sent', grp(L.executions - L.spans.length) + ' older executions: counted in the totals, not drawn'));
  } else if (h.laneLabel) {
    const L = h.laneLabel;
    title.textContent = 'lane ' + L.label;
    t.append(row('device', String(L.device)), row('context', String(L.context)), row('stream', String(L.stream)));
    t.append(row('showing', grp(L.spans.length) + ' of ' + grp(L.executions) + ' executions'));
    t.append(row('not shown', grp(L.executions - L.spans.length)));
  } else if (n.kind === 'device') {
    const d = n.data;
    title.textContent = 'GPU ' + d.index + ' · ' + nz(d.name);
    if (d.lost) t.append(row('state', 'LOST: the GPU stopped answering', true));
    t.append(row('uuid', d.uuid), row('PCI bus', nz(d.pci_bus_id)), row('MIG', nz(d.mig_mode)));
    t.append(row('utilization', nz(d.utilization_gpu_pct, fmtPct)), row('memory utilization', nz(d.utilization_memory_pct, fmtPct)));
    t.append(row('memory', nz(d.memory_used_bytes, fmtBytes) + ' / ' + nz(d.memory_total_bytes, fmtBytes)));
    t.append(row('temperature', nz(d.temperature_c, v => v + ' °C')), row('power', nz(d.power_draw_w, v => v.toFixed(1) + ' W') + ' / ' + nz(d.power_limit_w, v => v.toFixed(0) + ' W')));
    t.append(row('SM clock', nz(d.clock_sm_mhz, v => v + ' MHz')), row('memory clock', nz(d.clock_mem_mhz, v => v + ' MHz')));
    t.append(row('PCIe tx / rx', nz(d.pcie_tx_bytes_per_s, fmtRate) + ' / ' + nz(d.pcie_rx_bytes_per_s, fmtRate)));
    t.append(row('clock bar', 'SM clock vs the highest seen this session'));
  } else if (n.kind === 'host') {
    const hd = n.data;
    title.textContent = nz(hd.hostname);
    t.append(row('driver', nz(hd.driver_version)), row('CUDA (driver)', nz(hd.cuda_driver_version)), row('NVML', nz(hd.nvml_version)));
    t.append(row('sources', n.sources.join(', ') || 'none'));
    for (const p of hd.problems || []) t.append(row(p.severity + ' · ' + p.source, p.message, p.severity !== 'info'));
    for (const r of n.retired) {
      t.append(row('session ' + r.session, retiredText(r), !r.complete));
      for (const k of (r.kernels || []).slice(0, 5)) t.append(row('  ' + grp(k.count) + '×', shortKernel(k.name)));
      for (const x of r.transfers || []) t.append(row('  ' + x.direction, grp(x.count) + ' · ' + fmtBytes(x.bytes)));
    }
  } else {
    const p = n.data, tr = n.tr;
    title.textContent = nz(p ? p.name : tr.info.name) + ' · pid ' + n.pid;
    if (p) {
      t.append(row('user', nz(p.user)), row('command', nz(p.cmdline)));
      for (const a of p.attachments) {
        t.append(row('GPU ' + a.device_index + ' (' + a.kind + ')', 'mem ' + nz(a.memory_used_bytes, fmtBytes) + ' · SM ' +
          nz(a.sm_util_pct, fmtPct) + ' · mem util ' + nz(a.mem_util_pct, fmtPct)));
      }
    }
    if (tr) {
      const i = tr.info;
      t.append(row('traced', 'session ' + i.session + ' · ' + i.state + (i.state === 'exited' ? ' ' + nz(exitText(i)) : '')));
      t.append(row('CUPTI', i.cupti_status + (i.cupti_detail ? ': ' + i.cupti_detail : ''), i.cupti_status !== 'ok' && i.cupti_status !== 'starting'));
      t.append(row('records', grp(i.records || 0)), row('dropped', grp(i.dropped_ring || 0) + ' ring · ' + grp(i.dropped_cupti || 0) + ' CUPTI', (i.dropped_ring || i.dropped_cupti) > 0));
      if (i.translate_cpu_ns) t.append(row('GPUFlow CPU', fmtNs(i.translate_cpu_ns) + ' in the process · ' +
        Math.round(i.translate_cpu_ns / Math.max(1, i.records || 0)) + ' ns a record'));
      if (i.truncated) t.append(row('truncated', 'died without its exit flush; the tail may be missing', true));
      t.append(row('lanes', tr.lanes.length + ' · showing ' + grp(tr.held) + ' of ' + grp(tr.execs)));
    }
  }
  t.hidden = false;
  const w = t.offsetWidth, hh = t.offsetHeight;
  t.style.left = Math.min(cx + 14, window.innerWidth - w - 8) + 'px';
  t.style.top = (cy + 16 + hh > window.innerHeight ? Math.max(8, cy - hh - 10) : cy + 16) + 'px';
}
function hideTip() { el.tip.hidden = true; }
