// The stream's compact form (schema 4, docs/snapshot.md "The stream"): the page's one reader of it.
//
// What the agent sends on api/stream, read back into the plain form (schema 3, what
// /api/snapshot serves): per traced process (by host, session and pid) a names table, kernels
// and spans naming an id in it, spans as arrays with seq and start relative to the span before.
// A delta's left-out parts are the frame before's, its kernels are only those that changed, its
// names only those added.
// read() does for the page what gpuflow.transport.wire.StreamReader does in Python and gives the
// same plain frames (tests/ui/test_stream_reader.py feeds both the agent's own encoding). A plain
// frame (schema 1 or 3: the demo's frames, the recorded H200 stream) passes through, with only the
// parts a delta left out filled in. Frames of schemas 1 and 2 name no host (one host, unnamed).
//
// Constraints: the constants below are gpuflow/transport/wire.py's (and the snapshot's schema
// and kernel order), each written here once, as a literal on one line of its own:
// tests/transport/test_wire_page.py reads them from this text and fails when they differ.
// Pure: no DOM, no I/O. read() returns a new state and never changes the one it was given, so a
// frame that cannot be read changes nothing.

export const PLAIN_SCHEMA = 3;
export const STREAM_SCHEMA = 4;
export const COMPACT_SCHEMAS = [2, 4];
export const FULL = 'full';
export const DELTA = 'delta';
export const SPAN_KINDS = ['kernel', 'memcpy', 'memset'];
export const DIRECTIONS = ['h2d', 'd2h', 'd2d', 'p2p', 'h2h', 'memset'];
export const OMITTABLE = ['host', 'hosts', 'sources', 'devices', 'processes', 'traced_retired'];
export const KERNEL_ORDER = [['total_ns', 'desc'], ['count', 'desc'], ['name', 'asc'], ['mangled', 'asc']];

// why read() refused a frame (`why`): a delta on another base than the last frame read,
// something that is not a snapshot at all, or a snapshot that cannot be decoded against what was
// read before
export class FrameError extends Error {
  static OUT_OF_STEP = 'out of step';
  static NOT_A_SNAPSHOT = 'not a snapshot';
  static UNDECODABLE = 'undecodable';
  constructor(why, detail) { super(why + ': ' + detail); this.why = why; }
}

// the state before the first frame
export const nothingRead = Object.freeze({ seq: null, frame: null, processes: new Map() });

// the agent's order of a kernel table (gpuflow.core.snapshot.kernel_order): a total order
const ORDER = KERNEL_ORDER.map(([field, dir]) => [field, dir === 'desc' ? -1 : 1]);
export function kernelOrder(a, b) {
  for (const [field, sign] of ORDER) {
    const x = a[field], y = b[field];
    if (x !== y) return (x < y ? -1 : 1) * sign;
  }
  return 0;
}

// the kernel launches' order (by name, then mangled name), as kernelOrder compares names
function byText(x, y) { return x === y ? 0 : (x < y ? -1 : 1); }

function bad(why) { throw new FrameError(FrameError.UNDECODABLE, why); }
function geom(g) { return g === undefined || g === null ? null : typeof g === 'number' ? [g, 1, 1] : g; }
function nameAt(names, id) {
  if (id === undefined || id === null) return null;
  const e = names[id];
  return e ? e : bad('name id ' + id + ' is not in the table');
}
function direction(c) { return c === undefined || c === null ? null : DIRECTIONS[c] || bad('direction ' + c); }

// one lane's span arrays back to span objects (docs/snapshot.md, Span)
function decodeSpans(rows, names) {
  const out = new Array(rows.length);
  let seq = 0, start = 0;
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i], k = r[3];
    seq += r[0]; start += r[1];
    let s;
    if (typeof k === 'string') {   // outside the usual shapes: every field
      const n = nameAt(names, r[4]);
      s = { seq, kind: k, start_us: start, dur_ns: r[2], name: n && n[0], grid: geom(r[5]), block: geom(r[6]), bytes: r[7] ?? null, direction: r[8] ?? null };
    } else if (SPAN_KINDS[k] === 'kernel') {
      const n = nameAt(names, r[4]);
      s = { seq, kind: 'kernel', start_us: start, dur_ns: r[2], name: n && n[0], grid: geom(r[5]), block: geom(r[6]), bytes: null, direction: null };
    } else if (SPAN_KINDS[k] !== undefined) {
      s = { seq, kind: SPAN_KINDS[k], start_us: start, dur_ns: r[2], name: null, grid: null, block: null, bytes: r[4] ?? null, direction: direction(r[5]) };
    } else bad('span kind ' + k);
    out[i] = s;
  }
  return out;
}

