// The recorder's answers (GET api/history and api/window, docs/recorder.md) read from their JSON
// text (a window's also from the columnar form's body, below) into the form the page draws from:
// numbers in typed arrays, every array of an answer in one buffer, so an answer crosses from the
// worker that reads it (answer_worker.js) to the page by handing the buffer over, not by copying
// it, and the page makes no object per reading or per span.
//
// * A history answer: its series by entity and metric, each (entity, metric)'s series of several
//   resolutions (roll-ups, then samples at the polling rate) joined, oldest first: t, v, lo, hi
//   and res per point (NaN where a reading was not available; lo and hi the mean where the series
//   has no min and max); and the resolution of its newest readings.
// * A window answer: per traced process and lane, an exact lane's span columns (seq, start_us,
//   dur_ns, kind, name, grid_x..z, block_x..z, bytes, direction; -1 for "none", as sent), ordered by
//   start, with what the drawing needs (a kernel flag per span, the running sum of durations, the
//   longest span, the latest end), and the window's kernels and transfers tallied per process; a
//   reduced lane's buckets (count, busy_ns).
//
// shapeAnswer() gives {doc, buffer}: `doc` holds offsets into `buffer` (a Float64Array) where the
// arrays go; unpackAnswer() on the page's side makes the views. A malformed answer throws, and
// the question fails with that message, as one that did not answer JSON does.
//
// Constraints: pure (no DOM, no I/O, no page state): the worker and, where no worker can start,
// the page itself run it. Bounded by the answer: one pass over it, one buffer of its numbers (a
// window's made its size at once, from its lanes' lengths).

import { isNum } from './format.js';
import { DIRECTIONS, SPAN_KINDS } from './stream.js';

export const SPAN_COLUMNS = ['seq', 'start_us', 'dur_ns', 'kind', 'name', 'grid_x', 'grid_y', 'grid_z', 'block_x', 'block_y',
  'block_z', 'bytes', 'direction'];
const SERIES_COLUMNS = ['t', 'v', 'lo', 'hi', 'res'];
function num(x) { return typeof x === 'number' && isFinite(x) ? x : NaN; }
// a window's list of numbers: an array (the JSON form) or a column read from the columnar form
function isList(x) { return Array.isArray(x) || x instanceof Float64Array; }

// a growing list of numbers, one Float64Array at the end (`size`: how many it will hold, when known)
function packer(size) {
  let a = new Float64Array(size || 1 << 14), n = 0;
  return {
    // room for k numbers: their offset
    take(k) {
      if (n + k > a.length) { const b = new Float64Array(Math.max(a.length * 2, n + k)); b.set(a.subarray(0, n)); a = b; }
      const at = n; n += k; return at;
    },
    get array() { return a; },
    done() { return a.length === n ? a : a.slice(0, n); },
  };
}

// the answer's text read for `kind` ('history', 'window', or anything else: as parsed); a window's
// answer may be the columnar form's body instead (an ArrayBuffer: windowOfColumns)
export function shapeAnswer(text, kind) {
  if (typeof text !== 'string') {
    if (kind !== 'window') throw new Error('did not answer JSON');
    return shapeWindow(windowOfColumns(text));
  }
  let doc;
  try { doc = JSON.parse(text); } catch (e) { throw new Error('did not answer JSON'); }
  return shapeParsed(doc, kind);
}
// the same, of an answer already parsed
export function shapeParsed(doc, kind) {
  if (kind === 'history') return shapeHistory(doc);
  if (kind === 'window') return shapeWindow(doc);
  return { doc, buffer: null };
}

