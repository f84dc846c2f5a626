// Asking the agent's flight recorder: GET api/history and api/window (docs/recorder.md), with the
// page's token, for the timeline, the past moments it shows and the sparklines.
//
// Each kind of question has a channel: at most one request of it is in flight, and a question
// asked while one is waits, replacing any question that was already waiting. So a drag along the
// timeline sends one request after another, each for the latest moment, however fast the pointer
// moves, and every answer is handed over with the question it answers (the caller decides
// whether it still wants it).
//
// The answers are asked for, parsed and shaped into typed arrays (answer_shape.js) off the page's
// thread, by a worker of the page's own (answer_worker.js), and come back without a copy: a drag
// asks for a window of thousands of spans every frame, and fetched, parsed and built into objects
// on the page's thread, those answers took the frame's time. In demo mode the answers come from
// the demo's own recorder (demo_recorder.js), as the same answers the agent sends: through a
// port the reader asks directly (setAnswerPort), or a function the page asks (setAnswerer) until
// there is one. Until the worker has loaded (the page's first questions: what is retained, the
// sparklines), and where none can start, the page asks and reads them itself, the same way.
//
// Constraints: requests as answer_fetch.js makes them (only to the page's own agent, the token in
// a header, no 401 retried here). The ranges asked are the caller's to keep small (docs/ui.md
// says which); nothing here holds more than the answers being read.

import { agentText } from './answer_fetch.js';
import { shapeAnswer, shapeParsed, unpackAnswer } from './answer_shape.js';
import { token } from './login.js';

// demo mode: (path, params) -> Promise of the answer's text (a columnar window's body: an
// ArrayBuffer); null: ask the agent
let answerer = null;
export function setAnswerer(fn) { answerer = fn; }
// demo mode: a MessagePort on which the demo's recorder answers (answer_worker.js's protocol);
// handed to the reader, which then asks it directly (where no reader can start, setAnswerer's
// function keeps answering)
let portGiven = false;
export function setAnswerPort(port) {
  if (reader === null) startReader();
  if (reader === false) { port.close(); return; }
  reader.postMessage({ port }, [port]);
  portGiven = true;
}

export const recorderStats = { asked: 0, answered: 0, failed: 0, lastError: null };

// -- reading answers ----------------------------------------------------------------------------
// the worker that asks for and reads answers (null: not started yet, false: none could start),
// whether it has loaded, and the questions it has, by id
let reader = null, ready = false, readId = 0;
const reading = new Map();
function startReader() {
  try { reader = new Worker(new URL('./answer_worker.js', import.meta.url), { type: 'module' }); } catch (e) { reader = false; return; }
  let heard = false;
  reader.onmessage = (e) => {
    heard = true;
    if (e.data.ready) { ready = true; return; }
    const m = e.data, r = reading.get(m.id);
    if (!r) return;
    reading.delete(m.id);
    if (m.error !== undefined) r.reject(new Error(m.error));
    else r.resolve(unpackAnswer(m.doc, m.buffer, r.kind));
  };
  // a worker that could not start (its script refused): the page asks and reads what it had
  reader.onerror = (e) => {
    if (heard) return;
    e.preventDefault();
    reader.terminate();
    reader = false;
    portGiven = false;
    for (const r of reading.values()) {
      (r.text !== undefined ? Promise.resolve(r.text).then((t) => readHere(t, r.path, r.kind)) : answerHere(r.path, r.params, r.kind))
        .then(r.resolve, r.reject);
    }
    reading.clear();
  };
}
// an answer's text read on the page's thread
function readHere(text, path, kind) {
  let shaped;
  try { shaped = shapeAnswer(text, kind); } catch (err) { throw new Error(path + ' ' + err.message); }
  return unpackAnswer(shaped.doc, shaped.buffer, kind);
}
// an answer asked and read on the page's thread
function answerHere(path, params, kind) {
  return (answerer ? answerer(path, params) : agentText(path, params, token())).then((text) => readHere(text, path, kind));
}
// Promise of the answer to (path, params), read for `kind` ('history', 'window', or null: as parsed)
function answer(path, params, kind) {
  if (reader === null) startReader();
  if (reader === false || !ready) return answerHere(path, params, kind);
  // a demo's function is asked here until its port is handed to the reader, which reads the text
  if (answerer && !portGiven) return answerer(path, params).then((text) => toReader({ kind, path, text }, path, params, kind));
  return toReader({ kind, path, params, token: answerer ? null : token() }, path, params, kind);
}
function toReader(msg, path, params, kind) {
  if (reader === false) return msg.text !== undefined ? Promise.resolve(msg.text).then((t) => readHere(t, path, kind)) : answerHere(path, params, kind);
  return new Promise((resolve, reject) => {
    const id = ++readId;
    reading.set(id, { path, params, kind, text: msg.text, resolve, reject });
    reader.postMessage(Object.assign({ id }, msg));
  });
}

// One kind of question: ask(question) sends it now, or after the request in flight (replacing a
// question waiting before it); onAnswer(question, doc) and onError(question, error) get each
// outcome. `question` is {path, params, ...anything the caller wants back}; `kind` says how its
// answers are read ('history': with their series' index; 'window': with span columns; see
// answer_shape.js), and by default they are as parsed.
export function channel(onAnswer, onError, kind) {
  let busy = false, waiting = null;
  const run = (q) => {
    busy = true;
    recorderStats.asked++;
    answer(q.path, q.params, kind || null)
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
// a window question: [from, to), reduced to `width` pixels, every traced process; `columns`: in the
// columnar form (int64 blocks, for a channel of kind 'window'; a drag asks a window of thousands
// of spans every frame, and their decimal text was most of reading it)
export function windowQuestion(from, to, width, columns) {
  const params = { from: String(from), to: String(to), width: String(width) };
  if (columns) params.format = 'columns';
  return { path: 'api/window', params, from, to, width };
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
