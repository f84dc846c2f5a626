// The page's reader of the recorder's answers, on a thread of its own: it asks for each answer
// (GET from the agent with the page's token, or in demo mode from the demo's recorder, through
// the port the page handed it), parses and shapes it into typed arrays (answer_shape.js), and
// hands it to the page with its buffer transferred, not copied. The page asks a window of
// thousands of spans every frame of a drag; fetched, parsed and built into objects on the page's
// thread, those answers took the frame's time, and their text never needs to reach it.
//
// Messages in: {port} (demo mode: a MessagePort answering {ask: {id, path, params}} with {id,
// text}, {id, body} (a columnar window's ArrayBuffer, handed over) or {id, error}); {id, kind, path, params, token} per question, or {id, kind, path, text}
// with the text the page already has. Out: {id, doc, buffer} or {id, error} (the error's message
// as the page shows it); {ready} once, when its modules have loaded.
//
// Constraints: a dedicated module worker of the page's own origin, started by recorder.js;
// requests only as answer_fetch.js makes them; nothing held beyond the answer being read.

import { agentText } from './answer_fetch.js';
import { shapeAnswer } from './answer_shape.js';

let port = null, portId = 0;
const portAsked = new Map();   // id -> {resolve, reject}, until the demo's recorder answers
function viaPort(path, params) {
  return new Promise((resolve, reject) => {
    const id = ++portId;
    portAsked.set(id, { resolve, reject });
    port.postMessage({ ask: { id, path, params } });
  });
}
function onPort(e) {
  const m = e.data, w = portAsked.get(m.id);
  if (!w) return;
  portAsked.delete(m.id);
  if (m.error !== undefined) w.reject(new Error(m.error)); else w.resolve(m.body !== undefined ? m.body : m.text);
}

self.postMessage({ ready: true });
self.onmessage = async (e) => {
  const m = e.data;
  if (m.port) { port = m.port; port.onmessage = onPort; return; }
  let text;
  try {
    text = m.text !== undefined ? m.text : port ? await viaPort(m.path, m.params) : await agentText(m.path, m.params, m.token);
  } catch (err) { self.postMessage({ id: m.id, error: err.message }); return; }
  let shaped;
  try { shaped = shapeAnswer(text, m.kind); } catch (err) { self.postMessage({ id: m.id, error: m.path + ' ' + err.message }); return; }
  const { doc, buffer } = shaped;
  self.postMessage({ id: m.id, doc, buffer }, buffer ? [buffer.buffer] : []);
};
