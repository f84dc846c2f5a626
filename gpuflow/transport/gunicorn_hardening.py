"""What GPUFlow changes in the gunicorn worker that serves it: error pages, request heads read
off the pool, a read timeout, and closing off the main thread.

Things gunicorn does before the app ever runs, found by tests/hardening:

* **Its own error pages.** A malformed request (bad request line, bad or too many headers, a
  request line over 4094 bytes) is answered by the worker itself with an HTML page that quotes
  the offending line or header name and carries none of the app's security headers.
  :func:`write_error` replaces ``gunicorn.util.write_error``, the one function every worker
  writes those pages with: plain text, ``SECURITY_HEADERS``, the status and nothing the client
  sent.
* **A pool thread per connection that has not sent its request yet.** gthread submits every
  accepted connection to its pool at once, and the pool thread waits up to 5 s for a first byte,
  then reads the head with blocking reads. Measured before this: 128 silent connections made
  /healthz wait 4.7 s behind them on a 64-thread worker, 1,000 silent or trickling ones left it
  unanswered; and a client trickling its head a byte at a time held its thread for as long as
  it trickled (70 that sent half a head and stalled froze a 64-thread worker before the read
  timeout below existed). :func:`harden_worker` puts a
  :class:`~gpuflow.transport.heads.HeadReader` in front of the pool (``worker.enqueue_req``):
  a connection reaches a pool thread only once its whole head has arrived, within
  ``header_timeout_s`` of connecting, and a kept-alive connection again for each request;
  until then it costs no thread, and it does not count against ``worker_connections`` (which
  would otherwise stop the worker from accepting once enough idle connections were open): the
  reader's own cap (2048, the oldest closed first) bounds them, and the descriptor limit is
  raised for them. With TLS, HTTP/2,
  the uwsgi or the PROXY protocol the reader is left out (the bytes first sent are not an
  HTTP/1 head): gunicorn reads heads itself, bounded only by the read timeout below.
* **No timeout on a read.** A pool thread reads with a blocking socket and no timeout. The
  wrapped ``handle`` gives each connection's socket ``SO_RCVTIMEO`` = ``header_timeout_s``
  before the pool thread reads from it (a request body, a head where the reader is left out):
  a blocking read that waits longer fails and the connection is closed. (On the listening
  socket the option would miss connections that the kernel completed before the worker set
  it, e.g. while it booted.) It bounds each silence, not the whole read. The stream's writes use
  their own timeout (``sse.bound_send_time``), which replaces this one.

* **accept() out of descriptors ends the worker.** gthread's accept lets every error but
  EAGAIN and ECONNABORTED out of its loop, so EMFILE (a crowd at the descriptor limit: the
  connections handed to the head reader leave ``nr_conns``, so gthread keeps accepting) ended the
  worker with code 255, every connection with it, until the arbiter booted another (seen in
  tests/hardening at RLIMIT_NOFILE 400 with 1,000 silent clients). The wrapped ``accept`` takes
  EMFILE, ENFILE, ENOBUFS and ENOMEM as the embedded server's reader does: the reader closes its
  oldest waiting connection, and the main thread pauses accepting for ``ACCEPT_BACKOFF_S`` (the
  backlog keeps the newcomers) instead of spinning on a listener it cannot accept from.

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

Constraints: idempotent; a no-op outside a gunicorn worker; the head reader, the read timeout
and the close apply to the gthread worker only (the one docs/transport.md supports); called
from ``get_app()`` in the worker and from gunicorn_conf's ``post_worker_init`` (which also
covers ``--preload``), both before the worker accepts anything; with ``--http-protocols``
including h2 the read timeout is left out (an HTTP/2 connection idles between streams); relies
only on ``gunicorn.util.write_error(sock, status_int, reason, mesg)``, ``util.write_nonblock``,
``worker.log.error_log``, a ``worker.handle(conn)`` run in a pool thread that returns False
when the connection is to be closed, ``conn.sock`` being its socket (gunicorn 25 to 27), and
for the head reader on gthread's ``enqueue_req(conn)`` (called on its main thread) and
``accept(listener)`` (what its poller calls, looked up when accepting is enabled),
``method_queue.defer``, ``nr_conns``, ``worker_connections``, ``alive`` and a connection's
``initialized``, ``init()``, ``close()`` and ``parser.unreader.unread`` (gunicorn 27; without
``method_queue`` the reader is left out).
"""

from __future__ import annotations

import errno
import http
import logging
import socket
import struct
import sys
import time
from typing import Any

from gpuflow.transport.heads import DEFAULT_MAX_PENDING, Head, HeadReader, pending_budget
from gpuflow.transport.security import plain_error

STALL_MESSAGE = "Socket error processing request."
#: how long gthread's main thread stops accepting after accept() found no descriptor left
ACCEPT_BACKOFF_S = 0.01
#: accept() errors that mean no descriptor or buffer is left for a new connection (not the client's)
_OUT_OF_DESCRIPTORS = frozenset((errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM))
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


