"""The Falcon app in-process: routes, headers, Host allow-list, methods, token flow, UI page."""

from __future__ import annotations

import hashlib
import hmac
import json
import re

import pytest
from falcon import testing

from gpuflow.core.board import SnapshotBoard
from gpuflow.transport.app import AppSettings, create_app
from gpuflow.transport.security import HostAllowList, host_name
from snapshots import board_with, make_snapshot

HOST = {"Host": "127.0.0.1:7717"}
ROUTES = ["/", "/api/snapshot", "/metrics", "/healthz"]
TOKEN = "s3cret-token-value"


def client(board=None, **settings) -> testing.TestClient:
    settings.setdefault("first_snapshot_wait_s", 0.05)
    board = board if board is not None else board_with(make_snapshot(seq=3))
    return testing.TestClient(create_app(board, settings=AppSettings(**settings)), headers=HOST)


# -- routes ----------------------------------------------------------------------------------------
def test_snapshot_route_is_the_snapshot_json():
    snap = make_snapshot(seq=3)
    r = client(board_with(snap)).simulate_get("/api/snapshot")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert r.json == json.loads(json.dumps(snap.to_json_dict()))
    assert r.headers["cache-control"] == "no-store"


def test_snapshot_before_any_data_is_503_with_retry_after():
    r = client(SnapshotBoard()).simulate_get("/api/snapshot")
    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    assert r.json == {"error": "no snapshot yet"}


def test_healthz_ok_and_starting():
    ok = client().simulate_get("/healthz")
    assert ok.status_code == 200 and ok.json["status"] == "ok" and ok.json["seq"] == 3
    starting = client(SnapshotBoard()).simulate_get("/healthz")
    assert starting.status_code == 503 and starting.json["status"] == "starting"


def test_healthz_says_stopping_after_shutdown_began():
    c = client()
    c.app.begin_shutdown()
    r = c.simulate_get("/healthz")
    assert r.status_code == 503 and r.json["status"] == "stopping"


def test_unknown_route_is_404_with_security_headers():
    r = client().simulate_get("/nope")
    assert r.status_code == 404
    assert r.headers["x-content-type-options"] == "nosniff"


def test_ui_missing_serves_a_clear_not_built_page(tmp_path):
    r = client(ui_path=str(tmp_path / "absent.html")).simulate_get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "UI is not built" in r.text and "/api/snapshot" in r.text


def test_ui_page_gets_a_fresh_nonce_on_every_inline_block_and_in_its_csp(tmp_path):
    page = tmp_path / "index.html"
    page.write_text("<!doctype html><style>b{}</style><SCRIPT>let x=1</SCRIPT>"
                    "<script src='x.js'></script><p>scripts are fun</p>")
    c = client(ui_path=str(page))
    r1, r2 = c.simulate_get("/"), c.simulate_get("/")
    nonces = []
    for r in (r1, r2):
        csp = r.headers["content-security-policy"]
        n = re.search(r"'nonce-([A-Za-z0-9_-]+)'", csp).group(1)
        nonces.append(n)
        assert f"script-src 'self' 'nonce-{n}'" in csp and f"style-src 'self' 'nonce-{n}'" in csp
        assert "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp.split("style-src-attr")[0]
        assert r.text.count(f'nonce="{n}"') == 3
        assert "<p>scripts are fun</p>" in r.text
        assert r.headers["cache-control"] == "no-store"
    assert nonces[0] != nonces[1]


def test_ui_file_change_is_picked_up(tmp_path):
    page = tmp_path / "index.html"
    page.write_text("<p>one</p>")
    c = client(ui_path=str(page))
    assert "one" in c.simulate_get("/").text
    page.write_text("<p>second version</p>")
    assert "second version" in c.simulate_get("/").text


# -- headers ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ROUTES + ["/nope"])
def test_security_headers_on_every_response_and_never_cors(path):
    r = client().simulate_get(path, headers={**HOST, "Origin": "http://evil.example"})
    h = r.headers
    assert h["x-content-type-options"] == "nosniff"
    assert h["referrer-policy"] == "no-referrer"
    assert "frame-ancestors 'none'" in h["content-security-policy"]
    assert "default-src 'self'" in h["content-security-policy"]
    assert not [k for k in h if k.lower().startswith("access-control-")]


# -- methods ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
@pytest.mark.parametrize("path", ROUTES + ["/api/stream"])
def test_only_get_and_head(method, path):
    r = client().simulate_request(method, path)
    assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD"
    assert not [k for k in r.headers if k.lower().startswith("access-control-")]


def test_head_works_where_harmless():
    c = client()
    assert c.simulate_head("/api/snapshot").status_code == 200
    r = c.simulate_head("/api/stream")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    assert c.app.state.slots.served == 0


# -- Host allow-list -------------------------------------------------------------------------------
ALLOWED = ["127.0.0.1", "127.0.0.1:7717", "127.1.2.3:80", "[::1]", "[::1]:7717", "::1",
           "localhost", "LOCALHOST:7717", "localhost.", "gpu.localhost", "a.b.localhost:9",
           "[::ffff:127.0.0.1]:7717"]
REFUSED = [None, "", "evil.example", "evil.example:7717", "127.0.0.1.evil.example",
           "localhost.evil.example", "0.0.0.0", "10.0.0.5:7717", "[::1", "[::1]x", "[::2]:7717",
           "localhost:http", "mylocalhost"]


@pytest.mark.parametrize("host", ALLOWED)
def test_loopback_hosts_allowed(host):
    assert HostAllowList().allows(host)


