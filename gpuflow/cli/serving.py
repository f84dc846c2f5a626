"""Shared by ``watch`` and ``run``: assemble the app, start the agent and the embedded server.

The embedded server is a threaded WSGI server (gpuflow.transport.server), not gunicorn: gunicorn's
arbiter reaps every child with waitpid(-1) and owns the main thread's signals, which would steal
the exit status of the program ``gpuflow run`` launched. The same Falcon app is what
``gunicorn 'gpuflow.transport.app:get_app()'`` serves, assembled by the same function
(:func:`gpuflow.transport.app.assemble_app`).

Constraints: validates everything that can fail (plugins, options, --ui, port) before printing
the URL, and turns each failure into a one-line message for the CLI (exit status 2). Reaches the
collectors only through the plugin manager the command line loaded (``args.plugin_manager``).
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuflow.cli.options import is_loopback
from gpuflow.core.agent import Agent
from gpuflow.core.context import AgentConfig
from gpuflow.core.options import OptionError
from gpuflow.core.plugins import PluginLoadError
from gpuflow.testing.ab_period import ab_period_ms

if TYPE_CHECKING:
    from gpuflow.transport.app import GpuflowApp


class StartupError(Exception):
    """The agent cannot start; the message is one line for the user."""


@dataclass
class Serving:
    agent: Agent
    server: object
    url: str

    def stop(self) -> None:
        try:
            self.server.shutdown()  # type: ignore[attr-defined]
        finally:
            self.agent.stop()


def agent_config(args: argparse.Namespace) -> AgentConfig:
    return AgentConfig(interval_s=args.interval / 1000.0, show_cmdline=args.show_cmdline,
                       options=args.plugin_options)


def allowed_hosts(args: argparse.Namespace) -> tuple[str, ...]:
    """Host headers to accept besides loopback and localhost.

    On a loopback bind: only ``--allow-host`` values (DNS rebinding defence). On a non-loopback
    bind the page is reached by this machine's name or address, so those are added; with a token
    and no ``--allow-host`` any Host is accepted, because the token cookie is bound to the real
    host name and a rebinding page cannot present it.
    """
    hosts = list(args.allow_host)
    if is_loopback(args.bind):
        return tuple(hosts)
    if args.token and not hosts:
        return ("*",)
    names = {socket.gethostname(), socket.getfqdn()}
    if args.bind not in ("0.0.0.0", "::"):
        names.add(args.bind)
    else:
        names |= local_addresses()
    return tuple(hosts + sorted(n for n in names if n))


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
    """The app and its agent for these arguments, nothing started; StartupError says what is wrong."""
    from gpuflow.transport.app import AppSettings, assemble_app

    logging.basicConfig(level=logging.WARNING, format="gpuflow: %(levelname)s: %(name)s: %(message)s")
    if args.ui is not None:
        try:
            with open(args.ui, "rb"):
                pass
        except OSError as exc:
            raise StartupError(f"--ui {args.ui}: {exc.strerror}") from None
    try:
        settings = AppSettings(
            token=args.token,
            allow_hosts=allowed_hosts(args),
            ui_path=args.ui,
            metrics_per_process=args.metrics_per_process,
        )
        return assemble_app(agent_config(args), settings, plugin_manager=args.plugin_manager)
    except (PluginLoadError, OptionError, ValueError) as exc:
        raise StartupError(str(exc)) from None


def start_serving(args: argparse.Namespace, app: GpuflowApp) -> Serving:
    """Bind the port, start the agent and the server thread; the URL to print."""
    from gpuflow.transport.server import EmbeddedServer, ServerStartError

    agent = app.state.agent
    try:
        server = EmbeddedServer(app, args.bind, args.port)
    except ServerStartError as exc:
        raise StartupError(str(exc)) from None
    agent.start()
    server.serve_in_thread()
    shown = socket.gethostname() if args.bind in ("0.0.0.0", "::") else args.bind
    host = f"[{shown}]" if ":" in shown else shown
    url = f"http://{host}:{server.port}/"
    if args.token:
        url += f"?token={args.token}"
    return Serving(agent=agent, server=server, url=url)


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
    if not is_loopback(args.bind) and args.insecure_no_auth and not args.token:
        bar = "!" * 78
        sys.stderr.write(
            f"{bar}\n"
            f"gpuflow: WARNING: serving on {args.bind} WITHOUT AUTHENTICATION (--insecure-no-auth).\n"
            "gpuflow: anyone who can reach this port sees every GPU process on this machine:\n"
            "gpuflow: pids, users and program names. Use --token, or an SSH tunnel, instead.\n"
            f"{bar}\n"
        )
