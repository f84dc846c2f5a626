"""Command-line parsing for ``gpuflow``: flags, validation, and one-line errors with exit status 2.

``gpuflow export`` (a client of a running agent) takes flags of its own, checked here too.

The flags of the agent and the server are defined here; each plugin's own flags come from its
``declare_options`` hook (``--ring-capacity``, ``--flush-ms``: the CUPTI collector's), so the
plugins are loaded before the command line is parsed (with the ``--plugin`` modules found by a
first look at the arguments). A plugin flag that is given lands in ``args.plugin_options``
(``{plugin key: {option: value}}``), checked by the plugin's own converter.

Constraints: argparse's default error prints a usage block; users asked for one clear line, so
:class:`OneLineParser` prints ``gpuflow <cmd>: error: <what> (see gpuflow <cmd> --help)`` and
exits 2. Every value is validated here or, where it depends on the environment too (the token, a
public bind, the UI file), by gpuflow.cli.serving before anything starts (no half-started
agent). A flag left out stays None (or False, or empty) so that its GPUFLOW_* variable applies:
the settings are resolved in one place for the CLI and gunicorn (gpuflow.transport.settings).
Loading the plugins imports no collector library (NVML, CUPTI), so ``--help`` stays instant.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from typing import Any, NoReturn, Sequence


from gpuflow import __version__
from gpuflow.cli.hub import add_hub_command
from gpuflow.cli.open import add_open_command
from gpuflow.core.context import DEFAULT_INTERVAL_S
from gpuflow.core.options import Option, PluginOptions
from gpuflow.core.plugins import PluginLoadError, declared_options, get_plugin_manager

DEFAULT_BIND = "127.0.0.1"
DEFAULT_PORT = 7717


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        raise SystemExit(2)


MAX_INTERVAL_MS = 3_600_000  # an hour: longer waits are surely a typo (and overflow timed waits)


def positive_ms(text: str, maximum: int = MAX_INTERVAL_MS) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of milliseconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of milliseconds, got {value}")
    if value > maximum:
        raise argparse.ArgumentTypeError(f"must be at most {maximum} milliseconds, got {value}")
    return value


def writable_file(text: str) -> str:
    """A path gpuflow can create or overwrite, checked before anything starts."""
    import os

    if not text:
        raise argparse.ArgumentTypeError("the file name is empty")
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a directory")
    parent = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(parent):
        raise argparse.ArgumentTypeError(f"directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (os.path.exists(text) and not os.access(text, os.W_OK)):
        raise argparse.ArgumentTypeError(f"{text} cannot be written (permission denied)")
    return text


def epoch_seconds(text: str) -> float:
    """A time as seconds since the Unix epoch (what /api/window and /api/export take)."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds since the Unix epoch, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite, non-negative number of seconds, got {text!r}")
    return value


def process_id(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 2**31 - 1:
        raise argparse.ArgumentTypeError(f"expected a process id (a whole number), got {text!r}")
    return int(text)


def port_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port {value} is out of range (1-65535, or 0 for any free port)")
    return value


def bind_address(text: str) -> str:
    """An IP literal or ``localhost``; an IPv6 literal may come bracketed (``[::1]``), but whole."""
    host = text[1:-1] if text.startswith("[") and text.endswith("]") and len(text) > 1 else text
    if "[" in host or "]" in host:
        raise argparse.ArgumentTypeError(f"bind address has unbalanced brackets: {text!r} (write ::1 or [::1])")
    if not host:
        raise argparse.ArgumentTypeError("bind address is empty")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if host != "localhost":
            raise argparse.ArgumentTypeError(
                f"bind address must be an IP address (e.g. 127.0.0.1, 0.0.0.0, ::1) or localhost, got {text!r}"
            ) from None
    return host


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    return ipaddress.ip_address(host).is_loopback


def _add_serving_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bind", type=bind_address, default=DEFAULT_BIND, metavar="ADDR",
                   help=f"address to listen on (default {DEFAULT_BIND}; anything else needs a strong token)")
    p.add_argument("--port", type=port_number, default=DEFAULT_PORT, metavar="N",
                   help=f"TCP port (default {DEFAULT_PORT}; 0 picks a free one)")
    p.add_argument("--interval", type=positive_ms, default=None, metavar="MS",
                   help=f"NVML polling interval in milliseconds (default {int(DEFAULT_INTERVAL_S * 1000)}; "
                        "GPUFLOW_INTERVAL_MS)")
    p.add_argument("--ui", metavar="PATH", default=None,
                   help="serve this HTML file at / instead of the built-in UI (GPUFLOW_UI)")
    p.add_argument("--token", metavar="T", default=None,
                   help="require this token on every data route; 'auto' generates one and prints its login "
                        "URL once. Other local users can read a command line: prefer --token-file or "
                        "GPUFLOW_TOKEN")
    p.add_argument("--token-file", metavar="PATH", default=None,
                   help="read the token from this file (yours, chmod 600; GPUFLOW_TOKEN_FILE)")
    p.add_argument("--insecure-no-auth", action="store_true",
                   help="allow a non-loopback --bind without a token (anyone who can reach it sees every "
                        "process; GPUFLOW_INSECURE_NO_AUTH=1)")
    p.add_argument("--allow-host", action="append", default=[], metavar="H",
                   help="also accept this Host header (repeatable), e.g. a reverse proxy's name "
                        "(GPUFLOW_ALLOW_HOSTS=a,b)")
    p.add_argument("--plugin", action="append", default=[], metavar="MOD",
                   help="load a collector module by import name (repeatable)")
    p.add_argument("--show-cmdline", action="store_true",
                   help="show full command lines (default: the executable only; arguments can hold secrets; "
                        "GPUFLOW_SHOW_CMDLINE=1)")
    p.add_argument("--metrics-per-process", action="store_true",
                   help="export per-process series on /metrics (pid, user labels; GPUFLOW_METRICS_PER_PROCESS=1)")
    p.add_argument("--otlp-endpoint", metavar="URL", default=None,
                   help="also push metrics to this OTLP/HTTP receiver, e.g. an OpenTelemetry Collector's "
                        "http://collector:4318 (needs gpuflow[otlp]; GPUFLOW_OTLP_ENDPOINT)")


