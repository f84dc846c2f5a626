"""Shared by ``watch`` and ``run``: assemble the app, start the agent and the embedded server.

The embedded server is a threaded WSGI server (gpuflow.transport.server), not gunicorn: gunicorn's
arbiter reaps every child with waitpid(-1) and owns the main thread's signals, which would steal
the exit status of the program ``gpuflow run`` launched. The same Falcon app is what
``gunicorn 'gpuflow.transport.app:get_app()'`` serves, assembled by the same function
(:func:`gpuflow.transport.app.assemble_app`) from settings resolved by the same function
(:func:`gpuflow.transport.settings.from_environ`: the ``GPUFLOW_*`` variables, the flags given
overriding them), and held to the same rules before it serves
(:mod:`gpuflow.transport.preflight`: a public bind needs a strong token, the UI file is a
regular file).

Constraints: validates everything that can fail (plugins, options, token, bind, --ui, port)
before printing the URL, and turns each failure into a one-line message for the CLI (exit
status 2). Prints a generated token once, in the login URL (a token the user gave is never
printed). Reaches the collectors only through the plugin manager the command line loaded
(``args.plugin_manager``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import socket
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import quote

from gpuflow.cli import logs
from gpuflow.cli.options import is_loopback
from gpuflow.core.agent import Agent
from gpuflow.core.options import OptionError
from gpuflow.core.plugins import PluginLoadError
from gpuflow.testing.ab_period import ab_period_ms

if TYPE_CHECKING:
    from gpuflow.transport.app import GpuflowApp
    from gpuflow.transport.settings import AppSettings

TOKEN_HINT = "--token-file FILE, GPUFLOW_TOKEN or --token auto"


class StartupError(Exception):
    """The agent cannot start; the message is one line for the user."""


@dataclass
class Serving:
    agent: Agent
    server: object
    url: str  #: the page's address, never with a token
    login_url: str  #: what to print once at start: the address, with a generated token

    def stop(self) -> None:
        try:
            self.server.shutdown()  # type: ignore[attr-defined]
        finally:
            self.agent.stop()


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The flags given on the command line, as gpuflow.transport.settings overrides."""
    given: dict[str, Any] = {}
    if args.interval is not None:
        given["interval_s"] = args.interval / 1000.0
    if args.show_cmdline:
        given["show_cmdline"] = True
    if args.ui is not None:
        given["ui_path"] = args.ui
    if args.token is not None:
        given["token"] = args.token
    if args.token_file is not None:
        given["token_file"] = args.token_file
    if args.allow_host:
        given["allow_hosts"] = tuple(args.allow_host)
    if args.metrics_per_process:
        given["metrics_per_process"] = True
    if getattr(args, "otlp_endpoint", None):
        given["otlp_endpoint"] = args.otlp_endpoint
    if args.insecure_no_auth:
        given["insecure_no_auth"] = True
    if getattr(args, "switch_interval_s", None) is not None:   # a command's own default (gpuflow hub)
        given["switch_interval_s"] = args.switch_interval_s
    return given


def allowed_hosts(bind: str, hosts: tuple[str, ...], token: str | None) -> tuple[str, ...]:
    """Host headers to accept besides loopback and localhost.

    On a loopback bind: only the ``--allow-host`` / GPUFLOW_ALLOW_HOSTS values (DNS rebinding
    defence). On a non-loopback bind the page is reached by this machine's name or address, so
    those are added; with a token and no names given any Host is accepted: every data route
    needs the token, which a rebinding page cannot present (the page keeps it in the storage of
    the origin it was opened on).
    """
    if is_loopback(bind):
        return hosts
    if token and not hosts:
        return ("*",)
    names = {socket.gethostname(), socket.getfqdn()}
    if bind not in ("0.0.0.0", "::"):
        names.add(bind)
    else:
        names |= local_addresses()
    return tuple(list(hosts) + sorted(n for n in names if n))


def local_addresses() -> set[str]:
    """This machine's addresses by which a wildcard bind may be reached (best effort, no DNS)."""
    found: set[str] = set()
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None):
            found.add(str(info[4][0]))
    except OSError:
        pass
    return found


