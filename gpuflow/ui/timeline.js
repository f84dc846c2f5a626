// The timeline along the bottom of the page: which moment the plane shows and the controls to
// choose it.
//
// Its first row says LIVE, PAUSED, PLAYING or GONE and which moment (wall-clock time and how long
// ago), has pause/play and live buttons, the track, the chosen window's width, and "Save window"
// and "Open in Perfetto". The track spans the range the agent's recorder retains (retained.js),
// oldest to newest, with the GPUs' mean utilization over it, clock ticks, the chosen window as a
// band ending at the moment, and the moment as a line. Click or drag on it: the plane shows that
// moment (clamped to what is retained: a moment outside it is never offered); the wheel over it
// widens or narrows the window. The second row says what is retained, the outcome of the last
// save (and that opening in Perfetto needs this browser to reach Perfetto's UI), and the help.
// Keys: space pauses or plays on, ← → step a window back or forth (shift: ten), End goes live,
// E opens the window in Perfetto.
//
// Constraints: DOM text through textContent only, written only when it changed; the track is a
// canvas of its own, redrawn at most once per animation frame when the state changed, and once a
// second (its newest end is now). A drag asks nothing of the page's layout: the track's box is
// measured when it is resized (the items left of it have fixed widths, index.html), not per
// pointer event, so a drag never forces a layout. State is scrub.js's; the exports are
// perfetto.js's (window.open runs in the user's gesture, before anything is awaited).

import { COL, nextFrame, ui } from './canvas.js';
import { demo } from './connection.js';
import { fmtBytes, fmtClock, fmtSpan, fmtWindow } from './format.js';
import { download, fetchTrace, saveAndOpen } from './perfetto.js';
import { retained } from './retained.js';
import { agentNow, canRewind, chosenWindow, goLive, isPast, momentNow, rangeFrom, rangeTo, scrub, seek, step,
  togglePause, zoomWindow } from './scrub.js';
import { store } from './store.js';

const $ = (id) => document.getElementById(id);
const el = { state: $('tl-state'), pause: $('tl-pause'), live: $('tl-live'), moment: $('tl-moment'), track: $('tl-track'),
  window: $('tl-window'), save: $('tl-save'), open: $('tl-open'), retained: $('tl-retained'), msg: $('tl-msg') };
const tctx = el.track.getContext('2d');
export const PERFETTO_NOTE = 'Open in Perfetto needs this browser to reach ui.perfetto.dev; Save window always works';
export const timeline = { drag: false, msg: '', exports: 0, lastExport: null };

// -- the track's geometry ------------------------------------------------------------------------
function trackSpan() {
  const from = rangeFrom(), to = rangeTo();
  return from === null || !(to > from) ? null : { from, to };
}
// the track's box in the page, measured when it is resized (or first asked)
let box = null;
function measureTrack() { const r = el.track.getBoundingClientRect(); box = { left: r.left, top: r.top, width: r.width, height: r.height }; }
export function trackRect() { if (!box || !box.width) measureTrack(); return box; }
// page x of moment t on the track, and the moment at page x
export function xOf(t) {
  const s = trackSpan(), r = trackRect();
  return s ? r.left + (t - s.from) / (s.to - s.from) * r.width : null;
}
function timeAt(clientX) {
  const s = trackSpan(), r = trackRect();
  return s ? s.from + (clientX - r.left) / r.width * (s.to - s.from) : null;
}

