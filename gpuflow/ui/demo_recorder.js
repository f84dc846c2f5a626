// The demo's flight recorder (?demo): what an agent's recorder would keep of the demo's frames,
// answering the page's questions as the agent answers GET api/history and api/window
// (docs/recorder.md), as JSON text (a window asked in the columnar form, format=columns, as that
// form's body), so the timeline, past moments and sparklines take the same path in demo mode as
// live (recorder.js reads the answers; past.js, spark.js, retained.js use them).
//
// It keeps every reading of every demo frame (and of the minutes the demo makes up before its
// start, so the sparklines and the timeline have a past at once) for HISTORY_S seconds, and every
// span the demo generates for `retainS` seconds, one column per field as a collector's recorder
// does. A window answers each lane's spans exactly, or, when a lane has more executions in it
// than the asked width, per pixel bucket: how many start there and how much of it was busy. A
// history question with points= is reduced as the agent reduces it (buckets of (to - from) /
// (points - 1) seconds aligned to multiples of that width: mean, least and greatest).
//
// Constraints: loaded only in demo mode, by demo.js; no request leaves the page. Memory is
// bounded by the retention: columns are compacted as the oldest leave. Times are the demo's wall
// clock (it stands for the agent's).

import { PM_SERIES } from './demo_devices.js';
import { DIRECTIONS, SPAN_KINDS } from './stream.js';

export const HISTORY_S = 900;
const DEVICE_METRICS = [['utilization_gpu_pct', '%'], ['utilization_memory_pct', '%'], ['memory_used_bytes', 'bytes'],
  ['temperature_c', 'C'], ['power_draw_w', 'W'], ['clock_sm_mhz', 'MHz'], ['clock_mem_mhz', 'MHz'],
  ['pcie_tx_bytes_per_s', 'bytes/s'], ['pcie_rx_bytes_per_s', 'bytes/s']];
const PROCESS_METRICS = [['memory_used_bytes', 'bytes'], ['sm_util_pct', '%'], ['mem_util_pct', '%']];
const SPAN_FIELDS = ['seq', 'start_us', 'dur_ns', 'kind', 'name', 'grid_x', 'grid_y', 'grid_z', 'block_x', 'block_y', 'block_z',
  'bytes', 'direction'];

// a growable column of float64
function column() { return { a: new Float64Array(256), n: 0, lo: 0 }; }
function push(c, v) {
  if (c.n === c.a.length) {
    const live = c.n - c.lo, b = new Float64Array(Math.max(256, live * 2));   // compact, then grow if needed
    b.set(c.a.subarray(c.lo, c.n)); c.a = b; c.n = live; c.lo = 0;
  }
  c.a[c.n++] = v;
}
function first(c, t) {   // index of the first value >= t among the kept ones
  let lo = c.lo, hi = c.n;
  while (lo < hi) { const m = (lo + hi) >> 1; if (c.a[m] < t) lo = m + 1; else hi = m; }
  return lo;
}

// JSON's text of a value
const json = (v) => JSON.stringify(v);
// JSON's text of the numbers [a, b) of a typed array, what JSON.stringify writes of them: whole
// numbers (every column of a span, a bucket's counts and busy time) digit by digit into bytes,
// which costs half of what making each a string does (an exact window of a drag holds tens of
// thousands of them); a column holding any other number as JSON.stringify writes it
let digitBytes = new Uint8Array(1 << 16);
const ascii = new TextDecoder();
function numbersText(arr, a, b) {
  const need = (b - a) * 18 + 2;   // a safe integer: a sign and at most 16 digits, then a comma
  if (digitBytes.length < need) digitBytes = new Uint8Array(need * 2);
  const out = digitBytes;
  let o = 0;
  out[o++] = 91;   // [
  for (let i = a; i < b; i++) {
    let x = arr[i];
    if (!Number.isSafeInteger(x)) return JSON.stringify(Array.from(arr.subarray(a, b)));
    if (i > a) out[o++] = 44;   // ,
    if (x < 0) { out[o++] = 45; x = -x; }
    if (x < 1e9) o = digitsOf(out, o, x);
    else { const high = Math.floor(x / 1e9); o = digitsOf(out, o, high); o = digitsOf(out, o, x - high * 1e9, 9); }
  }
  out[o++] = 93;   // ]
  return ascii.decode(out.subarray(0, o));
}
// the decimal digits of whole number x < 2^32 at out[o], at least `width` of them (leading zeros):
// the offset after them
function digitsOf(out, o, x, width) {
  let n = 1;
  for (let y = x; y >= 10; y = (y / 10) >>> 0) n++;
  if (width > n) n = width;
  for (let p = o + n - 1, z = x >>> 0; p >= o; p--) { const q = (z / 10) >>> 0; out[p] = 48 + z - q * 10; z = q; }
  return o + n;
}

