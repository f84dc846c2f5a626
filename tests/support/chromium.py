"""Debian's Chromium as every browser test starts it: where it is, its flags, where screenshots go,
what is missing when it cannot start, and waiting for a page's state (:func:`until`).

Never ``playwright install``: the browser is /usr/bin/chromium (or $GPUFLOW_CHROMIUM). One
Playwright per test process (tests/conftest.py's session ``browser``): Playwright's sync API
refuses to start while another of its instances runs in the same thread, which is what a test
process running several browser test folders (pytest-xdist's workers) would otherwise do.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: screenshots for a person to look at (git-ignored)
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = os.environ.get("GPUFLOW_CHROMIUM", "/usr/bin/chromium")
#: headless as root, with none of Chromium's own calls out (the machines' network is closed)
CHROMIUM_ARGS = ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def missing() -> list[str]:
    """Why the browser tests cannot run here, if they cannot."""
    why = []
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        why.append("the playwright package is not installed")
    if not os.access(CHROMIUM, os.X_OK):
        why.append(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    return why


def until(page, expr: str, timeout: float = 10000, polling: float | str = "raf") -> None:
    """Wait until a JS expression is true in ``page``. Written as a function: Playwright evaluates
    a bare expression string with eval, which the page's CSP (rightly) refuses. An expression that
    reads the page's test hook waits for the hook too: just after a navigation the page's modules
    may not have run yet, and a predicate that throws ends the wait at once."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    guard = "window.__gpuflow !== undefined && " if "__gpuflow" in expr else ""
    try:
        page.wait_for_function(f"() => {guard}({expr})", timeout=timeout, polling=polling)
    except PlaywrightTimeout:
        raise AssertionError(f"not true within {timeout / 1000:g} s: {expr}\nthe page then: "
                             f"{page_state(page)}") from None


#: what a failed wait reports of the page: where it is and what its test hook says
_STATE = """() => { const h = window.__gpuflow; const pick = {url: location.href, ready: document.readyState};
  const got = performance.getEntriesByType('resource');
  pick.fetched = got.length;
  pick.not_ok = got.filter(e => e.responseStatus !== 200).map(e => [e.name.split('/').pop(), e.responseStatus, Math.round(e.duration)]);
  if (h === undefined) return JSON.stringify(Object.assign(pick, {hook: 'not defined'}));
  for (const k of ['connection', 'frames', 'draws', 'counts']) { try { pick[k] = h[k]; } catch (e) { pick[k] = String(e); } }
  return JSON.stringify(pick); }"""


def page_state(page) -> str:
    """The page's address, load state, what it fetched that did not answer 200, and the test
    hook's connection, frame and draw counts."""
    try:
        return page.evaluate(_STATE)
    except Exception as exc:  # noqa: BLE001 - a report of a failure must not fail differently
        return f"(could not be read: {exc})"