// -- drawing -------------------------------------------------------------------------------------
// The track is two layers: what stays still while the moment moves (the range's background, the
// utilization overview, the clock ticks and their labels), drawn into a bitmap of its own, and
// over it, every picture, the chosen window and the moment, on the still layer's scale. The still
// layer is drawn again only when the track's size or the overview changed, or the range changed
// enough to move something on it by STILL_PX (the range's newest end is now: at 10 min over 900 px,
// about once a second; drawing it costs about as much as a picture of the rest of the bar).
const TICKS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];
let trackQueued = false;
function queueTrack() {
  if (trackQueued) return;
  trackQueued = true;
  nextFrame(() => { trackQueued = false; drawTrack(); });
}
let tickFont = '';
const still = { canvas: null, ctx: null, image: null, w: 0, h: 0, dpr: 0, overview: null, from: NaN, to: NaN, drawn: 0 };
// does the still layer drawn for [still.from, still.to] show [from, to] to within STILL_PX?
const STILL_PX = 1.5;
function stillHolds(from, to, W) {
  const was = still.to - still.from, now = to - from;
  return from === still.from && was > 0 && Math.abs(now - was) / now * W < STILL_PX;
}
function drawStill(s, w, h, dpr, W, H) {
  if (!still.canvas || still.canvas.width !== w || still.canvas.height !== h) {
    still.canvas = new OffscreenCanvas(w, h); still.ctx = still.canvas.getContext('2d');
  }
  const g = still.ctx;
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  Object.assign(still, { w, h, dpr, overview: retained.overview, from: s.from, to: s.to });
  still.drawn++;
  const X = (t) => (t - s.from) / (s.to - s.from) * W, bandH = H - 11;
  g.fillStyle = '#0d1117'; g.fillRect(0, 0, W, H);
  g.fillStyle = '#1c2330'; g.fillRect(0, 0, W, bandH);
  // the GPUs' mean utilization over the range
  g.fillStyle = COL.sm; g.globalAlpha = 0.45; g.beginPath();
  for (const [t, res, v] of retained.overview) {
    const x0 = Math.max(0, X(t)), x1 = Math.min(W, X(t + res));
    if (x1 > x0) g.rect(x0, bandH - v / 100 * bandH, Math.max(1, x1 - x0), v / 100 * bandH);
  }
  g.fill(); g.globalAlpha = 1;
  // clock ticks about 90 px apart
  const step = TICKS.find(k => k / (s.to - s.from) * W >= 90) || 86400;
  if (!tickFont) tickFont = '10px ' + getComputedStyle(document.body).fontFamily;
  g.font = tickFont; g.textBaseline = 'bottom';
  for (let t = Math.ceil(s.from / step) * step; t <= s.to; t += step) {
    const x = X(t);
    g.fillStyle = '#30363d'; g.fillRect(Math.round(x), bandH, 1, 3);
    const label = fmtClock(t).replace(step >= 60 ? /:\d\d$/ : /$/, '');
    const lw = g.measureText(label).width;
    if (x - lw / 2 < 0 || x + lw / 2 > W) continue;
    g.fillStyle = '#8b949e'; g.fillText(label, x - lw / 2, H);
  }
  if (still.image) still.image.close();
  still.image = still.canvas.transferToImageBitmap();   // a bitmap draws fast; the canvas is blank again
}
export function drawTrack() {
  const r = trackRect(), dpr = window.devicePixelRatio || 1;
  const w = Math.max(1, Math.round(r.width * dpr)), h = Math.max(1, Math.round(r.height * dpr));
  if (el.track.width !== w || el.track.height !== h) { el.track.width = w; el.track.height = h; }
  const W = r.width, H = r.height;
  tctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  const s = trackSpan();
  el.track.classList.toggle('off', !s);
  // nothing to rewind (yet): the bar's own colour and a faint line, no track to point at
  if (!s) { tctx.fillStyle = '#161b22'; tctx.fillRect(0, 0, W, H); tctx.fillStyle = COL.barBg; tctx.fillRect(0, H - 12, W, 1); return; }
  if (still.w !== w || still.h !== h || still.dpr !== dpr || still.overview !== retained.overview || !stillHolds(s.from, s.to, W)) {
    drawStill(s, w, h, dpr, W, H);
  }
  tctx.setTransform(1, 0, 0, 1, 0, 0);
  tctx.drawImage(still.image, 0, 0);
  tctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  // the chosen window and the moment, on the scale the still layer was drawn at
  const X = (t) => (t - still.from) / (still.to - still.from) * W, bandH = H - 11;
  const win = chosenWindow(), past = isPast();
  const wx0 = X(Math.max(s.from, win.from)), wx1 = X(Math.min(s.to, win.to));
  tctx.fillStyle = past ? COL.past : COL.sm; tctx.globalAlpha = 0.35;
  tctx.fillRect(Math.min(wx0, wx1 - 2), 0, Math.max(2, wx1 - wx0), bandH);
  tctx.globalAlpha = 1;
  const mx = Math.min(W - 1, Math.max(0, X(momentNow())));
  tctx.fillStyle = scrub.gone ? COL.err : scrub.mode === 'playing' ? COL.mem : past ? COL.past : COL.sm;
  tctx.fillRect(Math.round(mx) - 1, 0, 2, bandH);
}

// -- the words -----------------------------------------------------------------------------------
const STATE = { live: 'LIVE', paused: 'PAUSED', playing: 'PLAYING' };
// an element's text (and class; and its title, for a text that may be cut), written only when changed
function put(e, text, cls, titled) {
  if (e.textContent !== text) { e.textContent = text; if (titled) e.title = text; }
  if (cls !== undefined && e.className !== cls) e.className = cls;
}
export function render() {
  const past = isPast(), t = momentNow(), ago = agentNow() - t;
  put(el.state, scrub.gone ? 'GONE' : STATE[scrub.mode], scrub.gone ? 'gone' : scrub.mode);
  const shown = store.past;
  const waiting = past && !scrub.gone && (!shown || Math.abs(shown.moment - t) > 1e-6 || shown.windowS !== scrub.windowS);
  put(el.moment, !past ? fmtClock(t) + ' (now)'
    : fmtClock(t, true) + ' · ' + fmtSpan(Math.max(0, ago)) + ' ago' + (scrub.gone ? ' · no longer retained' : waiting ? ' · asking…' : ''),
  scrub.gone ? 'gone' : '', true);
  put(el.pause, scrub.mode === 'paused' ? 'play' : 'pause');
  el.pause.disabled = !canRewind();
  el.live.disabled = !past;
  put(el.window, 'window ' + fmtWindow(scrub.windowS));
  const exportable = canRewind() && !demo && !scrub.gone;
  el.save.disabled = el.open.disabled = !exportable;
  const r = scrub.retained;
  put(el.retained, r ? 'retained ' + fmtClock(r.from) + ' – ' + (rangeTo() > r.to ? 'now' : fmtClock(r.to)) + ' (' +
      fmtSpan(rangeTo() - r.from) + ')' + (retained.sources.length ? ' · ' + retained.sources.join(', ') : '')
    : scrub.nothingKept ? 'the agent keeps no history: nothing to rewind'
    : retained.error ? 'could not ask what is retained: ' + retained.error : 'asking the agent what it keeps…');
  put(el.msg, timeline.msg || (demo ? 'demo mode: the demo has no agent to export from' : PERFETTO_NOTE), timeline.msgBad ? 'bad' : '', true);
  queueTrack();
}
// The words, at once; while the track is dragged, once an animation frame, with the track: a drag
// moves the moment at every pointer event and shows a new past moment about as often, and each
// would write them again.
let renderQueued = false;
export function renderSoon() {
  if (!timeline.drag) { render(); return; }
  if (renderQueued) return;
  renderQueued = true;
  nextFrame(() => { renderQueued = false; render(); });
}
function say(msg, bad) { timeline.msg = msg; timeline.msgBad = !!bad; render(); }

