"""``gpuflow open FILE``: a trace GPUFlow wrote, shown in GPUFlow's own page, with no GPU.

A recording made on one machine (``gpuflow run --trace-out``, ``gpuflow export``, the page's
save) is served here as the agent that recorded it would serve it, to be scrubbed over its range
in the page: the recording collector (the plugin named :data:`RECORDING`) reads the file, and
every other collector is off (no NVML, no CUPTI, no third-party plugin: what the page shows is the
recording, nothing of this machine). The file is read before anything is served; a file it
cannot show (missing, too large, cut short, not a GPUFlow trace) is one line on stderr and exit
status 2, before the URL. Then the page is served until Ctrl-C or SIGTERM, like ``gpuflow
watch`` (exit 0).

Constraints: imports no collector (the plugin is reached through the plugin manager, by its
name, as ``GPUFLOW_DISABLED_PLUGINS`` names plugins); every text from the snapshot goes through
:func:`gpuflow.cli.printable.printable`; the parser part (:func:`add_open_command`) imports nothing
of the command line's, which imports it.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable, Sequence

from gpuflow import __version__

#: the plugin that reads a recording (registered under this name in gpuflow.core.plugins)
RECORDING = "recording"
#: its option that takes the file
FILE_OPTION = "file"
#: the serving flags ``gpuflow open`` does not offer (no collector polls, none but the recording loads;
#: --plugin is refused if given)
NOT_OFFERED = ("interval", "plugin")


def add_open_command(sub: Any, plugins: Sequence[Any], serving_flags: Callable[[argparse.ArgumentParser], None],
                     plugin_flags: Callable[..., None]) -> None:
    """``gpuflow open``'s parser, with the serving flags and the plugins' flags for ``open``."""
    opened = sub.add_parser(
        "open", help="show a trace GPUFlow wrote in GPUFlow's page, scrubbable over its range (no GPU needed)",
        description="Serve a Perfetto trace that GPUFlow wrote (gpuflow run --trace-out, gpuflow export, the "
                    "page's Save window) in GPUFlow's own page: its GPUs, processes and traced streams as they "
                    "stood at its end, and the timeline over its whole range. Every collector but the recording "
                    "is off, so nothing of this machine is shown. A file that cannot be shown stops it at once, "
                    "with the reason (exit 2).",
        usage="gpuflow open [options] FILE")
    opened.add_argument("file", metavar="FILE", help="the trace (.perfetto-trace) to show")
    serving_flags(opened)
    for action in opened._actions:   # serving flags that do not apply to a recording: not offered
        if action.dest in NOT_OFFERED:
            action.help = argparse.SUPPRESS
    plugin_flags(opened, "open", plugins)


def _only_the_recording() -> Any:
    """A plugin manager holding the recording plugin alone; PluginLoadError if it cannot."""
    from gpuflow.core.plugins import DEFAULT_PLUGINS, PluginLoadError, disabled_plugin_names, get_plugin_manager

    if RECORDING in disabled_plugin_names():
        raise PluginLoadError(f"GPUFLOW_DISABLED_PLUGINS turns off {RECORDING!r}, the plugin that reads recordings")
    others = [name for name, _ in DEFAULT_PLUGINS if name != RECORDING]
    environ = {**os.environ, "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1", "GPUFLOW_DISABLED_PLUGINS": ",".join(others)}
    pm = get_plugin_manager(environ=environ)
    if pm.get_plugin(RECORDING) is None:
        raise PluginLoadError(f"this GPUFlow has no {RECORDING!r} plugin to read recordings")
    return pm


def cmd_open(args: argparse.Namespace) -> int:
    from gpuflow.cli import logs
    from gpuflow.cli.printable import printable
    from gpuflow.cli.serving import StartupError, build_app, describe_login, start_serving, warn_if_exposed
    from gpuflow.cli.watch import StopSignals
    from gpuflow.core.plugins import PluginLoadError

    err = sys.stderr
    if args.plugin:
        err.write("gpuflow open: error: --plugin does not apply: gpuflow open shows the recording alone "
                  "(see gpuflow open --help)\n")
        return 2
    try:
        args.plugin_manager = _only_the_recording()
        given = args.plugin_options.get(RECORDING, {})
        args.plugin_options = {RECORDING: {**given, FILE_OPTION: args.file}}
        app = build_app(args)
    except (PluginLoadError, StartupError) as exc:
        err.write(f"gpuflow open: error: {printable(str(exc))}\n")
        return 2
    agent = app.state.agent
    try:
        agent.start()   # the recording is read here, before anything is served
    except KeyboardInterrupt:
        err.write("gpuflow open: interrupted while reading the recording\n")
        return 130
    first = agent.board.latest()
    problems = first.problems if first is not None else ()
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        agent.stop()
        for p in errors:
            err.write(f"gpuflow open: error: {printable(p.message)}\n")
        return 2
    with StopSignals() as stop:
        try:
            serving = start_serving(args, app)
        except StartupError as exc:
            agent.stop()
            err.write(f"gpuflow open: error: {exc}\n")
            return 2
        warn_if_exposed(args)
        try:
            out = sys.stdout
            out.write(f"GPUFlow {__version__}: {printable(args.file)} at {serving.login_url}\n")
            for p in problems:
                out.write(f"  {printable(p.severity)}: [{printable(p.source)}] {printable(p.message)}\n")
            logs.install().banner_shown([p.message for p in problems])
            describe_login(args, out)
            out.write("Press Ctrl-C to stop.\n")
            out.flush()
            stop.wait()
        finally:
            serving.stop()
    sys.stdout.write("gpuflow: stopped\n")
    return 0
