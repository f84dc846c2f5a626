"""Logging a Problem without saying it twice: the mark a collector puts on such a log record.

A collector that reports something as a :class:`~gpuflow.core.snapshot.Problem` (shown on the page
and, at start, by ``gpuflow watch``/``run``) may also log it, for deployments whose operators read
logs (gunicorn). It marks the record with :func:`restates` so that a front end which already shows
the Problem's text can drop the record instead of printing the same sentence twice::

    log.warning("%s (retrying every %g s)", message, retry_s, extra=restates(message))

Constraints: plain data on the log record; no handler or filter here (front ends decide).
"""

from __future__ import annotations

#: the log record attribute holding the Problem text the record restates
ATTRIBUTE = "gpuflow_problem"


def restates(problem_message: str) -> dict[str, str]:
    """``extra=`` for a log call that restates the Problem with this message."""
    return {ATTRIBUTE: problem_message}


def restated(record: object) -> str | None:
    """The Problem text a log record restates, or None for an ordinary record."""
    value = getattr(record, ATTRIBUTE, None)
    return value if isinstance(value, str) else None
