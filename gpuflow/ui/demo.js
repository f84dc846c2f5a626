// Demo mode (?demo[=variant]) on the page's side: the banner, the demo's frames, its recorder's
// answers, and the ?demo=bench load.
//
// The demo's source (demo_source.js: a scenario's seeded generator of plain frames) stands in for
// an agent. The page makes its frames itself, as objects, and they take the live frames' path
// from the parsed event on (stream.js, store.js, layout.js): making one stands in for receiving
// and parsing a stream event. The demo's recorder, which answers the timeline's and the
// sparklines' questions as an agent's recorder would and does an agent's work for them, runs off
// the page's thread, in a worker of its own (demo_worker.js): a second generator there, made with
// the same start and told the time of each frame the page made, makes the same frames and records
// them. Its answers go to the page's answer reader through a port once the worker runs
// (recorder.js setAnswerPort), before that through recorder.js. Where a module worker cannot
// start, the page records and answers itself (a recording generator makes its frames then). The
// page shows DEMO on screen for as long as it runs. ?demo=bench also redraws every animation frame
// while the view drifts between the whole graph and a close look at the traced lanes, and records
// each frame's cost for bench/ui_frame.py; ?demo=bench&scrub also drags the timeline to a new
// past moment every frame; ?demo=bench&fleet=N shows a synthetic hub's overview of N hosts instead
// (demo_fleet.js).
//
// Constraints: loaded only in demo mode (main.js imports it dynamically), never the default;
// opens no stream and makes no request but for the page's own modules (its recorder answers in
// the browser).

import { bench, cssH, cssW, loop, view } from './canvas.js';
import { el, setConn } from './connection.js';
import { FLEET_GPUS, fleetSize, startFleetBench } from './demo_fleet.js';
import { makeDemo } from './demo_source.js';
import { bounds, model } from './layout.js';
import { setAnswerPort, setAnswerer } from './recorder.js';
import { agentNow, canRewind, scrub, seek, zoomWindow } from './scrub.js';
import { timeline } from './timeline.js';

// Shows the banner and hands the variant's frames to onFrame every interval.
export function startDemo(variant, onFrame) {
  el.banner.hidden = false;
  if (variant === 'bench' && new URLSearchParams(location.search).has('fleet')) {   // a hub's overview (demo_fleet.js)
    el.banner.textContent = 'DEMO — synthetic fleet (bench, ' + fleetSize() + ' hosts × ' + FLEET_GPUS + ' GPUs)';
    bench.on = true;
    setConn('demo', variant);
    setAnswerer(() => Promise.reject(new Error('the synthetic fleet has no recorder')));
    startFleetBench(onFrame);
    return;
  }
  if (variant === 'bench') {
    const q = new URLSearchParams(location.search), scrubbing = q.has('scrub');
    const still = scrubbing && q.has('still') ? (q.get('still') === 'close' ? 1 : 0) : null;
    el.banner.textContent = 'DEMO — synthetic frames (bench' + (scrubbing ? (still !== null
      ? ', scrubbing, still view' + (still ? ', close)' : ')') : ', scrubbing)') : ')');
    bench.on = true;
    const step = still !== null ? (ts) => benchStill(ts, still) : benchStep;
    loop.animate = scrubbing ? (ts) => { step(ts); benchScrub(ts); } : benchStep;
  }
  setConn('demo', variant);
  // the recorder's questions go to whichever records; asked before it is known, they wait
  let answerWith = null;
  const waiting = [];
  setAnswerer((path, params) => new Promise((resolve, reject) => {
    const q = { path, params, resolve, reject };
    if (answerWith) answerWith(q); else waiting.push(q);
  }));
  const use = (fn) => { answerWith = fn; for (const q of waiting.splice(0)) fn(q); };
  let worker = null;
  try { worker = new Worker(new URL('./demo_worker.js', import.meta.url), { type: 'module' }); } catch (e) { /* in the page */ }
  if (!worker) { recordHere(variant, onFrame, use); return; }
  const src = makeDemo(variant, { record: false });
  const asked = new Map();   // id -> question, until answered
  let nextId = 0, heard = false;
  const tick = () => { const now = Date.now(); worker.postMessage({ tick: now }); onFrame(src.frame(now)); };
  worker.onmessage = (e) => {
    const m = e.data;
    if (m.ready) {   // it runs: the page's answer reader asks its recorder directly from now on
      heard = true;
      const ch = new MessageChannel();
      worker.postMessage({ answerPort: ch.port1 }, [ch.port1]);
      setAnswerPort(ch.port2);
      return;
    }
    const q = asked.get(m.id);
    if (!q) return;
    asked.delete(m.id);
    if (m.error !== undefined) q.reject(new Error(m.error)); else q.resolve(m.body !== undefined ? m.body : m.text);
  };
  // a worker that could not start (its script refused): the page records and answers itself,
  // with a recording generator of the same start making the frames from the next one on
  worker.onerror = (e) => {
    if (heard) return;
    e.preventDefault();
    worker.terminate();
    clearInterval(timer);
    answerWith = null;
    waiting.unshift(...asked.values());
    asked.clear();
    recordHere(variant, onFrame, use, src.start);
  };
  use((q) => { const id = ++nextId; asked.set(id, q); worker.postMessage({ ask: { id, path: q.path, params: q.params } }); });
  worker.postMessage({ start: variant, at: src.start });
  tick();
  const timer = setInterval(tick, src.interval);
}
// the demo recorded and answered on the page's own thread: its frames every interval, its
// recorder's answers
function recordHere(variant, onFrame, use, start) {
  const src = makeDemo(variant, start === undefined ? {} : { start });
  use((q) => src.rec.answer(q.path, q.params).then(q.resolve, q.reject));
  const tick = () => { onFrame(src.frame()); };
  tick();
  setInterval(tick, src.interval);
}

