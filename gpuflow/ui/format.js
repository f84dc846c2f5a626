// Numbers and names as the page writes them: thousands grouped, bytes, rates, durations, exit
// statuses, kernel names (short, and from the function name on), the folded roll-up's lines, the
// time axis's labels, how long ago, wall-clock times, and the top bar's counts.
//
// Constraints: pure functions of their arguments (two small caches aside), no DOM. A value that
// is not available is the caller's to draw as DASH, never 0.

export const DASH = '\u2014';

const SIGNALS = {1: 'SIGHUP', 2: 'SIGINT', 3: 'SIGQUIT', 4: 'SIGILL', 6: 'SIGABRT', 7: 'SIGBUS',
  8: 'SIGFPE', 9: 'SIGKILL', 11: 'SIGSEGV', 13: 'SIGPIPE', 15: 'SIGTERM'};

export function grp(n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ','); }
export function compact(n) {
  if (n < 1e3) return String(n);
  if (n < 1e6) return (n / 1e3).toFixed(n < 1e4 ? 1 : 0) + 'k';
  if (n < 1e9) return (n / 1e6).toFixed(n < 1e7 ? 1 : 0) + 'M';
  return (n / 1e9).toFixed(1) + 'G';
}
export const KI = 1024, MI = KI * KI, GI = MI * KI, TI = GI * KI;
export function unitFor(b) { return b >= TI ? [TI, 'TiB'] : b >= GI ? [GI, 'GiB'] : b >= MI ? [MI, 'MiB'] : b >= KI ? [KI, 'KiB'] : [1, 'B']; }
export function num(v, div) { const x = v / div; return div === 1 ? String(Math.round(x)) : x >= 100 ? x.toFixed(0) : x.toFixed(1); }
export function fmtBytes(b) { const [d, u] = unitFor(b); return num(b, d) + ' ' + u; }
export function fmtRate(b) {
  if (b >= 1e9) return (b / 1e9).toFixed(1) + ' GB/s';
  if (b >= 1e6) return (b / 1e6).toFixed(1) + ' MB/s';
  if (b >= 1e3) return (b / 1e3).toFixed(0) + ' kB/s';
  return Math.round(b) + ' B/s';
}
// bytes a second as a figure of GB/s, for labels that say the unit once ("in 2.3 · out 0.4 of 63.0
// GB/s"): a measured rate below 0.05 GB/s is "<0.1", not a zero
export function fmtGB(b) {
  const g = b / 1e9;
  return g >= 100 ? g.toFixed(0) : g >= 0.05 || g === 0 ? g.toFixed(1) : '<0.1';
}
export function fmtNs(ns) {
  if (ns < 1e3) return Math.round(ns) + ' ns';
  if (ns < 1e6) return (ns / 1e3).toFixed(ns < 1e4 ? 2 : 1) + ' µs';
  if (ns < 1e9) return (ns / 1e6).toFixed(ns < 1e7 ? 2 : 1) + ' ms';
  return (ns / 1e9).toFixed(2) + ' s';
}
export function fmtPct(v) { return Math.round(v) + ' %'; }
export function fmtDim(d) { return d ? d.join('×') : DASH; }
export function exitText(t) {
  const s = t.exit_status;
  if (s === null || s === undefined) return null;
  if (s > 128 && s < 128 + 65) return s + ' (signal ' + (s - 128) + (SIGNALS[s - 128] ? ' ' + SIGNALS[s - 128] : '') + ')';
  return String(s);
}
export function isNum(v) { return typeof v === 'number' && isFinite(v); }
export function clamp01(x) { return x < 0 ? 0 : x > 1 ? 1 : x; }

