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
  64-thread worker, /healthz unanswered after 20 s). :func:`harden_worker` wraps the worker's
  ``handle`` so that each connection's socket gets ``SO_RCVTIMEO`` = ``header_timeout_s``
  before the pool thread reads from it: a blocking read that waits longer fails and the
  connection is closed. (On the listening socket the option would miss connections that the
  kernel completed before the worker set it, e.g. while it booted.) It bounds each silence, not
  the whole head: a client trickling a byte every few seconds still holds its thread
  (docs/security.md, "Limits"). The stream's writes use their own timeout
  (``sse.bound_send_time``), which replaces this one.

* **Closing lingers on the main thread.** When a connection ends, gthread's main thread closes it
  "gracefully" (``util.close_graceful``): it half-closes, then waits up to 2 s for the client
  to close too. A client that stalls never does, so every stalled client dropped (by the read
  timeout above, or by the stream's send timeout) stopped the main thread for 2 s, one after
  another: no accepting, no keep-alive bookkeeping, no heartbeat to the arbiter (which kills a
  worker silent for ``timeout``, 30 s). Measured before this: five never-reading streams
  dropped together kept /healthz waiting 10 s. The same ``handle`` wrapper does this wait in
  the pool thread that served the connection, then shuts the socket down, so the main
  thread's close returns at once.

gunicorn logs such a dropped client with a traceback ("Socket error processing request."); a
filter on its error log turns that record into one info line.

Constraints: idempotent; a no-op outside a gunicorn worker; the read timeout and the close
apply to the gthread worker only (the one docs/transport.md supports); called from
``get_app()`` in the worker and from gunicorn_conf's ``post_worker_init`` (which also covers
``--preload``), both before the worker accepts anything; with ``--http-protocols`` including
h2 the read timeout is left out (an HTTP/2 connection idles between streams); relies only on
``gunicorn.util.write_error(sock, status_int, reason, mesg)``, ``util.write_nonblock``,
``worker.log.error_log`` and a ``worker.handle(conn)`` run in a pool thread that returns False
when the connection is to be closed, ``conn.sock`` being its socket (gunicorn 25 to 27).
"""

from __future__ import annotations

import http
import logging
import socket
import struct
import sys
import time
from typing import Any

from gpuflow.transport.security import plain_error

STALL_MESSAGE = "Socket error processing request."
LINGER_S = 2.0  # as gunicorn's close_graceful
LINGER_DRAIN_BYTES = 65536


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


def settle_close(sock: socket.socket, linger_s: float = LINGER_S) -> None:
    """What ``util.close_graceful`` does before closing, done here, then both directions shut.

    Half-close, drain what the client still sends until it closes (at most ``linger_s``, 64 KiB),
    then shut the socket down for reading too, so gunicorn's own graceful close, which follows
    on the main thread, finds nothing to wait for.
    """
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        return  # already gone: gunicorn's close will not wait either
    deadline = time.monotonic() + linger_s
    drained = 0
    try:
        while drained < LINGER_DRAIN_BYTES:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            sock.settimeout(left)
            data = sock.recv(4096)
            if not data:
                break
            drained += len(data)
    except OSError:
        pass
    try:
        sock.shutdown(socket.SHUT_RD)
    except OSError:
        pass


def _wrap_handle(worker: Any, header_timeout_s: float) -> None:
    """gthread's ``handle(conn)``, with a read timeout before it and a settled close after it."""
    original = getattr(worker, "handle", None)
    if original is None or getattr(original, "_gpuflow_hardened", False):
        return

    # An HTTP/2 connection idles between its streams: a read timeout would cut it.
    h2 = "h2" in (getattr(getattr(worker, "cfg", None), "http_protocols", None) or ())

    def handle(conn: Any) -> Any:
        sock = getattr(conn, "sock", None)
        if not isinstance(sock, socket.socket):
            return original(conn)
        if not h2:
            try:
                set_read_timeout(sock, header_timeout_s)
            except OSError:
                pass
        result = original(conn)
        if result is False:  # gthread's main thread closes it next
            settle_close(sock)
        return result

    handle._gpuflow_hardened = True  # type: ignore[attr-defined]
    worker.handle = handle


def harden_worker(worker: Any, header_timeout_s: float) -> None:
    """Install the error pages, the read timeout, the settled close, the log filter (idempotent)."""
    util = sys.modules.get("gunicorn.util")
    if util is not None and getattr(util, "write_error", None) is not write_error:
        util.write_error = write_error
    gthread = sys.modules.get("gunicorn.workers.gthread")
    if gthread is not None and isinstance(worker, gthread.ThreadWorker):
        _wrap_handle(worker, header_timeout_s)  # pool threads, one main thread closing
    error_log = getattr(getattr(worker, "log", None), "error_log", None)
    if isinstance(error_log, logging.Logger) and not any(
            isinstance(f, StalledClientFilter) for f in error_log.filters):
        error_log.addFilter(StalledClientFilter())
