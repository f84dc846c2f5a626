// Asking the agent's flight recorder: GET api/history and api/window (docs/recorder.md), with the
// page's token, for the timeline, the past moments it shows and the sparklines.
//
// Each kind of question has a channel: at most one request of it is in flight, and a question
// asked while one is waits, replacing any question that was already waiting. So a drag along the
// timeline sends one request after another, each for the latest moment, however fast the pointer
// moves, and every answer is handed over with the question it answers (the caller decides
// whether it still wants it). In demo mode the answers come from the demo's own recorder
// (demo_recorder.js, through setAnswerer), as the same JSON text the agent sends, and take the
// same path from there: JSON.parse, then the handler.
//
// Constraints: requests only to the page's own agent, relative to the page (an agent behind a
// proxy path works), no credential the browser adds by itself; a 401 is not retried here (the
// stream's login form asks for the token, connection.js). The ranges asked are the caller's to
// keep small (docs/ui.md says which); nothing here holds more than the answer being read.

import { token } from './login.js';

// (path, params) -> Promise of the answer's text, in demo mode; null: ask the agent
let answerer = null;
export function setAnswerer(fn) { answerer = fn; }

export const recorderStats = { asked: 0, answered: 0, failed: 0, lastError: null };

async function fetchText(path, params) {
  if (answerer) return answerer(path, params);
  const headers = { Accept: 'application/json' };
  const t = token();
  if (t !== null) headers.Authorization = 'Bearer ' + t;
  const r = await fetch(path + '?' + new URLSearchParams(params).toString(),
    { headers, cache: 'no-store', credentials: 'omit' });
  const text = await r.text();
  if (!r.ok) {
    let why = r.status + ' ' + r.statusText;
    try { const doc = JSON.parse(text); if (doc && typeof doc.error === 'string') why = doc.error; } catch (e) { /* not JSON */ }
    throw new Error('the agent could not answer ' + path + ': ' + why);
  }
  return text;
}

// One kind of question: ask(question) sends it now, or after the request in flight (replacing a
// question waiting before it); onAnswer(question, doc) and onError(question, error) get each
// outcome. `question` is {path, params, ...anything the caller wants back}.
export function channel(onAnswer, onError) {
  let busy = false, waiting = null;
  const run = (q) => {
    busy = true;
    recorderStats.asked++;
    fetchText(q.path, q.params)
      .then((text) => { try { return JSON.parse(text); } catch (e) { throw new Error(q.path + ' did not answer JSON'); } })
      .then((doc) => { recorderStats.answered++; onAnswer(q, doc); },
        (err) => { recorderStats.failed++; recorderStats.lastError = err.message; onError(q, err); })
      .finally(() => {   // a handler's own exception still reaches the page's error reporting
        busy = false;
        if (waiting) { const next = waiting; waiting = null; run(next); }
      });
  };
  return {
    ask(q) { if (busy) waiting = q; else run(q); },
    get busy() { return busy || waiting !== null; },
  };
}

// a history question: [from, to) seconds since the epoch, some metrics, reduced to `points`
export function historyQuestion(from, to, metrics, points) {
  const params = { from: String(from), to: String(to) };
  if (metrics) params.metrics = metrics.join(',');
  if (points) params.points = String(points);
  return { path: 'api/history', params, from, to };
}
// a window question: [from, to), reduced to `width` pixels, every traced process
export function windowQuestion(from, to, width) {
  return { path: 'api/window', params: { from: String(from), to: String(to), width: String(width) }, from, to, width };
}

// A history answer's series by entity and metric: key 'device|<uuid>' or 'process|<pid>|<uuid>'
// -> metric -> {t, v, lo, hi, res} (Float64Arrays; NaN where the reading was not available;
// lo/hi only for reduced series and roll-ups). Several series of one (entity, metric) (roll-ups,
// then samples at the polling rate) become one, oldest first, each point with its resolution.
export function seriesIndex(doc) {
  const byKey = new Map();
  for (const s of (doc && doc.series) || []) {
    if (!Array.isArray(s.entity) || !Array.isArray(s.t) || !Array.isArray(s.value)) continue;
    const key = s.entity.join('|');
    let m = byKey.get(key);
    if (!m) { m = new Map(); byKey.set(key, m); }
    const parts = m.get(s.metric) || [];
    parts.push(s);
    m.set(s.metric, parts);
  }
  for (const m of byKey.values()) for (const [metric, parts] of m) m.set(metric, joined(parts));
  return byKey;
}
function num(x) { return typeof x === 'number' && isFinite(x) ? x : NaN; }
function joined(parts) {
  parts.sort((a, b) => (a.t[0] || 0) - (b.t[0] || 0));
  let n = 0;
  for (const p of parts) n += p.t.length;
  const t = new Float64Array(n), v = new Float64Array(n), res = new Float64Array(n);
  const lo = new Float64Array(n), hi = new Float64Array(n);
  let i = 0;
  for (const p of parts) {
    const r = num(p.resolution_s) > 0 ? p.resolution_s : 1;
    for (let j = 0; j < p.t.length; j++, i++) {
      t[i] = num(p.t[j]); v[i] = num(p.value[j]); res[i] = r;
      lo[i] = p.min ? num(p.min[j]) : v[i]; hi[i] = p.max ? num(p.max[j]) : v[i];
    }
  }
  return { t, v, lo, hi, res, unit: parts[0].unit };
}
// index of the last point at or before `at` (seconds), or -1
export function lastAtOrBefore(t, at) {
  let lo = 0, hi = t.length;
  while (lo < hi) { const m = (lo + hi) >> 1; if (t[m] <= at) lo = m + 1; else hi = m; }
  return lo - 1;
}
// A series' reading at moment `at`: the value of the last point at or before it (NaN: not
// available then), or undefined when there is none, or it is older than twice its resolution
// and half a second (a poll a little late still counts; a series that had stopped does not).
export const STALE_AFTER = (res) => res * 2 + 0.5;
export function valueAt(s, at) {
  if (!s) return undefined;
  const i = lastAtOrBefore(s.t, at);
  if (i < 0 || at - s.t[i] > STALE_AFTER(s.res[i])) return undefined;
  return s.v[i];
}
