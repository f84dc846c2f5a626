// The page's entry, the one script index.html loads: wires the modules together and starts the
// page, live on the agent's stream or, with ?demo, on demo.js's canned frames.
//
// Every frame, live or demo, takes the same path: read back to the plain form (stream.js),
// applied to what the page keeps (store.js), laid out (layout.js), and drawn in the next
// animation frame (scene.js through canvas.js's loop). A live frame is parsed from its event's
// JSON first; a demo frame is made as an object, already in the plain form.
//
// Constraints: ES modules of the page's own origin only, no framework, no build step, under the
// agent's Content-Security-Policy ('self' scripts, no eval, no inline handlers). demo.js is
// imported only in demo mode. The only global is the read-only test hook (hook.js).

import { bench, canvas, markDirty, resize, setOnResize, setPainter, ui, view } from './canvas.js';
import { demo, startLive, updateHeader } from './connection.js';
import { installHook } from './hook.js';
import { afterDraw, installInteraction } from './interaction.js';
import { fitTo, model, rebuild } from './layout.js';
import { installList, syncSelection, toggleList, updateList } from './list.js';
import { draw } from './scene.js';
import { APPLIED, RESYNC, ingest, store } from './store.js';

// One frame (parsed JSON); false when the page cannot apply it and must start over with a full
// frame. ?demo=bench times it, as a frame's ingest.
function onFrame(f) {
  const t = performance.now();
  const result = ingest(f);
  if (result === APPLIED) {
    rebuild(store.snap, store.traced);
    if (ui.isolated && !model.nodes.has(ui.isolated)) ui.isolated = null;
    if (!view.touched) fitTo(null);
    markDirty();
    updateList(false);
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

// each picture, then the hover card and the list's selection brought up to it
setPainter(() => { draw(); afterDraw(); syncSelection(); });
// a canvas of another size while the view follows the graph: laid out again for it, and fitted
setOnResize((changed) => {
  if (!changed || view.touched || !store.snap) return;
  rebuild(store.snap, store.traced);
  fitTo(null);
});
installInteraction(toggleList);
installList();
installHook();
new ResizeObserver(resize).observe(canvas);
window.addEventListener('resize', resize);
resize();
setInterval(updateHeader, 1000);
if (demo) import('./demo.js').then(m => m.startDemo(demo, onFrame));
else startLive(onFrameText);
