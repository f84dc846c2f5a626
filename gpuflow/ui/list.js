// The process list beside the graph: every process on the page (those holding a GPU and the traced
// ones) with its GPUs, memory and SM %, sortable by each column. Pointing at a row outlines its
// node in the graph and lights its neighbourhood; clicking a row isolates the node, as clicking
// the node does. It is what nvitop users look for first, and it keeps the graph as the picture.
// Beside a process's name: who it belongs to (its pod, container or Slurm job: workload.js), in
// the warning colour when it holds a GPU its container was not allocated.
//
// The list is collapsible (the button in the top bar, or P). It starts open on a window at least
// OPEN_WIDTH CSS px wide and closed on a smaller one, where the graph needs the width; a choice
// the user makes is remembered in localStorage. Open, it takes its width from the canvas, which
// then lays the graph out again for the room it has.
//
// Constraints: rows are built with createElement and textContent only (names and users are
// untrusted); rows are kept per pid and only changed cells are written, at most every
// REFRESH_MS, so a busy stream costs the DOM little. No state outside `list`.

import { markDirty, ui } from './canvas.js';
import { fmtBytes, fmtPct, isNum } from './format.js';
import { shownSnap } from './store.js';
import { unallocatedText, workloadLabel, workloadRows } from './workload.js';

export const OPEN_WIDTH = 1680;
const REFRESH_MS = 500, STORE_KEY = 'gpuflow.processList';
const COLUMNS = ['pid', 'name', 'user', 'gpus', 'memory', 'sm'];
const DESC_FIRST = new Set(['memory', 'sm']);

export const list = { open: false, key: 'memory', dir: -1, rows: new Map(), order: [], last: 0, timer: 0, selected: null };
const el = {
  aside: document.getElementById('list'), body: document.querySelector('#proctable tbody'),
  head: document.querySelector('#proctable thead'), button: document.getElementById('listbtn'),
  count: document.getElementById('listcount'),
};

// "0–3", "4,6": the GPU indices a process holds
export function gpuText(idx) {
  const out = [];
  for (let i = 0; i < idx.length; i++) {
    let j = i;
    while (j + 1 < idx.length && idx[j + 1] === idx[j] + 1) j++;
    out.push(j > i + 1 ? idx[i] + '–' + idx[j] : j === i + 1 ? idx[i] + ',' + idx[j] : String(idx[i]));
    i = j;
  }
  return out.join(',');
}
// one entry per pid on the page: memory summed over its GPUs, SM % their mean (null when no GPU
// reports it), both null when nothing is reported
export function entries(f) {
  const byPid = new Map();
  for (const p of f.processes || []) byPid.set(p.pid, { pid: p.pid, name: p.name, user: p.user, atts: p.attachments, traced: null, workload: p.workload || null });
  for (const t of f.traced || []) {
    const e = byPid.get(t.pid);
    if (e) e.traced = t; else byPid.set(t.pid, { pid: t.pid, name: t.name, user: null, atts: [], traced: t, workload: null });
  }
  return [...byPid.values()].map(e => {
    const mem = e.atts.map(a => a.memory_used_bytes).filter(isNum), sm = e.atts.map(a => a.sm_util_pct).filter(isNum);
    return { pid: e.pid, name: e.name, user: e.user, gpus: e.atts.map(a => a.device_index).sort((a, b) => a - b),
      memory: mem.length ? mem.reduce((a, b) => a + b, 0) : null, sm: sm.length ? sm.reduce((a, b) => a + b, 0) / sm.length : null,
      traced: e.traced ? e.traced.state : null, atts: e.atts, workload: e.workload };
  });
}
function compareBy(key, dir) {
  return (a, b) => {
    let x = a[key], y = b[key];
    if (key === 'gpus') { x = x.length ? x[0] * 1000 + x.length : null; y = y.length ? y[0] * 1000 + y.length : null; }
    if (x === null || x === undefined) return y === null || y === undefined ? a.pid - b.pid : 1;   // unknown last
    if (y === null || y === undefined) return -1;
    const c = typeof x === 'string' ? x.localeCompare(y) : x - y;
    return c ? c * dir : a.pid - b.pid;
  };
}
function cellTexts(e) {
  return [String(e.pid), e.name === null ? '—' : e.name, e.user === null ? '—' : e.user, e.gpus.length ? gpuText(e.gpus) : '—',
    e.memory === null ? '—' : fmtBytes(e.memory), e.sm === null ? '—' : fmtPct(e.sm)];
}
function makeRow(pid) {
  const tr = document.createElement('tr');
  for (let i = 0; i < COLUMNS.length; i++) tr.append(document.createElement('td'));
  const tag = document.createElement('span'); tag.className = 'tag';
  const wl = document.createElement('span'); wl.className = 'wl';
  tr.cells[1].append(document.createTextNode(''), tag, wl);
  tr.addEventListener('mouseenter', () => { ui.highlight = 'p:' + pid; markDirty(); });
  tr.addEventListener('click', () => { ui.isolated = ui.isolated === 'p:' + pid ? null : 'p:' + pid; syncSelection(); markDirty(); });
  return tr;
}
function fill(tr, e) {
  const texts = cellTexts(e);
  for (let i = 0; i < texts.length; i++) {
    const node = i === 1 ? tr.cells[1].firstChild : tr.cells[i];
    if (node.textContent !== texts[i]) node.textContent = texts[i];
  }
  const tag = tr.cells[1].childNodes[1], tagText = e.traced === null ? '' : e.traced === 'exited' ? 'exited' : 'traced';
  if (tag.textContent !== tagText) tag.textContent = tagText;
  const wl = tr.cells[1].lastChild, wlText = workloadLabel(e.workload), warn = unallocatedText(e.workload) !== '';
  if (wl.textContent !== wlText) wl.textContent = wlText;
  if (wl.classList.contains('warn') !== warn) wl.classList.toggle('warn', warn);
  const title = e.atts.map(a => 'GPU ' + a.device_index + ': SM ' + (isNum(a.sm_util_pct) ? fmtPct(a.sm_util_pct) : '—') +
    ' · ' + (isNum(a.memory_used_bytes) ? fmtBytes(a.memory_used_bytes) : '—'))
    .concat(workloadRows(e.workload).map(([k, v]) => k + ': ' + v)).join('\n');
  if (tr.title !== title) tr.title = title;
}

