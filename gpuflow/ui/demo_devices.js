// The demo's GPUs as issue 20 and 21 describe them (?demo; docs/ui.md, "Demo mode"), all of it
// synthetic: each model's facts (SMs, GPM or not, its PCIe link, its SM's limits), the GPM means
// and links a frame carries (PCIe generation, width and peak, rates; NVLink per link, to a peer GPU
// over a bridge or to an NVSwitch), the PM samples the demo's recorder keeps for a GPU that has
// them, the launch configuration of each demo kernel with its theoretical occupancy, limiter and
// waves, and a traced process's GPU busy share over a window of its lanes.
//
// Constraints: pure functions of their arguments (no DOM, no page state). What the page's generator
// and the demo worker's compute for the same frame is the same: nothing here draws random numbers
// but through the generator it is given (`R`), and the PM samples use none. The occupancy is the
// CUDA calculator's arithmetic for the demo's own numbers (docs/occupancy.md), not a measurement.

const KIB = 1024;
// per model: SMs, whether NVML offers GPM (Hopper on), compute capability, PCIe [generation,
// width], and an SM's limits: warps, registers, shared memory (bytes), blocks
const HOPPER = { gpm: true, cc: [9, 0], pcie: [5, 16], warps: 64, regs: 65536, smem: 228 * KIB, blocks: 32 };
const MODELS = {
  'NVIDIA H200': Object.assign({ sms: 132 }, HOPPER),
  'NVIDIA H100 80GB HBM3': Object.assign({ sms: 132 }, HOPPER),
  'NVIDIA A100-SXM4-80GB': { sms: 108, gpm: false, cc: [8, 0], pcie: [4, 16], warps: 64, regs: 65536, smem: 164 * KIB, blocks: 32 },
  'NVIDIA L4': { sms: 58, gpm: false, cc: [8, 9], pcie: [4, 16], warps: 48, regs: 65536, smem: 100 * KIB, blocks: 24 },
};
export function modelOf(name) { return MODELS[name] || null; }

// theoretical bytes per second each way of PCIe generation `gen` at `width` lanes (the collector's
// arithmetic: gpuflow/collectors/nvml/readings.py)
const GEN = { 3: [8e9, 128 / 130], 4: [16e9, 128 / 130], 5: [32e9, 128 / 130] };
function pciePeak(gen, width) { const g = GEN[gen]; return g ? g[0] * g[1] * width / 8 : null; }

// a GPU's GPM means over the last second, from its utilization `util` (null without GPM)
export function gpmOf(g, util, nvTx, nvRx, pcieTx, pcieRx) {
  const m = modelOf(g.model);
  if (!m || !m.gpm || g.lost || g.mig === 'enabled') return null;
  const sm = Math.max(0, Math.min(100, util * 0.93));
  return { gpu_instance_id: null, interval_s: 1.0, graphics_util_pct: util, sm_util_pct: Math.round(sm * 10) / 10,
    sm_occupancy_pct: Math.round(sm * (g.occ || 0.55) * 10) / 10, integer_util_pct: Math.round(sm * 0.2),
    tensor_util_pct: Math.round(sm * 0.6), dram_bw_util_pct: Math.round(sm * 0.45), fp64_util_pct: 0,
    fp32_util_pct: Math.round(sm * 0.15), fp16_util_pct: Math.round(sm * 0.1), pcie_tx_bytes_per_s: pcieTx,
    pcie_rx_bytes_per_s: pcieRx, nvlink_tx_bytes_per_s: nvTx, nvlink_rx_bytes_per_s: nvRx };
}

// a GPU's NVLinks in scenario `sc` at time tS: [{link, state, remote_pci_bus_id, remote_device_index,
// tx_bytes_per_s, rx_bytes_per_s, tx_bytes_total, rx_bytes_total}]; sc.nvlink is 'switch' (every
// link to an NVSwitch: no peer GPU) or {pairs: [[a, b], ...], links, gbps: {a: GB/s each way}}
export function nvlinksOf(sc, g, tS, busOf) {
  const nv = sc.nvlink;
  if (!nv || g.lost) return [];
  const wob = (k) => 1 + 0.25 * Math.sin(tS * 0.8 + g.index * 1.3 + k);
  if (nv === 'switch') {
    const per = g.base / 100 * 9e9;   // all-reduce traffic spread over 18 links
    return Array.from({ length: 18 }, (_, link) => ({ link, state: 'up', remote_pci_bus_id: '00000000:' + (0x05 + (link % 4)).toString(16).padStart(2, '0').toUpperCase() + ':00.0',
      remote_device_index: null, tx_bytes_per_s: Math.round(per * wob(link)), rx_bytes_per_s: Math.round(per * wob(link + 1)),
      tx_bytes_total: null, rx_bytes_total: null }));
  }
  const pair = nv.pairs.find(p => p.indexOf(g.index) >= 0);
  if (!pair) return [];
  const peer = pair[0] === g.index ? pair[1] : pair[0], lead = Math.min(pair[0], pair[1]);
  const gbps = (nv.gbps[lead] || 0) * 1e9 / nv.links;
  const out = g.index === lead ? 1 : 0.8;   // the lower GPU sends more (a pipeline's forward pass)
  return Array.from({ length: nv.links }, (_, link) => ({ link, state: (nv.down || []).some(([i, l]) => i === g.index && l === link) ? 'down' : 'up',
    remote_pci_bus_id: busOf(peer), remote_device_index: peer,
    tx_bytes_per_s: Math.round(gbps * out * wob(link)), rx_bytes_per_s: Math.round(gbps * (1.8 - out) * wob(link + 2)),
    tx_bytes_total: null, rx_bytes_total: null }));
}

