// The page's link to its agent and the top bar that reports it: the one stream (a fetch of
// api/stream), the connection badge, the host and frame lines (what is on the page, and how fresh
// it is), the stale-frame note.
//
// The page runs live (this module's stream) or, with ?demo, on canned frames (demo.js, loaded
// only then); `demo` says which, and asking for a demo never shows live data as one.
// One stream per page, read by eventstream.js, with the agent's token (login.js) in its
// Authorization header: fetch, not EventSource, which cannot send one. A stream that ends or
// drops after bringing frames (the agent ends each after a while) is reopened after the delay
// the agent's "retry:" field gave (2 s), as EventSource would; a failure (network error, a
// non-200, a wrong content type) is retried with backoff, capped at 2 s so a restarted agent is
// picked up well inside 5 s; a 401 shows the login form instead. Hidden tabs close their stream.
//
// Constraints: no request to anything but api/stream (with the view fleet.js asks for, on a hub's
// page), relative to the page (an agent behind a proxy path works), and no credential the browser adds by itself (credentials: 'omit'); frames
// go to the handler main.js gives startLive(), which says whether the page could apply them.
// Text reaches the DOM only through textContent.

import { markDirty } from './canvas.js';
import { readEvents } from './eventstream.js';
import { countsLine, fmtSpan, isNum } from './format.js';
import { askForToken, takeTokenFromUrl, token } from './login.js';
import { shownSnap, store } from './store.js';

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
// The agent sends a frame only when something changed, so a quiet stream is not a stale one: the
// frame line says how long ago the page received the last frame while frames come (within
// QUIET_S), and once the stream has been quiet longer, that nothing has changed for how long
// (since the agent built that frame, or received it, whichever is longer) while the stream is
// open. Not live, the picture is the last frame received, and says so. The counts are of what
// the plane shows (at a past moment, that moment's; the timeline says which).
export const QUIET_S = 2.5;
// an element's text, written only when it changed (a write lays the bar out again)
function put(e, text) { if (e.textContent !== text) e.textContent = text; }
export function isRecording(f) {
  const s = (f && f.sources) || [];
  return s.length === 1 && s[0] === 'recording';
}
export function updateHeader() {
  const f = store.snap;
  if (!f) return;
  put(el.host, countsLine(shownSnap()));
  const got = (performance.now() - store.receivedAt) / 1000, built = Date.now() / 1000 - f.timestamp;
  const open = demo || conn.state === 'live';
  put(el.frame, 'seq ' + f.seq + ' · ' + (!open || got < QUIET_S ? fmtSpan(got) + ' ago'
    : 'unchanged for ' + fmtSpan(isNum(built) ? Math.max(got, built) : got) + ' · agent connected'));
  // an agent serving a recording (gpuflow open: its one source is 'recording') is connected, but
  // what it shows is not live
  if (conn.state === 'live') put(el.conntext, isRecording(f) ? 'recording · not live' : 'live');
  const stale = !demo && conn.state !== 'live' && conn.state !== 'connecting';
  el.stale.hidden = !stale;
  if (stale) el.stale.textContent = 'showing the last frame received, ' + fmtSpan(got) + ' ago' +
    (conn.state === 'paused' ? ' (paused while the tab is hidden)' : ' — the agent is not answering');
}

export const conn = { stream: null, state: 'connecting', failures: 0, timer: 0, connects: 0, retryMs: 2000 };
// what the page streams: api/stream, or (a hub's page, fleet.js) the fleet's overview or one host
let streamPath = 'api/stream';
export function setStreamPath(path) { streamPath = path; if (!demo) connect(); }
export function setConn(state, detail) {
  conn.state = state;
  el.conn.className = state;
  const label = { connecting: 'connecting', live: 'live', reconnecting: 'reconnecting', unreachable: 'agent unreachable',
    paused: 'paused (tab hidden)', demo: 'demo', locked: 'token needed' }[state] || state;
  el.conntext.textContent = detail ? label + ' · ' + detail : label;
  if (!store.snap) markDirty();
  updateHeader();
}
let onFrame = () => true;
// opens the stream; each event's data goes to onFrameText, false from it means start over
export function startLive(onFrameText) {
  onFrame = onFrameText;
  takeTokenFromUrl();
  document.addEventListener('visibilitychange', onVisibility);
  setConn('connecting');
  connect();
}
function stopStream() {
  if (conn.stream) { conn.stream.abort(); conn.stream = null; }
}
function connect() {
  clearTimeout(conn.timer); conn.timer = 0;
  stopStream();
  if (document.hidden) { setConn('paused'); return; }
  const stream = new AbortController();
  conn.stream = stream; conn.connects++;
  const gone = () => stream !== conn.stream;
  const headers = { Accept: 'text/event-stream' };
  const t = token();
  if (t !== null) headers.Authorization = 'Bearer ' + t;
  let frames = 0;
  const onEvent = (type, data) => {
    if (gone() || (type !== 'snapshot' && type !== 'message')) return;
    if (!onFrame(data)) { connect(); return; }   // a delta we cannot apply: start over with a full frame
    frames++;
    conn.failures = 0;
    if (conn.state !== 'live') setConn('live');
  };
  fetch(streamPath, { headers, cache: 'no-store', credentials: 'omit', signal: stream.signal })
    .then((resp) => {
      if (gone()) return;
      if (resp.status === 401) { conn.stream = null; stream.abort(); setConn('locked'); askForToken(connect); return; }
      const type = resp.headers.get('content-type') || '';
      if (!resp.ok || !type.startsWith('text/event-stream')) throw new Error('not a stream: ' + resp.status);
      return readEvents(resp.body, onEvent, (ms) => { conn.retryMs = ms; }, gone);
    })
    .then(() => { if (!gone()) ended(frames); }, () => { if (!gone()) ended(frames); });
}
// The stream ended or dropped: after frames, reopened once the agent's retry delay has passed;
// without, retried with backoff.
function ended(frames) {
  conn.stream = null;
  if (frames > 0) {
    setConn('reconnecting');
    conn.timer = setTimeout(connect, conn.retryMs);
    return;
  }
  conn.failures++;
  const st = conn.failures >= 3 ? 'unreachable' : 'reconnecting';
  const delay = Math.min(2000, 250 * Math.pow(2, conn.failures - 1)) * (0.85 + Math.random() * 0.3);
  setConn(st, 'retry in ' + (delay / 1000).toFixed(1) + ' s');
  conn.timer = setTimeout(connect, delay);
}
function onVisibility() {
  if (document.hidden) {
    clearTimeout(conn.timer); conn.timer = 0;
    stopStream();
    if (conn.state !== 'locked') setConn('paused');
  } else if (!conn.stream && conn.state !== 'locked') { setConn('connecting'); connect(); }
}
