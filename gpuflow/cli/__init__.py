"""The ``gpuflow`` command: ``watch``, ``run``, ``export``, ``open``, ``hub`` and ``doctor``.

Constraints: imports of heavy modules happen inside the subcommand that needs them, so
``gpuflow --help`` and bad-flag errors are instant and work without falcon or a driver.
"""

from __future__ import annotations

from typing import Sequence

from gpuflow.cli.options import parse_args


def main(argv: Sequence[str] | None = None) -> int:
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
