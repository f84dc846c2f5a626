// The spread across SMs that CUPTI's PM sampling measures (issue 21; docs/gpu-metrics.md, "PM
// sampling"), per GPU at the moment the plane shows, for the SM grid's band (sm_grid.js): SM
// active and warps in flight, each the mean over the SMs and the least and the busiest SM.
//
// When the agent samples GPU metrics (gpu_metrics_layout.js gpuMetricsOn), it asks GET api/history
// for the SM metrics of the last SPAN_S seconds up to the moment, reduced to buckets of BUCKET_S
// (the transport reduces: a bucket's mean, least and greatest), and keeps per GPU the newest bucket
// with readings: the band is the least of the least SM's values to the greatest of the busiest
// SM's over that bucket, the mean the mean SM's mean, as the rows above a traced process's lanes
// draw them. A reading older than recorder.js's STALE_AFTER its resolution is none. Live it asks
// again every LIVE_REFRESH_MS, at a past moment when the moment moves; one question in flight.
//
// Constraints: no drawing; a picture reads what was last answered and never waits; nothing here
// is per SM: PM sampling measures the SMs' mean, least and greatest, never which SM.

import { markDirty } from './canvas.js';
import { channel, historyQuestion, lastAtOrBefore, STALE_AFTER } from './recorder.js';
import { isPast, momentNow } from './scrub.js';

export const BUCKET_S = 0.25;
const SPAN_S = 5 * BUCKET_S, LIVE_REFRESH_MS = 250;
// [what the band shows, the series of its mean, least SM, busiest SM]
export const SPREADS = [['sm', 'pm_sm_active_pct', 'pm_sm_active_min_pct', 'pm_sm_active_max_pct'],
  ['warps', 'pm_warps_active_pct', 'pm_warps_active_min_pct', 'pm_warps_active_max_pct']];
const METRICS = SPREADS.flatMap(s => s.slice(1));

// uuid -> {at, res, sm: {avg, min, max}, warps: {...}}; what the last answer said, for its moment
export const pm = { byUuid: new Map(), moment: null, askedAt: 0, answers: 0, error: null };
const ch = channel((q, doc) => {
  pm.byUuid = spreadsOf(doc.index, q.to);
  pm.moment = q.to; pm.answers++; pm.error = null;
  markDirty();
}, (q, err) => { pm.error = err.message; }, 'history');

// the newest bucket at or before `at` of each GPU's SM series in a history answer's index
function spreadsOf(index, at) {
  const out = new Map();
  for (const [key, m] of index) {
    if (!key.startsWith('device|')) continue;
    const got = {};
    let any = false;
    for (const [what, mean, least, busiest] of SPREADS) {
      const s = m.get(mean), lo = m.get(least), hi = m.get(busiest);
      const i = s ? newest(s, at) : -1;
      if (i < 0) continue;
      const j = lo ? lastAtOrBefore(lo.t, s.t[i]) : -1, k = hi ? lastAtOrBefore(hi.t, s.t[i]) : -1;
      got[what] = { avg: s.v[i], min: j >= 0 && lo.t[j] === s.t[i] ? lo.lo[j] : NaN, max: k >= 0 && hi.t[k] === s.t[i] ? hi.hi[k] : NaN };
      got.at = s.t[i]; got.res = s.res[i];
      any = true;
    }
    if (any) out.set(key.slice(7), got);
  }
  return out;
}
// the newest point of series s at or before `at` with a reading, not stale there; -1: none
function newest(s, at) {
  for (let i = lastAtOrBefore(s.t, at); i >= 0; i--) {
    if (at - s.t[i] > STALE_AFTER(s.res[i])) return -1;
    if (s.v[i] === s.v[i]) return i;
  }
  return -1;
}

// asks for the moment shown if the last answer is not for it (live: not fresh enough)
export function wantSpread() {
  const at = momentNow();
  if (at === null || at === undefined) return;
  if (isPast() ? pm.moment === at : performance.now() - pm.askedAt < LIVE_REFRESH_MS) return;
  if (ch.busy) return;
  pm.askedAt = performance.now();
  ch.ask(historyQuestion(at - SPAN_S, at, METRICS, Math.round(SPAN_S / BUCKET_S) + 1));
}
// GPU uuid's spread at the moment shown, or null (no samples there, or not asked yet)
export function spreadOf(uuid) {
  const got = pm.byUuid.get(uuid), at = momentNow();
  return got && got.at <= at && at - got.at <= STALE_AFTER(got.res) ? got : null;
}
