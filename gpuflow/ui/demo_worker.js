// Demo mode's recorder, on a thread of its own, as an agent's recorder runs in the agent's
// process: a generator of the page's variant (demo_source.js), made with the page's start and
// asked for a frame at each time the page made one, makes the page's frames again, and its
// recorder keeps them and answers the timeline's and the sparklines' questions with the JSON text
// an agent's api/history and api/window would send.
//
// Messages in: {start: variant, at: ms} once, first; {tick: ms} for each frame the page made, in
// order; {ask: {id, path, params}} per question; {answerPort} once, a MessagePort on which the
// page's answer reader (answer_worker.js) asks from then on, in the same form, so an answer's text
// goes to the reader without passing the page's thread. Out: {ready} once started; {id, text}, {id,
// body} (a columnar window's ArrayBuffer, handed over) or {id, error} per question (on the port
// for the port's questions).
//
// Constraints: a dedicated module worker of the page's own origin, started by demo.js in demo mode
// only; it reaches nothing but the page that started it. Questions before `start` wait for it.

import { makeDemo } from './demo_source.js';

let src = null;
const early = [];   // [question, where its answer goes] asked before the start
function answer(q, to) {
  src.rec.answer(q.path, q.params).then((r) => (typeof r === 'string' ? to.postMessage({ id: q.id, text: r }) : to.postMessage({ id: q.id, body: r }, [r])),
    (err) => to.postMessage({ id: q.id, error: err.message }));
}
function ask(q, to) { if (src === null) early.push([q, to]); else answer(q, to); }
self.onmessage = (e) => {
  const m = e.data;
  if (m.start !== undefined && src === null) {
    src = makeDemo(m.start, { start: m.at });
    self.postMessage({ ready: true });
    for (const [q, to] of early.splice(0)) answer(q, to);
  } else if (m.tick !== undefined && src !== null) src.frame(m.tick);
  else if (m.ask) ask(m.ask, self);
  else if (m.answerPort) {
    const port = m.answerPort;
    port.onmessage = (pe) => { if (pe.data.ask) ask(pe.data.ask, port); };
  }
};
