"""The embedded server of ``gpuflow watch`` and ``gpuflow run``: threaded wsgiref, not gunicorn.

gunicorn's arbiter reaps every child with ``waitpid(-1)`` and owns the main thread's signals;
``gpuflow run`` needs its child's exit status and its own Ctrl-C handling. So the CLI serves the
same Falcon app with ``wsgiref`` plus ``ThreadingMixIn``: one daemon thread per connection (an SSE
stream holds one), no signal handlers, no child reaping, no per-request log lines.

API::

    server = EmbeddedServer(app, "127.0.0.1", 0)   # binds now; ServerStartError if it cannot
    server.port                                     # the real port (useful with port 0)
    server.serve_in_thread()                        # or server.serve_forever() in this thread
    server.shutdown()                               # streams end, socket closed, thread joined

Bad input and slow peers (docs/security.md, "Tested"):

* the request head (request line and headers) must arrive without a silence longer than
  ``header_timeout_s`` (10 s), then a client that accepts no bytes for ``send_timeout_s``
  (30 s) is dropped;
* malformed requests get the server's own short text answers (400, 414, 431, 503), with the
  same security headers as the app's and without echoing the request; HTTP/0.9 requests
  (no version) are refused with 400;
* at most ``max_connections`` connections are served at once (default the stream cap + 64),
  one thread each; the next one is answered 503 with Retry-After at once, so threads stay
  bounded;
* the raw request target goes to the app as ``RAW_URI``, as under gunicorn, so an absolute-form
  target is checked against the Host allow-list too; the Server header says ``gpuflow`` and no
  Python version.

Constraints: binding happens in the constructor so "port in use" is reported before anything
is printed; :meth:`shutdown` returns within about a second even with streams open (it asks the
app to end them — ``begin_shutdown`` — and waits at most ``drain_s`` for them); IPv6 binds work;
no reverse DNS lookup at bind time (``HTTPServer.server_bind`` would call ``getfqdn``).
"""

from __future__ import annotations

import errno
import http
import logging
import socket
import socketserver
import threading
import time
from typing import Any, Callable
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer

from gpuflow.transport.security import plain_error

log = logging.getLogger("gpuflow.transport.server")

SERVER_SOFTWARE = "gpuflow"
MAX_REQUEST_LINE = 65536
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


class _Handler(WSGIRequestHandler):
    """wsgiref's handler, marked multithreaded, quiet, with socket timeouts for stalled peers."""

    server_version = SERVER_SOFTWARE
    sys_version = ""
    timeout = 30.0  # replaced by the server's send_timeout in setup(); reads and writes alike

    def setup(self) -> None:
        self.timeout = self.server.send_timeout
        super().setup()

    def handle(self) -> None:
        self.request_version = "HTTP/1.0"  # how send_error answers until the line is parsed
        self.command = ""
        self.connection.settimeout(self.server.header_timeout)
        try:
            self.raw_requestline = self.rfile.readline(MAX_REQUEST_LINE + 1)
            if len(self.raw_requestline) > MAX_REQUEST_LINE:
                self.send_error(414)
                return
            if not self.raw_requestline.strip():
                return  # connected and closed (or sent only a blank line): nothing to answer
            if not self.parse_request():
                return
        except TimeoutError:
            log.debug("dropped %s: no complete request head within %.0f s of silence",
                      self.address_string(), self.server.header_timeout)
            return
        if len(self.requestline.split()) != 3 or self.request_version == "HTTP/0.9":
            self.send_error(400)  # HTTP/0.9 has no headers: no Host to check, none to send
            return
        self.connection.settimeout(self.timeout)
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
        try:
            reason = http.HTTPStatus(code).phrase
        except ValueError:
            reason = "Error"
        log.debug("refused %s with %d: %s", self.address_string(), code, message or reason)
        try:
            self.wfile.write(plain_error(code, reason, "HTTP/1.0", body=self.command != "HEAD"))
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - wsgiref's signature
        log.debug("%s " + format, self.address_string(), *args)


class _ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128
    max_connections = DEFAULT_MAX_CONNECTIONS
    header_timeout = 10.0
    send_timeout = 30.0
    retry_after_s = 5

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._active = 0
        self._active_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    @property
    def active_connections(self) -> int:
        return self._active

    def process_request(self, request, client_address) -> None:
        with self._active_lock:
            full = self._active >= self.max_connections
            if not full:
                self._active += 1
        if full:
            log.warning("connection refused: %d connections open (max_connections)",
                        self.max_connections)
            self._refuse_busy(request)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._release()
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release()

    def _release(self) -> None:
        with self._active_lock:
            self._active -= 1

    def _refuse_busy(self, request: socket.socket) -> None:
        """503 written from the accepting thread without blocking it (the answer fits a buffer)."""
        try:
            request.setblocking(False)
            request.send(plain_error(503, "Service Unavailable", "HTTP/1.0",
                                     extra=[("Retry-After", str(self.retry_after_s))]))
        except OSError:
            pass

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = host
        self.server_port = port
        self.setup_environ()

    def handle_error(self, request, client_address) -> None:
        log.debug("connection from %s ended with an error", client_address, exc_info=True)


class _ThreadingWSGIServer6(_ThreadingWSGIServer):
    address_family = socket.AF_INET6


class EmbeddedServer:
    """A threaded WSGI server bound at construction time."""

    def __init__(self, app: Callable, host: str = "127.0.0.1", port: int = 7717,
                 drain_s: float = 1.0, max_connections: int | None = None) -> None:
        self.app = app
        self.host = host
        self.drain_s = drain_s
        settings = getattr(getattr(app, "state", None), "settings", None)
        if max_connections is None:
            max_connections = (settings.max_streams + SPARE_CONNECTIONS if settings is not None
                               else DEFAULT_MAX_CONNECTIONS)
        if max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}")
        base = _ThreadingWSGIServer6 if ":" in host else _ThreadingWSGIServer
        limits: dict[str, Any] = {"max_connections": max_connections}
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
        self._thread: threading.Thread | None = None
        self._serving = threading.Event()
        self._closed = False

    @property
    def max_connections(self) -> int:
        return self._httpd.max_connections

    @property
    def active_connections(self) -> int:
        """Connections being served now (each holds one thread)."""
        return self._httpd.active_connections

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def serve_forever(self) -> None:
        """Serve in the calling thread until :meth:`shutdown` (from another thread)."""
        self._serving.set()
        try:
            self._httpd.serve_forever(poll_interval=0.25)
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
        if self._serving.is_set():
            self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._wait_for_streams()

    def _wait_for_streams(self) -> None:
        slots = getattr(getattr(self.app, "state", None), "slots", None)
        deadline = time.monotonic() + self.drain_s
        while slots is not None and slots.open > 0 and time.monotonic() < deadline:
            time.sleep(0.02)

    def __enter__(self) -> EmbeddedServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
