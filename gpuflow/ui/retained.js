// What the agent's recorder retains, asked every ASK_MS: the range the timeline offers and, for
// the track behind it, every GPU's utilization over that range (its mean across GPUs drawn as
// the timeline's overview).
//
// Two small questions: GET api/history for the retained range, utilization only, reduced to
// about a point per OVERVIEW_PX pixels of the track (metrics= and points=; the first time, a
// week back, the longest range the API takes, to learn where the range begins; for readings that
// ended longer ago than that, as a recording's may under gpuflow open, the week before they
// ended), and GET api/window for the last second at a width of one pixel, which says what each
// traced process retains. The range is the union of both, and so are the collectors named as
// keeping it; nothing retained at all (no recorder) is said so.
//
// Constraints: one request of each kind in flight (recorder.js); answers are bounded by the
// reduction (at most the track's width over OVERVIEW_PX points per GPU).

import { isNum } from './format.js';
import { channel, historyQuestion, windowQuestion } from './recorder.js';
import { agentNow, setRetained } from './scrub.js';

export const ASK_MS = 4000, OVERVIEW_PX = 3;
const WEEK_S = 7 * 86400 - 60;

export const retained = { history: null, traced: null, overview: [], asked: 0, answers: 0, error: null, sources: [], heard: false,
  historySources: [], tracedSources: [] };
let onChange = () => {};
export function setOnRetained(fn) { onChange = fn; }

const hist = channel((q, doc) => {
  retained.history = isNum(doc.retained_from) && isNum(doc.retained_to) ? { from: doc.retained_from, to: doc.retained_to } : null;
  retained.historySources = Array.isArray(doc.sources) ? doc.sources.map(String) : [];
  retained.overview = meanOver(doc.index);
  retained.error = null; retained.heard = true;
  settle();
}, (q, err) => { retained.error = err.message; settle(); }, 'history');
const probe = channel((q, doc) => {
  let from = Infinity, to = -Infinity;
  for (const p of doc.processes || []) {
    if (isNum(p.retained_from)) from = Math.min(from, p.retained_from);
    if (isNum(p.retained_to)) to = Math.max(to, p.retained_to);
  }
  retained.traced = from <= to ? { from, to } : null;
  retained.tracedSources = Array.isArray(doc.sources) ? doc.sources.map(String) : [];
  retained.heard = true;
  settle();
}, (q, err) => { retained.error = err.message; settle(); });

// both answers (or failures) in: the union of the two ranges (a failed one as it was before)
let pending = 0;
function settle() {
  if (--pending > 0) return;
  retained.answers++;
  if (!retained.heard) { onChange(); return; }   // never answered yet (a failure): nothing is known
  const h = retained.history, t = retained.traced;
  const from = h && t ? Math.min(h.from, t.from) : h ? h.from : t ? t.from : null;
  const to = h && t ? Math.max(h.to, t.to) : h ? h.to : t ? t.to : null;
  retained.sources = [...new Set([...retained.historySources, ...retained.tracedSources])].sort();   // who keeps what
  setRetained(from, to, retained.sources);
  onChange();
}
// asks both questions; `trackPx` is the timeline's width in CSS px
export function askRetained(trackPx) {
  if (pending > 0) return;
  const now = agentNow(), h = retained.history;
  // readings that ended over a week ago (a recording, gpuflow open): the week before they ended
  const end = h && h.to < now - WEEK_S ? h.to + 1e-3 : now + 1e-3;
  const from = h ? Math.max(h.from, end - WEEK_S) : end - WEEK_S;
  const points = Math.max(16, Math.min(2048, Math.round(trackPx / OVERVIEW_PX)));
  pending = 2;
  retained.asked++;
  hist.ask(historyQuestion(from, end, ['utilization_gpu_pct'], points));
  probe.ask(windowQuestion(now - 1, now + 1e-3, 1));
}

// the overview: [t, resolution, mean utilization across the GPUs that report it] per point
function meanOver(index) {
  const at = new Map();
  for (const [key, m] of index) {
    if (!key.startsWith('device|')) continue;
    const s = m.get('utilization_gpu_pct');
    if (!s) continue;
    for (let i = 0; i < s.t.length; i++) {
      if (!isNum(s.v[i])) continue;
      let e = at.get(s.t[i]);
      if (!e) { e = [s.t[i], s.res[i], 0, 0]; at.set(s.t[i], e); }
      e[2] += s.v[i]; e[3]++;
    }
  }
  return [...at.values()].sort((a, b) => a[0] - b[0]).map(e => [e[0], e[1], e[2] / e[3]]);
}
