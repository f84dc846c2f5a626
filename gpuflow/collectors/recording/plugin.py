"""The recording collector as a pluggy plugin (registered under the name "recording").

Registered in every agent like the other built-ins (``DEFAULT_PLUGINS`` in
:mod:`gpuflow.core.plugins`), it does nothing until it is given a file (the ``file`` option, which
``gpuflow open FILE`` sets while it turns every other collector off). Then ``start_collecting``
reads the file (:mod:`~gpuflow.collectors.recording.loading`) and builds its snapshot part once
(:mod:`~gpuflow.collectors.recording.final_state`); ``produce_snapshot`` returns that same part
ever after, and ``query_window`` and ``query_history`` answer from the recording, also after
``stop_collecting``. A file it cannot read is one ``error`` Problem naming it, and nothing else
(``gpuflow open`` stops on it with that line and exit status 2).

Constraints: importing this module reads nothing; state in ``context.slots["recording"]`` (several
agents may share a process in tests); no thread of its own (the file is read in
``start_collecting``, before the agent serves anything).
"""

from __future__ import annotations

import time

from gpuflow.collectors.recording.final_state import final_part
from gpuflow.collectors.recording.loading import Recording, RecordingError, load
from gpuflow.collectors.recording.options import KEY, OPTIONS
from gpuflow.core.context import CollectorContext
from gpuflow.core.hookspecs import hookimpl
from gpuflow.core.options import PluginOptions
from gpuflow.core.recorded import HistoryPart, WindowPart
from gpuflow.core.snapshot import Problem, SnapshotPart

SOURCE = KEY
SLOT = KEY


class _Opened:
    """What the collector holds: the recording and its part, or the part saying why there is none."""

    def __init__(self, part: SnapshotPart, recording: Recording | None = None) -> None:
        self.part = part
        self.recording = recording


@hookimpl
def declare_options() -> PluginOptions:
    return OPTIONS


@hookimpl
def start_collecting(context: CollectorContext) -> None:
    values = context.plugin_options(OPTIONS)
    path = values["file"]
    if path is None:
        return
    try:
        recording = load(path, values["max_mb"] << 20)
    except RecordingError as exc:
        context.slots[SLOT] = _Opened(SnapshotPart(source=SOURCE, problems=(
            Problem(SOURCE, f"cannot open the recording {exc}", "error"),)))
    else:
        context.slots[SLOT] = _Opened(final_part(recording, SOURCE, time.time()), recording)
    context.notify()


@hookimpl
def produce_snapshot(context: CollectorContext) -> SnapshotPart | None:
    opened = context.slots.get(SLOT)
    return None if opened is None else opened.part


@hookimpl
def query_window(context: CollectorContext, start_s: float, end_s: float, pid: int | None,
                 width_px: int | None) -> WindowPart | None:
    opened = context.slots.get(SLOT)
    if opened is None or opened.recording is None:
        return None
    return opened.recording.window(start_s, end_s, pid, width_px, SOURCE)


@hookimpl
def query_history(context: CollectorContext, start_s: float, end_s: float) -> HistoryPart | None:
    opened = context.slots.get(SLOT)
    if opened is None or opened.recording is None:
        return None
    return opened.recording.readings.query(start_s, end_s, SOURCE)


@hookimpl
def stop_collecting(context: CollectorContext) -> None:
    """Nothing to stop: the recording stays answerable, as a recorder's window does after a run."""
