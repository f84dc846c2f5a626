"""The embedded server of ``gpuflow watch`` and ``gpuflow run``: wsgiref behind a head reader.

gunicorn's arbiter reaps every child with ``waitpid(-1)`` and owns the main thread's signals;
``gpuflow run`` needs its child's exit status and its own Ctrl-C handling. So the CLI serves the
same Falcon app with wsgiref's request handler, fed by :class:`~gpuflow.transport.heads.HeadReader`:
one thread accepts every connection and reads request heads without blocking; a request gets a
daemon thread of its own only once its whole head has arrived (an SSE stream keeps it). No
signal handlers, no child reaping, no per-request log lines. docs/transport.md ("The embedded
server") weighs this against cheroot and the plain threaded wsgiref it replaced.

API::

    server = EmbeddedServer(app, "127.0.0.1", 0)   # binds now; ServerStartError if it cannot
    server.port                                     # the real port (useful with port 0)
    server.serve_in_thread()                        # or server.serve_forever() in this thread
    server.shutdown()                               # streams end, socket closed, thread joined

Bad input and slow or idle peers (docs/security.md, "Hostile and broken clients"):

* a connection that has not sent its whole request head within ``header_timeout_s`` (10 s) of
  connecting is closed, however it trickles; until then it holds no thread, and when
  ``max_pending`` (2048) wait, the oldest is closed for the next (heads.py); a client that then
  accepts no bytes for ``send_timeout_s`` (30 s) is dropped;
* malformed requests get the server's own short text answers (400, 414, 431, 503, 505), with
  the same security headers as the app's and without echoing the request; HTTP/0.9 requests
  (no version) are refused with 400; a head is at most 32 KiB;
* at most ``max_connections`` requests are served at once (default the stream cap + 64), one
  thread each; the next one is answered 503 with Retry-After at once, so threads stay bounded;
* one request per connection (HTTP/1.0, closed after the answer): nothing can be pipelined or
  smuggled behind a request;
* the raw request target goes to the app as ``RAW_URI``, as under gunicorn, so an absolute-form
  target is checked against the Host allow-list too; the Server header says ``gpuflow`` and no
  Python version.

Writes: a chunk is written straight to the connection's descriptor, one ``write`` call, while the
socket's send buffer has room for it (:class:`_SocketWriter`); only a chunk that does not fit
goes through ``sendall``, which waits for room within the send timeout. ``sendall`` on a socket
with a timeout asks ``poll`` before every send, a second system call and a second release of the
interpreter's lock: on a hub, 64 pages' streams each take ten frames a second, and each release
of that lock lets another thread take it.

Constraints: binding happens in the constructor so "port in use" is reported before anything
is printed; :meth:`shutdown` returns within about a second even with streams open (it asks the
app to end them — ``begin_shutdown`` — and waits at most ``drain_s`` for them and for every request's
thread to be done with its connection); IPv6 binds work;
no reverse DNS lookup at bind time (``HTTPServer.server_bind`` would call ``getfqdn``).
"""

from __future__ import annotations

import errno
import http
import io
import logging
import os
import socket
import socketserver
import threading
import time
from typing import Any, Callable
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer

from gpuflow.transport.heads import DEFAULT_MAX_PENDING, MAX_HEAD_BYTES, Head, HeadReader, pending_budget
from gpuflow.transport.security import plain_error

log = logging.getLogger("gpuflow.transport.server")

SERVER_SOFTWARE = "gpuflow"
DEFAULT_MAX_CONNECTIONS = 256  # when the app does not say how many streams it allows
SPARE_CONNECTIONS = 64  # above the stream cap: page loads, snapshots, scrapes, health checks


class ServerStartError(Exception):
    """The server could not bind; the message is one line, fit for the CLI."""


class PortInUseError(ServerStartError):
    pass


class _ServerHandler(ServerHandler):
    """Logs through ``logging``: a vanished or stalled peer at debug level, app errors as errors."""

    server_software = SERVER_SOFTWARE

    def log_exception(self, exc_info) -> None:
        if isinstance(exc_info[1], OSError):
            log.debug("client connection failed: %r", exc_info[1])
        else:
            log.error("error serving %s", self.environ.get("PATH_INFO"), exc_info=exc_info)