// -- history ------------------------------------------------------------------------------------------
function shapeHistory(doc) {
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
  const P = packer(), series = [];
  for (const [key, m] of byKey) {
    for (const [metric, parts] of m) {
      parts.sort((a, b) => (a.t[0] || 0) - (b.t[0] || 0));
      let n = 0;
      for (const p of parts) n += p.t.length;
      const at = P.take(5 * n), a = P.array;
      let i = 0;
      for (const p of parts) {
        const r = num(p.resolution_s) > 0 ? p.resolution_s : 1, lo = Array.isArray(p.min) ? p.min : null, hi = Array.isArray(p.max) ? p.max : null;
        for (let j = 0; j < p.t.length; j++, i++) {
          const v = num(p.value[j]);
          a[at + i] = num(p.t[j]); a[at + n + i] = v;
          a[at + 2 * n + i] = lo ? num(lo[j]) : v; a[at + 3 * n + i] = hi ? num(hi[j]) : v; a[at + 4 * n + i] = r;
        }
      }
      series.push({ key, metric, unit: parts[0].unit, at, n });
    }
  }
  const out = {};
  for (const k in doc) if (k !== 'series') out[k] = doc[k];
  out.series = series;
  out.newest_resolution_s = newestResolution(doc);
  return { doc: out, buffer: P.done() };
}
// the resolution of the newest readings (the series whose last point is newest): how long after
// them a chunk of history still holds a moment (past.js). Not the coarsest series': an older
// stretch at a coarser resolution (roll-ups; the demo's made-up minutes) would make the chunk
// claim moments its newest readings are already too old for, and the plane would show dashes there.
function newestResolution(doc) {
  let t = -Infinity, r = 1;
  for (const s of (doc && doc.series) || []) {
    const n = Array.isArray(s.t) ? s.t.length : 0, last = n ? s.t[n - 1] : null;
    if (!isNum(last) || !isNum(s.resolution_s) || s.resolution_s <= 0) continue;
    if (last > t || (last === t && s.resolution_s > r)) { t = last; r = s.resolution_s; }
  }
  return r;
}

