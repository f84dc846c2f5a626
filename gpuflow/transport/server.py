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

Constraints: binding happens in the constructor so "port in use" is reported before anything
is printed; :meth:`shutdown` returns within about a second even with streams open (it asks the
app to end them — ``begin_shutdown`` — and waits at most ``drain_s`` for them); IPv6 binds work;
no reverse DNS lookup at bind time (``HTTPServer.server_bind`` would call ``getfqdn``).
"""

from __future__ import annotations

import errno
import logging
import socket
import socketserver
import threading
import time
from typing import Any, Callable
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer

log = logging.getLogger("gpuflow.transport.server")


class ServerStartError(Exception):
    """The server could not bind; the message is one line, fit for the CLI."""


class PortInUseError(ServerStartError):
    pass


class _ServerHandler(ServerHandler):
    """Logs through ``logging``: a vanished or stalled peer at debug level, app errors as errors."""

    def log_exception(self, exc_info) -> None:
        if isinstance(exc_info[1], OSError):
            log.debug("client connection failed: %r", exc_info[1])
        else:
            log.error("error serving %s", self.environ.get("PATH_INFO"), exc_info=exc_info)


class _Handler(WSGIRequestHandler):
    """wsgiref's handler, marked multithreaded, quiet, with a socket timeout for stalled peers."""

    timeout = 30.0  # applies to reads and writes: a client that stops reading is dropped

    def handle(self) -> None:
        self.raw_requestline = self.rfile.readline(65537)
        if len(self.raw_requestline) > 65536:
            self.requestline = self.request_version = self.command = ""
            self.send_error(414)
            return
        if not self.parse_request():
            return
        handler = _ServerHandler(self.rfile, self.wfile, self.get_stderr(), self.get_environ(),
                                multithread=True)
        handler.request_handler = self
        handler.run(self.server.get_app())

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - wsgiref's signature
        log.debug("%s " + format, self.address_string(), *args)


class _ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128

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
                 drain_s: float = 1.0) -> None:
        self.app = app
        self.host = host
        self.drain_s = drain_s
        cls = _ThreadingWSGIServer6 if ":" in host else _ThreadingWSGIServer
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
