// The hover card's content: everything the snapshot says about what is under the pointer (a GPU,
// the host, a process, a span, a lane's label, its "not sampled" stretch, a kernel or transfer
// row; at a past moment, a bucket of a reduced window and the stretch retention let go; a
// sparkline's reading at the time under the pointer), exactly: full names, exact counts and
// totals (a GPU's SM grid and links, a traced process's devices and a kernel's launch
// configuration: card_gpu.js). interaction.js decides what is under the
// pointer and rebuilds the card from the latest frame after every draw, so a card never shows a
// frame older than the picture beside it.
//
// Constraints: built with createElement and textContent only (names, command lines, messages and
// kernel names are untrusted). No state of its own.

import { gpuRows, kernelLaunchRows, tracedDeviceRows } from './card_gpu.js';
import { DASH, exitText, fmtBytes, fmtClock, fmtDim, fmtNs, fmtPct, fmtSpan, grp, isNum, retiredText, shortKernel }
  from './format.js';
import { DOCTOR_HINT } from './geometry.js';
import { model } from './layout.js';
import { agentNow } from './scrub.js';
import { spark } from './spark.js';
import { shownSnap, store } from './store.js';
import { isUnnamed, laneText } from './traced.js';
import { workloadRows } from './workload.js';

function row(k, v, warn) {
  const d = document.createElement('div'); d.className = 'r';
  const a = document.createElement('span'); a.textContent = k;
  const b = document.createElement('span'); b.textContent = v;
  if (warn) b.className = 'w';
  d.append(a, b); return d;
}
function nz(v, fmt) { return v === null || v === undefined ? DASH : fmt ? fmt(v) : String(v); }
function exactNs(ns) { return grp(ns) + ' ns (' + fmtNs(ns) + ')'; }

// what a lane's name means: NVTX, the null stream, or an id the program never named
export function laneMeaning(L) {
  if (isUnnamed(L)) return 'unnamed: the program did not name CUDA stream ' + L.stream + ' with NVTX ' +
    '(nvtxNameCudaStreamA), so the lane shows its stream id';
  if (L.label === 'default') return 'the null (default) stream of context ' + L.context;
  return 'named "' + L.label + '" by the program with NVTX';
}

