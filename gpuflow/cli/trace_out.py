"""``gpuflow run --trace-out FILE``: the whole run as a Perfetto trace, written after the final drain.

The agent is asked as ``/api/export`` asks it (gpuflow.export.window_export: in pieces), for the
run's time with a minute's margin on each side (span times come from the GPU's clock, mapped to
the wall clock), into a temporary file beside FILE that replaces it once whole. Then stderr says
what the file holds: how many executions of which processes, and, for a process whose run the
recorder could not keep whole (retention evicted its oldest records), the range kept and how to
keep more. A failure (a collector's problem, a full disk) says why and leaves FILE as it was;
the run's exit status stays the program's.

Constraints: reaches the collectors only through the agent's query methods; every text from them
goes through :func:`gpuflow.cli.printable.printable`.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any, TextIO

from gpuflow.cli.printable import printable
from gpuflow.core.snapshot import Device
from gpuflow.export.perfetto import ExportError
from gpuflow.export.window_export import ExportSummary, WindowExport

#: asked beyond the run's own time on each side (the GPU's clock maps to the wall clock)
MARGIN_S = 60.0
RETENTION_HINT = "raise --retain-mb (or --retain-s) to keep more"


def _clock(t: float | None) -> str:
    if t is None:
        return "?"
    return time.strftime("%H:%M:%S", time.localtime(t)) + f".{int(t % 1 * 1000):03d}"


def write_trace_out(agent: Any, path: str, start_s: float, end_s: float, err: TextIO,
                    devices: tuple[Device, ...] = ()) -> ExportSummary | None:
    """Write the run's trace to ``path`` and say what it holds; None (and why, on ``err``) if not.
    ``devices``: the GPUs the run was shown on, described in the trace."""
    export = WindowExport(agent.query_window, agent.query_history, max(0.0, start_s - MARGIN_S), end_s + MARGIN_S,
                          devices=devices)
    fd, partial = tempfile.mkstemp(prefix=".gpuflow-trace-", suffix=".partial",
                                   dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "wb") as fh:
            summary = export.write(fh.write)
        os.replace(partial, path)
    except (ExportError, OSError) as exc:
        os.unlink(partial)
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        err.write(f"gpuflow run: could not write --trace-out {path}: {printable(why)}\n")
        return None
    except BaseException:
        os.unlink(partial)
        raise
    processes = sorted(summary.processes.values(), key=lambda p: (p.pid, p.session))
    if not processes:
        err.write(f"gpuflow run: wrote --trace-out {path}, without executions: no collector retained any of "
                  "this run (nothing was traced, or no collector keeps a window)\n")
        return summary
    err.write(f"gpuflow run: wrote --trace-out {path}: {summary.slices} executions of {len(processes)} "
              "traced process(es); open it at https://ui.perfetto.dev\n")
    for p in summary.incomplete:
        err.write(f"gpuflow run: --trace-out holds pid {p.pid} ({printable(p.name or '?')}) only from "
                  f"{_clock(p.retained_from_s)} to {_clock(p.retained_to_s)}: the recorder had already let "
                  f"its older records go; {RETENTION_HINT}\n")
    return summary
