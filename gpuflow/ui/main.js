// The page's entry, the one script index.html loads: wires the modules together and starts the
// page, live on the agent's stream or, with ?demo, on demo.js's canned frames.
//
// Every frame, live or demo, takes the same path: read back to the plain form (stream.js),
// applied to what the page keeps (store.js), laid out (layout.js), and drawn in the next
// animation frame (scene.js through canvas.js's loop). A live frame is parsed from its event's
// JSON first; a demo frame is made as an object, already in the plain form. While the timeline
// shows a past moment (scrub.js, timeline.js), live frames are still applied to the store, but
// the plane shows the frame past.js builds from the recorder's answers instead, by the same
// layout and drawing; going live shows the latest frame at once.
//
// A hub's page (its first frame shows other agents' hosts) shows the fleet's overview instead, and
// any host's plane on a click: fleet.js takes the frames first and paints while it is shown.
//
// Constraints: ES modules of the page's own origin only, no framework, no build step, under the
// agent's Content-Security-Policy ('self' scripts, no eval, no inline handlers). demo.js is
// imported only in demo mode, and no question goes to the recorder before it has taken over
// answering them there. The only global is the read-only test hook (hook.js).

import { bench, canvas, markDirty, resize, setOnResize, setPainter, ui, view } from './canvas.js';
import { demo, startLive, updateHeader } from './connection.js';
import { drawFleet, fleetFrame, installFleet } from './fleet.js';
import { installHook } from './hook.js';
import { afterDraw, installInteraction } from './interaction.js';
import { fitTo, model, rebuild } from './layout.js';
import { installList, syncSelection, toggleList, updateList } from './list.js';
import { remember, requestMoment, setOnShow } from './past.js';
import { ASK_MS, askRetained, setOnRetained } from './retained.js';
import { draw } from './scene.js';
import { isPast, onScrub, tickPlaying } from './scrub.js';
import { REFRESH_MS, refreshSparks } from './spark.js';
import { APPLIED, RESYNC, ingest, store } from './store.js';
import { installTimeline, render as renderTimeline, renderSoon as renderTimelineSoon, trackRect } from './timeline.js';

// the plane shows `frame` and its traced processes: laid out, fitted while the view follows the
// graph, drawn, listed
function show(frame, traced) {
  rebuild(frame, traced);
  if (ui.isolated && !model.nodes.has(ui.isolated)) ui.isolated = null;
  if (!view.touched) fitTo(null);
  markDirty();
  updateList(false);
}
// One frame (parsed JSON); false when the page cannot apply it and must start over with a full
// frame. ?demo=bench times it, as a frame's ingest.
function onFrame(f) {
  if (fleetFrame(f)) return true;   // a hub's page: the fleet's overview takes it (fleet.js)
  const t = performance.now();
  const result = ingest(f);
  if (result === APPLIED) {
    remember(store.snap);
    if (!isPast()) show(store.snap, store.traced);
  }
  if (bench.on) { const d = performance.now() - t; bench.ingest.push(d); bench.pendingIngest += d; }
  updateHeader();
  return result !== RESYNC;
}
// One stream event's data.
function onFrameText(txt) {
  let f;
  try { f = JSON.parse(txt); } catch (e) { store.badFrames++; return true; }
  return onFrame(f);
}

// a past moment answered: the plane shows it
setOnShow((shown) => {
  if (!isPast()) return;
  store.past = shown;
  if (bench.on) bench.showLag.push(performance.now() - shown.askedAt);   // asked to shown: what a drag waits
  show(shown.frame, shown.traced);
  updateHeader();
  renderTimelineSoon();
});
// the timeline moved: live shows the latest frame; a past moment is asked for; the sparklines
// follow the moment (at most every REFRESH_MS while it moves, and once it has settled)
let settleTimer = 0, momentQueued = false;
// the questions for a past moment, once for all the changes of one task (a wheel and a seek
// together ask once, for where they left the moment and the window)
function queueMoment() {
  if (momentQueued) return;
  momentQueued = true;
  queueMicrotask(() => { momentQueued = false; if (isPast()) requestMoment(); });
}
onScrub((why) => {
  if (!isPast()) {
    if (store.past) { store.past = null; if (store.snap) show(store.snap, store.traced); updateHeader(); }
  } else queueMoment();
  if (why !== 'retained') {
    refreshSparks(false);
    clearTimeout(settleTimer);
    settleTimer = setTimeout(() => refreshSparks(true), 300);
  }
  renderTimelineSoon();
});
setOnRetained(renderTimeline);

// each picture, then the hover card and the list's selection brought up to it; a past moment's
// window asked again when the strip's width changed enough
setPainter(() => { if (drawFleet()) return; draw(); afterDraw(); syncSelection(); if (isPast()) requestMoment(); });
// a canvas of another size while the view follows the graph: laid out again for it, and fitted
setOnResize((changed) => {
  const f = store.past ? store.past.frame : store.snap;
  if (!changed || view.touched || !f) return;
  rebuild(f, store.past ? store.past.traced : store.traced);
  fitTo(null);
});
installFleet();   // before the plane's listeners: the overview's pointer is its own
installInteraction(toggleList);
installList();
installTimeline();
installHook();
new ResizeObserver(resize).observe(canvas);
window.addEventListener('resize', resize);
resize();
setInterval(() => { updateHeader(); renderTimeline(); }, 1000);
setInterval(tickPlaying, 200);
// the recorder's questions: what is retained, and the sparklines' minutes
function askRecorder() {
  askRetained(trackRect().width);
  refreshSparks(true);
  setInterval(() => askRetained(trackRect().width), ASK_MS);
  setInterval(() => { if (!isPast()) refreshSparks(true); }, REFRESH_MS);
}
if (demo) import('./demo.js').then(m => { m.startDemo(demo, onFrame); askRecorder(); });
else { startLive(onFrameText); askRecorder(); }
