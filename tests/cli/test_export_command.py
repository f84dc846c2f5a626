"""``gpuflow export`` against a real agent (``gpuflow watch`` with the fake collector, which
retains) and against local servers that misbehave: the file is written only whole, the token
only from a file or the environment and only to the URL given; bad input is one line, exit 2."""

from __future__ import annotations

import collections
import http.server
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from perfetto_read import read

from cli_process import gpuflow, gpuflow_env, start_gpuflow, stop_gpuflow
from gpuflow.export.perfetto import END_OF_TRACE
from servers import FAKE_ENV, http_get

STRONG = "q7Xf-2LpZr_9vKmW4tYb8NcE"
FAKE = ["--plugin", "gpuflow.testing.fake_collector"]


def env(**extra: str) -> dict[str, str]:
    return gpuflow_env(**{k: v for k, v in FAKE_ENV.items() if k != "GPUFLOW_PLUGINS"}, **extra)


def token_file(tmp_path: Path, token: str = STRONG) -> Path:
    path = tmp_path / "token"
    path.write_text(token + "\n")
    path.chmod(0o600)
    return path


def export(*flags: str, **variables: str):
    return gpuflow("export", *flags, env=gpuflow_env(**variables), timeout=60)


def now_range() -> list[str]:
    t = time.time()
    return ["--from", str(t - 3600), "--to", str(t + 60)]


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    """gpuflow watch with a token and the fake collector retaining: (port, token file)."""
    folder = tmp_path_factory.mktemp("agent")
    tok = token_file(folder)
    proc, port = start_gpuflow("watch", "--port", "0", *FAKE, "--token-file", str(tok),
                               env=env(GPUFLOW_FAKE_RATE_HZ="20", GPUFLOW_FAKE_SPANS="40"))
    yield port, tok
    stop_gpuflow(proc, signal.SIGTERM)