def reads_plain_http1(cfg: Any) -> bool:
    """Whether the worker's connections start with an HTTP/1 request head in clear text.

    TLS, HTTP/2, the uwsgi protocol and the PROXY protocol put other bytes first: gunicorn reads
    those itself (with the per-silence read timeout above).
    """
    return (not getattr(cfg, "is_ssl", False)
            and "h2" not in (getattr(cfg, "http_protocols", None) or ())
            and getattr(cfg, "http2_cleartext", "off") in ("off", None, False)
            and getattr(cfg, "protocol", "http") == "http"
            and getattr(cfg, "proxy_protocol", "off") in ("off", None, False))


def _buffered(conn: Any) -> bytes:
    """The bytes gunicorn's parser already read past the last request (a pipelined head)."""
    unreader = conn.parser.unreader
    take = getattr(unreader, "take_buffered", None)
    if take is not None:
        return take()
    data = unreader.buf.getvalue()
    unreader.buf = type(unreader.buf)()
    return data


def _install_head_reader(worker: Any, header_timeout_s: float) -> HeadReader | None:
    """Put a :class:`HeadReader` in front of gthread's pool: a connection reaches a pool thread
    only with its whole request head read (from accept, and again for each kept-alive request).

    While its head is being read a connection is the reader's, not gthread's: it leaves
    gthread's ``nr_conns`` (which gates accepting at ``worker_connections``) and comes back into
    it on gthread's main thread, which owns that count, with the head. So a crowd of idle
    connections never stops the worker from accepting; the reader's own cap (with the oldest
    closed first) bounds them, within the descriptors left beside ``worker_connections``.
    """
    enqueue = getattr(worker, "enqueue_req", None)
    method_queue = getattr(worker, "method_queue", None)
    cfg = getattr(worker, "cfg", None)
    if (enqueue is None or method_queue is None or getattr(enqueue, "_gpuflow_hardened", False)
            or not reads_plain_http1(cfg)):
        return None

    def to_pool(conn: Any) -> None:  # on gthread's main thread
        worker.nr_conns += 1
        enqueue(conn)

    def on_head(sock: socket.socket, conn: Any, data: bytes, state: Head) -> None:
        if state is not Head.COMPLETE:
            write_error(sock, 414 if state is Head.LINE_TOO_LONG else 431, "", "")
            conn.close()
            return
        try:
            if not conn.initialized:
                conn.init()  # plain HTTP/1: makes the parser, reads nothing
            conn.parser.unreader.unread(data)
            conn.data_ready = True  # gthread's handle() waits for no more data
        except Exception:
            conn.close()
            raise
        method_queue.defer(to_pool, conn)

    def on_drop(sock: socket.socket, conn: Any, why: str) -> None:
        conn.close()

    reader = HeadReader(deadline_s=header_timeout_s, on_head=on_head, on_drop=on_drop,
                        max_pending=pending_budget(DEFAULT_MAX_PENDING,
                                                   int(worker.worker_connections) + 64),
                        stopping=lambda: not worker.alive, name="gpuflow-heads")

    def enqueue_req(conn: Any) -> None:  # on gthread's main thread
        if reader.closed or getattr(conn, "is_http2", False):
            enqueue(conn)  # the worker is stopping: gunicorn answers, with Connection: close
            return
        seed = _buffered(conn) if conn.initialized else b""
        worker.nr_conns -= 1
        reader.add(conn.sock, conn, seed)

    enqueue_req._gpuflow_hardened = True  # type: ignore[attr-defined]
    worker.enqueue_req = enqueue_req
    _guard_accept(worker, reader)
    reader.start()
    return reader


def _guard_accept(worker: Any, reader: HeadReader) -> None:
    """gthread's ``accept`` (what its poller calls for a readable listener), with running out of
    descriptors answered by room and a pause rather than by the worker's end (the opening)."""
    accept = getattr(worker, "accept", None)
    if accept is None or getattr(accept, "_gpuflow_hardened", False):
        return
    warned = [0.0]

    def guarded(listener: Any) -> None:  # on gthread's main thread
        try:
            accept(listener)
        except OSError as exc:
            if exc.errno not in _OUT_OF_DESCRIPTORS:
                raise
            reader.make_room()
            now = time.monotonic()
            if now - warned[0] >= 10.0:
                warned[0] = now
                worker.log.warning("gpuflow: accept failed (%s): the oldest connection waiting for its "
                                   "request head is closed to make room; raise RLIMIT_NOFILE for more",
                                   exc.strerror or exc)
            time.sleep(ACCEPT_BACKOFF_S)

    guarded._gpuflow_hardened = True  # type: ignore[attr-defined]
    worker.accept = guarded


def harden_worker(worker: Any, header_timeout_s: float) -> None:
    """Install the error pages, the head reader, the read timeout, the settled close and the log
    filter (idempotent)."""
    util = sys.modules.get("gunicorn.util")
    if util is not None and getattr(util, "write_error", None) is not write_error:
        util.write_error = write_error
    gthread = sys.modules.get("gunicorn.workers.gthread")
    if gthread is not None and isinstance(worker, gthread.ThreadWorker):
        _install_head_reader(worker, header_timeout_s)  # heads read off the pool
        _wrap_handle(worker, header_timeout_s)  # pool threads, one main thread closing
    error_log = getattr(getattr(worker, "log", None), "error_log", None)
    if isinstance(error_log, logging.Logger) and not any(
            isinstance(f, StalledClientFilter) for f in error_log.filters):
        error_log.addFilter(StalledClientFilter())