class _SocketWriter(io.BufferedIOBase):
    """socketserver's writer of a connection (unbuffered), each chunk written straight to the
    socket's descriptor while its send buffer has room (see the module's docstring): the same
    bytes in the same order. What ``write`` could not place (the buffer full, a part of the
    chunk left) goes through ``sendall``, within the socket's timeout as before; a socket without
    a timeout (blocking: ``write`` could block without one) or of a subclass (TLS) always does."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        sock = self._sock
        with memoryview(b) as view:
            sent = 0
            if type(sock) is socket.socket and sock.gettimeout():   # non-blocking underneath
                try:
                    sent = os.write(sock.fileno(), view)
                except BlockingIOError:
                    sent = 0
            if sent < view.nbytes:
                sock.sendall(view[sent:])
            return view.nbytes

    def fileno(self) -> int:
        return self._sock.fileno()


class _Handler(WSGIRequestHandler):
    """wsgiref's handler over a request head already read: multithreaded, quiet, bounded writes."""

    server_version = SERVER_SOFTWARE
    sys_version = ""
    timeout = 30.0  # replaced by the server's send_timeout in setup()

    def __init__(self, request: socket.socket, client_address: Any, server: _WSGIServer,
                 head: bytes) -> None:
        self.head = head
        super().__init__(request, client_address, server)

    def setup(self) -> None:
        self.timeout = self.server.send_timeout
        super().setup()
        self.rfile.close()
        self.rfile = io.BytesIO(self.head)  # the head, and whatever arrived with it
        self.wfile = _SocketWriter(self.connection)  # wbufsize is 0: unbuffered, as socketserver's

    def handle(self) -> None:
        self.request_version = "HTTP/1.0"  # how send_error answers until the line is parsed
        self.command = ""
        self.raw_requestline = self.rfile.readline(MAX_HEAD_BYTES + 1)
        if not self.raw_requestline.strip():
            return  # only a blank line: nothing to answer
        if not self.parse_request():
            return
        if len(self.requestline.split()) != 3 or self.request_version == "HTTP/0.9":
            self.send_error(400)  # HTTP/0.9 has no headers: no Host to check, none to send
            return
        handler = _ServerHandler(self.rfile, self.wfile, self.get_stderr(), self.get_environ(),
                                multithread=True)
        handler.request_handler = self
        handler.run(self.server.get_app())

    def get_environ(self) -> dict:
        env = super().get_environ()
        env["RAW_URI"] = self.path  # as gunicorn has it: the target exactly as sent
        env["gpuflow.socket"] = self.connection  # for the stream's send bounds (sse.py)
        return env

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The server's own refusals: a fixed text, security headers, nothing echoed back."""
        self.close_connection = True
        log.debug("refused %s with %d: %s", self.address_string(), code, message or code)
        try:
            self.wfile.write(plain_error(code, _reason(code), "HTTP/1.0",
                                         body=self.command != "HEAD"))
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - wsgiref's signature
        log.debug("%s " + format, self.address_string(), *args)


def _reason(code: int) -> str:
    try:
        return http.HTTPStatus(code).phrase
    except ValueError:
        return "Error"


class _WSGIServer(WSGIServer):
    """wsgiref's server for the listening socket, the base environ and the app; the connections
    themselves come from :class:`~gpuflow.transport.heads.HeadReader`, not socketserver's loop."""

    request_queue_size = 1024  # a burst of connections waits in the kernel, not refused
    header_timeout = 10.0
    send_timeout = 30.0
    retry_after_s = 5

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = host
        self.server_port = port
        self.setup_environ()


class _WSGIServer6(_WSGIServer):
    address_family = socket.AF_INET6


