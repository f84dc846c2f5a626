"""``gpuflow run [options] -- cmd args``: trace an unmodified CUDA program and serve it live.

Sequence: assemble the app and its agent; ask every plugin what the program needs in its
environment for a fresh session id (the ``child_environment`` hook: the CUPTI collector checks its
injection library and libcupti there, and drains that session's rings once started); check the
command is runnable — all before anything starts; start the agent and the server; launch the child
with that environment; forward signals; when it exits, tell the plugins (``process_exited``),
drain, print the summary, and exit with the child's status (128+N for signal N). A stop signal
(SIGINT, SIGTERM, SIGHUP) that comes before the program is started ends gpuflow with 128+N and the
program is never started; with ``--linger`` one ends the lingering.

The program gets gpuflow's environment and what the plugins add, less the agent's token
(``GPUFLOW_TOKEN``).

With ``--trace-out FILE``, once the collectors have drained for the last time, every execution the
recorder retained of the run (and the readings kept over it) is written as a Perfetto trace
(gpuflow.export, asked through the agent like ``/api/export``); where retention had evicted part
of a process's run, stderr says which range the file holds and how to keep more.

Constraints: gpuflow's own messages go to stderr (stdout is the program's); the embedded server is
threaded, never gunicorn, so nothing else reaps the child; the collectors are reached only
through the agent's hook calls.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import sys
import time

from gpuflow.cli.child import LaunchError, TracedChild, resolve_command
from gpuflow.cli.trace_out import write_trace_out
from gpuflow.cli import logs
from gpuflow.cli.report import describe_start
from gpuflow.cli.serving import (StartupError, build_app, describe_login, start_serving, warn_if_benchmarking,
                                 warn_if_exposed)
from gpuflow.cli.summary import write_summary
from gpuflow.cli.watch import StopSignals, settled_snapshot
from gpuflow.core.errors import LaunchRefused

LINGER_DRAIN_S = 0.3


def new_session_id() -> str:
    return secrets.token_hex(8)


#: what the agent reads but the program it launches does not get: the token itself
WITHHELD = ("GPUFLOW_TOKEN",)


def program_environment() -> dict[str, str]:
    """gpuflow's own environment less :data:`WITHHELD`: the program need not hold the agent's
    token (it may log its environment, or hand it to children and containers)."""
    return {k: v for k, v in os.environ.items() if k not in WITHHELD}


def cmd_run(args: argparse.Namespace) -> int:
    err = sys.stderr
    session = new_session_id()
    started_s = time.time()
    with StopSignals() as stop:   # until the program starts, and while --linger serves
        try:
            app = build_app(args)
            added = app.state.agent.child_environment(session)
        except (StartupError, LaunchRefused) as exc:
            err.write(f"gpuflow run: error: {exc}\n")
            return 2
        try:
            resolve_command(args.cmd[0])
        except LaunchError as exc:
            err.write(f"gpuflow run: {exc}\n")
            return exc.exit_status
        try:
            serving = start_serving(args, app)
        except StartupError as exc:
            err.write(f"gpuflow run: error: {exc}\n")
            return 2
        warn_if_exposed(args)
        warn_if_benchmarking()
        try:
            logs.install().banner_shown(
                describe_start(settled_snapshot(serving.agent.board, timeout=1.0), serving.login_url, err))
            describe_login(args, err)
            if stop.received is not None:   # stopped before the program was started
                err.write(f"gpuflow run: stopped by {signal.Signals(stop.received).name} before "
                          "the program started\n")
                return 128 + stop.received
            if added:
                err.write(f"gpuflow: tracing session {session}: {' '.join(args.cmd)}\n")
            else:
                err.write("gpuflow: no collector adds anything to a launched program's environment: "
                          f"running untraced: {' '.join(args.cmd)}\n")
            err.flush()
            try:
                child = TracedChild(args.cmd, {**program_environment(), **added})
            except LaunchError as exc:
                err.write(f"gpuflow run: {exc}\n")
                return exc.exit_status
            status = child.wait(missed=stop.take)   # stop signals go to the program meanwhile
            serving.agent.process_exited(child.pid, status)
            if args.linger:
                time.sleep(LINGER_DRAIN_S)
                if not args.no_summary:
                    write_summary(serving.agent.board.latest(), err)
                err.write(f"gpuflow: program exited with status {status}; still serving {serving.url} "
                          "(--linger): press Ctrl-C to stop\n")
                err.flush()
                stop.wait()
        finally:
            live = serving.agent.board.latest()   # before the collectors stop and leave the snapshot
            serving.stop()
    final = serving.agent.board.latest()
    if not args.linger and not args.no_summary:
        write_summary(final, err, live=live)
    if args.summary_json:
        write_summary_json(final, args.summary_json, status, err)
    if args.trace_out:
        write_trace_out(serving.agent, args.trace_out, started_s, time.time(), err,
                        devices=live.devices if live is not None else ())
    err.flush()
    return status


def write_summary_json(snapshot, path: str, status: int, err) -> None:
    """The final traced part of the snapshot (schema of docs/snapshot.md), plus the exit status."""
    plain = snapshot.to_json_dict() if snapshot is not None else {"traced": [], "traced_retired": []}
    document = {"exit_status": status, "traced": plain["traced"], "traced_retired": plain["traced_retired"]}
    try:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(document, fh, indent=1)
    except OSError as exc:
        err.write(f"gpuflow run: could not write --summary-json {path}: {exc.strerror}\n")
