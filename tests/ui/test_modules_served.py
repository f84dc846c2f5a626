"""The page's modules as the agent serves them: exactly the package's gpuflow/ui/*.js, each at the
page's level, as JavaScript with the page's security headers, and nothing else.

In-process (falcon's TestClient) for the headers, and against a real embedded server with raw
request targets (http.client sends them as written: encoded dots and slashes, backslashes) for the
paths that must not reach a file. Any answer other than a module's is a 404 that holds no file's
contents.
"""

from __future__ import annotations

import http.client
import re

import pytest
from falcon import testing

from gpuflow.core.board import SnapshotBoard
from gpuflow.transport.app import AppSettings, create_app
from gpuflow.transport.server import EmbeddedServer
from gpuflow.transport.ui import UI_DIR, UI_MODULES, csp

HOST = {"Host": "127.0.0.1:7717"}
SECURITY = ("x-content-type-options", "referrer-policy", "x-frame-options")

#: request targets that name no module: other files of the package, the page's own file, and
#: every way of walking out of the folder
NOT_MODULES = [
    "/index.html", "/ui/index.html", "/ui/main.js", "/gpuflow/ui/main.js", "/transport/app.py",
    "/ui/../transport/app.py", "/../transport/app.py", "/%2e%2e/transport/app.py",
    "/..%2ftransport%2fapp.py", "/main.js/../../transport/app.py", "/main.js%2f..%2f..%2fapp.py",
    "/..\\transport\\app.py", "/main.js/", "/MAIN.JS", "/main", "/main.js%00", "/main.js.map",
    "/.main.js", "/main.mjs", "/nope.js", "/__init__.py", "/app.py",
]


def client(**settings) -> testing.TestClient:
    return testing.TestClient(create_app(SnapshotBoard(), settings=AppSettings(**settings)), headers=HOST)


def imported_modules() -> set[str]:
    """Every module the page loads: index.html's script and each module's imports, static or not,
    and the workers it starts (``new Worker(new URL('./x.js', import.meta.url), ...)``)."""
    names = set(re.findall(r'<script type="module" src="([\w-]+\.js)">', (UI_DIR / "index.html").read_text()))
    for name in UI_MODULES:
        text = (UI_DIR / name).read_text()
        names |= set(re.findall(r"""(?:from|import\(|new URL\()\s*'\./([\w-]+\.js)'""", text))
    return names


def test_the_allow_list_is_the_modules_the_page_loads():
    assert "main.js" in UI_MODULES and "demo.js" in UI_MODULES
    assert imported_modules() == set(UI_MODULES)


@pytest.mark.parametrize("name", UI_MODULES)
def test_a_module_is_javascript_with_the_pages_headers(name):
    c = client()
    page, r = c.simulate_get("/"), c.simulate_get("/" + name)
    assert r.status_code == 200 and r.content == (UI_DIR / name).read_bytes()
    assert r.headers["content-type"] == "text/javascript; charset=utf-8"
    for h in SECURITY:
        assert r.headers[h] == page.headers[h], h
    nonce = re.search(r"'nonce-([\w-]+)'", page.headers["content-security-policy"]).group(1)
    assert r.headers["content-security-policy"] == csp() == \
        page.headers["content-security-policy"].replace(f" 'nonce-{nonce}'", "")
    assert "'unsafe-inline'" not in r.headers["content-security-policy"].split("; style-src-attr")[0]
    assert not [k for k in r.headers if k.lower().startswith("access-control-")]


def test_a_module_is_revalidated_on_every_load_and_unchanged_costs_no_body():
    c = client()
    r = c.simulate_get("/main.js")
    assert r.headers["cache-control"] == "no-cache" and re.fullmatch(r'"[0-9a-f]{32}"', r.headers["etag"])
    again = c.simulate_get("/main.js", headers={**HOST, "If-None-Match": r.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    assert again.headers["etag"] == r.headers["etag"]
    other = c.simulate_get("/main.js", headers={**HOST, "If-None-Match": '"0000"'})
    assert other.status_code == 200 and other.content == r.content
    assert c.simulate_get("/stream.js").headers["etag"] != r.headers["etag"]


def test_head_gives_the_headers_without_the_body():
    r = client().simulate_head("/main.js")
    assert r.status_code == 200 and r.content == b""
    assert r.headers["content-type"].startswith("text/javascript")


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS"])
def test_modules_are_read_only(method):
    r = client().simulate_request(method, "/main.js")
    assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD"


def test_with_a_token_a_module_is_public_like_the_page_and_sets_no_cookie():
    """The page and its modules are fixed files that hold no data: they load before the page has
    its token (docs/security.md, "Token"); every data route still needs it."""
    c = client(token="s3cret-token-value")
    for name in UI_MODULES:
        r = c.simulate_get("/" + name)
        assert r.status_code == 200 and r.content == (UI_DIR / name).read_bytes()
        assert "set-cookie" not in r.headers
    assert c.simulate_get("/api/snapshot").status_code == 401


@pytest.fixture(scope="module")
def server():
    with EmbeddedServer(create_app(SnapshotBoard()), "127.0.0.1", 0) as s:
        s.serve_in_thread()
        yield s


def raw_get(port: int, target: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.putrequest("GET", target, skip_accept_encoding=True)
        conn.endheaders()
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


@pytest.mark.parametrize("target", NOT_MODULES)
def test_anything_not_on_the_list_is_404_with_no_file_in_it(server, target):
    status, body = raw_get(server.port, target)
    assert status == 404, (target, status)
    files = [UI_DIR / n for n in UI_MODULES] + [UI_DIR / "index.html", UI_DIR.parent / "transport" / "app.py"]
    for f in files:
        first = f.read_text().splitlines()[0]
        assert first.encode() not in body, (target, f.name)
    assert b"import " not in body and b"def " not in body and len(body) < 200


@pytest.mark.parametrize("name", UI_MODULES)
def test_the_real_server_serves_each_module_whole(server, name):
    assert raw_get(server.port, "/" + name) == (200, (UI_DIR / name).read_bytes())


def test_a_query_names_no_other_file(server):
    assert raw_get(server.port, "/stream.js?x=/../transport/app.py") == (200, (UI_DIR / "stream.js").read_bytes())