@pytest.mark.parametrize("host", REFUSED)
def test_foreign_hosts_refused(host):
    assert not HostAllowList().allows(host)


def test_allow_host_values_exact_and_wildcard():
    hosts = HostAllowList(["gpu-node-3", "*.lab.example"])
    assert hosts.allows("gpu-node-3:7717") and hosts.allows("GPU-NODE-3")
    assert hosts.allows("a.lab.example") and hosts.allows("x.y.lab.example:80")
    assert not hosts.allows("lab.example") and not hosts.allows("gpu-node-33")
    assert not hosts.allows("evil-lab.example")


def test_allow_any_host_needs_a_token():
    with pytest.raises(ValueError, match="token"):
        AppSettings(allow_hosts=("*",))
    assert HostAllowList(["*"]).allows("anything.example")


@pytest.mark.parametrize("path", ROUTES + ["/api/stream", "/nope"])
def test_foreign_host_is_403_on_every_route(path):
    r = client().simulate_get(path, headers={"Host": "attacker.example"})
    assert r.status_code == 403 and "Host" in r.text
    assert r.headers["x-content-type-options"] == "nosniff"


def test_configured_host_passes_through_the_app():
    r = client(allow_hosts=("gpu-node-3",)).simulate_get("/api/snapshot",
                                                         headers={"Host": "gpu-node-3:7717"})
    assert r.status_code == 200


def test_host_name_parsing():
    assert host_name("[::1]:80") == "::1" and host_name("Example.COM.") == "example.com"
    assert host_name("a:b") is None and host_name(None) is None


# -- token -----------------------------------------------------------------------------------------
DATA_ROUTES = ["/api/snapshot", "/api/stream", "/metrics", "/healthz"]
PUBLIC = ["/", "/favicon.ico", "/main.js", "/connection.js"]
#: what the agent's cookie used to be (name by port, HMAC of the token): never a credential now
OLD_COOKIE = "gpuflow_auth_7717=" + hmac.new(TOKEN.encode(), b"gpuflow-cookie-v1", hashlib.sha256).hexdigest()


def tclient(**kw) -> testing.TestClient:
    return client(token=TOKEN, **kw)


def bearer(token: str = TOKEN) -> dict:
    return {**HOST, "Authorization": f"Bearer {token}"}


@pytest.mark.parametrize("path", DATA_ROUTES)
def test_without_credentials_every_data_route_is_401_and_leaks_nothing(path):
    r = tclient().simulate_get(path)
    assert r.status_code == 401 and r.headers["www-authenticate"] == 'Bearer realm="gpuflow"'
    assert TOKEN not in r.text
    assert "set-cookie" not in r.headers
    assert "4242" not in r.text  # no snapshot content


@pytest.mark.parametrize("path", PUBLIC)
def test_the_page_and_its_modules_need_no_token_and_hold_no_data(path):
    r = tclient().simulate_get(path)
    assert r.status_code in (200, 204) and "set-cookie" not in r.headers
    assert TOKEN not in r.text and "4242" not in r.text and "fakehost" not in r.text


@pytest.mark.parametrize("path", ["/api/snapshot", "/metrics", "/healthz"])
def test_bearer_opens_every_data_route(path):
    r = tclient().simulate_get(path, headers=bearer())
    assert r.status_code == 200 and "set-cookie" not in r.headers


def test_bearer_opens_the_stream():
    c = tclient(max_stream_age_s=0.2, poll_s=0.05)
    r = c.simulate_get("/api/stream", headers=bearer())
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")


@pytest.mark.parametrize("cookie", [OLD_COOKIE, f"gpuflow_auth_7717={TOKEN}", f"gpuflow_auth={TOKEN}",
                                    f"token={TOKEN}"])
def test_no_cookie_is_a_credential(cookie):
    r = tclient().simulate_get("/api/snapshot", headers={**HOST, "Cookie": cookie})
    assert r.status_code == 401


def test_the_token_in_a_query_logs_nobody_in_and_sets_nothing():
    c = tclient()
    page = c.simulate_get("/", params={"token": TOKEN})
    assert page.status_code == 200 and "set-cookie" not in page.headers and TOKEN not in page.text
    assert c.simulate_get("/api/snapshot", params={"token": TOKEN}).status_code == 401


@pytest.mark.parametrize("value", ["Bearer nope", f"Bearer {TOKEN}x", f"Basic {TOKEN}", TOKEN,
                                   f"Bearer{TOKEN}", "Bearer "])
def test_wrong_bearer_is_401_with_challenge(value):
    r = tclient().simulate_get("/metrics", headers={**HOST, "Authorization": value})
    assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")


def test_bearer_scheme_in_any_case():
    r = tclient().simulate_get("/metrics", headers={**HOST, "Authorization": f"bEaReR {TOKEN}"})
    assert r.status_code == 200


def test_host_check_comes_before_auth():
    r = tclient().simulate_get("/api/snapshot", headers={"Host": "evil.example",
                                                         "Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 403 and "set-cookie" not in r.headers


def test_create_app_rejects_other_sources():
    with pytest.raises(TypeError):
        create_app(object(), settings=AppSettings())


def test_favicon_is_an_empty_204_so_consoles_stay_clean():
    r = client().simulate_get("/favicon.ico")
    assert r.status_code == 204 and r.content == b""
    assert client().simulate_get("/favicon.ico", headers={"Host": "evil.example"}).status_code == 403
