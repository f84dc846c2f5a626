// One GET of the agent's recorder (api/history, api/window: docs/recorder.md), relative to the
// page, with the page's token when it has one: the answer's text (its body, an ArrayBuffer, for a
// window asked in the columnar form: format=columns), or an Error saying why the agent did not
// answer. The page's answer reader (answer_worker.js) asks this way, and so does the page
// itself where that worker cannot start (recorder.js).
//
// Constraints: requests only to the page's own agent, relative to the page's modules (which sit
// at the page's own level, so an agent behind a proxy path works), no credential the browser adds
// by itself (the token goes in a header); a 401 is not retried here (the stream's login form asks
// for the token, connection.js). No DOM: it runs in a worker.

export async function agentText(path, params, token) {
  const headers = { Accept: 'application/json' };
  if (token !== null && token !== undefined) headers.Authorization = 'Bearer ' + token;
  const r = await fetch(path + '?' + new URLSearchParams(params).toString(),
    { headers, cache: 'no-store', credentials: 'omit' });
  if (r.ok && params.format === 'columns') return r.arrayBuffer();
  const text = await r.text();
  if (!r.ok) {
    let why = r.status + ' ' + r.statusText;
    try { const doc = JSON.parse(text); if (doc && typeof doc.error === 'string') why = doc.error; } catch (e) { /* not JSON */ }
    throw new Error('the agent could not answer ' + path + ': ' + why);
  }
  return text;
}