export function makeRecorder(retainS) {
  const series = new Map();        // entity|metric -> {entity, metric, unit, t, v, r}: r the seconds each reading stands for
  const entities = new Map();      // entity -> its metrics' series, in the metrics' order
  const traced = new Map();        // pid -> {pid, session, name, lanes: Map key -> lane}
  const lanesOf = new WeakMap();   // the generator's lane -> its recorded lane
  let trimmedAt = -Infinity;       // when the readings older than HISTORY_S were last let go

  // the series of `entity`'s `metrics` (one list of them per `group`), made the first time it is recorded
  function seriesOf(entity, metrics, group) {
    const ekey = entity.join('|'), gkey = ekey + '|' + (group || '');
    let list = entities.get(gkey);
    if (!list) {
      list = metrics.map(([metric, unit]) => {
        const key = ekey + '|' + metric;
        let s = series.get(key);
        if (!s) { s = { entity, metric, unit, t: column(), v: column(), r: column() }; series.set(key, s); }
        return s;
      });
      entities.set(gkey, list);
    }
    return list;
  }
  function record(list, metrics, x, t, every) {
    for (let i = 0; i < metrics.length; i++) {
      const s = list[i], v = x[metrics[i][0]];
      push(s.t, t); push(s.v, v === null || v === undefined ? NaN : v); push(s.r, every);
    }
  }
  // the readings of plain frame `f` at time t (seconds), each standing for `seconds`, and the PM
  // samples of the GPUs that have them (`pm`: [[uuid, {metric: value}]]); those older than
  // HISTORY_S are let go once a second
  function reading(t, f, seconds, pm) {
    for (const d of f.devices) record(seriesOf(['device', d.uuid], DEVICE_METRICS), DEVICE_METRICS, d, t, seconds);
    for (const [uuid, v] of pm || []) record(seriesOf(['device', uuid], PM_SERIES, 'pm'), PM_SERIES, v, t, seconds);
    for (const p of f.processes) for (const a of p.attachments) {
      record(seriesOf(['process', String(p.pid), a.device_uuid], PROCESS_METRICS), PROCESS_METRICS, a, t, seconds);
    }
    if (t >= trimmedAt && t < trimmedAt + 1) return;
    trimmedAt = t;
    for (const s of series.values()) {
      const keep = first(s.t, t - HISTORY_S);
      s.t.lo = keep; s.v.lo = keep; s.r.lo = keep;
    }
  }
  // one span the demo generated, of lane [device, context, stream, label] of traced process spec
  function span(spec, L, s) {
    let lane = lanesOf.get(L);
    if (!lane) {
      let p = traced.get(spec.pid);
      if (!p) { p = { pid: spec.pid, session: spec.session, name: spec.name, lanes: new Map() }; traced.set(spec.pid, p); }
      const key = L.device + ':' + L.context + ':' + L.stream;
      lane = p.lanes.get(key);
      if (!lane) {
        lane = { device: L.device, context: L.context, stream: L.stream, label: L.label, names: [], nameIds: new Map(), end: 0, evicted: false };
        for (const f of SPAN_FIELDS) lane[f] = column();
        p.lanes.set(key, lane);
      }
      lanesOf.set(L, lane);
    }
    let nameId = -1;
    if (s.name !== null) {
      nameId = lane.nameIds.get(s.name);
      if (nameId === undefined) { nameId = lane.names.length; lane.names.push(s.name); lane.nameIds.set(s.name, nameId); }
    }
    const g = s.grid, b = s.block;
    push(lane.seq, s.seq); push(lane.start_us, s.start_us); push(lane.dur_ns, s.dur_ns); push(lane.kind, SPAN_KINDS.indexOf(s.kind));
    push(lane.name, nameId);
    push(lane.grid_x, g ? g[0] : -1); push(lane.grid_y, g ? g[1] : -1); push(lane.grid_z, g ? g[2] : -1);
    push(lane.block_x, b ? b[0] : -1); push(lane.block_y, b ? b[1] : -1); push(lane.block_z, b ? b[2] : -1);
    push(lane.bytes, s.bytes === null ? -1 : s.bytes); push(lane.direction, s.direction === null ? -1 : DIRECTIONS.indexOf(s.direction));
    lane.end = Math.max(lane.end, s.start_us + s.dur_ns / 1000);
    const st = lane.start_us, oldest = s.start_us - retainS * 1e6;
    if (st.a[st.lo] >= oldest) return;
    const keep = first(st, oldest);
    if (keep > st.lo) { lane.evicted = true; for (const f of SPAN_FIELDS) lane[f].lo = keep; }
  }

  function history(q) {
    const from = Number(q.from), to = Number(q.to), points = q.points ? Number(q.points) : null;
    const metrics = q.metrics ? new Set(q.metrics.split(',')) : null;
    let rFrom = null, rTo = null;
    const out = [];
    for (const s of series.values()) {
      if (s.t.n > s.t.lo) {
        rFrom = rFrom === null ? s.t.a[s.t.lo] : Math.min(rFrom, s.t.a[s.t.lo]);
        rTo = rTo === null ? s.t.a[s.t.n - 1] : Math.max(rTo, s.t.a[s.t.n - 1]);
      }
      if (metrics && !metrics.has(s.metric)) continue;
      // one series per resolution, as the agent answers its roll-ups and its samples apart (the
      // minutes made up before the demo began are one reading a second, its own frames faster)
      const a = first(s.t, from), b = first(s.t, to);
      for (let i = a; i < b;) {
        const res = s.r.a[i];
        let j = i + 1;
        while (j < b && s.r.a[j] === res) j++;
        if (points && j - i > points) out.push(reduced(s, i, j, res, from, to, points));
        else {
          const value = new Array(j - i);
          for (let k = i; k < j; k++) { const x = s.v.a[k]; value[k - i] = isNaN(x) ? null : x; }
          out.push({ entity: s.entity, metric: s.metric, unit: s.unit, resolution_s: res, t: Array.from(s.t.a.subarray(i, j)), value });
        }
        i = j;
      }
    }
    return { from, to, sources: ['demo'], retained_from: rFrom, retained_to: rTo, series: out, problems: [] };
  }
  // points [a, b) of series s, one resolution, reduced to `points` buckets
  function reduced(s, a, b, res, from, to, points) {
    const t = s.t.a, v = s.v.a;
    const width = (to - from) / (points - 1), firstK = Math.floor(from / width), lastK = firstK + points - 1;
    const out = { entity: s.entity, metric: s.metric, unit: s.unit, resolution_s: Math.max(width, res), t: [], value: [], min: [], max: [] };
    let i = a;
    while (i < b) {
      const k = Math.min(Math.max(Math.floor(t[i] / width), firstK), lastK);
      let j = i, sum = 0, n = 0, lo = Infinity, hi = -Infinity;
      while (j < b && (k === lastK || t[j] < (k + 1) * width)) {
        const x = v[j++];
        if (isNaN(x)) continue;
        sum += x; n++; if (x < lo) lo = x; if (x > hi) hi = x;
      }
      if (j === i) j = i + 1;
      out.t.push(k * width); out.value.push(n ? sum / n : null); out.min.push(n ? lo : null); out.max.push(n ? hi : null);
      i = j;
    }
    return out;
  }

  // What a window question selects, for both of its answers' forms: the question's figures, and
  // per traced process (by pid) its retained range, whether the window is whole, and each lane
  // with spans in [lo, hi): the lane and its span range [a, b).
  function windowSelection(q) {
    const from = Number(q.from), to = Number(q.to), width = q.width ? Number(q.width) : null, pid = q.pid ? Number(q.pid) : null;
    const lo = from * 1e6, hi = to * 1e6, processes = [];
    for (const p of [...traced.values()].sort((a, b) => a.pid - b.pid)) {
      if (pid !== null && p.pid !== pid) continue;
      let rFrom = Infinity, rTo = -Infinity, complete = true;
      const lanes = [];
      for (const L of p.lanes.values()) {
        const st = L.start_us;
        if (st.n === st.lo) continue;
        rFrom = Math.min(rFrom, st.a[st.lo]); rTo = Math.max(rTo, L.end);
        if (L.evicted && st.a[st.lo] > lo) complete = false;
        const a = first(st, lo), b = first(st, hi);
        if (b > a) lanes.push({ L, a, b });
      }
      if (rFrom !== Infinity) processes.push({ p, rFrom, rTo, complete, lanes });
    }
    return { from, to, width, pid, lo, hi, processes };
  }

  // A window's answer in the columnar form (format=columns; gpuflow/transport/window_columns.py is
  // its one definition): the preamble, the header (the JSON form's document, each lane's lists
  // replaced by where their blocks lie), zeros to a multiple of 8, then each exact lane's 13 span
  // columns, or a reduced lane's counts and busy times, as little-endian int64 blocks.
  function windowColumns(q) {
    const { from, to, width, pid, lo, hi, processes: selected } = windowSelection(q);
    const processes = [], blocks = [];
    let offset = 0;
    for (const { p, rFrom, rTo, complete, lanes: chosen } of selected) {
      const lanes = [];
      for (const { L, a, b } of chosen) {
        const n = b - a;
        const head = { device: L.device, context: L.context, stream: L.stream, label: L.label, executions: n };
        if (width !== null && n > width) {
          const { start_us, width_us, count, busy } = bucketsOf(L, a, b, lo, hi, width);
          head.buckets = { start_us, width_us, rows: width, offset };
          blocks.push([count, 0, width], [busy, 0, width]);
          offset += 16 * width;
        } else {
          head.spans = { rows: n, offset, names: L.names };
          for (const f of SPAN_FIELDS) blocks.push([L[f].a, a, b]);
          offset += 8 * n * SPAN_FIELDS.length;
        }
        lanes.push(head);
      }
      processes.push({ pid: p.pid, session: p.session, name: p.name, retained_from: rFrom / 1e6, retained_to: rTo / 1e6, complete, lanes });
    }
    const header = new TextEncoder().encode(JSON.stringify({ from, to, pid, width, sources: ['demo'], format: 'columns', dtype: '<i8',
      span_columns: SPAN_FIELDS, bucket_columns: ['count', 'busy_ns'], processes, problems: [] }));
    const data = Math.ceil((16 + header.length) / 8) * 8, body = new ArrayBuffer(data + offset), view = new DataView(body);
    new Uint8Array(body).set([71, 70, 87, 67]);   // GFWC
    view.setUint32(4, 1, true); view.setUint32(8, header.length, true);
    new Uint8Array(body, 16, header.length).set(header);
    const words = new Int32Array(body, data);
    let w = 0;
    for (const [col, a, b] of blocks) {
      for (let i = a; i < b; i++) {
        const v = col[i], high = Math.floor(v / 4294967296);
        words[w++] = v - high * 4294967296; words[w++] = high;
      }
    }
    return body;
  }
  // A window's answer, written as its JSON text straight from the columns (the text JSON.stringify
  // makes of the answer's document, byte for byte): a drag asks one a frame, and making each
  // span's fields into arrays of numbers first, to stringify them, was most of the demo recorder's
  // time and of its garbage.
  function window_(q) {
    const { from, to, width, pid, lo, hi, processes: selected } = windowSelection(q);
    const processes = [];
    for (const { p, rFrom, rTo, complete, lanes: chosen } of selected) {
      const lanes = [];
      for (const { L, a, b } of chosen) {
        const n = b - a;
        let body;
        if (width !== null && n > width) body = '"buckets":' + buckets(L, a, b, lo, hi, width);
        else body = '"spans":{"names":' + JSON.stringify(L.names) + SPAN_FIELDS.map(f => ',"' + f + '":' + numbersText(L[f].a, a, b)).join('') + '}';
        lanes.push('{"device":' + json(L.device) + ',"context":' + json(L.context) + ',"stream":' + json(L.stream) + ',"label":' + json(L.label) +
          ',"executions":' + n + ',' + body + '}');
      }
      processes.push('{"pid":' + json(p.pid) + ',"session":' + json(p.session) + ',"name":' + json(p.name) + ',"retained_from":' + json(rFrom / 1e6) +
        ',"retained_to":' + json(rTo / 1e6) + ',"complete":' + complete + ',"lanes":[' + lanes.join(',') + ']}');
    }
    return '{"from":' + json(from) + ',"to":' + json(to) + ',"pid":' + json(pid) + ',"width":' + json(width) + ',"sources":["demo"],"processes":[' +
      processes.join(',') + '],"problems":[]}';
  }
  // a lane's per-pixel buckets [lo, hi) of spans [a, b), as the answer's text
  function buckets(L, a, b, lo, hi, width) {
    const { start_us, width_us, count, busy } = bucketsOf(L, a, b, lo, hi, width);
    return '{"start_us":' + json(start_us) + ',"width_us":' + json(width_us) + ',"count":' + numbersText(count, 0, width) + ',"busy_ns":' + numbersText(busy, 0, width) + '}';
  }
  // and as numbers: how many start in each bucket and how much of it is busy (ns, whole)
  function bucketsOf(L, a, b, lo, hi, width) {
    const w = (hi - lo) / width, count = new Float64Array(width), busy = new Float64Array(width);
    const st = L.start_us.a, dur = L.dur_ns.a;
    for (let i = a; i < b; i++) {
      let j = Math.min(width - 1, Math.floor((st[i] - lo) / w));
      count[j]++;
      let begin = st[i];
      const end = st[i] + dur[i] / 1000;
      while (j < width && begin < end) {
        const edge = lo + (j + 1) * w;
        busy[j] += (Math.min(end, edge) - begin) * 1000;
        begin = edge; j++;
      }
    }
    const most = Math.floor(w * 1000);
    for (let j = 0; j < width; j++) busy[j] = Math.min(Math.floor(busy[j]), most);
    return { start_us: lo, width_us: w, count, busy };
  }

  // recorder.js's answerer: (path, params) -> Promise of the JSON text the agent would send
  // (answered in a task of its own, as an answer from the network arrives)
  function answer(path, params) {
    return new Promise((resolve, reject) => setTimeout(() => {
      if (path === 'api/history') resolve(JSON.stringify(history(params)));
      else if (path === 'api/window') resolve(params.format === 'columns' ? windowColumns(params) : window_(params));
      else reject(new Error('the demo has no ' + path));
    }, 0));
  }
  return { reading, span, answer };
}
