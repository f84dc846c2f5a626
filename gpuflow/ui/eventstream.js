// Reads a text/event-stream body (Server-Sent Events) from a fetch() response, for the page's
// one stream (connection.js). fetch rather than EventSource because EventSource cannot send an
// Authorization header, and the page's only credential is its token in that header (login.js).
//
// Constraints: the event format of the HTML standard, as the agent writes it (gpuflow/transport/
// sse.py): lines end in LF, CRLF or CR; "data:" lines join with LF; "event:" names the event;
// "retry:" (digits only) is handed on as the reconnection delay, which connection.js keeps as
// EventSource would; comments (": ping") and "id:" are dropped; an event is dispatched at its
// blank line, a partial one at the end is dropped. Bytes are decoded as UTF-8 across chunk
// boundaries. Nothing is buffered beyond the event being read.

// Calls onEvent(type, data) for each complete event of `body`, and onRetry(ms) for each retry
// field, until it ends (resolves) or fails (rejects); stop() returning true cancels the read.
export async function readEvents(body, onEvent, onRetry, stop) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '', data = [], type = '', skipLf = false;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    if (stop()) { reader.cancel(); return; }
    buf += value;
    let at = 0;
    for (;;) {
      if (skipLf && buf.charCodeAt(at) === 10) at++;   // the LF of a CRLF split across lines
      skipLf = false;
      const lf = buf.indexOf('\n', at), cr = buf.indexOf('\r', at);
      const end = cr >= 0 && (lf < 0 || cr < lf) ? cr : lf;
      if (end < 0) break;
      const line = buf.slice(at, end);
      at = end + 1;
      if (end === cr) { if (at < buf.length) { if (buf.charCodeAt(at) === 10) at++; } else skipLf = true; }
      if (line === '') {
        if (data.length) onEvent(type || 'message', data.join('\n'));
        data = []; type = '';
        if (stop()) { reader.cancel(); return; }
        continue;
      }
      const colon = line.indexOf(':');
      if (colon === 0) continue;
      const field = colon < 0 ? line : line.slice(0, colon);
      let v = colon < 0 ? '' : line.slice(colon + 1);
      if (v.charCodeAt(0) === 32) v = v.slice(1);
      if (field === 'data') data.push(v);
      else if (field === 'event') type = v;
      else if (field === 'retry' && /^[0-9]+$/.test(v)) onRetry(Number(v));
    }
    buf = buf.slice(at);
  }
}