// the same pids as the rows?
function samePids(f) {
  let n = 0;
  for (const p of f.processes || []) { if (!list.rows.has(p.pid)) return false; n++; }
  for (const t of f.traced || []) { if (!list.rows.has(t.pid)) return false; if (!(f.processes || []).some(p => p.pid === t.pid)) n++; }
  return n === list.rows.size;
}
// the rows from the frame the plane shows (the latest, or the timeline's past moment): now when a
// process came or went (the list never disagrees with the graph about who is there), and its
// values (coming from the stream) at most every REFRESH_MS
export function updateList(now) {
  const f = shownSnap();
  if (!list.open || !f) return;
  const t = performance.now();
  if (!now && t - list.last < REFRESH_MS && samePids(f)) {
    if (!list.timer) list.timer = setTimeout(() => { list.timer = 0; updateList(true); }, REFRESH_MS - (t - list.last));
    return;
  }
  list.last = t;
  const es = entries(f).sort(compareBy(list.key, list.dir));
  const seen = new Set();
  for (const e of es) {
    let tr = list.rows.get(e.pid);
    if (!tr) { tr = makeRow(e.pid); list.rows.set(e.pid, tr); }
    fill(tr, e);
    seen.add(e.pid);
  }
  for (const [pid, tr] of list.rows) if (!seen.has(pid)) { tr.remove(); list.rows.delete(pid); }
  const order = es.map(e => e.pid);
  if (order.join() !== list.order.join() || el.body.children.length !== order.length) {
    el.body.append(...order.map(pid => list.rows.get(pid)));
    list.order = order;
  }
  el.count.textContent = String(order.length);
  for (const th of el.head.querySelectorAll('th')) {
    th.className = th.dataset.key === list.key ? (list.dir > 0 ? 'asc' : 'desc') : '';
  }
  list.selected = undefined;
  syncSelection();
}
// the row of the isolated node marked, whoever isolated it (a row or the graph)
export function syncSelection() {
  if (list.selected === ui.isolated) return;
  list.selected = ui.isolated;
  for (const [pid, tr] of list.rows) tr.classList.toggle('sel', ui.isolated === 'p:' + pid);
}
function remember(open) { try { localStorage.setItem(STORE_KEY, open ? 'open' : 'closed'); } catch (e) { /* not kept */ } }
function remembered() { try { return localStorage.getItem(STORE_KEY); } catch (e) { return null; } }
export function setListOpen(open, byUser) {
  list.open = open;
  el.aside.hidden = !open;
  document.body.classList.toggle('list-open', open);
  el.button.setAttribute('aria-pressed', String(open));
  el.button.textContent = (open ? '▸ ' : '◂ ') + 'processes';
  if (byUser) remember(open);
  if (open) updateList(true);
}
export function toggleList() { setListOpen(!list.open, true); }

export function installList() {
  el.button.addEventListener('click', toggleList);
  el.head.addEventListener('click', (e) => {
    const key = e.target.closest('th') && e.target.closest('th').dataset.key;
    if (!key) return;
    if (list.key === key) list.dir = -list.dir;
    else { list.key = key; list.dir = DESC_FIRST.has(key) ? -1 : 1; }
    updateList(true);
  });
  el.body.addEventListener('mouseleave', () => { ui.highlight = null; markDirty(); });
  const choice = remembered();
  setListOpen(choice ? choice === 'open' : window.innerWidth >= OPEN_WIDTH, false);
}