// -- window ------------------------------------------------------------------------------------------
function shapeWindow(doc) {
  const P = packer(windowNumbers(doc)), out = {};
  for (const k in doc) if (k !== 'processes') out[k] = doc[k];
  out.processes = [];
  for (const p of (doc && doc.processes) || []) {
    const q = {}, kernels = new Map(), transfers = new Map();
    for (const k in p) if (k !== 'lanes') q[k] = p[k];
    q.lanes = [];
    for (const L of p.lanes || []) {
      const head = {};
      for (const k in L) if (k !== 'spans' && k !== 'buckets') head[k] = L[k];
      if (L.spans) { head.spans = exactLane(L.spans, P, kernels, transfers); }
      else if (L.buckets) {
        const b = L.buckets, count = b.count || [], busy = b.busy_ns || [], n = count.length;
        const at = P.take(2 * n), a = P.array;
        for (let i = 0; i < n; i++) { a[at + i] = num(count[i]); a[at + n + i] = num(busy[i]); }
        head.buckets = { start_us: b.start_us, width_us: b.width_us, at, n };
      }
      q.lanes.push(head);
    }
    q.kernels = [...kernels.values()];
    q.transfers = [...transfers.values()];
    out.processes.push(q);
  }
  return { doc: out, buffer: P.done() };
}
// how many numbers a window's buffer holds (each exact lane's columns, flags and sums; each reduced
// lane's counts and busy times): made that size at once, it is neither grown nor copied at the end
function windowNumbers(doc) {
  let k = 0;
  for (const p of (doc && doc.processes) || []) for (const L of p.lanes || []) {
    if (L.spans) k += (SPAN_COLUMNS.length + 2) * (isList(L.spans.seq) ? L.spans.seq.length : 0) + 1;
    else if (L.buckets) k += 2 * (isList(L.buckets.count) ? L.buckets.count.length : 0);
  }
  return Math.max(1, k);
}
// One exact lane's columns into the buffer, ordered by start, and tallied: {at, n, names, maxDurNs,
// kernels (how many spans are kernels), end}. The buffer holds, from `at`, each of SPAN_COLUMNS (n
// numbers each), then the kernel flags (n), then the running sums of durations in µs (n + 1).
function exactLane(c, P, kernels, transfers) {
  const n = isList(c.seq) ? c.seq.length : 0, names = (c.names || []).map(String);
  const cols = SPAN_COLUMNS.map(f => (isList(c[f]) ? c[f] : []));
  const start = cols[1];
  let order = null;   // the drawing finds spans by start; the recorder lists them by seq, which follows it
  for (let i = 1; i < n; i++) if (num(start[i]) < num(start[i - 1])) { order = Array.from({ length: n }, (_, j) => j).sort((x, y) => num(start[x]) - num(start[y])); break; }
  const at = P.take((SPAN_COLUMNS.length + 2) * n + 1), a = P.array;
  for (let f = 0; f < SPAN_COLUMNS.length; f++) {
    const col = cols[f], base = at + f * n;
    for (let i = 0; i < n; i++) a[base + i] = num(col[order ? order[i] : i]);
  }
  const kindAt = at + 3 * n, durAt = at + 2 * n, startAt = at + n, flagAt = at + SPAN_COLUMNS.length * n, sumAt = flagAt + n;
  let maxDurNs = 0, kernelCount = 0, end = -Infinity;
  a[sumAt] = 0;
  const lane = laneTally();
  for (let i = 0; i < n; i++) {
    const kind = SPAN_KINDS[a[kindAt + i]] || 'kernel', dur = a[durAt + i];
    const isKernel = kind === 'kernel';
    a[flagAt + i] = isKernel ? 1 : 0;
    a[sumAt + i + 1] = a[sumAt + i] + dur / 1000;
    if (dur > maxDurNs) maxDurNs = dur;
    if (isKernel) kernelCount++;
    const e = a[startAt + i] + dur / 1000;
    if (e > end) end = e;
    if (isKernel) lane.kernel(a[at + 4 * n + i], dur);
    else { const dc = a[at + 12 * n + i]; lane.transfer((dc >= 0 ? DIRECTIONS[dc] : null) || kind, a[at + 11 * n + i], dur); }
  }
  lane.into(names, kernels, transfers);
  return { at, n, names, maxDurNs, kernels: kernelCount, end };
}
// the name of name id `id` of a lane's names, or null
export function spanName(names, id) { return id >= 0 && names[id] !== undefined ? names[id] : null; }
// The window's own top kernels and transfers, as past.js shows them for an exact window: a lane's
// spans tallied by name id and by direction (a lane has a few of each, so no lookup by name per
// span), then added to the window's, kernels by name (a name the lane does not have is one
// kernel, '(unnamed kernel)'), each in the order its first span came. Durations and bytes are
// whole numbers, so the sums are exact in whatever order they are added.
function laneTally() {
  const byId = new Map(), byDirection = new Map();
  return {
    kernel(id, dur) {
      let k = byId.get(id);
      if (!k) { k = { count: 0, total_ns: 0, min_ns: dur, max_ns: dur }; byId.set(id, k); }
      k.count++; k.total_ns += dur;
      if (dur < k.min_ns) k.min_ns = dur;
      if (dur > k.max_ns) k.max_ns = dur;
    },
    transfer(d, bytes, dur) {
      let x = byDirection.get(d);
      if (!x) { x = { count: 0, bytes: 0, total_ns: 0 }; byDirection.set(d, x); }
      x.count++; x.bytes += bytes >= 0 ? bytes : 0; x.total_ns += dur;
    },
    into(names, kernels, transfers) {
      for (const [id, t] of byId) {
        const name = spanName(names, id) || '(unnamed kernel)';
        let k = kernels.get(name);
        if (!k) { k = { name, mangled: null, count: 0, total_ns: 0, min_ns: t.min_ns, max_ns: t.max_ns, timed: 0 }; kernels.set(name, k); }
        k.count += t.count; k.timed += t.count; k.total_ns += t.total_ns;
        if (t.min_ns < k.min_ns) k.min_ns = t.min_ns;
        if (t.max_ns > k.max_ns) k.max_ns = t.max_ns;
      }
      for (const [d, t] of byDirection) {
        let x = transfers.get(d);
        if (!x) { x = { direction: d, count: 0, bytes: 0, total_ns: 0 }; transfers.set(d, x); }
        x.count += t.count; x.bytes += t.bytes; x.total_ns += t.total_ns;
      }
    },
  };
}