// "void at::native::(anonymous namespace)::foo<...>(args)" -> "foo": the full name is in the hover
const shortCache = new Map();
export function shortKernel(s) {
  let r = shortCache.get(s);
  if (r !== undefined) return r;
  const t = s.replace(/^void /, '').replace(/\(anonymous namespace\)/g, '{anon}');
  let out = '', depth = 0;
  for (let i = 0; i < t.length; i++) {
    const ch = t[i];
    if (ch === '<' || ch === '(') depth++;
    else if (ch === '>' || ch === ')') depth = Math.max(0, depth - 1);
    else if (depth === 0) out += ch;
  }
  const parts = out.split('::').map(x => x.trim()).filter(Boolean);
  r = parts.length ? parts[parts.length - 1] : s;
  if (shortCache.size > 2000) shortCache.clear();
  shortCache.set(s, r);
  return r;
}
// "void at::native::(anonymous namespace)::foo<float>(int)" -> "foo<float>(int)": the return type
// and the namespaces left out, the template arguments and parameters kept, for a table that has
// room for more than the short name
export function kernelFrom(s) {
  const t = s.replace(/^void /, '').replace(/\(anonymous namespace\)/g, '{anon}');
  let end = t.search(/[<(]/);
  if (end < 0) end = t.length;
  const sep = t.lastIndexOf('::', end);
  return sep < 0 ? t : t.slice(sep + 2);
}

// a time axis label: `us` microseconds from now (negative: before), at ticks `stepUs` apart
export function fmtTick(us, stepUs) {
  const a = Math.abs(us), sign = us < 0 ? '\u2212' : '';
  if (a < 0.5) return '0';
  if (stepUs >= 500000) return sign + (a / 1e6).toFixed(stepUs >= 1e6 ? 0 : 1) + ' s';
  if (stepUs >= 1000) return sign + grp(Math.round(a / 1000)) + ' ms';
  return sign + grp(Math.round(a)) + ' µs';
}
// a duration in seconds as a reader says it: "4.2 s", "3 min 5 s", "2 h 5 min"
export function fmtSpan(sec) {
  if (sec < 10) return Math.max(0, sec).toFixed(1) + ' s';
  if (sec < 60) return Math.round(sec) + ' s';
  const m = Math.floor(sec / 60);
  if (m < 60) return m + ' min ' + Math.round(sec - m * 60) + ' s';
  return Math.floor(m / 60) + ' h ' + (m % 60) + ' min';
}
// a wall-clock time (seconds since the epoch) in the browser's time zone: "14:03:22", with
// milliseconds "14:03:22.418", with the day in front when it is not today ("Mon 14:03:22")
const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
function two(n) { return n < 10 ? '0' + n : String(n); }
export function fmtClock(sec, ms) {
  const d = new Date(sec * 1000), today = new Date();
  let s = two(d.getHours()) + ':' + two(d.getMinutes()) + ':' + two(d.getSeconds());
  if (ms) s += '.' + String(d.getMilliseconds()).padStart(3, '0');
  const sameDay = d.getDate() === today.getDate() && d.getMonth() === today.getMonth() && d.getFullYear() === today.getFullYear();
  return sameDay ? s : DAYS[d.getDay()] + ' ' + s;
}
// a window's width, as the timeline writes it: "1.00 s", "250 ms", "2 min 0 s"
export function fmtWindow(sec) { return sec >= 60 ? fmtSpan(sec) : fmtNs(sec * 1e9); }

// the top bar's line for plain frame f: host, GPUs, processes (every pid on the page once:
// those holding a GPU and the traced ones), how many are traced and how many of those exited,
// problems
export function countsLine(f) {
  const h = f.host || {}, traced = f.traced || [];
  const pids = new Set((f.processes || []).map(p => p.pid));
  for (const t of traced) pids.add(t.pid);
  const exited = traced.filter(t => t.state === 'exited').length;
  const probs = (h.problems || []).length;
  const plural = (n, one, many) => n + ' ' + (n === 1 ? one : many);
  return (h.hostname || DASH) + ' · ' + plural(f.devices.length, 'GPU', 'GPUs') + ' · ' + plural(pids.size, 'process', 'processes') +
    (traced.length ? ' · ' + traced.length + ' traced' + (exited ? ', ' + exited + ' exited' : '') : '') +
    (probs ? ' · ' + plural(probs, 'problem', 'problems') : '');
}


// older exited traced processes of a session, folded together by the agent (docs/snapshot.md)
export function retiredLines(r) {
  const launches = (r.kernels || []).reduce((a, k) => a + k.count, 0);
  return [grp(r.processes) + ' earlier traced process' + (r.processes === 1 ? '' : 'es') + ' (folded):',
    grp(launches) + ' launches' + (r.failed ? ' · ' + r.failed + ' failed' : '') + (r.complete ? '' : ' · INCOMPLETE')];
}
export function retiredText(r) { return retiredLines(r).join(' '); }
