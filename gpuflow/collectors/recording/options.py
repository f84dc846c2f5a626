"""The recording collector's options: the trace file it shows, and how large a file it reads.

``file`` has no flag and no variable: ``gpuflow open FILE`` gives it (code and tests may too);
without it the collector answers nothing. ``max_mb`` (``--max-mb`` on ``gpuflow open``,
``GPUFLOW_RECORDING_MAX_MB``) bounds the file's size, and with it what reading it costs: about
as much memory as the file, and the reader's time per execution (docs/recorder.md, "Opening a
recording").

Constraints: pure; a path is checked here only for what can be known without reading it (it is a
regular file, readable): reading happens when the collector starts.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from gpuflow.core.options import Option, PluginOptions

KEY = "recording"
DEFAULT_MAX_MB = 256
MAX_MB_RANGE = (1, 65_536)


def trace_path(value: Any) -> str | None:
    """A path to a regular file this process can read, or None."""
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise ValueError(f"expected a file name, got {value!r}")
    path = os.fspath(value)
    if not path:
        raise ValueError("the file name is empty")
    try:
        found = os.stat(path)
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror}") from None
    if not stat.S_ISREG(found.st_mode):
        raise ValueError(f"{path} is not a regular file")
    if not os.access(path, os.R_OK):
        raise ValueError(f"{path}: permission denied")
    return path


def megabytes(value: Any) -> int:
    """A whole number of MiB, from 1 to 65,536."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"expected a whole number of MiB, got {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"expected a whole number of MiB, got {value!r}") from None
    low, high = MAX_MB_RANGE
    if not low <= number <= high:
        raise ValueError(f"expected {low} to {high} MiB, got {value!r}")
    return number


OPTIONS = PluginOptions(KEY, (
    Option("file", trace_path, None, "the GPUFlow trace to show (given by gpuflow open)"),
    Option("max_mb", megabytes, DEFAULT_MAX_MB,
           f"refuse a trace larger than this many MiB (default {DEFAULT_MAX_MB}; reading one takes about as "
           "much memory)", flag="--max-mb", env="GPUFLOW_RECORDING_MAX_MB", metavar="MB", commands=("open",)),
))
