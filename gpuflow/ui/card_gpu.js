// The hover card's rows about what a GPU's SM grid and links show (card.js builds the card): its SM
// count and where it came from, its GPM means, the spread across its SMs that PM sampling measured,
// the traced kernel over the grid with its launch configuration, its PCIe link and its NVLinks; a
// traced process's devices (SM count, busy share, copies by direction and host memory); a kernel's
// launch configurations and theoretical occupancy. Exact where the picture rounds or cuts.
//
// Constraints: rows are [label, value, warn] as plain strings (card.js writes them with
// textContent: kernel names are untrusted); a value not known is "—", never 0; no state.

import { DASH, fmtBytes, fmtClock, fmtGB, fmtNs, fmtPct, fmtRate, grp, isNum } from './format.js';
import { nvlinkRates } from './link_edges.js';
import { model } from './layout.js';
import { BUCKET_S, spreadOf } from './pm_spread.js';
import { gridFacts } from './sm_grid.js';

function nz(v, fmt) { return isNum(v) ? (fmt ? fmt(v) : String(v)) : DASH; }
const pct1 = v => v.toFixed(1) + ' %';

// a launch entry's configuration and occupancy, in a few rows
export function launchRows(L) {
  const rows = [];
  rows.push(['occupancy', isNum(L.occupancy_pct) ? pct1(L.occupancy_pct) + ' theoretical (' + (L.limiters || DASH).replace(/_/g, ' ') + ')' +
    (isNum(L.occupancy_min_pct) && isNum(L.occupancy_max_pct) && L.occupancy_min_pct !== L.occupancy_max_pct
      ? ', ' + pct1(L.occupancy_min_pct) + ' – ' + pct1(L.occupancy_max_pct) + ' over its configurations' : '')
    : DASH + (L.unavailable ? ' (' + L.unavailable + ')' : ''), !isNum(L.occupancy_pct)]);
  rows.push(['blocks / SM', nz(L.blocks_per_sm)]);
  rows.push(['waves', isNum(L.waves_min) && isNum(L.waves_max) ? (L.waves_min === L.waves_max ? String(L.waves_min) : L.waves_min + ' – ' + L.waves_max) +
    ' (grid blocks over blocks an SM holds × SMs)' : DASH]);
  rows.push(['configuration', nz(L.block_threads) + ' threads a block · ' + nz(L.registers) + ' registers a thread · ' +
    nz(L.shared_bytes, fmtBytes) + ' shared a block' + (isNum(L.device) ? ' · device ' + L.device : '')]);
  rows.push(['configurations', grp(L.configs) + (L.configs_more ? ' (+ ' + grp(L.configs_more) + ' launches in others)' : '')]);
  return rows;
}

// the rows of GPU `d`'s card about its SMs, GPM, PM spread, traced kernel and links
export function gpuRows(d) {
  const rows = [], g = gridFacts(d);
  const by = g.traced.find(x => isNum(x.dev.sm_count));
  rows.push(['SMs', g.sms === null ? 'not known: no traced process has described this GPU (CUPTI\'s DEVICE record gives it)'
    : g.sms + ' (from the DEVICE record of traced pid ' + by.info.pid + ')']);
  const m = d.gpm;
  rows.push(['GPM', m ? 'GPU means over ' + m.interval_s.toFixed(2) + ' s, all processes, not per SM' : DASH + ' (no GPM on this GPU, MIG, or none at this moment)']);
  if (m) {
    rows.push(['SM busy · occupancy', nz(m.sm_util_pct, pct1) + ' · ' + nz(m.sm_occupancy_pct, pct1)]);
    rows.push(['tensor · DRAM bw', nz(m.tensor_util_pct, pct1) + ' · ' + nz(m.dram_bw_util_pct, pct1)]);
  }
  const s = spreadOf(d.uuid);
  if (s) {
    const band = (x) => (x ? nz(x.avg, pct1) + ' (least SM ' + nz(x.min, pct1) + ', busiest ' + nz(x.max, pct1) + ')' : DASH);
    rows.push(['PM across SMs', 'the ' + BUCKET_S + ' s from ' + fmtClock(s.at, true) + ', the least and busiest SM\'s figures their least and greatest']);
    rows.push(['SM active', band(s.sm)], ['warps in flight', band(s.warps)]);
  }
  if (g.top) {
    const k = g.top.kernel;
    rows.push(['traced kernel', (k ? k.name : g.top.launch.mangled) + ' (pid ' + g.top.pid + ', its kernel with the most time whose main configuration ran here' +
      (k ? ': ' + fmtNs(k.total_ns) : '') + ')']);
    rows.push(...launchRows(g.top.launch));
  }
  for (const r of linkRows(d)) rows.push(r);
  return rows;
}

