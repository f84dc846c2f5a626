"""Command-line parsing for ``gpuflow``: flags, validation, and one-line errors with exit status 2.

Constraints: argparse's default error prints a usage block; users asked for one clear line, so
:class:`OneLineParser` prints ``gpuflow <cmd>: error: <what> (see gpuflow <cmd> --help)`` and
exits 2. Every value is validated here, before anything starts (no half-started agent).
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from typing import NoReturn, Sequence

from gpuflow import __version__
from gpuflow.core.context import DEFAULT_FLUSH_MS, DEFAULT_INTERVAL_S, DEFAULT_RING_CAPACITY

DEFAULT_BIND = "127.0.0.1"
DEFAULT_PORT = 7717
MIN_RING_CAPACITY = 1 << 10
MAX_RING_CAPACITY = 1 << 26


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        raise SystemExit(2)


MAX_INTERVAL_MS = 3_600_000  # an hour: longer waits are surely a typo (and overflow timed waits)
MIN_FLUSH_MS, MAX_FLUSH_MS = 5, 10_000  # the injected library's own bounds (docs/inject.md)


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


def flush_ms(text: str) -> int:
    value = positive_ms(text, MAX_FLUSH_MS)
    if value < MIN_FLUSH_MS:
        raise argparse.ArgumentTypeError(f"must be at least {MIN_FLUSH_MS} milliseconds, got {value}")
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


def port_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port {value} is out of range (1-65535, or 0 for any free port)")
    return value


def ring_capacity(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of records, got {text!r}") from None
    if value <= 0 or value & (value - 1):
        raise argparse.ArgumentTypeError(f"ring capacity must be a power of two, got {value}")
    if not MIN_RING_CAPACITY <= value <= MAX_RING_CAPACITY:
        raise argparse.ArgumentTypeError(
            f"ring capacity must be between {MIN_RING_CAPACITY} and {MAX_RING_CAPACITY} records, got {value}")
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
                   help=f"address to listen on (default {DEFAULT_BIND}; anything else needs --token)")
    p.add_argument("--port", type=port_number, default=DEFAULT_PORT, metavar="N",
                   help=f"TCP port (default {DEFAULT_PORT}; 0 picks a free one)")
    p.add_argument("--interval", type=positive_ms, default=int(DEFAULT_INTERVAL_S * 1000), metavar="MS",
                   help="NVML polling interval in milliseconds (default 1000)")
    p.add_argument("--ui", metavar="PATH", default=None,
                   help="serve this HTML file at / instead of the built-in UI")
    p.add_argument("--ring-capacity", type=ring_capacity, default=DEFAULT_RING_CAPACITY, metavar="N",
                   help=f"records per traced process ring, a power of two (default {DEFAULT_RING_CAPACITY})")
    p.add_argument("--token", metavar="T", default=None,
                   help="require this token (open /?token=T once; /metrics takes Authorization: Bearer T)")
    p.add_argument("--insecure-no-auth", action="store_true",
                   help="allow a non-loopback --bind without a token (anyone who can reach it sees every process)")
    p.add_argument("--allow-host", action="append", default=[], metavar="H",
                   help="also accept this Host header (repeatable), e.g. a reverse proxy's name")
    p.add_argument("--plugin", action="append", default=[], metavar="MOD",
                   help="load a collector module by import name (repeatable)")
    p.add_argument("--show-cmdline", action="store_true",
                   help="show full command lines (default: the executable only; arguments can hold secrets)")
    p.add_argument("--metrics-per-process", action="store_true",
                   help="export per-process series on /metrics (pid, user labels)")


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="gpuflow",
        description="A live, browser-based view of what every process is doing on this machine's NVIDIA GPUs.",
    )
    parser.add_argument("--version", action="version", version=f"gpuflow {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)

    watch = sub.add_parser("watch", help="serve the live view of every GPU and every process on it",
                           description="Poll NVML and serve the live view in the browser.")
    _add_serving_flags(watch)

    run = sub.add_parser(
        "run", help="launch a CUDA program with kernel/copy tracing and serve the live view",
        description="Launch an unmodified CUDA program with GPUFlow's CUPTI collector injected; its kernels "
                    "and copies appear live in the browser. Exits with the program's exit status.",
        usage="gpuflow run [options] -- COMMAND [ARGS...]",
    )
    _add_serving_flags(run)
    run.add_argument("--flush-ms", type=flush_ms, default=DEFAULT_FLUSH_MS, metavar="MS",
                     help=f"how often the traced program hands records to GPUFlow (default {DEFAULT_FLUSH_MS})")
    run.add_argument("--linger", action="store_true",
                     help="keep serving the final state after the program exits, until Ctrl-C")
    run.add_argument("--no-summary", action="store_true", help="do not print the end-of-run summary")
    run.add_argument("--summary-json", type=writable_file, metavar="FILE", default=None,
                     help="also write the final traced state (complete counts, transfers, drops) as JSON")
    run.add_argument("cmd", nargs=argparse.REMAINDER, metavar="COMMAND", help="the program and its arguments")

    sub.add_parser("doctor", help="check what works on this machine and why not",
                   description="Check NVML, the driver, CUPTI, the injection library and shared memory.")
    return parser


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if args.command is None:
        if unknown:
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        parser.print_help(sys.stderr)
        raise SystemExit(2)
    sub = parser._subparsers._group_actions[0].choices[args.command]  # type: ignore[union-attr]
    if unknown:
        sub.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command in ("watch", "run"):
        if not is_loopback(args.bind) and not args.token and not args.insecure_no_auth:
            sub.error(f"--bind {args.bind} is reachable from other machines: give --token T "
                      "(or --insecure-no-auth to expose every process on this machine without authentication)")
        if args.command == "run":
            cmd = list(args.cmd)
            if cmd and cmd[0] == "--":
                cmd = cmd[1:]
            if not cmd:
                sub.error("no command given: use gpuflow run [options] -- COMMAND [ARGS...]")
            args.cmd = cmd
    return args