// a GPU's links: PCIe at its most (the generation drops when idle) and its NVLinks
export function linksOf(g, util, nvlinks) {
  const m = modelOf(g.model);
  if (g.lost) return null;
  if (!m || g.nulls.indexOf('pcie_rx_bytes_per_s') >= 0) {
    return { pcie_gen: null, pcie_width: null, pcie_gen_max: null, pcie_width_max: null, pcie_peak_bytes_per_s: null,
      pcie_tx_bytes_total: null, pcie_rx_bytes_total: null, pcie_rate_source: null, nvlinks };
  }
  const [gen, width] = m.pcie;
  return { pcie_gen: util > 0 ? gen : 1, pcie_width: width, pcie_gen_max: gen, pcie_width_max: width,
    pcie_peak_bytes_per_s: pciePeak(gen, width), pcie_tx_bytes_total: null, pcie_rx_bytes_total: null,
    pcie_rate_source: m.gpm ? 'gpm' : 'throughput', nvlinks };
}

// A GPU's PM samples at time tS, when its utilization but for noise is `load` (the spread across
// its SMs, as CUPTI's PM sampling gives them), by the metrics of PM_SERIES; null where it has none.
// No random numbers: the page's generator does not make them, only the recorder's.
export const PM_SERIES = [['pm_sm_active_pct', '%'], ['pm_sm_active_min_pct', '%'], ['pm_sm_active_max_pct', '%'],
  ['pm_warps_active_pct', '%'], ['pm_warps_active_min_pct', '%'], ['pm_warps_active_max_pct', '%'],
  ['pm_dram_throughput_pct', '%'], ['pm_pcie_read_bytes_per_s', 'bytes/s'], ['pm_pcie_write_bytes_per_s', 'bytes/s']];
export function pmOf(g, tS, load) {
  if (!g.pm || g.lost) return null;
  const busy = load > 0 ? Math.max(0, Math.min(100, load * 0.93 + Math.sin(tS * 9.1) * 3)) : 0;
  const idle = Math.max(0, Math.min(busy, 30 + Math.sin(tS * 2.3) * 25));   // the least busy SM waits on a data-loader
  const warps = busy * (g.occ || 0.55);
  const r = (v) => Math.round(v * 10) / 10;
  return { pm_sm_active_pct: r(busy), pm_sm_active_min_pct: r(Math.max(0, busy - idle)), pm_sm_active_max_pct: r(Math.min(100, busy > 0 ? busy + 6 : 0)),
    pm_warps_active_pct: r(warps), pm_warps_active_min_pct: r(Math.max(0, warps - idle * 0.7)), pm_warps_active_max_pct: r(Math.min(100, busy > 0 ? warps * 1.35 : 0)),
    pm_dram_throughput_pct: r(busy * 0.42), pm_pcie_read_bytes_per_s: Math.round(busy * 1.1e8), pm_pcie_write_bytes_per_s: Math.round(busy * 0.3e8) };
}

// A kernel's launch entry (KernelLaunch in docs/snapshot.md) for its one configuration `cfg`
// ({grid, block, regs, smem}) on a GPU of model `m` with `sms` SMs, run mostly on `device`: the
// blocks an SM holds by each limit, the least of them, what reaches it, and the waves.
export function launchOf(mangled, cfg, m, device) {
  const threads = cfg.block[0] * cfg.block[1] * cfg.block[2], warps = Math.ceil(threads / 32);
  const by = { warps: Math.floor(m.warps / warps), registers: Math.floor(m.regs / (cfg.regs * warps * 32)),
    shared_memory: cfg.smem ? Math.floor(m.smem / cfg.smem) : Infinity, blocks: m.blocks };
  const blocks = Math.min(by.warps, by.registers, by.shared_memory, by.blocks);
  const limiters = ['registers', 'shared_memory', 'warps', 'blocks'].filter(k => by[k] === blocks).join('+');
  const occ = blocks * warps / m.warps * 100, grid = cfg.grid[0] * cfg.grid[1] * cfg.grid[2];
  const waves = blocks > 0 ? Math.round(grid / (blocks * m.sms) * 100) / 100 : null;
  return { mangled, configs: 1, configs_more: 0, device, block_threads: threads, registers: cfg.regs, shared_bytes: cfg.smem,
    occupancy_pct: Math.round(occ * 100) / 100, blocks_per_sm: blocks, limiters, waves_min: waves, waves_max: waves,
    occupancy_min_pct: Math.round(occ * 100) / 100, occupancy_max_pct: Math.round(occ * 100) / 100, unavailable: null };
}

// The share of [endUs - windowUs, endUs) that lanes' kernels covered (their union), in percent:
// each lane's kept spans are in start order, so the lanes are merged as they are walked.
export function busyOf(lanes, endUs, windowUs) {
  const from = endUs - windowUs, ivs = [];
  for (const L of lanes) {
    for (let i = L.sample.length - 1; i >= 0; i--) {
      const s = L.sample[i], e = s.start_us + s.dur_ns / 1000;
      if (e <= from) break;
      if (s.kind === 'kernel' && s.start_us < endUs) ivs.push([Math.max(from, s.start_us), Math.min(endUs, e)]);
    }
  }
  ivs.sort((a, b) => a[0] - b[0]);
  let busy = 0, cur0 = -Infinity, cur1 = -Infinity;
  for (const [a, b] of ivs) {
    if (a > cur1) { if (cur1 > cur0) busy += cur1 - cur0; cur0 = a; cur1 = b; } else if (b > cur1) cur1 = b;
  }
  if (cur1 > cur0) busy += cur1 - cur0;
  return Math.round(busy / windowUs * 1000) / 10;
}
