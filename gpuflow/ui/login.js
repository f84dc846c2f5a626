// The page's token, for an agent that has one: where it comes from, where it is kept, and the
// form that asks for it.
//
// The token comes from the login URL gpuflow prints for a generated token (#token=…, or
// ?token=… as Jupyter users type it), or from the login form, which the page shows when the
// agent answers 401 (no token yet, or a wrong one). It is kept in this tab's sessionStorage,
// which the browser keeps per origin (scheme, host and port), and sent only as the
// Authorization header of the page's own fetch of api/stream (connection.js). There is no
// cookie: a browser sends a host's cookies to every port of that host, so another local web
// server the user visits would receive one (docs/security.md, "Token").
//
// Constraints: the token is taken out of the address bar and of the tab's history entry before
// anything else runs (history.replaceState), other parameters kept; it never reaches the DOM
// (the input is a password field, cleared once read) nor any log; a '+' in a hand-typed URL
// stays a '+' (a token has no spaces, so URL decoding's '+' → ' ' is undone).

const KEY = 'gpuflow.token';

const form = document.getElementById('login');
const input = document.getElementById('login-token');
const why = document.getElementById('login-why');

// Moves a token found in the page's URL into sessionStorage and the URL back to the page's own.
export function takeTokenFromUrl() {
  const url = new URL(location.href);
  const hash = new URLSearchParams(url.hash.slice(1));
  const given = hash.has('token') ? hash.get('token') : url.searchParams.get('token');
  if (given === null) return;
  hash.delete('token');
  url.searchParams.delete('token');
  const rest = hash.toString();
  history.replaceState(history.state, '', url.pathname + url.search + (rest ? '#' + rest : ''));
  if (given) sessionStorage.setItem(KEY, given.replace(/ /g, '+'));
}

export function token() { return sessionStorage.getItem(KEY); }

// The agent refused the token (or there was none): forget it and ask; onToken() once one is given.
export function askForToken(onToken) {
  const had = token() !== null;
  sessionStorage.removeItem(KEY);
  why.textContent = had ? 'The agent did not accept that token.' :
    'This agent needs its token: paste it, or open the login URL gpuflow printed.';
  form.hidden = false;
  input.focus();
  form.onsubmit = (ev) => {
    ev.preventDefault();
    const given = input.value.trim();
    input.value = '';
    if (!given) return;
    sessionStorage.setItem(KEY, given);
    form.hidden = true;
    form.onsubmit = null;
    onToken();
  };
}