// a GPU's PCIe link and NVLinks
function linkRows(d) {
  const rows = [], l = d.links;
  rows.push(['PCIe in · out', nz(d.pcie_rx_bytes_per_s, fmtRate) + ' · ' + nz(d.pcie_tx_bytes_per_s, fmtRate) +
    (l && l.pcie_rate_source ? ' (' + (l.pcie_rate_source === 'gpm' ? 'GPM mean' : 'NVML 20 ms sample') + ')' : '')]);
  if (!l) return rows;
  rows.push(['PCIe link', 'gen ' + nz(l.pcie_gen) + ' ×' + nz(l.pcie_width) + ' now, at most gen ' + nz(l.pcie_gen_max) + ' ×' +
    nz(l.pcie_width_max) + ': ' + nz(l.pcie_peak_bytes_per_s, fmtRate) + ' each way']);
  const peers = new Map();
  let sw = 0, swTx = null, swRx = null;
  for (const x of l.nvlinks || []) {
    if (isNum(x.remote_device_index)) { peers.set(x.remote_device_index, (peers.get(x.remote_device_index) || 0) + 1); continue; }
    sw++;
    if (isNum(x.tx_bytes_per_s)) swTx = (swTx || 0) + x.tx_bytes_per_s;
    if (isNum(x.rx_bytes_per_s)) swRx = (swRx || 0) + x.rx_bytes_per_s;
  }
  for (const [peer, n] of peers) {
    const b = model.nodes.get('d:' + peer), r = b ? nvlinkRates(d, b.data) : null;
    rows.push(['NVLink to GPU ' + peer, n + ' link' + (n === 1 ? '' : 's') + (r && r.down ? ', ' + r.down + ' down' : '') +
      (r ? ': out ' + nz(r.ab, v => fmtGB(v) + ' GB/s') + ' · in ' + nz(r.ba, v => fmtGB(v) + ' GB/s') : ''), !!(r && r.down)]);
  }
  if (sw) rows.push(['NVLink, no GPU here', sw + ' link' + (sw === 1 ? '' : 's') + ' (to an NVSwitch): in ' + nz(swRx, v => fmtGB(v) + ' GB/s') +
    ' · out ' + nz(swTx, v => fmtGB(v) + ' GB/s')]);
  if (!(l.nvlinks || []).length) rows.push(['NVLink', 'none reported']);
  return rows;
}

// a traced process's devices: what its records say of each, its busy share there, its copies
export function tracedDeviceRows(info) {
  const rows = [];
  for (const dev of info.devices || []) {
    const gpu = [...model.nodes.values()].find(n => n.kind === 'device' && n.data.uuid === dev.uuid);
    rows.push(['device ' + dev.device, (gpu ? 'GPU ' + gpu.data.index : nz(dev.uuid)) + ' · ' + nz(dev.sm_count) + ' SMs · busy ' +
      (isNum(dev.busy_pct) ? fmtPct(dev.busy_pct) + (isNum(dev.busy_window_ms) && isNum(dev.busy_window_end_us)
        ? ' of the ' + (dev.busy_window_ms / 1000).toFixed(1) + ' s before ' + fmtClock(dev.busy_window_end_us / 1e6, true) : '') : DASH) + (dev.busy_late ? ' (a lower bound: ' + grp(dev.busy_late) + ' late kernels)' : '')]);
    for (const c of dev.copies || []) {
      rows.push(['  ' + c.direction + ' ' + c.memory, nz(c.bytes_per_s, v => fmtGB(v) + ' GB/s') + ' · ' + grp(c.count) + ' copies, ' +
        fmtBytes(c.bytes) + ' in ' + fmtNs(c.total_ns)]);
    }
  }
  return rows;
}

// a kernel table row's launch entry, found by its mangled name
export function kernelLaunchRows(info, k) {
  const L = (info.kernel_launches || []).find(x => x.mangled === k.mangled);
  return L ? launchRows(L) : [['occupancy', DASH + ' (no launch configuration recorded)']];
}
