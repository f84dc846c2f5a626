// Numbers and names as the page writes them: thousands grouped, bytes, rates, durations, exit
// statuses, short kernel names, the folded roll-up's lines.
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


// older exited traced processes of a session, folded together by the agent (docs/snapshot.md)
export function retiredLines(r) {
  const launches = (r.kernels || []).reduce((a, k) => a + k.count, 0);
  return [grp(r.processes) + ' earlier traced process' + (r.processes === 1 ? '' : 'es') + ' (folded):',
    grp(launches) + ' launches' + (r.failed ? ' · ' + r.failed + ' failed' : '') + (r.complete ? '' : ' · INCOMPLETE')];
}
export function retiredText(r) { return retiredLines(r).join(' '); }