// -- the columnar form -----------------------------------------------------------------------------
// A window's answer in the columnar form (format=columns, docs/recorder.md; its one definition is
// gpuflow/transport/window_columns.py): a 16-byte preamble (GFWC, version 1, the header's length),
// the header (the JSON form's document, each lane's lists replaced by where their blocks lie), then
// the columns as little-endian int64 blocks from the next multiple of 8. The JSON form's document
// again, each list a Float64Array read from its block (every value of a window is a whole number
// well inside 2^53): no decimal text to parse, for tens of thousands of numbers a drag asks each
// frame. Every length and place is checked against the body before it is read.
const COLUMNS_LAYOUT = ['format', 'dtype', 'span_columns', 'bucket_columns'];
function windowOfColumns(body) {
  const bad = (why) => new Error('answered a malformed columnar form: ' + why);
  if (!(body instanceof ArrayBuffer) || body.byteLength < 16) throw bad('shorter than its preamble');
  const bytes = new Uint8Array(body), view = new DataView(body);
  if (String.fromCharCode(bytes[0], bytes[1], bytes[2], bytes[3]) !== 'GFWC' || view.getUint32(4, true) !== 1) throw bad('not GFWC version 1');
  const headerEnd = 16 + view.getUint32(8, true);
  if (headerEnd > body.byteLength) throw bad('its header runs past its end');
  let doc;
  try { doc = JSON.parse(new TextDecoder().decode(bytes.subarray(16, headerEnd))); } catch (e) { throw bad('its header is not JSON'); }
  if (!doc || doc.format !== 'columns' || doc.dtype !== '<i8' || !Array.isArray(doc.span_columns) || !Array.isArray(doc.bucket_columns)) throw bad('its header');
  // every int64 of the data as a number, in one array (each block a view of it, made once)
  const data = Math.ceil(headerEnd / 8) * 8, count = Math.max(0, body.byteLength - data) >> 3;
  const words = new Int32Array(body, Math.min(data, body.byteLength), 2 * count), values = new Float64Array(count);
  for (let i = 0; i < count; i++) values[i] = words[2 * i + 1] * 4294967296 + (words[2 * i] >>> 0);
  const spanAt = SPAN_COLUMNS.map(c => doc.span_columns.indexOf(c)), countAt = doc.bucket_columns.indexOf('count'), busyAt = doc.bucket_columns.indexOf('busy_ns');
  if (spanAt.indexOf(-1) >= 0 || countAt < 0 || busyAt < 0) throw bad('its columns');
  // block k of a lane of `rows` values at byte `offset` of the data
  const block = (where, columns, k) => {
    const rows = where.rows, offset = where.offset;
    if (!Number.isInteger(rows) || !Number.isInteger(offset) || rows < 0 || offset < 0 || offset % 8 ||
      offset + 8 * rows * columns > 8 * count) throw bad('a lane\'s blocks lie outside it');
    const at = offset / 8 + rows * k;
    return values.subarray(at, at + rows);
  };
  for (const p of doc.processes || []) for (const L of p.lanes || []) {
    if (L.spans) {
      const s = { names: L.spans.names };
      SPAN_COLUMNS.forEach((c, i) => { s[c] = block(L.spans, doc.span_columns.length, spanAt[i]); });
      L.spans = s;
    } else if (L.buckets) {
      const b = L.buckets;
      L.buckets = { start_us: b.start_us, width_us: b.width_us, count: block(b, doc.bucket_columns.length, countAt),
        busy_ns: block(b, doc.bucket_columns.length, busyAt) };
    }
  }
  for (const k of COLUMNS_LAYOUT) delete doc[k];
  return doc;
}

// -- on the page's side ----------------------------------------------------------------------------
// The shaped answer with its arrays as views of `buffer`: a history answer's `index` (key 'device|
// <uuid>' or 'process|<pid>|<uuid>' -> metric -> {t, v, lo, hi, res, unit}); a window answer's exact
// lanes' `spans` as {n, names, cols: {seq, start_us, ...}, start, dur, kern, cum, maxDurNs, kernels,
// end}, a reduced lane's `buckets` with count and busy_ns.
export function unpackAnswer(doc, buffer, kind) {
  if (kind === 'history') {
    const index = new Map();
    for (const s of doc.series) {
      let m = index.get(s.key);
      if (!m) { m = new Map(); index.set(s.key, m); }
      const v = {}, n = s.n;
      SERIES_COLUMNS.forEach((c, i) => { v[c] = buffer.subarray(s.at + i * n, s.at + (i + 1) * n); });
      v.unit = s.unit;
      m.set(s.metric, v);
    }
    doc.index = index;
  } else if (kind === 'window') {
    for (const p of doc.processes) for (const L of p.lanes) {
      if (L.spans) {
        const s = L.spans, n = s.n, cols = {};
        SPAN_COLUMNS.forEach((c, i) => { cols[c] = buffer.subarray(s.at + i * n, s.at + (i + 1) * n); });
        const flagAt = s.at + SPAN_COLUMNS.length * n;
        Object.assign(s, { cols, start: cols.start_us, dur: cols.dur_ns, kern: buffer.subarray(flagAt, flagAt + n),
          cum: buffer.subarray(flagAt + n, flagAt + 2 * n + 1) });
      } else if (L.buckets) {
        const b = L.buckets;
        b.count = buffer.subarray(b.at, b.at + b.n); b.busy_ns = buffer.subarray(b.at + b.n, b.at + 2 * b.n);
      }
    }
  }
  return doc;
}
