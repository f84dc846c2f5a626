"""What GPUFlow changes in the gunicorn worker that serves it: error pages and a read timeout.

Two things gunicorn does before the app ever runs, found by tests/hardening:

* **Its own error pages.** A malformed request (bad request line, bad or too many headers, a
  request line over 4094 bytes) is answered by the worker itself with an HTML page that quotes
  the offending line or header name and carries none of the app's security headers.
  :func:`write_error` replaces ``gunicorn.util.write_error``, the one function every worker
  writes those pages with: plain text, ``SECURITY_HEADERS``, the status and nothing the client
  sent.
* **No timeout on a request head.** gthread hands a connection to a pool thread once its first
  bytes arrive, and that thread reads the rest with a blocking socket and no timeout. A client
  that sends half a request and stalls holds the thread until it hangs up; ``--threads`` such
  clients and the worker answers nothing at all (measured before this: 70 of them froze a
  64-thread worker, /healthz unanswered after 20 s). :func:`harden_worker` sets ``SO_RCVTIMEO``
  on the worker's listening sockets; Linux copies it into every accepted socket, so a blocking
  read that waits longer than ``header_timeout_s`` fails and the connection is closed. It bounds
  each silence, not the whole head: a client trickling a byte every few seconds still holds its
  thread (docs/security.md, "Limits"). Writes keep their own timeout (``sse.bound_send_time``).

gunicorn logs such a dropped client with a traceback ("Socket error processing request."); a
filter on its error log turns that record into one info line.

Constraints: idempotent; a no-op outside a gunicorn worker; called from ``get_app()`` in the
worker and from gunicorn_conf's ``post_worker_init`` (which also covers ``--preload``); relies
only on ``gunicorn.util.write_error(sock, status_int, reason, mesg)``, ``util.write_nonblock``,
``worker.sockets`` and ``worker.log.error_log`` (gunicorn 25 to 27).
"""

from __future__ import annotations

import http
import logging
import socket
import struct
import sys
from typing import Any

from gpuflow.transport.security import plain_error

STALL_MESSAGE = "Socket error processing request."


def write_error(sock: Any, status_int: int, reason: str, mesg: str) -> None:
    """Drop-in for ``gunicorn.util.write_error``: ``mesg`` (which quotes the request) is not sent."""
    from gunicorn import util

    try:
        reason = http.HTTPStatus(status_int).phrase
    except ValueError:
        reason = "Error"
    util.write_nonblock(sock, plain_error(status_int, reason, "HTTP/1.1"))


class StalledClientFilter(logging.Filter):
    """gunicorn's traceback for a client dropped by a socket timeout, as one info line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if record.msg == STALL_MESSAGE and isinstance(exc, (BlockingIOError, TimeoutError)):
            record.msg = "dropped a stalled client (%s)"
            record.args = ("sent no bytes" if isinstance(exc, BlockingIOError)
                           else "accepted no bytes",)
            record.exc_info = None
            record.exc_text = None
            record.levelno = logging.INFO
            record.levelname = "INFO"
        return True


def set_read_timeout(sock: socket.socket, seconds: float) -> None:
    whole = int(seconds)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                    struct.pack("ll", whole, int((seconds - whole) * 1_000_000)))


def harden_worker(worker: Any, header_timeout_s: float) -> None:
    """Install the error pages, the head read timeout and the log filter (idempotent)."""
    util = sys.modules.get("gunicorn.util")
    if util is not None and getattr(util, "write_error", None) is not write_error:
        util.write_error = write_error
    for listener in getattr(worker, "sockets", ()) or ():
        sock = getattr(listener, "sock", listener)  # gunicorn wraps sockets in its own class
        try:
            set_read_timeout(sock, header_timeout_s)
        except (OSError, AttributeError, TypeError):
            pass
    error_log = getattr(getattr(worker, "log", None), "error_log", None)
    if isinstance(error_log, logging.Logger) and not any(
            isinstance(f, StalledClientFilter) for f in error_log.filters):
        error_log.addFilter(StalledClientFilter())