def test_a_range_is_saved_whole_with_the_windows_counts(agent, tmp_path):
    port, tok = agent
    time.sleep(1.0)
    end = time.time() - 0.5  # the fake adds nothing starting before this any more
    start = end - 0.5
    out = tmp_path / "run.perfetto-trace"
    r = export("--url", f"http://127.0.0.1:{port}/", "--token-file", str(tok), "--from", repr(start),
               "--to", repr(end), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert f"wrote {out}" in r.stderr and "ui.perfetto.dev" in r.stderr
    t = read(out.read_bytes())
    code, _, body = http_get(port, f"/api/window?from={start!r}&to={end!r}", {"Authorization": f"Bearer {STRONG}"})
    counts = collections.Counter()
    for proc in json.loads(body)["processes"]:
        for lane in proc["lanes"]:
            s = lane["spans"]
            counts.update(s["names"][n] for k, n in zip(s["kind"], s["name"]) if k == 0)
    assert code == 200 and counts and t.kernel_counts() == counts
    assert sorted(os.listdir(tmp_path)) == ["run.perfetto-trace"]  # nothing partial left beside it


def test_the_token_may_come_from_the_environment(agent, tmp_path):
    port, tok = agent
    out = tmp_path / "t.perfetto-trace"
    r = export("--url", f"http://127.0.0.1:{port}", *now_range(), "-o", str(out), GPUFLOW_TOKEN=STRONG)
    assert r.returncode == 0, r.stderr and read(out.read_bytes()).whole
    r = export("--url", f"http://127.0.0.1:{port}", *now_range(), "-o", str(out), GPUFLOW_TOKEN_FILE=str(tok))
    assert r.returncode == 0, r.stderr


def test_without_the_token_nothing_is_written_and_an_old_file_stays(agent, tmp_path):
    port, _ = agent
    out = tmp_path / "kept.perfetto-trace"
    out.write_bytes(b"an earlier export")
    r = export("--url", f"http://127.0.0.1:{port}/", *now_range(), "-o", str(out))
    assert r.returncode == 1 and "needs its token" in r.stderr and "was not written" in r.stderr
    assert out.read_bytes() == b"an earlier export" and sorted(os.listdir(tmp_path)) == ["kept.perfetto-trace"]
    r = export("--url", f"http://127.0.0.1:{port}/", *now_range(), "-o", str(out), GPUFLOW_TOKEN="W" + STRONG)
    assert r.returncode == 1 and "refused the token" in r.stderr


@pytest.mark.parametrize("flags,said", [
    ([], "the following arguments are required"),
    (["--url", "http://127.0.0.1:1/", "--from", "x", "--to", "2", "-o", "f"], "--from: expected seconds"),
    (["--url", "http://127.0.0.1:1/", "--from", "5", "--to", "2", "-o", "f"], "--to must be after --from"),
    (["--url", "http://127.0.0.1:1/", "--from", "1", "--to", "2", "--pid", "-3", "-o", "f"], "--pid"),
    (["--url", "http://127.0.0.1:1/", "--from", "1", "--to", "2", "-o", "/nonexistent/dir/f"], "does not exist"),
    (["--url", "http://127.0.0.1:1/#token=" + STRONG, "--from", "1", "--to", "2", "-o", "f"], "holds a token"),
    (["--url", "http://me:pw@127.0.0.1:1/", "--from", "1", "--to", "2", "-o", "f"], "user name or password"),
    (["--url", "ftp://127.0.0.1/", "--from", "1", "--to", "2", "-o", "f"], "http:// or https://"),
    (["--url", "http://127.0.0.1:99999/", "--from", "1", "--to", "2", "-o", "f"], "port"),
])
def test_bad_input_is_one_line_and_exit_2(flags, said, tmp_path):
    r = gpuflow("export", *flags, env=gpuflow_env(), cwd=tmp_path, timeout=30)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and said in lines[0], r.stderr
    assert lines[0].startswith("gpuflow export: error: ") and STRONG not in r.stderr
    assert not os.listdir(tmp_path)


@pytest.mark.parametrize("variables,said", [
    ({"GPUFLOW_TOKEN": "auto"}, "asks an agent to make a token"),
    ({"GPUFLOW_TOKEN": STRONG, "GPUFLOW_TOKEN_FILE": "/x"}, "not both"),
    ({"GPUFLOW_TOKEN": "has space"}, "printable ASCII"),
])
def test_a_token_that_cannot_be_used_is_one_line_and_exit_2(variables, said, tmp_path):
    r = export("--url", "http://127.0.0.1:1/", "--from", "1", "--to", "2", "-o", str(tmp_path / "f"), **variables)
    assert r.returncode == 2 and said in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_an_unreachable_agent_is_exit_1(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = export("--url", f"http://127.0.0.1:{port}/", "--from", "1", "--to", "2", "-o", str(tmp_path / "f"))
    assert r.returncode == 1 and "cannot reach the agent" in r.stderr and not os.listdir(tmp_path)


class Misbehaving(http.server.BaseHTTPRequestHandler):
    """Answers /api/export as a broken or hostile server would; records what it was sent."""

    seen: list[dict] = []
    mode = "cut"

    def do_GET(self):  # noqa: N802 - http.server's name
        Misbehaving.seen.append({"path": self.path, "auth": self.headers.get("Authorization")})
        if self.path.startswith("/elsewhere"):
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.end_headers()
            self.wfile.write(b"stolen" + END_OF_TRACE)
            return
        if Misbehaving.mode == "redirect":
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{self.server.server_address[1]}/elsewhere")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream" if Misbehaving.mode == "cut" else "text/html")
        self.end_headers()
        self.wfile.write(b"\x0a\x02\x50\x01" * 1000)  # whole packets, but no end-of-trace

    def log_message(self, *args):
        pass


@pytest.fixture
def misbehaving():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Misbehaving)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Misbehaving.seen = []
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("mode,said", [("cut", "before the whole trace"), ("html", "did not answer with a trace"),
                                       ("redirect", "follows none")])
def test_a_stream_that_is_not_a_whole_trace_writes_nothing(misbehaving, tmp_path, mode, said):
    Misbehaving.mode = mode
    r = export("--url", f"http://127.0.0.1:{misbehaving}/", "--from", "1", "--to", "2", "-o", str(tmp_path / "f"),
               GPUFLOW_TOKEN=STRONG)
    assert r.returncode == 1 and said in r.stderr, r.stderr
    assert not os.listdir(tmp_path)
    assert [s["auth"] for s in Misbehaving.seen] == [f"Bearer {STRONG}"]  # never sent to the redirect's target
    assert Misbehaving.seen[0]["path"].startswith("/api/export?from=1.0&to=2.0")