function laneHead(L) {
  const h = {};
  for (const k in L) if (k !== 'spans' && k !== 'spans_skipped') h[k] = L[k];
  return h;
}

// One frame (parsed JSON) after `state`: { frame: the plain form, state: what the next frame is
// read against }. Throws a FrameError; anything else thrown means the frame's shape is broken.
export function read(state, f) {
  const isDelta = f.frame === DELTA;
  if (isDelta && Array.isArray(f.traced) && (state.frame === null || f.base_seq !== state.seq)) {
    throw new FrameError(FrameError.OUT_OF_STEP, 'delta on base ' + f.base_seq + ', last frame read ' + state.seq);
  }
  const frame = Object.assign({}, f);
  if (isDelta && state.frame) for (const k of OMITTABLE) if (!(k in frame)) frame[k] = state.frame[k];
  if (!Array.isArray(frame.devices)) throw new FrameError(FrameError.NOT_A_SNAPSHOT, 'no devices');
  const compact = COMPACT_SCHEMAS.indexOf(frame.schema) >= 0;
  const processes = new Map(), traced = [];
  for (const t of frame.traced || []) {
    const key = (t.host ?? '') + '/' + t.session + '/' + t.pid;
    const old = isDelta && !t.reset ? state.processes.get(key) : undefined;   // reset: a new process, same pid
    const plain = {};
    for (const k in t) if (k !== 'names' && k !== 'kernels' && k !== 'lanes' && k !== 'kernel_launches') plain[k] = t[k];
    let names = [], kernels = null, launches = null;
    if (compact) {
      const add = t.names || [];
      names = old ? (add.length ? old.names.concat(add) : old.names) : add;
      if (isDelta && !('kernels' in t) && !old) bad('kernels left out for a process the page does not have');
      // a delta carries only the kernels that changed: update the table by name id
      kernels = old ? new Map(old.kernels) : new Map();
      for (const k of t.kernels || []) {
        const n = nameAt(names, k.id) || bad('kernel without a name id');
        const { id, ...fields } = k;
        kernels.set(id, Object.assign({ name: n[0], mangled: n[1] }, fields));
      }
      plain.kernels = old ? [...kernels.values()].sort(kernelOrder) : [...kernels.values()];
      // kernel launches likewise, only those that changed, kept in mangled order (a launch is
      // named by its kernel entry's mangled name)
      launches = old && old.launches ? new Map(old.launches) : new Map();
      for (const x of t.kernel_launches || []) {
        const n = nameAt(names, x.id) || bad('kernel launch without a name id');
        const { id, ...fields } = x;
        launches.set(id, Object.assign({ mangled: n[1] }, fields));
      }
      plain.kernel_launches = [...launches.values()].sort((a, b) => byText(a.mangled, b.mangled));
    } else {
      plain.kernels = t.kernels;
      plain.kernel_launches = t.kernel_launches || [];
    }
    let heads;
    if (isDelta && !('lanes' in t)) {   // every lane as in the base frame: its head, no new span
      if (!old) bad('lanes left out for a process the page does not have');
      heads = old.lanes;
      plain.lanes = heads.map(h => Object.assign({}, h, { spans: [], spans_skipped: 0 }));
    } else {
      plain.lanes = (t.lanes || []).map(L => Object.assign({}, L,
        { spans: compact ? decodeSpans(L.spans || [], names) : (L.spans || []) }));
      heads = plain.lanes.map(laneHead);
    }
    processes.set(key, { names, kernels, launches, lanes: heads });
    traced.push(plain);
  }
  frame.traced = traced;
  return { frame, state: { seq: frame.seq, frame, processes } };
}