// fills `t` with the card for hit `h` on node n
export function fillCard(t, h, n) {
  t.replaceChildren();
  const title = document.createElement('div'); title.className = 't';
  t.append(title);
  const tr = n.tr;
  if (h.span) {
    const s = h.span;
    title.textContent = s.kind === 'kernel' ? (s.name || '(unnamed kernel)') : s.kind + ' ' + nz(s.direction);
    t.append(row('lane', laneText(tr, h.laneObj) + ' · GPU ' + h.laneObj.device + ' · stream ' + h.laneObj.stream));
    t.append(row('kind', s.kind), row('duration', fmtNs(s.dur_ns)));
    if (s.kind === 'kernel') t.append(row('grid', fmtDim(s.grid)), row('block', fmtDim(s.block)));
    else t.append(row('bytes', nz(s.bytes, fmtBytes)), row('direction', nz(s.direction)));
    const f = shownSnap(), ago = f ? f.timestamp * 1e6 - s.start_us : null;
    t.append(row('started', ago === null ? DASH : fmtNs(ago * 1000) + (store.past ? ' before the moment' : ' before the frame')));
    t.append(row('seq', String(s.seq)));
  } else if (h.spark) {
    sparkCard(t, title, h.spark, n);
  } else if (h.bucket) {
    const b = h.bucket, share = b.busy_ns / (b.width_us * 1000);
    title.textContent = grp(b.count) + ' execution' + (b.count === 1 ? '' : 's') + ' · lane ' + laneText(tr, b.lane);
    t.append(row('from', fmtClock(b.from_us / 1e6, true)), row('for', fmtNs(b.width_us * 1000)));
    t.append(row('busy', (share * 100).toFixed(share < 0.1 ? 1 : 0) + ' % of the time'));
    t.append(row('reduced', 'the window has more executions than the strip has pixels: narrow it (wheel over the timeline) or zoom in to see each one'));
  } else if (h.notRetained) {
    title.textContent = 'not retained';
    t.append(row('retained from', fmtClock(h.notRetained.retainedFrom, true)));
    t.append(row('why', 'the recorder has let the older part of this window go (its memory or time limit)'));
  } else if (h.notSampled) {
    const L = h.notSampled;
    title.textContent = 'not sampled · lane ' + laneText(tr, L);
    t.append(row('kept', 'the most recent ' + grp(L.spans.length) + ' executions of this stream'));
    t.append(row('not sent', grp(L.executions - L.spans.length) + ' older executions: counted in the totals, not drawn'));
  } else if (h.laneLabel) {
    const L = h.laneLabel;
    title.textContent = 'lane ' + laneText(tr, L);
    t.append(row('name', laneMeaning(L), false));
    t.append(row('device', String(L.device)), row('context', String(L.context)), row('stream', String(L.stream)));
    t.append(row('showing', grp(L.spans.length) + ' of ' + grp(L.executions) + ' executions'));
    t.append(row('not shown', grp(L.executions - L.spans.length)));
  } else if (h.kernel) {
    const k = h.kernel, all = tr.info.kernels || [];
    const sum = all.reduce((a, x) => a + x.total_ns, 0);
    title.textContent = k.name || k.mangled || '(unnamed kernel)';
    if (k.mangled && k.mangled !== k.name) t.append(row('mangled', k.mangled));
    t.append(row('launches', grp(k.count) + (k.timed !== undefined && k.timed !== k.count ? ' (' + grp(k.timed) + ' timed)' : '')));
    t.append(row('total', exactNs(k.total_ns)));
    const timed = k.timed === undefined ? k.count : k.timed;
    if (timed) t.append(row('mean', fmtNs(k.total_ns / timed)));
    t.append(row('min / max', nz(k.min_ns, fmtNs) + ' / ' + nz(k.max_ns, fmtNs)));
    if (sum) t.append(row('share', (k.total_ns / sum * 100).toFixed(1) + ' % of this process\'s kernel time'));
    t.append(row('rank', (h.kernelIndex + 1) + ' of ' + all.length + ' kernels'));
    if (!store.past) for (const [k2, v, w] of kernelLaunchRows(tr.info, k)) t.append(row(k2, v, w));
  } else if (h.transfer) {
    const x = h.transfer;
    title.textContent = 'transfers ' + x.direction;
    t.append(row('count', grp(x.count) + (x.timed !== undefined && x.timed !== x.count ? ' (' + grp(x.timed) + ' timed)' : '')));
    t.append(row('bytes', grp(x.bytes) + ' (' + fmtBytes(x.bytes) + ')'), row('total', exactNs(x.total_ns)));
  } else if (n.kind === 'device') deviceCard(t, title, n);
  else if (n.kind === 'host') hostCard(t, title, n);
  else processCard(t, title, n);
}

const METRIC_NAMES = { utilization_gpu_pct: 'utilization', memory_used_bytes: 'memory', power_draw_w: 'power', sm_util_pct: 'SM' };
function reading(metric, v) {
  if (!isNum(v)) return DASH;
  return metric === 'memory_used_bytes' ? fmtBytes(v) : metric === 'power_draw_w' ? v.toFixed(1) + ' W' : fmtPct(v);
}
// a sparkline's point under the pointer: each reading's mean there, its least and greatest, when
function sparkCard(t, title, sp, n) {
  const who = n.kind === 'device' ? 'GPU ' + n.data.index : nz(n.data && n.data.name) + ' · pid ' + n.pid + ' on GPU ' + sp.device;
  title.textContent = who + ' · ' + sp.metrics.map(m => METRIC_NAMES[m] || m).join(' and ');
  const p = sp.values.find(v => v.t !== null);
  if (!p) { t.append(row('at', fmtClock(sp.t) + ' · no reading kept then')); return; }
  t.append(row('at', fmtClock(p.t) + ' – ' + fmtClock(p.t + p.res) + ' · ' + fmtSpan(Math.max(0, agentNow() - p.t)) + ' ago'));
  for (const v of sp.values) {
    if (v.t === null) { t.append(row(METRIC_NAMES[v.metric], DASH)); continue; }
    const range = isNum(v.lo) && isNum(v.hi) && v.hi > v.lo ? ' (' + reading(v.metric, v.lo) + ' – ' + reading(v.metric, v.hi) + ')' : '';
    t.append(row(METRIC_NAMES[v.metric] || v.metric, reading(v.metric, v.v) + range));
  }
  t.append(row('sparkline', 'the last ' + fmtSpan(spark.span) + ' up to the moment shown; each point the mean of ' + fmtSpan(p.res) +
    ', its least to greatest behind it'));
}

