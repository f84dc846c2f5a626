"""``gpuflow export --url URL [--token-file F] --from T0 --to T1 [--pid P] -o FILE``: save a range a
running agent retains as a Perfetto trace.

A client of the agent's ``GET /api/export`` (gpuflow.transport.export_api): the trace streams into
a temporary file beside FILE, which replaces FILE only once the whole trace has arrived (it ends
with the trace's end-of-trace packet, gpuflow.export.perfetto.END_OF_TRACE); anything else
(the agent unreachable, a refusal, a stream cut short, Ctrl-C) leaves FILE as it was and says why
in one line. Exit status: 0 written, 1 the export failed, 2 bad input (flags, URL, token), 130
interrupted.

The token is the one the agent was given: from ``--token-file``, else ``GPUFLOW_TOKEN_FILE``, else
``GPUFLOW_TOKEN`` (the file judged as the agent judges its own: gpuflow.transport.tokens). There
is no ``--token`` flag and a URL may not carry one (a login URL's ``#token=``): every user of
the machine can read a command line.

Constraints: standard library HTTP only; the token goes only to the URL given — no proxy from the
environment, no redirect followed (a redirect would carry the Authorization header elsewhere);
text from the agent is printed through :func:`gpuflow.cli.printable.printable`, bounded.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import urllib.error
import urllib.request
from typing import Mapping
from urllib.parse import urlencode, urlsplit

from gpuflow.cli.printable import printable
from gpuflow.export.perfetto import END_OF_TRACE
from gpuflow.transport.tokens import GENERATE, TokenError, check_form, read_token_file

READ_BYTES = 1 << 20
TIMEOUT_S = 60.0
MAX_ERROR_BYTES = 4096


class BadInput(Exception):
    """A flag, URL or token that cannot be used (exit 2)."""


class ExportFailed(Exception):
    """The export did not arrive whole (exit 1)."""


def agent_base(url: str) -> str:
    """The agent's address checked, ending in ``/`` (the routes are relative to it)."""
    parts = urlsplit(url)
    if parts.fragment and "token" in parts.fragment or "token=" in parts.query:
        raise BadInput("the URL holds a token, which every user of this machine can read on a command "
                       "line: give the agent's address alone, and the token with --token-file or GPUFLOW_TOKEN")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(f"--url must be the agent's http:// or https:// address, got {printable(url)!s}")
    if parts.username or parts.password:
        raise BadInput("--url must not hold a user name or password")
    if parts.query or parts.fragment:
        raise BadInput("--url must be the agent's address, without a query or fragment")
    try:
        parts.port
    except ValueError:
        raise BadInput("--url has a port that is not a number from 0 to 65535") from None
    path = parts.path if parts.path.endswith("/") else parts.path + "/"
    return f"{parts.scheme}://{parts.netloc}{path}"


def export_token(token_file: str | None, env: Mapping[str, str]) -> str | None:
    """The agent's token: --token-file, else GPUFLOW_TOKEN_FILE, else GPUFLOW_TOKEN, else None."""
    try:
        if token_file is not None:
            return read_token_file(token_file, "--token-file")
        from_file = env.get("GPUFLOW_TOKEN_FILE") or None
        raw = env.get("GPUFLOW_TOKEN") or None
        if from_file and raw:
            raise TokenError("set GPUFLOW_TOKEN or GPUFLOW_TOKEN_FILE, not both")
        if from_file:
            return read_token_file(from_file, "GPUFLOW_TOKEN_FILE")
        if raw is None:
            return None
        if raw == GENERATE:
            raise TokenError(f"GPUFLOW_TOKEN={GENERATE} asks an agent to make a token; give gpuflow export "
                             "the token the agent uses")
        check_form(raw, "GPUFLOW_TOKEN")
        return raw
    except TokenError as exc:
        raise BadInput(str(exc)) from None


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        raise ExportFailed(f"the agent answered {code} (a redirect): gpuflow export follows none, so that "
                           "the token goes nowhere else; give the address it redirects to with --url")


def _refusal(exc: urllib.error.HTTPError, had_token: bool) -> ExportFailed:
    if exc.code == 401:
        return ExportFailed("the agent refused the token" if had_token else
                            "the agent needs its token: give --token-file FILE, GPUFLOW_TOKEN_FILE or GPUFLOW_TOKEN")
    try:
        said = json.loads(exc.read(MAX_ERROR_BYTES).decode("utf-8", "replace")).get("error")
    except (ValueError, AttributeError, OSError):
        said = None
    reason = f": {printable(str(said))[:500]}" if said else ""
    if exc.code == 404:
        return ExportFailed("the agent has no /api/export (is it GPUFlow 0.3 or later?)" + reason)
    return ExportFailed(f"the agent answered {exc.code} {printable(str(exc.reason))[:80]}{reason}")


def download(url: str, token: str | None, output: str) -> int:
    """The export at ``url`` into ``output`` (replaced only when whole); the bytes written."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirects())
    headers = {"Accept": "application/octet-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, headers=headers)
    folder = os.path.dirname(os.path.abspath(output))
    fd, partial = tempfile.mkstemp(prefix=".gpuflow-export-", suffix=".partial", dir=folder)
    try:
        size, tail = 0, b""
        with os.fdopen(fd, "wb") as fh:
            try:
                with opener.open(request, timeout=TIMEOUT_S) as response:
                    kind = response.headers.get("Content-Type", "")
                    if kind.split(";")[0].strip() != "application/octet-stream":
                        raise ExportFailed(f"{printable(url)} did not answer with a trace ({printable(kind)[:60]}): "
                                           "is --url a GPUFlow agent?")
                    while True:
                        chunk = response.read(READ_BYTES)
                        if not chunk:
                            break
                        fh.write(chunk)
                        size += len(chunk)
                        tail = (tail + chunk)[-len(END_OF_TRACE):]
            except urllib.error.HTTPError as exc:
                raise _refusal(exc, token is not None) from None
            except urllib.error.URLError as exc:
                raise ExportFailed(f"cannot reach the agent at {printable(url)}: "
                                   f"{printable(str(exc.reason))[:200]}") from None
            except (OSError, ValueError) as exc:  # reset, timed out, a broken chunk
                raise ExportFailed(f"the export broke off after {size} bytes: {printable(str(exc))[:200]}") from None
        if tail != END_OF_TRACE:
            raise ExportFailed(f"the agent ended the export after {size} bytes, before the whole trace (its log "
                               "says why)")
        os.replace(partial, output)
        return size
    except BaseException:
        try:
            os.unlink(partial)
        except FileNotFoundError:
            pass
        raise


def cmd_export(args: argparse.Namespace) -> int:
    err = sys.stderr
    try:
        base = agent_base(args.url)
        token = export_token(args.token_file, os.environ)
    except BadInput as exc:
        err.write(f"gpuflow export: error: {exc}\n")
        return 2
    query = {"from": repr(args.start), "to": repr(args.end)}
    if args.pid is not None:
        query["pid"] = str(args.pid)
    try:
        size = download(f"{base}api/export?{urlencode(query)}", token, args.output)
    except ExportFailed as exc:
        err.write(f"gpuflow export: {exc}; {args.output} was not written\n")
        return 1
    except KeyboardInterrupt:
        err.write(f"gpuflow export: interrupted; {args.output} was not written\n")
        return 130
    err.write(f"gpuflow export: wrote {args.output} ({size / 1e6:.1f} MB): open it at https://ui.perfetto.dev\n")
    return 0
