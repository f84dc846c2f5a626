"""The ``gpuflow`` command: ``watch``, ``run``, ``export``, ``open``, ``hub`` and ``doctor``.

Constraints: imports of heavy modules happen inside the subcommand that needs them, so
``gpuflow --help`` and bad-flag errors are instant and work without falcon or a driver. Output
whose reader has gone (``gpuflow watch | head -1``) stops the command as cleanly as Ctrl-C does
(its server and collectors stopped on the way out) and is said in one line on stderr, status 1,
not as a traceback.
"""

from __future__ import annotations

import os
import sys
from typing import Sequence

from gpuflow.cli.options import parse_args


def main(argv: Sequence[str] | None = None) -> int:
    try:
        status = _command(argv)
        sys.stdout.flush()   # here, not at the interpreter's exit, where a closed pipe is a traceback
        return status
    except BrokenPipeError:
        _discard_stdout()
        try:
            sys.stderr.write("gpuflow: stopped: its output was closed (broken pipe)\n")
            sys.stderr.flush()
        except OSError:   # stderr went with it
            pass
        return 1


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so that what the interpreter flushes at exit fails no more."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _command(argv: Sequence[str] | None) -> int:
    args = parse_args(argv)
    if args.command == "watch":
        from gpuflow.cli.watch import cmd_watch

        return cmd_watch(args)
    if args.command == "run":
        from gpuflow.cli.run import cmd_run

        return cmd_run(args)
    if args.command == "open":
        from gpuflow.cli.open import cmd_open

        return cmd_open(args)
    if args.command == "hub":
        from gpuflow.cli.hub import cmd_hub

        return cmd_hub(args)
    if args.command == "export":
        from gpuflow.cli.export import cmd_export

        return cmd_export(args)
    from gpuflow.cli.doctor import cmd_doctor

    return cmd_doctor(args)
