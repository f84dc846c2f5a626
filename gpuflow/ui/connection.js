// The page's link to its agent and the top bar that reports it: the one EventSource on
// api/stream, the connection badge, the host and frame lines, the stale-frame note.
//
// The page runs live (this module's stream) or, with ?demo, on canned frames (demo.js, loaded
// only then); `demo` says which, and asking for a demo never shows live data as one.
// One EventSource per page. Chromium retries by itself after a network error; after a non-200 or
// a wrong content type it gives up (readyState CLOSED) and the page retries with backoff, capped
// at 2 s so a restarted agent is picked up well inside 5 s. Hidden tabs close their stream.
//
// Constraints: no request to anything but api/stream, relative to the page (an agent behind a
// proxy path works); frames go to the handler main.js gives startLive(), which says whether the
// page could apply them. Text reaches the DOM only through textContent.

import { markDirty } from './canvas.js';
import { DASH, isNum } from './format.js';
import { store } from './store.js';

// ?demo[=variant] switches the live stream off and replays canned frames; anything unknown is the
// default variant (still a demo, still bannered: asking for a demo never shows live data as one)
export const DEMO_VARIANTS = ['default', 'shared', 'multigpu', 'traced', 'bench'];
export const demo = (() => {
  const q = new URLSearchParams(location.search);
  if (!q.has('demo')) return null;
  const v = q.get('demo');
  return DEMO_VARIANTS.indexOf(v) >= 0 ? v : 'default';
})();

export const el = {
  conn: document.getElementById('conn'), conntext: document.getElementById('conntext'),
  host: document.getElementById('hostinfo'), frame: document.getElementById('frameinfo'),
  banner: document.getElementById('demo-banner'), tip: document.getElementById('tip'),
  stale: document.getElementById('stale'),
};
export function updateHeader() {
  const f = store.snap;
  if (f) {
    const h = f.host || {};
    el.host.textContent = (h.hostname || DASH) + ' · ' + f.devices.length + ' GPU' + (f.devices.length === 1 ? '' : 's') +
      ' · ' + (f.processes || []).length + ' processes' + ((f.traced || []).length ? ' · ' + f.traced.length + ' traced' : '') +
      ((h.problems || []).length ? ' · ' + h.problems.length + ' problem' + (h.problems.length === 1 ? '' : 's') : '');
    const age = (Date.now() / 1000 - f.timestamp);
    el.frame.textContent = 'seq ' + f.seq + ' · ' + (isNum(age) ? (age < 0.05 ? 'now' : age.toFixed(1) + ' s ago') : '');
    // not live: the picture is the last frame received, and says so
    const stale = !demo && conn.state !== 'live' && conn.state !== 'connecting';
    el.stale.hidden = !stale;
    if (stale) el.stale.textContent = 'showing the last frame received, ' + (isNum(age) ? age.toFixed(0) + ' s ago' : '') +
      (conn.state === 'paused' ? ' (paused while the tab is hidden)' : ' — the agent is not answering');
  }
}

export const conn = { es: null, state: 'connecting', failures: 0, timer: 0, connects: 0 };
export function setConn(state, detail) {
  conn.state = state;
  el.conn.className = state;
  const label = { connecting: 'connecting', live: 'live', reconnecting: 'reconnecting', unreachable: 'agent unreachable',
    paused: 'paused (tab hidden)', demo: 'demo' }[state] || state;
  el.conntext.textContent = detail ? label + ' · ' + detail : label;
  if (!store.snap) markDirty();
  updateHeader();
}
let onFrame = () => true;
// opens the stream; each event's data goes to onFrameText, false from it means start over
export function startLive(onFrameText) {
  onFrame = onFrameText;
  document.addEventListener('visibilitychange', onVisibility);
  setConn('connecting');
  connect();
}
function connect() {
  clearTimeout(conn.timer); conn.timer = 0;
  if (conn.es) { conn.es.close(); conn.es = null; }
  if (document.hidden) { setConn('paused'); return; }
  const es = new EventSource('api/stream');
  conn.es = es; conn.connects++;
  const onMsg = (ev) => {
    if (es !== conn.es) return;
    if (!onFrame(ev.data)) { reopen(); return; }   // a delta we cannot apply: start over with a full frame
    conn.failures = 0;
    if (conn.state !== 'live') setConn('live');
  };
  es.addEventListener('snapshot', onMsg);
  es.onmessage = onMsg;
  es.onerror = () => {
    if (es !== conn.es) return;
    conn.failures++;
    const st = conn.failures >= 3 ? 'unreachable' : 'reconnecting';
    if (es.readyState === EventSource.CLOSED) {
      const delay = Math.min(2000, 250 * Math.pow(2, conn.failures - 1)) * (0.85 + Math.random() * 0.3);
      conn.es = null; es.close();
      setConn(st, 'retry in ' + (delay / 1000).toFixed(1) + ' s');
      conn.timer = setTimeout(connect, delay);
    } else setConn(st);
  };
}
function reopen() { connect(); }
function onVisibility() {
  if (document.hidden) {
    clearTimeout(conn.timer); conn.timer = 0;
    if (conn.es) { conn.es.close(); conn.es = null; }
    setConn('paused');
  } else if (!conn.es) { setConn('connecting'); connect(); }
}
