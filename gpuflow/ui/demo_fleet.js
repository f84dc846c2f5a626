// ?demo=bench&fleet=N: a synthetic fleet of N hosts × 8 GPUs in the hub's overview, the load
// bench/ui_frame.py --fleet measures the overview's frame time with (issue 22: 1,000 hosts).
//
// It stands in for a hub as demo_source.js stands in for an agent: the page makes the frames
// itself, as objects, and they take a hub's frames' path from the parsed event on (main.js's
// onFrame, fleet.js's fleetFrame, fleet_stream.js's reader). First a plain full frame naming a
// followed host (what makes a page a hub's: fleet.js turns to the overview), then the overview
// stream's frames (docs/snapshot.md, "The fleet's overview"): a full one listing every tile, and
// every PUBLISH_MS a delta holding the tiles that changed, as a hub of N agents at 1 Hz publishes
// them (a quarter of the hosts each time, their GPUs' readings moved; now and then a host stale,
// down, or back up). The hosts are seeded, so every run is the same fleet; their addresses say
// they are synthetic. Each frame's ingest is timed as the plane's are (canvas.js's `bench`), and
// every animation frame the view drifts between the whole fleet (every tile, no text) and a
// close look (tiles legible, their text drawn) panning across it, so each one is a full redraw.
//
// Constraints: loaded only by demo.js in demo mode with ?demo=bench&fleet; makes no request.

import { bench, cssH, cssW, loop, view } from './canvas.js';
import { GAP, TILE_H, TILE_W, fleet } from './fleet.js';

export const FLEET_GPUS = 8;
const PUBLISH_MS = 250, GIB = 1024 ** 3;

function mulberry32(a) {
  return () => {
    a |= 0; a = a + 0x6D2B79F5 | 0;
    let t = Math.imul(a ^ a >>> 15, 1 | a);
    t = t + Math.imul(t ^ t >>> 7, 61 | t) ^ t;
    return ((t ^ t >>> 14) >>> 0) / 4294967296;
  };
}

// the number of hosts ?fleet= asks for (1 to 5,000; 1,000 when it names none)
export function fleetSize() {
  const n = parseInt(new URLSearchParams(location.search).get('fleet'), 10);
  return Number.isFinite(n) && n >= 1 ? Math.min(n, 5000) : 1000;
}

function makeFleet(n) {
  const R = mulberry32(22), born = Date.now() / 1000;
  const hosts = [];
  for (let i = 0; i < n; i++) {
    const name = 'node-' + String(i + 1).padStart(4, '0');
    hosts.push({ name, hostname: name, boot_epoch: Math.round(born * 1000) - i, interval_s: 1, problems: [],
      state: 'up', seen: born, restarts: 0, address: 'synthetic://' + name, detail: 'summary', lag_ms: 3,
      process_count: Math.floor(R() * 9), traced_running: R() < 0.1 ? 1 : 0,
      gpus: Array.from({ length: FLEET_GPUS }, (_, g) => [g, Math.round(R() * 100), Math.round(R() * 80) * GIB, 80 * GIB, false]) });
  }
  return { hosts, R, seq: 0, turn: 0 };
}

// the next delta: a quarter of the hosts with new readings, a few changing state
function nextDelta(fl) {
  const now = Date.now() / 1000, changed = [], n = fl.hosts.length, quarter = Math.ceil(n / 4);
  for (let k = 0; k < quarter; k++) {
    const h = fl.hosts[(fl.turn * quarter + k) % n], R = fl.R;
    const roll = R();
    const state = roll < 0.004 ? 'stale' : roll < 0.006 ? 'down' : h.state === 'down' && roll < 0.5 ? 'down' : 'up';
    const gpus = h.gpus.map(([g, util, mem, total]) => [g, Math.max(0, Math.min(100, util + Math.round((R() - 0.5) * 30))),
      Math.max(0, Math.min(total, mem + Math.round((R() - 0.5) * 8) * GIB)), total, R() < 0.0005]);
    const t = Object.assign({}, h, { state, gpus, seen: state === 'up' ? now : h.seen,
      restarts: h.state === 'down' && state === 'up' ? h.restarts + 1 : h.restarts });
    fl.hosts[(fl.turn * quarter + k) % n] = t;
    changed.push(t);
  }
  fl.turn = (fl.turn + 1) % 4;
  const base = fl.seq++;
  return { frame: 'delta', base_seq: base, schema: 4, detail: 'hosts', seq: fl.seq, timestamp: now, hosts: changed, hosts_gone: [] };
}

// Starts the synthetic hub: its frames to onFrame (each timed as a frame's ingest), the view's drift
export function startFleetBench(onFrame) {
  const fl = makeFleet(fleetSize());
  const timed = (f) => { const t = performance.now(); onFrame(f); const d = performance.now() - t; bench.ingest.push(d); bench.pendingIngest += d; };
  const hub = { name: 'bench-hub', hostname: 'bench-hub', boot_epoch: 1, interval_s: 1, problems: [] };
  // a hub's first frame on api/stream: hosts that are other agents, followed
  onFrame({ frame: 'full', schema: 3, seq: 0, timestamp: Date.now() / 1000, host: hub, hosts: [fl.hosts[0]],
    devices: [], processes: [], traced: [], sources: ['fleet'], problems: [] });
  timed({ frame: 'full', schema: 4, detail: 'hosts', seq: fl.seq, timestamp: Date.now() / 1000, host: hub,
    hosts: fl.hosts.slice(), hosts_gone: [] });
  setInterval(() => timed(nextDelta(fl)), PUBLISH_MS);
  loop.animate = fleetStep;
}

// every animation frame the view moves between the whole fleet (ph 0) and the tiles at zoom 1
// (ph 1, legible), its centre panning across the grid, so each frame is drawn anew
function fleetStep(ts) {
  const t = ts / 1000, n = fleet.order.length;
  bench.t = t;
  if (!n) return;
  const cols = fleet.cols, rows = Math.ceil(n / cols);
  const W = cols * (TILE_W + GAP) - GAP, H = rows * (TILE_H + GAP) - GAP;
  const fitS = Math.min(cssW / W, cssH / H), ph = (Math.sin(t * 0.9) + 1) / 2, s = fitS + (1 - fitS) * ph;
  const cx = W / 2 + Math.sin(t * 0.31) * W * 0.4 * ph, cy = H / 2 + Math.cos(t * 0.23) * H * 0.4 * ph;
  view.s = s; view.x = cssW / 2 - cx * s; view.y = cssH / 2 - cy * s; view.touched = true;
  loop.dirty = true;
}