// -- exporting the chosen window ------------------------------------------------------------------
// the chosen window, within what is retained, and the isolated process if one is
function exportRange() {
  const w = chosenWindow(), from = Math.max(w.from, rangeFrom()), to = Math.min(w.to, rangeTo()) + 1e-6;
  const pid = ui.isolated && ui.isolated.startsWith('p:') ? Number(ui.isolated.slice(2)) : null;
  return { from, to, pid };
}
// Save window (open false) or Open in Perfetto (true): called in the user's click or key
export function exportWindow(open) {
  if (demo) { say('demo mode: the demo has no agent to export from', true); return; }
  if (!canRewind()) {
    say(scrub.nothingKept ? 'the agent keeps nothing to export' : 'still asking the agent what it keeps: try again in a moment', true);
    return;
  }
  if (scrub.gone) { say('this moment is no longer retained: nothing to save', true); return; }
  const { from, to, pid } = exportRange();
  const what = fmtWindow(to - from) + ' up to ' + fmtClock(to, true) + (pid !== null ? ' of pid ' + pid : '');
  timeline.exports++;
  say((open ? 'opening ' : 'saving ') + what + '…');
  const done = (r) => {
    timeline.lastExport = Object.assign({ from, to, pid }, r);
    say('saved ' + r.fileName + ' (' + fmtBytes(r.bytes) + ')' + (open ? r.opened === true ? ' · opened in Perfetto'
      : ' · not opened in Perfetto: ' + r.opened : ''), open && r.opened !== true);
  };
  const failed = (err) => { timeline.lastExport = { from, to, pid, error: err.message }; say(err.message, true); };
  if (open) saveAndOpen(from, to, pid).then(done, failed);
  else fetchTrace(from, to, pid).then((t) => { download(t.buffer, t.fileName); done({ fileName: t.fileName, bytes: t.buffer.byteLength }); }, failed);
}

// -- input ---------------------------------------------------------------------------------------
// the keys the timeline takes (interaction.js hands every key here first): true when taken
export function timelineKey(e) {
  if (e.key === ' ' || e.code === 'Space') togglePause();
  else if (e.key === 'ArrowLeft') step(-1, e.shiftKey);
  else if (e.key === 'ArrowRight') step(1, e.shiftKey);
  else if (e.key === 'End') goLive();
  else if (e.key === 'e' || e.key === 'E') exportWindow(true);
  else return false;
  e.preventDefault();
  return true;
}
export function installTimeline() {
  el.track.addEventListener('pointerdown', (e) => {
    if (e.button !== 0 || !trackSpan()) return;
    timeline.drag = true;
    el.track.setPointerCapture(e.pointerId);
    seek(timeAt(e.clientX));
  });
  el.track.addEventListener('pointermove', (e) => { if (timeline.drag) seek(timeAt(e.clientX)); });
  const up = () => { timeline.drag = false; };
  el.track.addEventListener('pointerup', up);
  el.track.addEventListener('pointercancel', up);
  el.track.addEventListener('wheel', (e) => {
    e.preventDefault();
    const dy = e.deltaMode === 1 ? e.deltaY * 16 : e.deltaMode === 2 ? e.deltaY * 400 : e.deltaY;
    zoomWindow(Math.exp(dy * 0.0015));
  }, { passive: false });
  // a button gives its focus back at once, so space and the arrows keep meaning the timeline's keys
  const button = (b, fn) => b.addEventListener('click', () => { b.blur(); fn(); });
  button(el.pause, togglePause);
  button(el.live, goLive);
  button(el.save, () => exportWindow(false));
  button(el.open, () => exportWindow(true));
  new ResizeObserver(() => { measureTrack(); drawTrack(); }).observe(el.track);
  window.addEventListener('resize', measureTrack);
  render();
}
