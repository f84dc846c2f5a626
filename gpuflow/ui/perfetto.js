// Saving a range of what the agent retains as a Perfetto trace, and opening it in Perfetto's UI.
//
// The trace is the agent's GET api/export (gpuflow/transport/export_api.py), fetched with the
// page's token (login.js). It is always offered as a download (a file the user keeps, and the
// way for anyone Perfetto's UI cannot reach); from a page on a loopback origin (127.0.0.1,
// localhost, [::1]) it is also handed to Perfetto's UI by the handshake Perfetto documents
// ("Deep linking to the Perfetto UI"): window.open the UI, post 'PING' until it answers 'PONG',
// then post {perfetto: {buffer, title, fileName}}. Perfetto opens what loopback pages send
// without asking; a page on any other origin gets the download only (Perfetto would first ask
// the user whether to trust that origin; GPUFlow hands traces over from loopback pages only).
//
// Constraints: window.open must run in the user's gesture (a click or a key), before the fetch
// is awaited, or pop-up blockers refuse it: openInPerfetto takes the window already opened.
// Messages go to Perfetto's origin only (never '*'), and only a 'PONG' from that window and
// origin counts. The page's CSP allows it all: the fetch is 'self', the download a blob: URL.
// Pages served from file:// cannot do the handshake (Perfetto says so); they get the download.

import { token } from './login.js';

export const PERFETTO_UI = 'https://ui.perfetto.dev';
const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);
const PING_MS = 100;
const HANDSHAKE_MS = 30000;

// Whether a page at `where` (a URL or Location) may hand traces to Perfetto's UI.
export function canOpenInPerfetto(where) {
  const url = new URL(String(where));
  return (url.protocol === 'http:' || url.protocol === 'https:') && LOOPBACK.has(url.hostname);
}

// The export's address, relative to the page (the agent serves both): times in seconds since the epoch.
export function exportPath(from, to, pid) {
  const q = new URLSearchParams({ from: String(from), to: String(to) });
  if (pid !== null && pid !== undefined) q.set('pid', String(pid));
  return 'api/export?' + q.toString();
}

// The trace of [from, to) (of one process with pid) as {buffer, fileName}; an Error saying why not.
export async function fetchTrace(from, to, pid) {
  const headers = {};
  const t = token();
  if (t !== null) headers.Authorization = 'Bearer ' + t;
  const r = await fetch(exportPath(from, to, pid), { headers, cache: 'no-store' });
  if (!r.ok) {
    let why = r.status + ' ' + r.statusText;
    try { const doc = await r.json(); if (doc && typeof doc.error === 'string') why = doc.error; } catch (e) { /* not JSON */ }
    throw new Error('the agent could not export: ' + why);
  }
  const disposition = r.headers.get('Content-Disposition') || '';
  const m = /filename="([\w.-]+)"/.exec(disposition);
  return { buffer: await r.arrayBuffer(), fileName: m ? m[1] : 'gpuflow.perfetto-trace' };
}

// Offers the trace as a file to save.
export function download(buffer, fileName) {
  const url = URL.createObjectURL(new Blob([buffer], { type: 'application/octet-stream' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = fileName;
  a.hidden = true;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

// Hands a trace to a Perfetto UI window opened by the caller (in the user's gesture): resolves
// once posted, rejects when the window is gone or never answers.
export function openInPerfetto(win, trace, ui = PERFETTO_UI, timeoutMs = HANDSHAKE_MS) {
  const origin = new URL(ui).origin;
  return new Promise((resolve, reject) => {
    if (!win) { reject(new Error('the browser blocked the Perfetto window (allow pop-ups for this page)')); return; }
    let ticker = null, timer = null;
    const done = (err) => {
      clearInterval(ticker); clearTimeout(timer);
      window.removeEventListener('message', onMessage);
      if (err) reject(err); else resolve();
    };
    const onMessage = (e) => {
      if (e.source !== win || e.origin !== origin || e.data !== 'PONG') return;
      win.postMessage({ perfetto: { buffer: trace.buffer, title: trace.title, fileName: trace.fileName } }, origin);
      done(null);
    };
    window.addEventListener('message', onMessage);
    const ping = () => {
      if (win.closed) { done(new Error('the Perfetto window was closed before it took the trace')); return; }
      win.postMessage('PING', origin);
    };
    ticker = setInterval(ping, PING_MS);
    timer = setTimeout(() => done(new Error('Perfetto UI did not answer (offline? the trace was saved as a file)')),
      timeoutMs);
    ping();
  });
}

// The page's "save" and "open in Perfetto" in one: call it from the user's gesture. Always
// downloads the trace; from a loopback page also opens it in Perfetto's UI. Resolves to
// {fileName, bytes, opened}, where opened is true, or the reason it was not.
export async function saveAndOpen(from, to, pid, { ui = PERFETTO_UI, title = null } = {}) {
  const local = canOpenInPerfetto(location.href);
  const win = local ? window.open(ui, '_blank') : null;
  let trace;
  try {
    trace = await fetchTrace(from, to, pid);
  } catch (e) {
    if (win) win.close();
    throw e;
  }
  download(trace.buffer, trace.fileName);
  if (!local) return { fileName: trace.fileName, bytes: trace.buffer.byteLength, opened: 'not a loopback page' };
  const named = { ...trace, title: title || 'GPUFlow ' + trace.fileName };
  try {
    await openInPerfetto(win, named, ui);
    return { fileName: trace.fileName, bytes: trace.buffer.byteLength, opened: true };
  } catch (e) {
    return { fileName: trace.fileName, bytes: trace.buffer.byteLength, opened: e.message };
  }
}