function deviceCard(t, title, n) {
  const d = n.data;
  title.textContent = 'GPU ' + d.index + ' · ' + nz(d.name);
  if (store.past) t.append(row('at', fmtClock(store.past.moment, true) + ' (from the recorder\'s history)'));
  if (d.lost) t.append(row('state', 'LOST: the GPU stopped answering', true));
  t.append(row('uuid', d.uuid), row('PCI bus', nz(d.pci_bus_id)), row('MIG', nz(d.mig_mode)));
  t.append(row('utilization', nz(d.utilization_gpu_pct, fmtPct)), row('memory utilization', nz(d.utilization_memory_pct, fmtPct)));
  t.append(row('memory', nz(d.memory_used_bytes, fmtBytes) + ' / ' + nz(d.memory_total_bytes, fmtBytes)));
  t.append(row('temperature', nz(d.temperature_c, v => v + ' °C')), row('power', nz(d.power_draw_w, v => v.toFixed(1) + ' W') + ' / ' + nz(d.power_limit_w, v => v.toFixed(0) + ' W')));
  t.append(row('SM clock', nz(d.clock_sm_mhz, v => v + ' MHz')), row('memory clock', nz(d.clock_mem_mhz, v => v + ' MHz')));
  if (!d.lost) for (const [k, v, w] of gpuRows(d)) t.append(row(k, v, w));
  const holders = [...model.nodes.values()].filter(p => p.kind === 'process' && p.data &&
    p.data.attachments.some(a => a.device_index === d.index));
  t.append(row('processes', holders.length ? holders.map(p => (p.data.name || '?') + ' ' + p.pid).join(', ') : 'none'));
}
function hostCard(t, title, n) {
  const hd = n.data;
  title.textContent = nz(hd.hostname);
  t.append(row('driver', nz(hd.driver_version)), row('CUDA (driver)', nz(hd.cuda_driver_version)), row('NVML', nz(hd.nvml_version)));
  t.append(row('sources', n.sources.join(', ') || 'none'));
  for (const p of hd.problems || []) t.append(row(p.severity + ' · ' + p.source, p.message, p.severity !== 'info'));
  if ((hd.problems || []).some(p => p.severity === 'error')) t.append(row('next', DOCTOR_HINT));
  for (const r of n.retired) {
    t.append(row('session ' + r.session, retiredText(r), !r.complete));
    for (const k of (r.kernels || []).slice(0, 5)) t.append(row('  ' + grp(k.count) + '×', shortKernel(k.name)));
    for (const x of r.transfers || []) t.append(row('  ' + x.direction, grp(x.count) + ' · ' + fmtBytes(x.bytes)));
  }
}
function processCard(t, title, n) {
  const p = n.data, tr = n.tr;
  title.textContent = nz(p ? p.name : tr.info.name) + ' · pid ' + n.pid;
  if (p) {
    t.append(row('user', nz(p.user)), row('command', nz(p.cmdline)));
    for (const [label, value, warn] of workloadRows(p.workload)) t.append(row(label, value, warn));
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
    for (const [k, v, w] of tracedDeviceRows(i)) t.append(row(k, v, w));
  }
}
