// Demo mode's stand-in for the agent, on a thread of its own: the variant's generator and recorder
// (demo_source.js) run here, as an agent's work runs in its own process, and the page gets what an
// agent would send it: each frame (every interval, as the stream would bring it) and the text of
// each answer its recorder gives (as api/history and api/window would), by message.
//
// Messages in: {start: variant} once, first; {ask: {id, path, params}} per question; {answerPort}
// once, a MessagePort on which the page's answer reader (answer_worker.js) asks from then on, in
// the same form, so an answer's text goes to the reader without passing the page's thread. Out:
// {frame} per frame (its JSON text, as a stream event's data), {id, text} or {id, error} per
// question (on the port for the port's questions).
//
// Constraints: a dedicated module worker of the page's own origin, started by demo.js in demo mode
// only; it reaches nothing but the page that started it. Questions before `start` wait for it.

import { makeDemo } from './demo_source.js';

let src = null;
const early = [];
function answer(q, to) {
  src.rec.answer(q.path, q.params).then((text) => to.postMessage({ id: q.id, text }),
    (err) => to.postMessage({ id: q.id, error: err.message }));
}
self.onmessage = (e) => {
  const m = e.data;
  if (m.start !== undefined && src === null) {
    src = makeDemo(m.start);
    const tick = () => self.postMessage({ frame: JSON.stringify(src.frame()) });
    tick();
    setInterval(tick, src.interval);
    for (const [q, to] of early.splice(0)) answer(q, to);
  } else if (m.ask) {
    if (src === null) early.push([m.ask, self]); else answer(m.ask, self);
  } else if (m.answerPort) {
    const port = m.answerPort;
    port.onmessage = (pe) => { if (pe.data.ask) { if (src === null) early.push([pe.data.ask, port]); else answer(pe.data.ask, port); } };
  }
};
