// Asking the agent's flight recorder: GET api/history and api/window (docs/recorder.md), with the
// page's token, for the timeline, the past moments it shows and the sparklines.
//
// Each kind of question has a channel: at most one request of it is in flight, and a question
// asked while one is waits, replacing any question that was already waiting. So a drag along the
// timeline sends one request after another, each for the latest moment, however fast the pointer
// moves, and every answer is handed over with the question it answers (the caller decides
// whether it still wants it). In demo mode the answers come from the demo's own recorder
// (demo_recorder.js, through setAnswerer), as the same JSON text the agent sends, and take the
// same path from there.
//
// An answer's text is read off the page's thread, by a worker of the page's own
// (answer_worker.js): parsed, and a history or window answer shaped into typed arrays
// (answer_shape.js), which come back without a copy. A drag asks for a window of thousands of
// spans every frame; parsed and built into objects on the page's thread, its answers took the
// frame's time. Where no worker can start, the page reads them itself, the same way.
//
// Constraints: requests only to the page's own agent, relative to the page (an agent behind a
// proxy path works), no credential the browser adds by itself; a 401 is not retried here (the
// stream's login form asks for the token, connection.js). The ranges asked are the caller's to
// keep small (docs/ui.md says which); nothing here holds more than the answer being read.

import { shapeAnswer, shapeParsed, unpackAnswer } from './answer_shape.js';
import { token } from './login.js';

// (path, params) -> Promise of the answer's text, in demo mode; null: ask the agent
let answerer = null;
export function setAnswerer(fn) { answerer = fn; }

export const recorderStats = { asked: 0, answered: 0, failed: 0, dropped: 0, lastError: null };

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

// -- reading answers ----------------------------------------------------------------------------
// the worker that reads answers (null: not started yet, false: none could start) and the
// answers it is reading, by id
let reader = null, readId = 0;
const reading = new Map();
function startReader() {
  try { reader = new Worker(new URL('./answer_worker.js', import.meta.url), { type: 'module' }); } catch (e) { reader = false; return; }
  let heard = false;
  reader.onmessage = (e) => {
    heard = true;
    const m = e.data, r = reading.get(m.id);
    if (!r) return;
    reading.delete(m.id);
    if (m.error !== undefined) r.reject(new Error(m.error));
    else r.resolve(unpackAnswer(m.doc, m.buffer, r.kind));
  };
  // a worker that could not start (its script refused): the page reads what was sent to it
  reader.onerror = (e) => {
    if (heard) return;
    e.preventDefault();
    reader.terminate();
    reader = false;
    for (const r of reading.values()) readHere(r.text, r.kind).then(r.resolve, r.reject);
    reading.clear();
  };
}
function readHere(text, kind) {
  return new Promise((resolve) => {
    const { doc, buffer } = shapeAnswer(text, kind);
    resolve(unpackAnswer(doc, buffer, kind));
  });
}
// Promise of an answer's text read for `kind` ('history', 'window', or null: as parsed)
function readAnswer(text, kind) {
  if (reader === null) startReader();
  if (reader === false) return readHere(text, kind);
  return new Promise((resolve, reject) => {
    const id = ++readId;
    reading.set(id, { text, kind, resolve, reject });
    reader.postMessage({ id, text, kind });
  });
}

// One kind of question: ask(question) sends it now, or after the request in flight (replacing a
// question waiting before it); onAnswer(question, doc) and onError(question, error) get each
// outcome. `question` is {path, params, ...anything the caller wants back}; `kind` says how its
// answers are read ('history': with their series' index; 'window': with span columns; see
// answer_shape.js), and by default they are as parsed.
//
// Asking and reading overlap: once an answer's text is in, the next question goes out while the
// text is read. An answer that arrives while an older one is still being read waits for it, and
// a newer one replaces it unread (counted in recorderStats.dropped): a drag reads only the latest
// moment's answer, however far behind the reading falls.
export function channel(onAnswer, onError, kind) {
  let busy = false, waiting = null;        // the request in flight; the question waiting for it
  let reading = false, unread = null;      // an answer being read; the newest one waiting to be
  const failed = (q, err) => { recorderStats.failed++; recorderStats.lastError = err.message; onError(q, err); };
  const read = (q, text) => {
    reading = true;
    readAnswer(text, kind || null)
      .then((doc) => { recorderStats.answered++; onAnswer(q, doc); },
        (err) => failed(q, new Error(q.path + ' ' + err.message)))
      .finally(() => {   // a handler's own exception still reaches the page's error reporting
        reading = false;
        if (unread) { const [nq, nt] = unread; unread = null; read(nq, nt); }
      });
  };
  const run = (q) => {
    busy = true;
    recorderStats.asked++;
    fetchText(q.path, q.params)
      .then((text) => {
        if (!reading) { read(q, text); return; }
        if (unread) recorderStats.dropped++;
        unread = [q, text];
      }, (err) => failed(q, err))
      .finally(() => {
        busy = false;
        if (waiting) { const next = waiting; waiting = null; run(next); }
      });
  };
  return {
    ask(q) { if (busy) waiting = q; else run(q); },
    // an answer of this channel is still to come
    get busy() { return busy || waiting !== null || reading || unread !== null; },
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

// A parsed history answer's series by entity and metric: key 'device|<uuid>' or
// 'process|<pid>|<uuid>' -> metric -> {t, v, lo, hi, res, unit} (Float64Arrays; NaN where the
// reading was not available; lo/hi the mean where the series has none). Several series of one
// (entity, metric) (roll-ups, then samples at the polling rate) become one, oldest first, each
// point with its resolution. A channel of kind 'history' hands its answers over with this index
// already made, off the page's thread (doc.index).
export function seriesIndex(doc) {
  const { doc: shaped, buffer } = shapeParsed(doc, 'history');
  return unpackAnswer(shaped, buffer, 'history').index;
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