// ?demo=bench: every animation frame the view drifts between the whole graph and a zoom-1 look
// at the traced node, so each one is a full redraw
function benchStep(ts) {
  bench.t = ts / 1000;
  const b = bounds(null);
  if (b) setDrift(b, (Math.sin(bench.t * 0.9) + 1) / 2, Math.sin(bench.t * 2.3) * 30);
  loop.dirty = true;
}
// ?demo=bench&scrub&still: the view stays still, as it does under a hand dragging the timeline,
// on one of the two ends of benchStep's drift: the whole graph fitted (`still`: titles only at
// 1600 px) or the traced node at zoom 1 (`still=close`: every reading and lane label drawn); set
// again only when the graph's bounds change. Every frame is still a full redraw (another moment).
let stillFor = '';
function benchStill(ts, ph) {
  bench.t = ts / 1000;
  const b = bounds(null);
  const key = b ? [b.x0, b.y0, b.x1, b.y1].join() : '';
  if (b && key !== stillFor) {
    setDrift(b, ph, 0);
    stillFor = key;
  }
  loop.dirty = true;
}
// the view at `ph` of the drift (0: the whole graph, 1: the traced node at zoom 1), `sway` px aside
function setDrift(b, ph, sway) {
  const fitS = Math.min((cssW - 80) / (b.x1 - b.x0), (cssH - 110) / (b.y1 - b.y0));
  const tr = [...model.nodes.values()].find(n => n.tr);
  const s = fitS + (1.0 - fitS) * ph;
  const cx = (b.x0 + b.x1) / 2 * (1 - ph) + (tr ? tr.x + tr.w / 2 : 0) * ph + sway;
  const cy = (b.y0 + b.y1) / 2 * (1 - ph) + (tr ? tr.y + tr.h / 2 : 0) * ph;
  view.s = s; view.x = cssW / 2 - cx * s; view.y = cssH / 2 - cy * s; view.touched = true;
}
// ?demo=bench&scrub: every animation frame the timeline is dragged to another moment of the last
// 2-14 s, as a pointer on the track would, and the window breathes between 0.3 and 2 s (as a
// wheel would: a step when it is a quarter off), so the lanes are exact at times and reduced at
// others
function benchScrub(ts) {
  if (!canRewind()) return;
  const t = ts / 1000, w = 0.3 + 1.7 * (1 + Math.sin(t * 0.37)) / 2;
  timeline.drag = true;
  if (Math.abs(Math.log(w / scrub.windowS)) > 0.25) zoomWindow(w / scrub.windowS);
  seek(agentNow() - 2 - 12 * (1 + Math.sin(t * 0.7)) / 2);
}