#: where a given plugin flag is stored in the namespace: PLUGIN_DEST + "<key>:<option>"
PLUGIN_DEST = "plugin_option:"


def _checked_by(option: Option):
    """argparse's ``type=`` for a plugin option: the plugin's converter, its reason as the error."""
    def convert(text: str) -> Any:
        try:
            return option.convert(text)
        except (TypeError, ValueError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = option.name
    return convert


def _add_plugin_flags(p: argparse.ArgumentParser, command: str, plugins: Sequence[PluginOptions]) -> None:
    for declared in plugins:
        offered = [o for o in declared.options if o.flag and command in o.commands]
        if not offered:
            continue
        group = p.add_argument_group(f"{declared.plugin} collector")
        for option in offered:
            where = f" (environment: {option.env})" if option.env else ""
            dest = f"{PLUGIN_DEST}{declared.plugin}:{option.name}"
            try:
                if option.switch:
                    group.add_argument(option.flag, action="store_true", dest=dest, default=argparse.SUPPRESS,
                                       help=option.help + where)
                elif option.repeatable:   # every value given, checked together by the plugin
                    group.add_argument(option.flag, action="append", dest=dest, default=argparse.SUPPRESS,
                                       metavar=option.metavar or "VALUE", help=option.help + where)
                else:
                    group.add_argument(option.flag, type=_checked_by(option), dest=dest,
                                       default=argparse.SUPPRESS, metavar=option.metavar or "VALUE",
                                       help=option.help + where)
            except argparse.ArgumentError as exc:
                raise PluginLoadError(f"collector {declared.plugin!r} declares {option.flag}, which "
                                      f"another flag already uses: {exc}") from None


def build_parser(plugins: Sequence[PluginOptions] = ()) -> OneLineParser:
    parser = OneLineParser(
        prog="gpuflow",
        description="A live, browser-based view of what every process is doing on this machine's NVIDIA GPUs.",
    )
    parser.add_argument("--version", action="version", version=f"gpuflow {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)

    watch = sub.add_parser("watch", help="serve the live view of every GPU and every process on it",
                           description="Poll NVML and serve the live view in the browser.")
    _add_serving_flags(watch)
    _add_plugin_flags(watch, "watch", plugins)

    run = sub.add_parser(
        "run", help="launch a CUDA program with kernel/copy tracing and serve the live view",
        description="Launch an unmodified CUDA program with GPUFlow's CUPTI collector injected; its kernels "
                    "and copies appear live in the browser. Exits with the program's exit status.",
        usage="gpuflow run [options] -- COMMAND [ARGS...]",
    )
    _add_serving_flags(run)
    run.add_argument("--linger", action="store_true",
                     help="keep serving the final state after the program exits, until Ctrl-C")
    run.add_argument("--no-summary", action="store_true", help="do not print the end-of-run summary")
    run.add_argument("--summary-json", type=writable_file, metavar="FILE", default=None,
                     help="also write the final traced state (complete counts, transfers, drops) as JSON")
    run.add_argument("--trace-out", type=writable_file, metavar="FILE", default=None,
                     help="at the end, write every execution the recorder retained of the run as a Perfetto "
                          "trace (open it at ui.perfetto.dev)")
    run.add_argument("cmd", nargs=argparse.REMAINDER, metavar="COMMAND", help="the program and its arguments")
    _add_plugin_flags(run, "run", plugins)

    export = sub.add_parser(
        "export", help="save a time range a running agent retains as a Perfetto trace",
        description="Ask a running agent (gpuflow watch/run, or under gunicorn) for every execution it retains "
                    "in a time range, and the readings kept over it, as a Perfetto trace file (open it at "
                    "ui.perfetto.dev). Nothing is written unless the whole trace arrived.",
        usage="gpuflow export --url URL [--token-file F] --from T0 --to T1 [--pid P] -o FILE")
    export.add_argument("--url", required=True, metavar="URL",
                        help="the agent's address, as gpuflow printed it (e.g. http://127.0.0.1:7717/)")
    export.add_argument("--token-file", metavar="PATH", default=None,
                        help="the agent's token, read from this file (yours, chmod 600); else GPUFLOW_TOKEN_FILE "
                             "or GPUFLOW_TOKEN")
    export.add_argument("--from", dest="start", type=epoch_seconds, required=True, metavar="T0",
                        help="the range's start, seconds since the Unix epoch")
    export.add_argument("--to", dest="end", type=epoch_seconds, required=True, metavar="T1",
                        help="its end (after T0, at most a week later)")
    export.add_argument("--pid", type=process_id, default=None, metavar="P", help="only this traced process")
    export.add_argument("-o", "--output", type=writable_file, required=True, metavar="FILE",
                        help="the trace file to write (replaced only once the whole trace has arrived)")

    add_open_command(sub, plugins, _add_serving_flags, _add_plugin_flags)
    add_hub_command(sub, plugins, _add_serving_flags, _add_plugin_flags)

    sub.add_parser("doctor", help="check what works on this machine and why not",
                   description="Check NVML, the driver, CUPTI, the injection library and shared memory.")
    return parser


def plugin_modules(argv: Sequence[str]) -> list[str]:
    """The ``--plugin`` modules named before ``--`` (the plugins must load before the full parse)."""
    found = []
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == "--plugin" and i + 1 < len(argv):
            found.append(argv[i + 1])
        elif arg.startswith("--plugin="):
            found.append(arg.split("=", 1)[1])
    return found


def _command_of(argv: Sequence[str]) -> str | None:
    return next((a for a in argv if a in ("watch", "run", "export", "open", "hub", "doctor")), None)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line, checked, with ``args.plugin_manager`` (the loaded plugins) and
    ``args.plugin_options`` (the plugin flags given) added; exits 2 with one line on bad input."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        pm = get_plugin_manager(extra_modules=plugin_modules(argv))
        parser = build_parser(declared_options(pm))
    except PluginLoadError as exc:
        command = _command_of(argv)
        OneLineParser(prog=f"gpuflow {command}" if command else "gpuflow").error(str(exc))
    args, unknown = parser.parse_known_args(argv)
    if args.command is None:
        if unknown:
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        parser.error("a command is needed: watch (every GPU, live), run -- COMMAND (trace a program), "
                     "export (save a range as a Perfetto trace), open FILE (show a saved trace) or doctor "
                     "(what works here)")
    sub = parser._subparsers._group_actions[0].choices[args.command]  # type: ignore[union-attr]
    if unknown:
        sub.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command in ("watch", "run"):
        if args.command == "run":
            cmd = list(args.cmd)
            if cmd and cmd[0] == "--":
                cmd = cmd[1:]
            if not cmd:
                sub.error("no command given: use gpuflow run [options] -- COMMAND [ARGS...]")
            args.cmd = cmd
    if args.command == "export" and not args.end > args.start:
        sub.error("--to must be after --from")
    args.plugin_manager = pm
    args.plugin_options = _given_plugin_options(args)
    return args


def _given_plugin_options(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    given: dict[str, dict[str, Any]] = {}
    for dest, value in list(vars(args).items()):
        if dest.startswith(PLUGIN_DEST):
            plugin, name = dest[len(PLUGIN_DEST):].split(":", 1)
            given.setdefault(plugin, {})[name] = value
            delattr(args, dest)
    return given
