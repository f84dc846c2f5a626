// Which moment the plane shows: live (the default), or a past moment inside what the agent's
// recorder retains, paused there or playing forward from it at the wall clock's pace; and the
// chosen window, [moment - window, moment], which the traced lanes show and "Save window" saves.
//
// The moment is always inside the retained range: seeking, stepping and playing are clamped to
// it, so a moment the recorder does not hold is never offered. The range moves forward while the
// page looks (the recorder lets the oldest go); a paused moment it has left stays shown, marked
// as gone (`gone`), until the user moves. Time is the agent's clock (the live frame's timestamp
// plus the time since it arrived), so "x s ago" is right even when the browser's clock is not.
//
// Constraints: no DOM, no drawing; every change goes to the listeners (timeline.js redraws the
// bar, past.js asks the recorder for the moment). The window's width is kept between
// MIN_WINDOW_S and MAX_WINDOW_S.

import { store } from './store.js';

export const MIN_WINDOW_S = 1e-4, MAX_WINDOW_S = 600, DEFAULT_WINDOW_S = 1;
// a recorder whose newest reading is at most this old is still recording: its range reaches now
const LIVE_EDGE_S = 10;

export const scrub = {
  mode: 'live',            // 'live', 'paused' or 'playing'
  moment: null,            // seconds since the epoch while paused; where playing started from
  playWall: 0,             // performance.now() when playing started
  windowS: DEFAULT_WINDOW_S,
  retained: null,          // {from, to, at: agent time when said, sources}; null: not known yet
  nothingKept: false,      // the agent answered, and keeps nothing to rewind
  gone: false,             // the paused moment left the retained range
};
const listeners = [];
export function onScrub(fn) { listeners.push(fn); }
function changed(why) { for (const fn of listeners) fn(why); }

// now, on the agent's clock
export function agentNow() {
  const f = store.snap;
  if (!f || typeof f.timestamp !== 'number') return Date.now() / 1000;
  return f.timestamp + (performance.now() - store.receivedAt) / 1000;
}
export function isPast() { return scrub.mode !== 'live'; }
// the moment shown (asked for): now when live
export function momentNow() {
  if (scrub.mode === 'live') return agentNow();
  if (scrub.mode === 'playing') return Math.min(scrub.moment + (performance.now() - scrub.playWall) / 1000, rangeTo());
  return scrub.moment;
}
// the retained range's ends; its newest end is now while the recorder is still recording
export function rangeFrom() { return scrub.retained ? scrub.retained.from : null; }
export function rangeTo() {
  const r = scrub.retained;
  if (!r) return agentNow();
  return r.to >= r.at - LIVE_EDGE_S ? Math.max(r.to, agentNow()) : r.to;
}
export function canRewind() { return !!scrub.retained; }
function clamp(t) {
  const lo = rangeFrom(), hi = rangeTo();
  return lo === null ? t : Math.min(Math.max(t, lo), hi);
}

// What the recorder said it retains (timeline.js asks it): {from, to} seconds, or null for
// nothing. A paused moment it has left is marked gone, not moved.
export function setRetained(from, to, sources) {
  if (from === null || to === null) { scrub.retained = null; scrub.nothingKept = true; }
  else { scrub.retained = { from, to, at: agentNow(), sources }; scrub.nothingKept = false; }
  const wasGone = scrub.gone;
  scrub.gone = isPast() && (!scrub.retained || momentNow() < scrub.retained.from);
  if (scrub.gone && scrub.mode === 'playing') { scrub.moment = momentNow(); scrub.mode = 'paused'; }
  changed(scrub.gone !== wasGone ? 'gone' : 'retained');
}

// to moment t (clamped), paused there: what a click or a drag on the timeline does
export function seek(t) {
  if (!canRewind()) return;
  scrub.moment = clamp(t);
  scrub.mode = 'paused';
  scrub.gone = false;
  changed('seek');
}
// space: live -> paused now; paused -> playing; playing -> paused where it got to
export function togglePause() {
  if (scrub.mode === 'live') { if (canRewind()) seek(agentNow()); return; }
  if (scrub.mode === 'paused') {
    if (scrub.gone) scrub.moment = clamp(scrub.moment);
    scrub.gone = false;
    scrub.mode = 'playing'; scrub.playWall = performance.now();
  } else { scrub.moment = momentNow(); scrub.mode = 'paused'; }
  changed('pause');
}
// ← → : a window's width back or forward (ten with shift), paused
export function step(dir, big) {
  if (!canRewind()) return;
  const from = scrub.mode === 'live' ? agentNow() : momentNow();
  seek(from + dir * scrub.windowS * (big ? 10 : 1));
}
// End, or the live button
export function goLive() {
  if (scrub.mode === 'live') return;
  scrub.mode = 'live'; scrub.moment = null; scrub.gone = false;
  changed('live');
}
// the wheel over the timeline: the window wider (factor > 1) or narrower, ending at the moment
export function zoomWindow(factor) {
  const w = Math.min(MAX_WINDOW_S, Math.max(MIN_WINDOW_S, scrub.windowS * factor));
  if (w === scrub.windowS) return;
  scrub.windowS = w;
  changed('window');
}
// playing: the moment moves on; at the live edge it becomes live
export function tickPlaying() {
  if (scrub.mode !== 'playing') return;
  if (momentNow() >= agentNow() - 0.05) { goLive(); return; }
  changed('play');
}
// the chosen window, [from, to] seconds, for the lanes and for "Save window"
export function chosenWindow() {
  const to = momentNow();
  return { from: to - scrub.windowS, to };
}