class EmbeddedServer:
    """A WSGI server bound at construction time: request heads on one thread, requests on their own."""

    def __init__(self, app: Callable, host: str = "127.0.0.1", port: int = 7717,
                 drain_s: float = 1.0, max_connections: int | None = None,
                 max_pending: int = DEFAULT_MAX_PENDING) -> None:
        self.app = app
        self.host = host
        self.drain_s = drain_s
        settings = getattr(getattr(app, "state", None), "settings", None)
        if max_connections is None:
            max_connections = (settings.max_streams + SPARE_CONNECTIONS if settings is not None
                               else DEFAULT_MAX_CONNECTIONS)
        if max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}")
        base = _WSGIServer6 if ":" in host else _WSGIServer
        limits: dict[str, Any] = {}
        if settings is not None:
            limits.update(header_timeout=settings.header_timeout_s,
                          send_timeout=settings.send_timeout_s,
                          retry_after_s=settings.retry_after_s)
        cls = type(base.__name__, (base,), limits)
        try:
            self._httpd = cls((host, port), _Handler)
        except OSError as exc:
            where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            if exc.errno == errno.EADDRINUSE:
                raise PortInUseError(f"port {port} is already in use on {host}") from None
            if exc.errno == errno.EACCES:
                raise ServerStartError(f"cannot listen on {where}: permission denied") from None
            raise ServerStartError(f"cannot listen on {where}: {exc.strerror or exc}") from None
        except socket.gaierror as exc:
            raise ServerStartError(f"cannot listen on {host}: {exc.strerror}") from None
        self._httpd.set_app(app)
        self.port: int = self._httpd.server_address[1]
        self.max_connections = max_connections
        self._active = 0
        self._active_lock = threading.Lock()
        self._heads = HeadReader(deadline_s=self._httpd.header_timeout, on_head=self._on_head,
                                 max_pending=pending_budget(max_pending, max_connections),
                                 name="gpuflow-http")
        self._heads.listen(self._httpd.socket)
        self._thread: threading.Thread | None = None
        self._serving = threading.Event()
        self._closed = False

    @property
    def active_connections(self) -> int:
        """Requests being served now (each holds one thread; an open stream is one)."""
        return self._active

    @property
    def pending_connections(self) -> int:
        """Connections whose request head has not arrived yet (they hold no thread)."""
        return self._heads.pending

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def serve_forever(self) -> None:
        """Serve in the calling thread until :meth:`shutdown` (from another thread)."""
        self._serving.set()
        try:
            self._heads.run()
        finally:
            self._serving.clear()

    def serve_in_thread(self) -> threading.Thread:
        if self._thread is None:
            self._thread = threading.Thread(target=self.serve_forever, name="gpuflow-http",
                                            daemon=True)
            self._thread.start()
        return self._thread

    def shutdown(self) -> None:
        """End streams, stop accepting, close the socket; idempotent; never from the serving thread."""
        if self._closed:
            return
        self._closed = True
        begin = getattr(self.app, "begin_shutdown", None)
        if begin is not None:
            begin()
        self._heads.stop()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._wait_for_requests()

    # -- on the head reader's thread ---------------------------------------------------------------
    def _on_head(self, sock: socket.socket, client_address: Any, head: bytes, state: Head) -> None:
        """A complete head gets a thread of its own, unless max_connections are busy (503)."""
        if state is not Head.COMPLETE:
            log.debug("refused %s: %s", client_address, state.value)
            self._refuse(sock, 414 if state is Head.LINE_TOO_LONG else 431)
            return
        with self._active_lock:
            full = self._active >= self.max_connections
            if not full:
                self._active += 1
        if full:
            log.warning("request refused: %d requests in progress (max_connections)",
                        self.max_connections)
            self._refuse(sock, 503, [("Retry-After", str(self._httpd.retry_after_s))])
            return
        try:
            threading.Thread(target=self._serve, args=(sock, client_address, head),
                             name="gpuflow-request", daemon=True).start()
        except RuntimeError:  # no thread to be had: answer as if full
            self._release()
            self._refuse(sock, 503, [("Retry-After", str(self._httpd.retry_after_s))])

    def _refuse(self, sock: socket.socket, code: int,
                extra: list[tuple[str, str]] | None = None) -> None:
        """A short answer written without blocking (it fits a socket buffer), then closed."""
        try:
            sock.send(plain_error(code, _reason(code), "HTTP/1.0", extra=extra or []))
        except OSError:
            pass
        self._httpd.shutdown_request(sock)

    # -- on a request's thread ---------------------------------------------------------------------
    def _serve(self, sock: socket.socket, client_address: Any, head: bytes) -> None:
        try:
            _Handler(sock, client_address, self._httpd, head)
        except Exception:
            log.debug("connection from %s ended with an error", client_address, exc_info=True)
        finally:
            self._httpd.shutdown_request(sock)
            self._release()

    def _release(self) -> None:
        with self._active_lock:
            self._active -= 1

    def _wait_for_requests(self) -> None:
        """Wait, at most ``drain_s``, for the streams to end and every request's thread to be done
        with its connection (a stream gives its slot back before its thread closes the socket)."""
        slots = getattr(getattr(self.app, "state", None), "slots", None)
        deadline = time.monotonic() + self.drain_s
        while ((slots is not None and slots.open > 0) or self.active_connections > 0) \
                and time.monotonic() < deadline:
            time.sleep(0.02)

    def __enter__(self) -> EmbeddedServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
