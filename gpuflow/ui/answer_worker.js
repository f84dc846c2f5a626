// The page's reader of the recorder's answers, on a thread of its own: each answer's JSON text
// parsed and shaped into typed arrays (answer_shape.js), handed back to the page with its buffer
// transferred, not copied. The page asks a window of thousands of spans every frame of a drag;
// read on its own thread, that took the frame's time.
//
// Messages in: {id, text, kind} per answer; out: {id, doc, buffer} or {id, error}.
//
// Constraints: a dedicated module worker of the page's own origin, started by recorder.js; it
// makes no request and reads nothing but what it is sent.

import { shapeAnswer } from './answer_shape.js';

self.onmessage = (e) => {
  const { id, text, kind } = e.data;
  let shaped;
  try { shaped = shapeAnswer(text, kind); } catch (err) { self.postMessage({ id, error: err.message }); return; }
  const { doc, buffer } = shaped;
  self.postMessage({ id, doc, buffer }, buffer ? [buffer.buffer] : []);
};