def build_app(args: argparse.Namespace) -> GpuflowApp:
    """The app and its agent for these arguments, nothing started; StartupError says what is wrong.

    Sets ``args.settings`` (the transport settings in force) and ``args.token_source``.
    """
    from gpuflow.transport.app import assemble_app
    from gpuflow.transport.preflight import check_ui_file, exposure_error
    from gpuflow.transport.settings import from_environ

    logs.install()
    try:
        env = from_environ(os.environ, overrides(args))
        settings = dataclasses.replace(
            env.settings, allow_hosts=allowed_hosts(args.bind, env.settings.allow_hosts, env.settings.token))
        if settings.ui_path is not None:
            check_ui_file(settings.ui_path, "--ui" if args.ui is not None else "GPUFLOW_UI")
        refused = exposure_error([args.bind], settings, TOKEN_HINT, "give --insecure-no-auth")
        if refused is not None:
            raise StartupError(f"--bind {refused}" if settings.token is None else refused)
        config = dataclasses.replace(env.agent, options=args.plugin_options)
        app = assemble_app(config, settings, plugin_manager=args.plugin_manager)
    except (PluginLoadError, OptionError, ValueError) as exc:
        raise StartupError(str(exc)) from None
    args.settings, args.token_source = settings, env.token_source
    return app


def start_serving(args: argparse.Namespace, app: GpuflowApp) -> Serving:
    """Bind the port, start the agent and the server thread; the URL to print."""
    from gpuflow.transport.server import EmbeddedServer, ServerStartError

    agent = app.state.agent
    try:
        server = EmbeddedServer(app, args.bind, args.port)
    except ServerStartError as exc:
        raise StartupError(str(exc)) from None
    agent.start()
    app.state.ensure_started()   # what the app starts beside the agent (the OTLP exporter)
    server.serve_in_thread()
    shown = socket.gethostname() if args.bind in ("0.0.0.0", "::") else args.bind
    host = f"[{shown}]" if ":" in shown else shown
    url = f"http://{host}:{server.port}/"
    token = app.state.settings.token
    login = login_url(url, token) if token is not None and args.token_source == "generated" else url
    return Serving(agent=agent, server=server, url=url, login_url=login)


def login_url(url: str, token: str) -> str:
    """The page's address with the token in its fragment, percent-encoded: the fragment never
    leaves the browser (no request line, no proxy log), and the page takes it out of the address
    bar and its history entry at once."""
    return f"{url}#token={quote(token, safe='')}"


def describe_login(args: argparse.Namespace, out: TextIO) -> None:
    """How to log in, where it is not in the printed URL: the page asks for the token."""
    if args.settings.token is not None and args.token_source != "generated":
        out.write(f"  the page asks for the token (from {args.token_source}) once per tab\n")


def warn_if_benchmarking() -> None:
    """GPUFLOW_AB_PERIOD_MS (gpuflow.testing.ab_period) makes GPUFlow stand aside every other
    period: whoever set it and forgot must not take the partial view for a whole one."""
    period = ab_period_ms()
    if period:
        sys.stderr.write(
            f"gpuflow: GPUFLOW_AB_PERIOD_MS={period} (benchmarking): in every other {period} ms traced "
            "kernels and copies are stepped over, not recorded, and NVML is not polled: counts, "
            "lanes and readings are partial. Unset it for a whole view.\n")


def warn_if_exposed(args: argparse.Namespace) -> None:
    """The token on the command line, a weak token, serving without authentication: on stderr."""
    from gpuflow.transport.preflight import exposure_warnings

    settings: AppSettings = args.settings
    if args.token_source == "--token":
        sys.stderr.write("gpuflow: warning: --token is on the command line, which every user of this "
                         "machine can read (ps, /proc/PID/cmdline): use --token-file FILE or "
                         "GPUFLOW_TOKEN instead\n")
    for line in exposure_warnings([args.bind], settings):
        if settings.token is None:
            bar = "!" * 78
            sys.stderr.write(f"{bar}\ngpuflow: WARNING: {line}\n{bar}\n")
        else:
            sys.stderr.write(f"gpuflow: warning: {line}\n")
