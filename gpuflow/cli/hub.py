"""``gpuflow hub``: one live view over many agents, served like ``gpuflow watch`` serves one.

The hub is an agent whose collector is the fleet plugin (:data:`FLEET`): it follows other agents'
streams and serves their hosts with the same app, the same page, the same ``/metrics``, the same
rules (a loopback bind by default; a public one needs a strong token; the Host allow-list). This
machine's own collectors are off (its NVML and CUPTI, entry-point collectors) unless
``--local-collectors``; ``--plugin`` modules are loaded as asked. The agents come from
``--targets FILE`` (Prometheus file_sd JSON, re-read when it changes), ``--target URL``
(repeatable) and/or ``--srv NAME`` (a DNS SRV name, asked again as its TTL says), their tokens
from ``--credentials FILE`` (re-read when it changes; never a flag: command lines are readable
by every local user); those flags are the fleet plugin's own (gpuflow/collectors/fleet/options.py),
and its variables serve under gunicorn too (docs/fleet.md). Without a target it stops at once
with one line (exit 2), as with any bad value, before the URL is printed.

Constraints: imports no collector (the plugin is reached through the plugin manager, by its
name, as ``GPUFLOW_DISABLED_PLUGINS`` names plugins); the parser part (:func:`add_hub_command`)
imports nothing of the command line's, which imports it.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable, Sequence

from gpuflow import __version__

#: the plugin that follows other agents (registered under this name in gpuflow.core.plugins)
FLEET = "fleet"
#: the switch interval a hub runs with unless GPUFLOW_SWITCH_INTERVAL_MS says otherwise, or it runs
#: this machine's own collectors too (--local-collectors: then the agent's): the interpreter's own. An agent lowers it to 0.5 ms so that its server answers while CPU-bound
#: collectors drain rings (gpuflow.core.gil); a hub's threads are its network thread and its pages'
#: streams, and at 64 watched agents on the GPU host 0.5 ms cost it 1.16-1.23 times the CPU with
#: a /healthz neither reliably quicker nor slower (docs/fleet.md, "The hub's switch interval")
HUB_SWITCH_INTERVAL_S = 0.005
NO_TARGET = ("no agent to follow: give --targets FILE (Prometheus file_sd JSON), --target URL or "
             "--srv NAME (or GPUFLOW_HUB_TARGETS_FILE / GPUFLOW_HUB_TARGETS / GPUFLOW_HUB_SRV)")


def add_hub_command(sub: Any, plugins: Sequence[Any], serving_flags: Callable[[argparse.ArgumentParser], None],
                    plugin_flags: Callable[..., None]) -> None:
    """``gpuflow hub``'s parser: the serving flags, ``--local-collectors``, the plugins' hub flags."""
    hub = sub.add_parser(
        "hub", help="serve one live view of many agents (gpuflow watch on other hosts)",
        description="Follow other GPUFlow agents' streams and serve their hosts in one page: a tile per "
                    "host, and any host's own view (its GPUs, processes and traced lanes) on a click. "
                    "Serves like gpuflow watch, under the same rules. The agents come from a Prometheus "
                    "file_sd file (--targets), URLs (--target) and DNS SRV names (--srv, asked again as "
                    "their TTL says); the targets and credentials files are read again when they change.",
        usage="gpuflow hub (--targets FILE | --target URL ... | --srv NAME ...) [--credentials FILE] [options]")
    serving_flags(hub)
    hub.add_argument("--local-collectors", action="store_true",
                     help="also run this machine's own collectors (NVML, CUPTI, entry points)")
    plugin_flags(hub, "hub", plugins)


def _fleet_only(extra_modules: Sequence[str]) -> Any:
    """A plugin manager with the fleet plugin and the ``--plugin`` modules only."""
    from gpuflow.core.plugins import DEFAULT_PLUGINS, PluginLoadError, disabled_plugin_names, get_plugin_manager

    if FLEET in disabled_plugin_names():
        raise PluginLoadError(f"GPUFLOW_DISABLED_PLUGINS turns off {FLEET!r}, the plugin that follows agents")
    others = [name for name, _ in DEFAULT_PLUGINS if name != FLEET]
    environ = {**os.environ, "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1",
               "GPUFLOW_DISABLED_PLUGINS": ",".join(others)}
    return get_plugin_manager(extra_modules, environ=environ)


def _targets_given(app: Any, pm: Any) -> bool:
    """Whether the fleet plugin has some target (from a flag or its variables)."""
    from gpuflow.core.plugins import declared_options

    for declared in declared_options(pm):
        if declared.plugin == FLEET:
            values = app.state.agent.context.plugin_options(declared)
            return bool(values["targets"]) or values["targets_file"] is not None or bool(values.get("srv"))
    return False


def cmd_hub(args: argparse.Namespace) -> int:
    from gpuflow.cli import logs
    from gpuflow.cli.printable import printable
    from gpuflow.cli.serving import StartupError, build_app, describe_login, start_serving, warn_if_exposed
    from gpuflow.cli.watch import StopSignals
    from gpuflow.core.plugins import PluginLoadError

    err = sys.stderr
    try:
        if not args.local_collectors:
            args.plugin_manager = _fleet_only(args.plugin)
        if not args.local_collectors and not os.environ.get("GPUFLOW_SWITCH_INTERVAL_MS", "").strip():
            args.switch_interval_s = HUB_SWITCH_INTERVAL_S   # with local collectors, the agent's
        app = build_app(args)
        if not _targets_given(app, args.plugin_manager):
            raise StartupError(NO_TARGET)
    except (PluginLoadError, StartupError) as exc:
        err.write(f"gpuflow hub: error: {printable(str(exc))}\n")
        return 2
    with StopSignals() as stop:
        try:
            serving = start_serving(args, app)
        except StartupError as exc:
            err.write(f"gpuflow hub: error: {exc}\n")
            return 2
        warn_if_exposed(args)
        try:
            out = sys.stdout
            first = serving.agent.board.wait_first(3.0)
            hosts = len(first.hosts) if first is not None else 0
            out.write(f"GPUFlow {__version__}: hub at {serving.login_url}, following {hosts} agent(s)\n")
            for p in first.problems if first is not None else ():
                out.write(f"  {printable(p.severity)}: [{printable(p.source)}] {printable(p.message)}\n")
            logs.install().banner_shown([p.message for p in first.problems] if first is not None else [])
            describe_login(args, out)
            out.write("Press Ctrl-C to stop.\n")
            out.flush()
            stop.wait()
        finally:
            serving.stop()
    sys.stdout.write("gpuflow: stopped\n")
    return 0
